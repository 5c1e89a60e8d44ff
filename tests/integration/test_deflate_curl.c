/* keel with http1 + deflate, with curl as the client: --compressed
 * (curl's own Accept-Encoding and decoder) gives back the identity body,
 * having downloaded fewer bytes. Skipped where curl is missing. */
#define _GNU_SOURCE
#include "test_http.h"

#define CURL_TIMEOUT_MS 20000
#define CURL_SHOW       "\n---- curl exit %d, stderr ----\n%s---- end ----"

static void need_curl(void)
{
    const char *argv[] = {"curl", "--version", NULL};
    ht_run_result rr = ht_run(argv, 5000);
    int ok = rr.status == 0 && strstr(rr.out, "libz") != NULL;
    ht_run_free(&rr);
    if (!ok)
        cr_skip_test("curl (with libz) is not installed");
}

static kh_proc *start(void)
{
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:0 http1\n"
                          "workers = 2\n"
                          "modules = http1 deflate deflatefix hello\n" KH_MODULE_PATH,
                          NULL, 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port");
    return p;
}

/* curl URL [--compressed]: the body, and the bytes on the wire in *wire. */
static ht_run_result fetch(kh_proc *p, const char *path, int compressed, long *wire)
{
    char url[256], out[400];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", kh_port(p, 0), path);
    snprintf(out, sizeof out, "%s/body", p->dir);
    const char *argv[] = {
        "curl", "--silent", "--show-error", "--max-time",       "15",
        "-o",   out,        "-w",           "%{size_download}", compressed ? "--compressed" : "-g",
        url,    NULL};
    ht_run_result rr = ht_run(argv, CURL_TIMEOUT_MS);
    kh_assert(p, rr.status == 0, "curl %s" CURL_SHOW, path, rr.status, rr.err);
    *wire = atol(rr.out);
    /* The decoded body replaces the size in rr.out. */
    FILE *f = fopen(out, "rb");
    cr_assert(f, "no output file");
    free(rr.out);
    rr.out = NULL;
    rr.out_len = 0;
    char tmp[65536];
    size_t n;
    ht_append(&rr.out, &rr.out_len, "", 0);
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        ht_append(&rr.out, &rr.out_len, tmp, n);
    fclose(f);
    unlink(out);
    return rr;
}

Test(deflate_curl, compressed_equals_identity, .timeout = 90, .fini = kh_cleanup_all)
{
    need_curl();
    kh_proc *p = start();
    /* hello's /stream writes 500 lines of 15 bytes, each flushed on its
     * own (a streamed piece must reach the client now): it gains less. */
    const char *paths[] = {"/fix/body?len=200000", "/fix/body?len=3000&cl=1", "/stream?n=500",
                           "/fix/body?len=2000000&status=404"};
    const int ratio[] = {3, 3, 1, 3};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        long plain_wire, z_wire;
        ht_run_result id = fetch(p, paths[i], 0, &plain_wire);
        ht_run_result z = fetch(p, paths[i], 1, &z_wire);
        kh_assert(p, z.out_len == id.out_len && memcmp(z.out, id.out, id.out_len) == 0,
                  "%s: --compressed gave %zu bytes, identity %zu", paths[i], z.out_len, id.out_len);
        kh_assert(p, id.out_len > 0 && z_wire < plain_wire / ratio[i],
                  "%s: %ld bytes on the wire compressed, %ld identity", paths[i], z_wire,
                  plain_wire);
        ht_run_free(&id);
        ht_run_free(&z);
    }
    kh_stop(p);
}
