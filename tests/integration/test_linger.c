/* The lingering close through the real keel and http1: after a response
 * that ends the connection (here a 400), keel shuts its write side and
 * reads and discards what the client still sends, for a bounded time
 * (2 s). A client that trickles bytes must not hold the connection open
 * with them: neither as such, nor through a graceful shutdown. */
#define _GNU_SOURCE
#include "test_http.h"

#define BAD_REQUEST "BAD\x01 / HTTP/1.1\r\n\r\n"

/* Sends the bad request, reads the 400 and keel's FIN. */
static ht_conn *refused(kh_proc *p)
{
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send(c, BAD_REQUEST, sizeof BAD_REQUEST - 1);
    ht_resp r;
    int rc = ht_read_response(c, &r, 0, 5000);
    kh_assert(p, rc == 0, "reading the response: %s", r.err);
    kh_assert(p, r.status == 400, "status %d for a malformed request line\n%s", r.status, r.head);
    ht_resp_free(&r);
    int closed = ht_wait_closed(c, 5000);
    kh_assert(p, closed == 1, "after the 400 the connection %s",
              closed ? "sent more bytes" : "was not shut");
    return c;
}

/* One byte every interval_ms until keel has closed the socket for good:
 * then a byte draws a reset (keel's side is gone), or a send fails. Returns
 * the milliseconds that took, or -1 after max_ms; *sent counts the bytes. */
static long long trickle_until_reset(int fd, int interval_ms, int max_ms, int *sent,
                                     kh_proc *exiting)
{
    long long start = kh_now_ms();
    while (kh_now_ms() - start < max_ms) {
        ssize_t n = send(fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == 1)
            (*sent)++;
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return kh_now_ms() - start; /* EPIPE, ECONNRESET */
        long long next = kh_now_ms() + interval_ms;
        while (kh_now_ms() < next) {
            char b;
            ssize_t r = recv(fd, &b, 1, MSG_DONTWAIT);
            if (r < 0 && errno == ECONNRESET)
                return kh_now_ms() - start;
            if (exiting != NULL && kh_exited(exiting))
                return kh_now_ms() - start;
            kh_sleep_ms(10);
        }
    }
    return -1;
}

Test(linger, trickling_client_cannot_hold_a_lingering_close, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start_n(1, NULL, NULL);
    ht_conn *c = refused(p);
    /* keel lingers now; the client never closes and sends a byte every
     * 300 ms. The linger budget (2 s) is for the whole linger. */
    int sent = 0;
    long long took = trickle_until_reset(c->fd, 300, 6000, &sent, NULL);
    kh_assert(p, took >= 0, "keel still held the connection after 6 s (%d bytes trickled)", sent);
    kh_assert(p, took < 4000, "keel closed the lingering connection only after %lld ms", took);
    kh_assert(p, sent >= 3, "only %d bytes trickled before the close", sent);
    ht_close(c);
    /* And the worker still serves. */
    ht_resp r;
    ht_roundtrip(p, "GET / HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    kh_assert(p, r.status == 200, "server unwell afterwards: %d", r.status);
    ht_resp_free(&r);
    kh_stop(p);
}

Test(linger, graceful_shutdown_does_not_wait_for_a_trickling_client, .timeout = 30,
     .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start_n(1, "shutdown_timeout = 10s\n", NULL);
    ht_conn *c = refused(p);
    long long t0 = kh_now_ms();
    kh_signal(p, SIGTERM);
    int sent = 0;
    /* Trickles while keel stops; ends when keel has exited or reset us. */
    trickle_until_reset(c->fd, 300, 6000, &sent, p);
    int status = kh_wait_exit(p, 10000);
    long long took = kh_now_ms() - t0;
    kh_assert(p, status == 0, "exit status %d", status);
    kh_assert(p, took < 4000,
              "the shutdown took %lld ms with a lingering, trickling client (shutdown_timeout "
              "10 s)",
              took);
    kh_assert(p, kh_count_log(p, "shutdown deadline reached") == 0,
              "the lingering connection held the shutdown until its deadline");
    ht_close(c);
    kh_stop(p);
}
