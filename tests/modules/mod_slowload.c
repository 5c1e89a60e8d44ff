/* A module whose load takes its time: a reload's new process that does
 * not serve within [keel] reload_timeout (integration.reload).
 *
 *   [slowload]
 *   delay = 5s     how long load() blocks (default 0) */
#include <keel/keel.h>

#ifdef _WIN32
#include <windows.h>
#else
#include <time.h>
#endif

static int slowload_load(keel_module *module)
{
    uint64_t ms = 0;
    int rc = keel_config_duration_ms(module, "delay", 0, &ms);
    if (rc != KEEL_OK)
        return rc;
    keel_log(module, KEEL_LOG_INFO, "slowload: loading for %llu ms", (unsigned long long)ms);
#ifdef _WIN32
    Sleep((DWORD)ms);
#else
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
#endif
    return KEEL_OK;
}

KEEL_MODULE(slowload, .version = "1.0.0", .load = slowload_load);
