/* HTTPS upstreams through the tls module's outbound side
 * (`upstream = NAME tls HOST:PORT`): the certificate and the name are
 * verified by default ([tls] ca), so an upstream whose certificate names
 * another host is a 502, never a silent plaintext-grade connection. The
 * upstream is keel's hello on an http1 tls listener; certificates come
 * from keel-cert. */
#define _GNU_SOURCE
#include "test_proxy.h"
#include "tls_helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>

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

/* Issue 23 (found by the attack on its fixes): a client that leaves while
 * keel's TLS handshake with an HTTPS upstream is under way. The attempt's
 * handle was freed once TCP connected, so the proxy's cancel used freed
 * memory, and the handshake's end later opened a freed exchange (ASan:
 * heap-use-after-free in keel_connect_cancel). Now the handle lives until
 * the handshake answers, and cancelling it closes the upstream connection
 * at once: the upstream, which holds the ClientHello unanswered, sees it
 * close within a second of the client leaving. */
Test(proxy_tls, client_leaves_during_the_upstream_handshake, .timeout = 60, .fini = tt_cleanup)
{
    tt_mkdir();
    tt_make_cert("lh", "localhost", NULL);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    cr_assert(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 4) == 0 &&
              getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
    kh_proc *p = proxy_to("localhost", ntohs(a.sin_port), tt_path("lh.pem"));
    int c = kh_connect("127.0.0.1", kh_port(p, 0));
    cr_assert(c >= 0);
    kh_send_str(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    /* keel connects and sends its ClientHello, which stays unanswered */
    struct pollfd pf = {.fd = lfd, .events = POLLIN};
    kh_assert(p, poll(&pf, 1, 5000) == 1, "keel did not connect to the upstream");
    int up = accept(lfd, NULL, NULL);
    cr_assert(up >= 0);
    char hello[4096];
    size_t n = kh_recv_n(up, hello, sizeof hello, 5, 5000);
    kh_assert(p, n >= 5 && hello[0] == 0x16, "no ClientHello (%zu bytes)", n);
    struct linger lg = {1, 0};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(c); /* the client leaves with a reset */
    long long t0 = kh_now_ms();
    int eof = 0;
    while (!eof && kh_now_ms() - t0 < 3000) /* the rest of the ClientHello first */
        eof = kh_expect_eof(up, hello, sizeof hello, 3000) == 1;
    kh_assert(p, eof, "the upstream's handshake was not given up when the client left");
    kh_assert(p, kh_now_ms() - t0 < 1500, "given up after %lld ms", kh_now_ms() - t0);
    close(up);
    close(lfd);
    px_stop(p);
}
