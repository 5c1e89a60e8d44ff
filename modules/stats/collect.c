/* collect.c — one reading of everything the pages show. Two collections:
 * the workers' sums (KEEL_METRICS_SUM, what every page shows) and each
 * worker's values (for per-worker utilisation and the like). They are not
 * one instant (keel/metrics.h says a collection never is): a per-worker
 * value may be a little newer than its sum. */
#include "mod.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <time.h>
#endif

/* Unix time in milliseconds, as the core's start time has it:
 * keel_time_now's whole seconds would make a young server's uptime jump.
 * timespec_get is C11, but mingw-w64's msvcrt lacks it. */
static double wall_seconds(void)
{
#ifdef _WIN32
    FILETIME ft; /* 100 ns units since 1601 */
    GetSystemTimeAsFileTime(&ft);
    uint64_t t = ((uint64_t)ft.dwHighDateTime << 32) | ft.dwLowDateTime;
    return (double)((t - 116444736000000000ULL) / 10000) / 1e3;
#else
    struct timespec ts;
    if (timespec_get(&ts, TIME_UTC) != TIME_UTC)
        return (double)keel_time_now();
    return (double)ts.tv_sec + (double)(ts.tv_nsec / 1000000) / 1e3;
#endif
}

static void visit_sum(const keel_metric_sample *sample, void *userdata)
{
    stats_snap_add(userdata, sample);
}

static void visit_worker(const keel_metric_sample *sample, void *userdata)
{
    stats_snap_add_worker(userdata, sample);
}

void stats_collect(const stats *st, keel_worker *worker, stats_snap *snap)
{
    keel_module *m = st->module;
    stats_snap_init(snap, keel_module_worker_count(m));
    snap->version = keel_host_version();
    snap->abi = keel_host_abi();
    snap->now = wall_seconds();
    snap->mono_ms = worker ? keel_worker_now_ms(worker) : 0;
    const char *name, *version;
    for (size_t i = 0; keel_module_at(m, i, &name, &version) == KEEL_OK; i++)
        stats_snap_add_module(snap, name, version);
    keel_metrics_collect(m, KEEL_METRICS_SUM, visit_sum, snap);
    keel_metrics_collect(m, KEEL_METRICS_PER_WORKER, visit_worker, snap);

    /* The core's start time when it exports one; else our own load, which
     * is within a moment of it. */
    const stats_family *f = stats_snap_find(snap, ST_START_TIME);
    const stats_series *t = f && f->nseries > 0 ? &f->series[0] : NULL;
    snap->start_time = t ? stats_value(f, t) : (double)st->loaded_at;
}
