/* A module that loads but fails to start on its workers: start-up must stop
 * with a message naming it and the worker.
 *
 *   [startfail]
 *   worker = N     fail on worker N only (default -1: on every worker); on
 *                  the others start succeeds and start and stop are logged,
 *                  so a test can check that every worker that started was
 *                  stopped (integration.faults) */
#include <keel/keel.h>

static int64_t fail_on = -1;

static int startfail_load(keel_module *module)
{
    return keel_config_int(module, "worker", -1, -1, 1024, &fail_on);
}

static int startfail_start(keel_module *module, keel_worker *worker, void *state)
{
    (void)state;
    unsigned id = keel_worker_id(worker);
    if (fail_on >= 0 && (int64_t)id != fail_on) {
        keel_log(module, KEEL_LOG_INFO, "startfail: started on worker %u", id);
        return KEEL_OK;
    }
    return KEEL_ERR_INVAL;
}

static void startfail_stop(keel_module *module, keel_worker *worker, void *state)
{
    (void)state;
    keel_log(module, KEEL_LOG_INFO, "startfail: stopped on worker %u", keel_worker_id(worker));
}

KEEL_MODULE(startfail, .version = "1.0.0", .load = startfail_load, .start = startfail_start,
            .stop = startfail_stop);
