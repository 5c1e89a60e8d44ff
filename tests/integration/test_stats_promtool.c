/* keel's /metrics checked by Prometheus's own linter, `promtool check
 * metrics` (Debian package "prometheus"), after some load so that every
 * family has values: the plain page and the per-worker one. Skipped, with
 * the package to install, where promtool is missing. */
#define _GNU_SOURCE
#include "test_stats.h"

Test(stats_promtool, metrics_page_passes_promtool, .timeout = 90, .fini = kh_cleanup_all)
{
    st_need_promtool();
    kh_proc *p = st_start(2, NULL, NULL);
    /* Requests of every kind hello has, and a 404. */
    static const char *paths[] = {"/", "/hello/x", "/nope", "/headers", "/stream?n=3"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        st_fetch(p, paths[i], NULL);
    st_promtool_check(p, "/metrics");
    st_promtool_check(p, "/metrics?per_worker=1");
}
