/* A module that loads but fails to start on its workers: start-up must stop
 * with a message naming it and the worker. */
#include <keel/keel.h>

static int startfail_start(keel_module *module, keel_worker *worker, void *state)
{
    (void)module;
    (void)worker;
    (void)state;
    return KEEL_ERR_INVAL;
}

KEEL_MODULE(startfail, .version = "1.0.0", .start = startfail_start);
