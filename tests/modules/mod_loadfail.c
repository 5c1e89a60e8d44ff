/* A module whose load fails: start-up must stop, naming it. */
#include <keel/keel.h>

static int loadfail_load(keel_module *module)
{
    keel_log(module, KEEL_LOG_DEBUG, "refusing to load, as tests expect");
    return KEEL_ERR_INVAL;
}

KEEL_MODULE(loadfail, .version = "1.0.0", .load = loadfail_load);
