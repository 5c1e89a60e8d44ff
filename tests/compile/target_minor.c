/* Compiled, never run, by tests/compile/check-target-minor.cmake: each
 * PROBE_* calls one ABI 1.3 function. With KEEL_TARGET_ABI_MINOR=2 every
 * probe must fail to compile (the entry is declared unavailable); with 3
 * every probe must compile, which proves the failures come from the target
 * and not from a broken file. */
#include <keel/keel.h>

int probe(keel_module *module);

int probe(keel_module *module)
{
#if defined(PROBE_STRERROR)
    (void)module;
    return keel_strerror(KEEL_ERR_CLOSED)[0];
#elif defined(PROBE_WORKER_COUNT)
    return (int)keel_module_worker_count(module);
#elif defined(PROBE_CONFIG_ERROR)
    return keel_config_error(module, "key", "bad value '%s'", "x");
#elif defined(PROBE_TIMER_RESTART)
    (void)module;
    return keel_timer_restart((keel_timer *)0, 1, 0);
#else
#error "define one PROBE_*"
#endif
}
