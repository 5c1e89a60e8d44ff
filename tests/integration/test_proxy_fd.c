/* The proxy when keel itself is out of file descriptors (issue 23, section
 * 6): an upstream connection that cannot get a socket is keel's shortage,
 * not the server's failure. It is answered 503 with Retry-After, as static
 * answers a file it cannot open, and the server is not taken out: before,
 * it was a 502 and, with max_fails = 1, the only server was out for
 * fail_timeout, so every request after the shortage got 503 for 10 s. */
#define _GNU_SOURCE
#include "test_proxy.h"

#include <errno.h>

#define CROWD 200 /* more connections than keel has descriptors (128) */

Test(proxy_fd, out_of_descriptors_is_503_and_not_the_servers_fault, .timeout = 90,
     .fini = kh_cleanup_all)
{
#ifndef __linux__
    cr_skip_test("sets RLIMIT_NOFILE for keel");
#else
    kh_proc *up = px_upstream();
    char conf[1024];
    snprintf(
        conf, sizeof conf,
        "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\nmodules = http1 proxy\n" KH_MODULE_PATH
        "[http1]\nheader_timeout = 60s\nkeepalive_timeout = 60s\n"
        "[proxy]\nupstream = py 127.0.0.1:%u\npass = / py\nkeepalive = 0\n",
        kh_port(up, 0));
    kh_next_nofile(64, 128);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    ht_conn *early = ht_connect(port);
    kh_assert(p, kh_wait_accepted(port, 5000), "keel did not accept the first connection");
    int fds = kh_count_fds(p);

    int crowd[CROWD];
    for (int i = 0; i < CROWD; i++) {
        crowd[i] = kh_connect("127.0.0.1", port);
        kh_assert(p, crowd[i] >= 0, "connection %d of the crowd: %s", i, strerror(errno));
    }
    kh_assert(p, kh_wait_log(p, "out of file descriptors", 5000),
              "the descriptors did not run out");

    ht_send_str(early, "GET /id HTTP/1.1\r\nHost: t\r\n\r\n");
    ht_resp r;
    ht_expect_response(p, early, &r, 0);
    kh_assert(p, r.status == 503, "an upstream connection without a descriptor: status %d",
              r.status);
    const char *retry = ht_header(&r, "Retry-After");
    kh_assert(p, retry != NULL && strcmp(retry, "1") == 0, "Retry-After: %s",
              retry ? retry : "(none)");
    ht_resp_free(&r);

    /* Descriptors free again: the server was never taken out. */
    for (int i = 0; i < CROWD; i++)
        close(crowd[i]);
    kh_assert(p, kh_wait_fds_at_most(p, fds, 10000),
              "keel holds %d descriptors, %d before the crowd", kh_count_fds(p), fds);
    ht_send_str(early, "GET /id HTTP/1.1\r\nHost: t\r\n\r\n");
    ht_expect_response(p, early, &r, 0);
    kh_assert(p, r.status == 200, "after the shortage: status %d (the server was taken out)",
              r.status);
    ht_resp_free(&r);
    kh_assert(p, kh_count_log(p, "is out for") == 0, "the server was taken out");
    ht_close(early);
    px_stop(p);
    kh_signal(up, SIGTERM);
#endif
}
