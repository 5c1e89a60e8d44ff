/* HTTPS upstreams through the tls module's outbound side
 * (`upstream = NAME tls HOST:PORT`): the certificate and the name are
 * verified by default ([tls] ca), so an upstream whose certificate names
 * another host is a 502, never a silent plaintext-grade connection. The
 * upstream is keel's hello on an http1 tls listener; certificates come
 * from keel-cert. */
#define _GNU_SOURCE
#include "test_proxy.h"
#include "tls_helpers.h"

static kh_proc *proxy_to(const char *host, unsigned port, const char *ca)
{
    char section[1024];
    snprintf(section, sizeof section, "upstream = s tls %s:%u\npass = / s\n[tls]\nca = %s\n", host,
             port, ca);
    return px_keel_with("tls http1 proxy", section, 0);
}

Test(proxy_tls, https_upstream_verified, .timeout = 60, .fini = tt_cleanup)
{
    px_need_curl();
    tt_mkdir();
    tt_make_cert("lh", "localhost", NULL);
    tt_make_cert("other", "other.test", NULL);
    char pem[400], other_pem[400];
    snprintf(pem, sizeof pem, "%s", tt_path("lh.pem"));
    snprintf(other_pem, sizeof other_pem, "%s", tt_path("other.pem"));
    kh_proc *up = tt_start(1,
                           "listen = 127.0.0.1:0 http1 tls\nworkers = 1\n"
                           "modules = tls http1 hello\n[tls]\ncert = %s %s\n",
                           pem, tt_path("lh.key"));
    kh_proc *p = proxy_to("localhost", kh_port(up, 0), pem);
    char url[160];
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/"));
    kh_assert(p, px_status(&rr) == 200 && strcmp(px_body(&rr), "Hello, World!") == 0,
              "through TLS" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);

    /* the same upstream, trusted only through another certificate: the
     * chain does not verify, 502 */
    p = proxy_to("localhost", kh_port(up, 0), other_pem);
    rr = px_get(px_url(url, sizeof url, p, 0, "/"));
    kh_assert(p, px_status(&rr) == 502, "untrusted upstream" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* A client over TLS: the upstream hears proto https (X-Forwarded-Proto,
 * Forwarded), from the client connection's transport. */
Test(proxy_tls, forwarded_proto_https, .timeout = 60, .fini = tt_cleanup)
{
    px_need_curl();
    tt_mkdir();
    tt_make_cert("lh", "localhost", NULL);
    kh_proc *up = px_upstream();
    kh_proc *p = tt_start(1,
                          "listen = 127.0.0.1:0 http1 tls\nworkers = 1\n"
                          "modules = tls http1 proxy\n[tls]\ncert = %s %s\n"
                          "[proxy]\nupstream = py 127.0.0.1:%u\npass = / py\n",
                          tt_path("lh.pem"), tt_path("lh.key"), kh_port(up, 0));
    char url[160];
    snprintf(url, sizeof url, "https://localhost:%u/headers", kh_port(p, 0));
    const char *args[] = {"-i", "--cacert", tt_path("lh.pem"), url, NULL};
    ht_run_result rr = px_curl(args);
    kh_assert(p, px_status(&rr) == 200, "over TLS" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    kh_assert(p,
              strstr(px_body(&rr), "X-Forwarded-Proto: https\n") != NULL &&
                  strstr(px_body(&rr), ";proto=https\n") != NULL,
              "proto https" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}
