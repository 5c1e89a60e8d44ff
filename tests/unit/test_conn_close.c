/* Closing a connection, in process (conn_harness.h): back-pressure past
 * write_high_water and a close with that output queued, an abort that
 * fails the queued writes in order before on_close, and the lingering
 * close (the response delivered despite unread input; a peer that
 * trickles does not hold keel past the linger budget). */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <keel/embed.h>
#include <uv.h>

#include "conn_harness.h"

/* Only to look at a connection's reading state from the worker thread
 * (back-pressure); everything else goes through the public API. */
#include "net/conn.h"

/* ---- back-pressure, drain, close with output queued ------------------------------------- */

static int bp_close_in_drain; /* the variant */

/* Sampled on the worker thread. */
static struct {
    int backpressure_flag, reading_flag, ndata_at_sync;
    char late[256]; /* bytes on_data got after back-pressure */
    size_t nlate;
} bp;

static int bp_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    *consumed = len;
    if (rec.ndata++ == 0) {
        write_until_queued(c, 2 * HIGH_WATER, 256u << 20);
        rec.queued_after = keel_conn_write_queued(c);
        bp.backpressure_flag = (c->flags & KL_CONN_BACKPRESSURE) != 0;
        bp.reading_flag = (c->flags & KL_CONN_READING) != 0;
        STORE(rec.phase1, 1);
        return KEEL_OK;
    }
    /* After the drain (variant that stays open): the bytes sent meanwhile. */
    size_t n = len < sizeof bp.late - bp.nlate ? len : sizeof bp.late - bp.nlate;
    memcpy(bp.late + bp.nlate, data, n);
    bp.nlate += n;
    if (bp.nlate >= 10 && !rec.closed) {
        write_rec(c, "END\n", 4);
        record_close(c);
    }
    return KEEL_OK;
}

static void bp_drain(keel_conn *c)
{
    rec.ndrain++;
    if (bp_close_in_drain && !rec.closed) {
        /* Past the high-water mark again, and close with all that queued. */
        write_until_queued(c, 2 * HIGH_WATER, 256u << 20);
        rec.queued_after = keel_conn_write_queued(c);
        record_close(c);
    }
}

static const keel_protocol proto_bp = {
    .size = sizeof(keel_protocol),
    .name = "bp",
    .on_open = common_open,
    .on_data = bp_data,
    .on_drain = bp_drain,
    .on_close = common_close,
};

static void sample_reading(void)
{
    bp.ndata_at_sync = rec.ndata;
    bp.reading_flag = rec.conn != NULL && (rec.conn->flags & KL_CONN_READING) != 0;
}

/* The client does not read: keel queues past write_high_water and stops
 * reading; bytes the client sends meanwhile are not delivered. Returns the
 * client's socket. */
static int backpressure_begin(void)
{
    /* A small receive window, so that keel's queue fills quickly. */
    int fd = cl_connect(16 * 1024);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&rec.phase1, 1, 10000), "on_data did not run");
    cr_assert_gt(rec.queued_after, HIGH_WATER, "only %zu bytes queued", rec.queued_after);
    cr_assert(bp.backpressure_flag, "past write_high_water without back-pressure");
    cr_assert(!bp.reading_flag, "still reading past write_high_water");
    cl_send(fd, "more data\n", 10);
    worker_sync_then(sample_reading);
    cr_assert_eq(bp.ndata_at_sync, 1, "on_data ran for bytes sent under back-pressure");
    cr_assert(!bp.reading_flag, "reading resumed while the queue is still full");
    return fd;
}

Test(conn, close_with_output_past_high_water_delivers_everything, .timeout = 60)
{
    bp_close_in_drain = 1;
    server_start("bp");
    int fd = backpressure_begin();
    /* Now read everything: on_drain comes while open, the protocol queues
     * past the high-water mark again and closes with all that queued. */
    expect e = {0, UINT64_MAX, NULL, 0};
    rd r = cl_read(fd, &e, UINT64_MAX, 30000);
    cr_assert(LOAD(rec.closed), "the protocol never closed (on_drain: %d)", rec.ndrain);
    cr_assert_eq(r.err, 0, "the stream ended with %s after %llu bytes", err_name(r.err),
                 (unsigned long long)r.total);
    cr_assert_eq(r.total, rec.total, "got %llu of %llu bytes", (unsigned long long)r.total,
                 (unsigned long long)rec.total);
    cr_assert_eq(r.good, rec.total, "byte %llu differs", (unsigned long long)r.good);
    cr_assert_gt(rec.queued_after, HIGH_WATER, "closed with only %zu bytes queued",
                 rec.queued_after);
    close(fd);
    cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come");
    cr_assert_eq(rec.ndrain, 1, "on_drain ran %d times", rec.ndrain);
    cr_assert_eq(rec.close_status, KEEL_OK, "on_close(%d)", rec.close_status);
    cr_assert_eq(LOAD(rec.ndata), 1, "bytes sent under back-pressure reached a closed protocol");
    check_callbacks(all_ok);
    server_stop();
}

Test(conn, backpressure_holds_input_until_drained, .timeout = 60)
{
    bp_close_in_drain = 0;
    server_start("bp");
    int fd = backpressure_begin();
    /* The client reads: the queue drains, on_drain runs, reading resumes
     * and the held bytes arrive, then the protocol answers and closes. */
    expect e = {0, rec.total, "END\n", 4};
    rd r = cl_read(fd, &e, UINT64_MAX, 30000);
    cr_assert_eq(r.err, 0, "the stream ended with %s after %llu bytes", err_name(r.err),
                 (unsigned long long)r.total);
    cr_assert_eq(r.total, rec.total + 4, "got %llu of %llu bytes", (unsigned long long)r.total,
                 (unsigned long long)rec.total + 4);
    cr_assert_eq(r.good, r.total, "byte %llu differs", (unsigned long long)r.good);
    close(fd);
    cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come");
    cr_assert_eq(rec.ndrain, 1, "on_drain ran %d times", rec.ndrain);
    cr_assert(bp.nlate == 10 && memcmp(bp.late, "more data\n", 10) == 0,
              "the bytes sent under back-pressure arrived as '%.*s'", (int)bp.nlate, bp.late);
    cr_assert_eq(rec.close_status, KEEL_OK);
    check_callbacks(all_ok);
    server_stop();
}

/* ---- abort with output queued ----------------------------------------------------------- */

static int abort_at_once; /* the variant: abort inside on_data */
static int abort_seq, abort_write_rc;

static void do_abort(keel_conn *c)
{
    abort_seq = ++rec.seq;
    keel_conn_abort(c);
    keel_conn_abort(c); /* idempotent */
    keel_buf b = {"x", 1};
    abort_write_rc = keel_conn_write(c, &b, 1, never_called, NULL);
}

static int abort_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (rec.ndata++ > 0)
        return KEEL_OK;
    write_rec(c, "hello\n", 6); /* leaves at once */
    write_until_queued(c, 2 * HIGH_WATER, 256u << 20);
    rec.queued_after = keel_conn_write_queued(c);
    if (abort_at_once)
        do_abort(c);
    STORE(rec.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_abort = {
    .size = sizeof(keel_protocol),
    .name = "abort",
    .on_open = common_open,
    .on_data = abort_data,
    .on_close = common_close,
};

static int ok_if_at_once(int i)
{
    return rec.at_once[i] ? KEEL_OK : KEEL_ERR_CLOSED;
}

static void abort_now(void)
{
    if (rec.conn != NULL)
        do_abort(rec.conn);
}

static void abort_with_output_queued(int at_once)
{
    abort_at_once = at_once;
    server_start("abort");
    int fd = cl_connect(16 * 1024);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&rec.phase1, 1, 10000), "on_data did not run");
    cr_assert_gt(rec.queued_after, HIGH_WATER, "only %zu bytes queued", rec.queued_after);
    cr_assert(rec.at_once[0], "the first write did not leave at once");
    cr_assert(!rec.at_once[rec.nw - 1], "the last write left at once");
    if (!at_once)
        worker_sync_then(abort_now);
    cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come after the abort");
    /* The client sees the connection end (the bytes that had reached its
     * socket first, perhaps). */
    rd r = cl_read(fd, NULL, UINT64_MAX, 10000);
    cr_assert(r.err == 0 || r.err == ECONNRESET, "after the abort the client saw %s",
              err_name(r.err));
    cr_assert_lt(r.total, rec.total + 6, "every byte arrived: nothing was dropped");
    worker_sync();
    cr_assert_eq(abort_write_rc, KEEL_ERR_CLOSED, "a write after the abort: %d", abort_write_rc);
    cr_assert_eq(LOAD(rec.late_cb), 0);
    cr_assert_eq(rec.close_status, KEEL_ERR_CLOSED, "on_close(%d) after keel_conn_abort",
                 rec.close_status);
    check_callbacks(ok_if_at_once);
    for (int i = 0; i < rec.nw; i++)
        if (!rec.at_once[i])
            cr_assert_gt(rec.cb_seq[i], abort_seq, "write %d failed before the abort", i);
    cr_assert_gt(rec.close_seq, abort_seq);
    close(fd);
    server_stop();
}

Test(conn, abort_fails_pending_writes_before_on_close, .timeout = 60)
{
    abort_with_output_queued(0);
}

Test(conn, abort_inside_on_data_fails_pending_writes_in_order, .timeout = 60)
{
    abort_with_output_queued(1);
}

/* ---- lingering close ---------------------------------------------------------------------- */

static uint64_t linger_response = 4096;

static int linger_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    rec.ndata++;
    if (rec.closed) {
        *consumed = len; /* never expected: keel stops reading on close */
        return KEEL_OK;
    }
    if (len < 4) {
        *consumed = 0;
        return KEEL_OK;
    }
    *consumed = len;
    while (rec.total < linger_response) {
        uint64_t n = linger_response - rec.total < CHUNK ? linger_response - rec.total : CHUNK;
        if (write_rec(c, pattern + rec.total % PERIOD, (size_t)n) != KEEL_OK)
            break;
        rec.total += n;
    }
    record_close(c);
    return KEEL_OK;
}

static const keel_protocol proto_linger = {
    .size = sizeof(keel_protocol),
    .name = "linger",
    .on_open = common_open,
    .on_data = linger_data,
    .on_close = common_close,
};

Test(conn, lingering_close_delivers_the_response_despite_unread_input, .timeout = 60)
{
    linger_response = 2u << 20;
    server_start("linger");
    /* A small window keeps most of the response in keel and the kernel. */
    int fd = cl_connect(16 * 1024);
    cl_send(fd, "req\n", 4);
    cr_assert(wait_for(&rec.closed, 1, 5000), "the protocol did not answer");
    /* Bytes keel will never read, while the response is still on its way. */
    static char junk[32 * 1024];
    memset(junk, 'j', sizeof junk);
    cl_send(fd, junk, sizeof junk);
    expect e = {0, linger_response, NULL, 0};
    rd r = cl_read(fd, &e, UINT64_MAX, 30000);
    cr_assert_eq(r.err, 0, "the response ended with %s after %llu of %llu bytes (a reset?)",
                 err_name(r.err), (unsigned long long)r.total, (unsigned long long)linger_response);
    cr_assert_eq(r.total, linger_response);
    cr_assert_eq(r.good, linger_response, "byte %llu differs", (unsigned long long)r.good);
    close(fd);
    cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come after the client closed");
    cr_assert_eq(rec.close_status, KEEL_OK);
    cr_assert_eq(LOAD(rec.ndata), 1, "input after the close reached the protocol");
    check_callbacks(all_ok);
    server_stop();
}

Test(conn, lingering_close_is_bounded_when_the_peer_trickles, .timeout = 30)
{
    linger_response = 4096;
    server_start("linger");
    int fd = cl_connect(0);
    cl_send(fd, "req\n", 4);
    expect e = {0, linger_response, NULL, 0};
    rd r = cl_read(fd, &e, UINT64_MAX, 5000);
    cr_assert(r.err == 0 && r.good == linger_response, "response: %llu bytes then %s",
              (unsigned long long)r.good, err_name(r.err));
    /* The write side is shut; keel lingers. One byte every 200 ms must not
     * keep it there: the linger budget (2 s) is for the whole linger. */
    int sent = 0, send_failed = 0;
    uint64_t start = uv_hrtime() / 1000000;
    while (!LOAD(rec.nclose) && uv_hrtime() / 1000000 - start < 6000) {
        ssize_t n = send(fd, "t", 1, MSG_NOSIGNAL);
        if (n == 1) {
            sent++;
        } else if (n < 0 && errno != EINTR) {
            send_failed = 1;
            break;
        }
        /* A real-time trickle (the point of the test), ended by on_close. */
        for (int i = 0; i < 200 && !LOAD(rec.nclose); i++)
            uv_sleep(1);
    }
    cr_assert(wait_for(&rec.nclose, 1, 100),
              "keel still held the connection after %llu ms (%d bytes trickled)",
              (unsigned long long)(uv_hrtime() / 1000000 - start), sent);
    uint64_t held_ms = (rec.on_close_ns - rec.close_called_ns) / 1000000;
    cr_assert_lt(held_ms, 4000, "the lingering close took %llu ms", (unsigned long long)held_ms);
    cr_assert_geq(sent, 3, "only %d bytes trickled (send failed: %d)", sent, send_failed);
    cr_assert_eq(rec.close_status, KEEL_OK);
    cr_assert_eq(LOAD(rec.ndata), 1, "trickled bytes reached the protocol");
    check_callbacks(all_ok);
    close(fd);
    server_stop();
}

/* ---- what the server offers (conn_harness.h) -------------------------------------------- */

const keel_protocol *const conn_test_protocols[] = {&proto_bp, &proto_abort, &proto_linger, NULL};
const keel_transport *const conn_test_transports[] = {NULL};

/* The peer's address as text (X-Forwarded-For, $remote_addr): IPv4 is
 * written by hand, so its edges are checked against the fixed forms. */
Test(conn, peer_address_names, .timeout = 10)
{
    kl_peer_addr a;
    char buf[64];
    memset(&a, 0, sizeof a);
    cr_assert_eq(uv_ip4_addr("0.0.0.0", 0, &a.in4), 0);
    cr_assert_eq(kl_peer_addr_name(&a, 1, buf, sizeof buf), KEEL_OK);
    cr_assert_str_eq(buf, "0.0.0.0:0");
    cr_assert_eq(uv_ip4_addr("255.10.109.1", 65535, &a.in4), 0);
    cr_assert_eq(kl_peer_addr_name(&a, 1, buf, sizeof buf), KEEL_OK);
    cr_assert_str_eq(buf, "255.10.109.1:65535");
    cr_assert_eq(kl_peer_addr_name(&a, 0, buf, sizeof buf), KEEL_OK);
    cr_assert_str_eq(buf, "255.10.109.1");
    /* exactly the room it needs, then one byte less */
    cr_assert_eq(kl_peer_addr_name(&a, 0, buf, 13), KEEL_OK);
    cr_assert_eq(kl_peer_addr_name(&a, 0, buf, 12), KEEL_ERR_INVAL);
    cr_assert_str_eq(buf, "");
    memset(&a, 0, sizeof a);
    cr_assert_eq(uv_ip6_addr("::1", 8080, &a.in6), 0);
    cr_assert_eq(kl_peer_addr_name(&a, 1, buf, sizeof buf), KEEL_OK);
    cr_assert_str_eq(buf, "[::1]:8080");
    cr_assert_eq(kl_peer_addr_name(&a, 0, buf, sizeof buf), KEEL_OK);
    cr_assert_str_eq(buf, "::1");
}
