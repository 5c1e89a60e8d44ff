/* HSTS (modules/headers `hsts`): Strict-Transport-Security goes out on
 * responses over TLS only (RFC 6797 7.2: a host sends it over secure
 * transport and never over plain HTTP), on every status there, with the
 * directives written as RFC 6797 6.1 has them. One keel with a TLS
 * listener and a plain one on the same config; curl reads both. */
#define _GNU_SOURCE
#include "test_http.h"
#include "tls_helpers.h"

/* curl -sI URL (with the test's CA) and the response head. */
static char *head_of(kh_proc *p, const char *url)
{
    ht_run_result rr =
        tt_sh(20000, "curl -sS -i -o - --max-time 10 --cacert %s '%s'", tt_path("lh.pem"), url);
    kh_assert(p, rr.status == 0, "curl %s: %d %s", url, rr.status, rr.out);
    char *out = rr.out;
    rr.out = NULL;
    ht_run_free(&rr);
    return out;
}

Test(web_hsts, only_over_tls_on_every_status, .timeout = 60, .fini = tt_cleanup)
{
    tt_mkdir();
    tt_make_cert("lh", "localhost", "127.0.0.1", NULL);
    kh_proc *p =
        tt_start(2,
                 "listen = 127.0.0.1:0 http1 tls\nlisten = 127.0.0.1:0 http1\n"
                 "workers = 1\nmodules = tls http1 headers hello\n"
                 "[tls]\ncert = %s %s\n"
                 "[headers]\nhsts = max-age=31536000 includeSubDomains\n"
                 "[/preload/]\nheaders.hsts = max-age=63072000 includeSubDomains preload\n",
                 tt_path("lh.pem"), tt_path("lh.key"));
    static const struct {
        const char *path, *want;
    } cases[] = {
        {"/", "Strict-Transport-Security: max-age=31536000; includeSubDomains\r\n"},
        {"/missing", "Strict-Transport-Security: max-age=31536000; includeSubDomains\r\n"},
        {"/preload/x",
         "Strict-Transport-Security: max-age=63072000; includeSubDomains; preload\r\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char url[256];
        snprintf(url, sizeof url, "https://localhost:%u%s", kh_port(p, 0), cases[i].path);
        char *h = head_of(p, url);
        kh_assert(p, strstr(h, cases[i].want) != NULL, "%s: no '%s' in\n%s", url, cases[i].want, h);
        free(h);
        snprintf(url, sizeof url, "http://127.0.0.1:%u%s", kh_port(p, 1), cases[i].path);
        h = head_of(p, url);
        kh_assert(p, strcasestr(h, "Strict-Transport-Security") == NULL,
                  "%s: HSTS over plain HTTP:\n%s", url, h);
        free(h);
    }
    tt_finish(p);
}
