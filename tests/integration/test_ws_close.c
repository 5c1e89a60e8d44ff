/* The closing handshake both ways (RFC 6455 5.5.1, 7.1), its timeout,
 * nothing sent after a close, idle pings and the idle close, and a peer
 * that does not read (dropped with its queue's memory bounded). */
#define _GNU_SOURCE
#include "ws_test.h"

#include <errno.h>
#include <sys/socket.h>

Test(ws_close, server_initiated, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    wsc *c = wsc_open(kh_port(p, 0), "/t/app", NULL);
    wsc_send_text(c, "close4000");
    char reason[64];
    int code = wsc_expect_close(c, reason, sizeof reason, 5000);
    kh_assert(p, code == 4000 && strcmp(reason, "app") == 0, "close %d '%s'", code, reason);
    /* Until our answer, the server waits (and sends nothing more: a data
     * frame of ours is dropped, not echoed). */
    wsc_send_text(c, "echo me?");
    kh_assert(p, kh_wait_peer_read(c->fd, 5000), "the frame was not read");
    char got[64];
    /* Whatever keel does with the frame it does when it reads it: nothing
     * in 100 ms is nothing (a wait for what must not happen is a time). */
    int r = kh_expect_eof(c->fd, got, sizeof got, 100);
    kh_assert(p, r == 0, "%s before the handshake completed", r == 1 ? "closed" : "data");
    uint8_t frame[16];
    size_t n = wsc_build(frame, 1, 0, 8, "\x0f\xa0", 2, 1, 0);
    wsc_send_raw(c, frame, n);
    kh_assert(p, wsc_wait_eof(c, 5000) == 1, "no TCP close after the handshake");
    kh_assert(p, kh_wait_log(p, "wstest close code=4000", 5000), "on_close not called");
    wsc_close(c);
    wt_finish(p);
}

Test(ws_close, client_initiated, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    wsc *c = wsc_open(kh_port(p, 0), "/t/app", NULL);
    /* A message and the close in one write: the message is answered,
     * then the close echoed, then TCP closed by the server. */
    uint8_t buf[64];
    size_t n = wsc_build(buf, 1, 0, 1, "first", 5, 1, 0);
    n += wsc_build(buf + n, 1, 0, 8, "\x03\xe8see you", 9, 1, 0);
    n += wsc_build(buf + n, 1, 0, 1, "after close", 11, 1, 0);
    wsc_send_raw(c, buf, n);
    wt_expect_text(p, c, "first");
    wt_expect_close(p, c, 1000, 0);
    kh_assert(p, kh_wait_log(p, "wstest close code=1000 reason=see you", 5000),
              "on_close with the peer's code and reason");
    wsc_close(c);
    wt_finish(p);
}

Test(ws_close, close_timeout, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start("[websocket]\nclose_timeout = 300ms\n");
    wsc *c = wsc_open(kh_port(p, 0), "/t/app", NULL);
    wsc_send_text(c, "close");
    int code = wsc_expect_close(c, NULL, 0, 5000);
    kh_assert(p, code == 1000, "close code %d", code);
    long long t0 = kh_now_ms();
    /* We never answer: the server gives up after close_timeout. */
    kh_assert(p, wsc_wait_eof(c, 5000) == 1, "not closed after close_timeout");
    long long waited = kh_now_ms() - t0;
    kh_assert(p, waited >= 200 && waited < 3000, "closed after %lld ms", waited);
    kh_assert(p, kh_wait_log(p, "wstest close code=1006", 5000), "on_close should say 1006");
    wsc_close(c);
    wt_finish(p);
}

Test(ws_close, close_timeout_is_a_deadline, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start("[websocket]\nclose_timeout = 500ms\n");
    wsc *c = wsc_open(kh_port(p, 0), "/t/app", NULL);
    wsc_send_text(c, "close");
    kh_assert(p, wsc_expect_close(c, NULL, 0, 5000) == 1000, "no close");
    /* Keep talking without answering: the deadline still holds. */
    long long t0 = kh_now_ms();
    while (!c->eof && kh_now_ms() - t0 < 5000) {
        if (wsc_send_text(c, "still here") != 0)
            break;
        wsc_wait_eof(c, 100);
    }
    long long waited = kh_now_ms() - t0;
    kh_assert(p, waited >= 400 && waited < 2000, "closed after %lld ms", waited);
    wsc_close(c);
    wt_finish(p);
}

Test(ws_close, idle_ping_and_idle_close, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start("[websocket]\nping_interval = 200ms\nidle_timeout = 700ms\n");
    wsc *c = wsc_open(kh_port(p, 0), "/ws", NULL);
    /* Quiet: a ping comes; answering it keeps the connection. */
    for (int i = 0; i < 4; i++) {
        wsc_frame f;
        int rc = wsc_read(c, &f, 2000);
        kh_assert(p, rc == 0 && f.op == 9, "expected a ping (round %d): rc %d op %d", i, rc, f.op);
        wsc_send(c, 1, 10, f.data, f.len);
        wsc_frame_free(&f);
    }
    /* Stop answering: a close 1001 comes after idle_timeout. */
    long long t0 = kh_now_ms();
    int code = wsc_expect_close(c, NULL, 0, 5000);
    kh_assert(p, code == 1001, "close code %d", code);
    long long waited = kh_now_ms() - t0;
    kh_assert(p, waited >= 400, "closed after %lld ms", waited);
    wsc_close(c);
    wt_finish(p);
}

Test(ws_close, non_reading_peer, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start("[websocket]\nsend_queue_limit = 1m\nsend_high_water = 256k\n"
                          "send_low_water = 64k\n");
    wsc *c = wsc_open(kh_port(p, 0), "/t/app", NULL);
    wsc_send_text(c, "flood"); /* 64 KiB messages until the queue refuses */
    kh_assert(p, kh_wait_log(p, "wstest flood rc=limit exceeded", 10000),
              "the queue was not limited");
    /* Bounded: it took about send_queue_limit plus what the kernel's
     * socket buffers accept (a few MB on loopback), not 100000 messages. */
    const char *line = strstr(kh_stderr(p), "wstest flood rc=");
    unsigned long sent = 0;
    kh_assert(p, line && sscanf(strstr(line, "after ") + 6, "%lu", &sent) == 1, "no count");
    kh_assert(p, sent < 1000, "%lu messages of 64 KiB were accepted", sent);
    kh_assert(p, kh_wait_log(p, "wstest close code=1006", 5000), "not closed");
    /* What the kernel had buffered still arrives, then the end. */
    kh_assert(p, wsc_wait_eof(c, 20000) == 1, "connection not dropped");
    wsc_close(c);
    wt_finish(p);
}

Test(ws_close, drain_paces_a_producer, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start("[websocket]\nsend_queue_limit = 1m\nsend_high_water = 128k\n"
                          "send_low_water = 32k\n");
    /* A small window, so that the queue passes send_high_water whatever
     * loopback's buffers would otherwise absorb. */
    wsc *c = wsc_open_small_window(kh_port(p, 0), "/t/app", 8192);
    wsc_send_text(c, "fill");
    /* A slow reader: 64 blocks of 64 KiB arrive, in order, then "done";
     * the producer stayed under the limit by waiting for on_drain. Slow is
     * a pace (300 ms first, 20 ms every 8 blocks): reading as soon as
     * keel's socket held anything, on_drain was never needed. */
    kh_sleep_ms(300);
    for (int i = 0; i < 64; i++) {
        wsc_frame f;
        int rc = wsc_read(c, &f, 10000);
        kh_assert(p, rc == 0 && f.op == 2 && f.len == 65536 && f.data[0] == (uint8_t)i,
                  "block %d: rc %d op %d len %zu first %d", i, rc, f.op, f.len,
                  f.data ? f.data[0] : -1);
        wsc_frame_free(&f);
        if (i % 8 == 0)
            kh_sleep_ms(20);
    }
    wt_expect_text(p, c, "done");
    kh_assert(p, kh_count_log(p, "wstest drain") >= 1, "on_drain never called");
    kh_assert(p, !strstr(kh_stderr(p), "wstest close"), "closed");
    wsc_close(c);
    wt_finish(p);
}

Test(ws_close, shutdown_says_going_away, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    wsc *c = wsc_open(kh_port(p, 0), "/t/app", NULL);
    wsc_send_text(c, "x");
    wt_expect_text(p, c, "x");
    kh_signal(p, SIGTERM);
    int code = wsc_expect_close(c, NULL, 0, 5000);
    kh_assert(p, code == 1001, "close code %d on shutdown", code);
    uint8_t frame[16];
    size_t n = wsc_build(frame, 1, 0, 8, "\x03\xe9", 2, 1, 0);
    wsc_send_raw(c, frame, n);
    kh_assert(p, wsc_wait_eof(c, 5000) == 1, "not closed");
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "keel did not exit cleanly");
    wsc_close(c);
}
