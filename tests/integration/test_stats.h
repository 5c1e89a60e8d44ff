/* test_stats.h — helpers shared by the test_stats*.c integration tests:
 * keel with http1 + hello + stats, one GET on a keep-alive connection, and
 * reading one series' value off the Prometheus page. Everything is static.
 * Define _GNU_SOURCE before including it (test_http.h needs it). */
#ifndef KEEL_TEST_STATS_H
#define KEEL_TEST_STATS_H

#include "test_http.h"

/* keel with http1, hello and stats on 127.0.0.1, `workers` workers;
 * `stats` is appended to the [stats] section (may be NULL). */
HT_FN kh_proc *st_start(int workers, const char *stats, const char *const *args)
{
    char conf[4096];
    snprintf(conf, sizeof conf,
             "[keel]\n"
             "listen = 127.0.0.1:0 http1\n"
             "workers = %d\n"
             "modules = http1 hello stats\n" KH_MODULE_PATH "[stats]\n%s",
             workers, stats ? stats : "");
    kh_proc *p = kh_start(conf, args, 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port in the 'listening on' line");
    return p;
}

/* GET path on c (kept alive); the response in r (free it). */
HT_FN void st_get(kh_proc *p, ht_conn *c, const char *path, ht_resp *r)
{
    ht_send_str(c, ht_fmt("GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path));
    ht_expect_response(p, c, r, 0);
}

/* GET path on a fresh connection: the status, and the body in *body if
 * body is not NULL (free it). */
HT_FN int st_fetch(kh_proc *p, const char *path, char **body)
{
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_resp r = {0};
    st_get(p, c, path, &r);
    int status = r.status;
    if (body != NULL) {
        *body = r.body;
        r.body = NULL;
    }
    ht_resp_free(&r);
    ht_close(c);
    return status;
}

/* The value of the sample line "series value" in a Prometheus page
 * (series written exactly as the page writes it, labels included). Fails
 * the test if the line is missing. */
HT_FN double st_prom_value(kh_proc *p, const char *page, const char *series)
{
    size_t n = strlen(series);
    for (const char *l = page; l != NULL && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, series, n) == 0 && l[n] == ' ')
            return strtod(l + n + 1, NULL);
    }
    kh_assert(p, 0, "no series %s in:\n%s", series, page);
    return 0;
}

/* Skips the test, naming the package, where promtool is missing. */
HT_FN void st_need_promtool(void)
{
    const char *argv[] = {"promtool", "--version", NULL};
    ht_run_result rr = ht_run(argv, 10000);
    int ok = rr.status == 0;
    ht_run_free(&rr);
    if (!ok)
        cr_skip_test("promtool is not installed (Debian: apt-get install prometheus)");
}

/* `promtool check metrics` on the page at path (written to a file: it
 * reads stdin); fails the test with promtool's words and the page. */
HT_FN void st_promtool_check(kh_proc *p, const char *path)
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

#endif
