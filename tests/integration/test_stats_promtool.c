/* keel's /metrics checked by Prometheus's own linter, `promtool check
 * metrics` (Debian package "prometheus"), after some load so that every
 * family has values: the plain page and the per-worker one. Skipped, with
 * the package to install, where promtool is missing. */
#define _GNU_SOURCE
#include "test_stats.h"

static void need_promtool(void)
{
    const char *argv[] = {"promtool", "--version", NULL};
    ht_run_result rr = ht_run(argv, 10000);
    int ok = rr.status == 0;
    ht_run_free(&rr);
    if (!ok)
        cr_skip_test("promtool is not installed (Debian: apt-get install prometheus)");
}

/* Writes the page to a file and runs promtool on it (it reads stdin). */
static void check(kh_proc *p, const char *path)
{
    char *page = NULL;
    cr_assert_eq(st_fetch(p, path, &page), 200);
    char file[400];
    snprintf(file, sizeof file, "%s/metrics.txt", p->dir);
    FILE *f = fopen(file, "w");
    cr_assert(f && fputs(page, f) >= 0 && fclose(f) == 0, "write %s", file);
    const char *argv[] = {"sh", "-c", "promtool check metrics < \"$0\"", file, NULL};
    ht_run_result rr = ht_run(argv, 30000);
    cr_assert(rr.status == 0, "promtool check metrics on %s: exit %d\n%s%s\n---- page ----\n%s",
              path, rr.status, rr.out, rr.err, page);
    ht_run_free(&rr);
    free(page);
}

Test(stats_promtool, metrics_page_passes_promtool, .timeout = 90, .fini = kh_cleanup_all)
{
    need_promtool();
    kh_proc *p = st_start(2, NULL, NULL);
    /* Requests of every kind hello has, and a 404. */
    static const char *paths[] = {"/", "/hello/x", "/nope", "/headers", "/stream?n=3"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        st_fetch(p, paths[i], NULL);
    check(p, "/metrics");
    check(p, "/metrics?per_worker=1");
}
