/* In-process tests of a connection's write and close paths through the
 * public API (net/conn.c, conn_close.c, output.c, file_send.c): protocols
 * compiled into the test program (KEEL_LINKED, as in test_runtime.c) run
 * on a one-worker server on 127.0.0.1:0, and the test's thread is the
 * client over plain sockets.
 *
 * Protocol callbacks run on the worker thread: they only record what
 * happened (Criterion's asserts are for the test's thread), and the test
 * waits for those records with bounded polls, never with a sleep that
 * "lets things happen". A check that something did NOT happen first makes
 * the worker's loop turn at least once more (worker_sync). Criterion runs
 * each test in a process of its own, so the globals start at zero. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <keel/embed.h>
#include <uv.h>

/* Only to look at a connection's reading state from the worker thread
 * (back-pressure); everything else goes through the public API. */
#include "net/conn.h"

#define LOAD(x)     __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)
#define ADD(x, v)   __atomic_add_fetch(&(x), (v), __ATOMIC_SEQ_CST)

#define HIGH_WATER (64 * 1024)
#define CHUNK      (64 * 1024)
#define MAXW       4096

/* ---- what the worker records ---------------------------------------------------- */

static struct {
    keel_worker *worker;
    uv_thread_t worker_thread;
    int started;
    int seq; /* orders events on the worker thread */

    keel_conn *conn; /* the test's one connection */
    int nopen, ndata, ndrain, nclose;
    int close_status, close_seq;
    uint64_t close_called_ns, on_close_ns; /* uv_hrtime */
    int closed;                            /* keel_conn_close was called */
    int phase1;                            /* the protocol's first step is done */

    /* Writes: their return codes and their callbacks. */
    int nw;
    int rc[MAXW];
    int at_once[MAXW]; /* nothing was queued right after the call */
    int cb_count[MAXW], cb_status[MAXW], cb_seq[MAXW];
    int ncb;
    int in_call;        /* inside keel_conn_write / _write_file */
    int cb_inside_call; /* callbacks that came from inside such a call */
    int cb_wrong_thread;
    int next_cb, cb_out_of_order, first_out_of_order, before_out_of_order;
    uint64_t total; /* pattern bytes written */

    /* Sampled on the worker thread. */
    int backpressure_flag, reading_flag, ndata_at_sync;
    size_t queued_after;
    int after_close_rc, after_close_copy_rc, after_close_file_rc, late_cb;

    char late[256]; /* bytes on_data got after back-pressure */
    size_t nlate;
} g;

/* ---- a periodic pattern, so that a lost or repeated chunk shows ------------------- */

#define PERIOD 251
static unsigned char pattern[CHUNK + PERIOD];

static unsigned char pattern_at(uint64_t k)
{
    return (unsigned char)((k % PERIOD) * 3 + 1);
}

static void pattern_init(void)
{
    for (size_t i = 0; i < sizeof pattern; i++)
        pattern[i] = pattern_at(i);
}

/* ---- writes with their callbacks recorded ------------------------------------------- */

static void on_written(keel_conn *c, int status, void *ud)
{
    (void)c;
    int i = (int)(uintptr_t)ud;
    uv_thread_t self = uv_thread_self();
    if (LOAD(g.in_call))
        ADD(g.cb_inside_call, 1);
    if (!uv_thread_equal(&self, &g.worker_thread))
        ADD(g.cb_wrong_thread, 1);
    g.cb_status[i] = status;
    g.cb_seq[i] = ++g.seq;
    if (i != g.next_cb && g.cb_out_of_order++ == 0) {
        g.first_out_of_order = i;
        g.before_out_of_order = g.next_cb - 1;
    }
    g.next_cb = i + 1;
    ADD(g.cb_count[i], 1);
    ADD(g.ncb, 1);
}

/* keel_conn_write with the callback recorded; returns its status. */
static int write_rec(keel_conn *c, const void *data, size_t len)
{
    int i = g.nw++;
    keel_buf b = {data, len};
    STORE(g.in_call, 1);
    int rc = keel_conn_write(c, &b, 1, on_written, (void *)(uintptr_t)i);
    STORE(g.in_call, 0);
    g.rc[i] = rc;
    g.at_once[i] = rc == KEEL_OK && keel_conn_write_queued(c) == 0;
    return rc;
}

static int write_file_rec(keel_conn *c, int fd, uint64_t offset, uint64_t len)
{
    int i = g.nw++;
    STORE(g.in_call, 1);
    int rc = keel_conn_write_file(c, fd, offset, len, on_written, (void *)(uintptr_t)i);
    STORE(g.in_call, 0);
    g.rc[i] = rc;
    return rc;
}

/* Pattern bytes in chunks until more than `queued` wait in keel (the client
 * does not read), at most `cap` bytes. */
static void write_until_queued(keel_conn *c, size_t queued, uint64_t cap)
{
    uint64_t start = g.total;
    while (keel_conn_write_queued(c) <= queued && g.total - start < cap && g.nw < MAXW - 8) {
        if (write_rec(c, pattern + g.total % PERIOD, CHUNK) != KEEL_OK)
            return;
        g.total += CHUNK;
    }
}

static void record_close(keel_conn *c)
{
    g.close_called_ns = uv_hrtime();
    keel_conn_close(c);
    STORE(g.closed, 1);
}

/* ---- the protocols' common callbacks -------------------------------------------------- */

static int common_open(keel_conn *c, void *arg)
{
    (void)arg;
    g.conn = c;
    ADD(g.nopen, 1);
    return KEEL_OK;
}

static void common_close(keel_conn *c, int status)
{
    (void)c;
    g.close_status = status;
    g.close_seq = ++g.seq;
    g.on_close_ns = uv_hrtime();
    g.conn = NULL;
    ADD(g.nclose, 1);
}

/* ---- (a) writes that complete at once ------------------------------------------------ */

#define QUICK_WRITES 200
static char quick_text[QUICK_WRITES + 1][8];

static void on_chain(keel_conn *c, int status, void *ud)
{
    on_written(c, status, ud);
    write_rec(c, "end\n", 4);
    record_close(c);
}

static int quick_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (g.ndata++ > 0)
        return KEEL_OK;
    for (int i = 0; i < QUICK_WRITES; i++) {
        snprintf(quick_text[i], sizeof quick_text[i], "w%04d\n", i);
        write_rec(c, quick_text[i], 6);
    }
    /* Two buffers in one call, and an empty write: one callback each. */
    int i = g.nw++;
    keel_buf two[2] = {{"tw", 2}, {"o\n", 2}};
    STORE(g.in_call, 1);
    g.rc[i] = keel_conn_write(c, two, 2, on_written, (void *)(uintptr_t)i);
    STORE(g.in_call, 0);
    g.at_once[i] = g.rc[i] == KEEL_OK && keel_conn_write_queued(c) == 0;
    /* The empty write's callback writes once more and closes: from the
     * loop's idle pass, whose callback must not come from inside either. */
    i = g.nw++;
    keel_buf none = {"", 0};
    STORE(g.in_call, 1);
    g.rc[i] = keel_conn_write(c, &none, 1, on_chain, (void *)(uintptr_t)i);
    STORE(g.in_call, 0);
    g.at_once[i] = g.rc[i] == KEEL_OK && keel_conn_write_queued(c) == 0;
    STORE(g.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_quick = {
    .size = sizeof(keel_protocol),
    .name = "quick",
    .on_open = common_open,
    .on_data = quick_data,
    .on_close = common_close,
};

/* A write from the callback of a write that went through libuv's queue
 * (called back from libuv's write completion), when that write was the
 * last one in flight: the common "write the next piece when the previous
 * one has left" pattern. */
static int chain_index = -1, chain_rc = -1000;

static void on_chain_written(keel_conn *c, int status, void *ud)
{
    on_written(c, status, ud);
    if ((int)(uintptr_t)ud != chain_index)
        return;
    chain_rc = keel_conn_write_copy(c, "after\n", 6);
    record_close(c);
}

static int qchain_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (g.ndata++ > 0)
        return KEEL_OK;
    while (keel_conn_write_queued(c) == 0 && g.nw < MAXW - 8) {
        int i = g.nw++;
        keel_buf b = {pattern + g.total % PERIOD, CHUNK};
        STORE(g.in_call, 1);
        g.rc[i] = keel_conn_write(c, &b, 1, on_chain_written, (void *)(uintptr_t)i);
        STORE(g.in_call, 0);
        if (g.rc[i] != KEEL_OK)
            break;
        g.total += CHUNK;
        chain_index = i;
    }
    g.queued_after = keel_conn_write_queued(c);
    STORE(g.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_qchain = {
    .size = sizeof(keel_protocol),
    .name = "qchain",
    .on_open = common_open,
    .on_data = qchain_data,
    .on_close = common_close,
};

/* ---- (b) a write after close ----------------------------------------------------------- */

static void never_called(keel_conn *c, int status, void *ud)
{
    (void)c;
    (void)status;
    (void)ud;
    ADD(g.late_cb, 1);
}

static int after_close_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (g.ndata++ > 0)
        return KEEL_OK;
    write_rec(c, "bye\n", 4);
    record_close(c);
    keel_buf b = {"late\n", 5};
    g.after_close_rc = keel_conn_write(c, &b, 1, never_called, NULL);
    g.after_close_copy_rc = keel_conn_write_copy(c, "late\n", 5);
    g.after_close_file_rc = keel_conn_write_file(c, 0, 0, 1, never_called, NULL);
    keel_conn_close(c); /* idempotent */
    STORE(g.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_after_close = {
    .size = sizeof(keel_protocol),
    .name = "after_close",
    .on_open = common_open,
    .on_data = after_close_data,
    .on_close = common_close,
};

/* ---- (c) back-pressure, drain, close with output queued ----------------------------- */

static int bp_close_in_drain; /* the variant */

static int bp_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    *consumed = len;
    if (g.ndata++ == 0) {
        write_until_queued(c, 2 * HIGH_WATER, 256u << 20);
        g.queued_after = keel_conn_write_queued(c);
        g.backpressure_flag = (c->flags & KL_CONN_BACKPRESSURE) != 0;
        g.reading_flag = (c->flags & KL_CONN_READING) != 0;
        STORE(g.phase1, 1);
        return KEEL_OK;
    }
    /* After the drain (variant that stays open): the bytes sent meanwhile. */
    size_t n = len < sizeof g.late - g.nlate ? len : sizeof g.late - g.nlate;
    memcpy(g.late + g.nlate, data, n);
    g.nlate += n;
    if (g.nlate >= 10 && !g.closed) {
        write_rec(c, "END\n", 4);
        record_close(c);
    }
    return KEEL_OK;
}

static void bp_drain(keel_conn *c)
{
    g.ndrain++;
    if (bp_close_in_drain && !g.closed) {
        /* Past the high-water mark again, and close with all that queued. */
        write_until_queued(c, 2 * HIGH_WATER, 256u << 20);
        g.queued_after = keel_conn_write_queued(c);
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

/* ---- (d) abort with output queued ---------------------------------------------------- */

static int abort_at_once; /* the variant: abort inside on_data */
static int abort_seq, abort_write_rc;

static void do_abort(keel_conn *c)
{
    abort_seq = ++g.seq;
    keel_conn_abort(c);
    keel_conn_abort(c); /* idempotent */
    keel_buf b = {"x", 1};
    abort_write_rc = keel_conn_write(c, &b, 1, never_called, NULL);
}

static int abort_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (g.ndata++ > 0)
        return KEEL_OK;
    write_rec(c, "hello\n", 6); /* leaves at once */
    write_until_queued(c, 2 * HIGH_WATER, 256u << 20);
    g.queued_after = keel_conn_write_queued(c);
    if (abort_at_once)
        do_abort(c);
    STORE(g.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_abort = {
    .size = sizeof(keel_protocol),
    .name = "abort",
    .on_open = common_open,
    .on_data = abort_data,
    .on_close = common_close,
};

/* ---- (e) a file, then a write, then close ------------------------------------------------ */

static int file_fd = -1;
static uint64_t file_offset, file_len;
static const char file_tail[] = "TAIL-AFTER-FILE\n";

static int file_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (g.ndata++ > 0)
        return KEEL_OK;
    write_file_rec(c, file_fd, file_offset, file_len);
    g.queued_after = keel_conn_write_queued(c);
    write_rec(c, file_tail, sizeof file_tail - 1);
    record_close(c);
    STORE(g.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_file = {
    .size = sizeof(keel_protocol),
    .name = "file",
    .on_open = common_open,
    .on_data = file_data,
    .on_close = common_close,
};

/* ---- (f), (g) lingering close --------------------------------------------------------------- */

static uint64_t linger_response = 4096;

static int linger_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    g.ndata++;
    if (g.closed) {
        *consumed = len; /* never expected: keel stops reading on close */
        return KEEL_OK;
    }
    if (len < 4) {
        *consumed = 0;
        return KEEL_OK;
    }
    *consumed = len;
    while (g.total < linger_response) {
        uint64_t n = linger_response - g.total < CHUNK ? linger_response - g.total : CHUNK;
        if (write_rec(c, pattern + g.total % PERIOD, (size_t)n) != KEEL_OK)
            break;
        g.total += n;
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

/* ---- (h) many timeouts of arbitrary durations -------------------------------------------- */

#define MANY_CONNS 200

typedef struct tconn {
    uint64_t duration, opened, last_read, fired;
} tconn;

static struct {
    tconn rec[MANY_CONNS];
    int nopened, nfired, nclosed, nreads;
    uint64_t rng;
    int bad_close_status;
} tm;

static int timeout_open(keel_conn *c, void *arg)
{
    (void)arg;
    int i = tm.nopened;
    if (i >= MANY_CONNS)
        return KEEL_ERR_LIMIT;
    tconn *t = &tm.rec[i];
    tm.rng = tm.rng * 6364136223846793005ull + 1442695040888963407ull;
    t->duration = 37 + (tm.rng >> 33) % (2000 - 37 + 1);
    t->opened = t->last_read = keel_worker_now_ms(keel_conn_worker(c));
    keel_conn_set_data(c, t);
    keel_conn_set_timeout(c, t->duration);
    ADD(tm.nopened, 1);
    return KEEL_OK;
}

static int timeout_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    tconn *t = keel_conn_data(c);
    /* A read pushes the inactivity deadline back (lazily, in the heap). */
    t->last_read = keel_worker_now_ms(keel_conn_worker(c));
    *consumed = len;
    ADD(tm.nreads, 1);
    return KEEL_OK;
}

static void timeout_fired(keel_conn *c)
{
    tconn *t = keel_conn_data(c);
    if (t->fired == 0) {
        t->fired = keel_worker_now_ms(keel_conn_worker(c));
        ADD(tm.nfired, 1);
    }
    keel_conn_close(c);
}

static void timeout_close(keel_conn *c, int status)
{
    (void)c;
    if (status != KEEL_OK)
        ADD(tm.bad_close_status, 1);
    ADD(tm.nclosed, 1);
}

static const keel_protocol proto_timeouts = {
    .size = sizeof(keel_protocol),
    .name = "timeouts",
    .on_open = timeout_open,
    .on_data = timeout_data,
    .on_timeout = timeout_fired,
    .on_close = timeout_close,
};

/* ---- (i) keel_conn_consume ----------------------------------------------------------------- */

static struct {
    int in_data_rc, in_data_rc2;
    size_t first_len;
    int rc_too_many, rc_three, rc_zero, rc_two, rc_idle_zero, rc_idle_one;
    char second[64];
    size_t second_len;
    int timer_ran, post_done;
} cs;

static int consume_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    int n = ++g.ndata;
    if (n == 1 || !g.phase1) {
        if (len < 10) {
            *consumed = 0; /* wait for the ten bytes */
            return KEEL_OK;
        }
        cs.in_data_rc = keel_conn_consume(c, 1);
        cs.first_len = len;
        *consumed = 0;
        keel_conn_pause(c);
        STORE(g.phase1, 1);
        return KEEL_OK;
    }
    cs.in_data_rc2 = keel_conn_consume(c, 0);
    size_t m = len < sizeof cs.second ? len : sizeof cs.second;
    memcpy(cs.second, data, m);
    cs.second_len = m;
    *consumed = len;
    if (m >= 5) {
        /* Nothing buffered now (on_data consumed all): consume refuses. */
        STORE(g.closed, 1);
    }
    return KEEL_OK;
}

static void consume_timer(keel_timer *timer, void *ud)
{
    keel_conn *c = ud;
    cs.rc_two = keel_conn_consume(c, 2);
    cs.timer_ran = 1;
    keel_timer_stop(timer);
    keel_conn_resume(c);
}

/* From a post, while paused with ten bytes buffered. */
static void consume_post(keel_worker *w, void *ud)
{
    (void)ud;
    keel_conn *c = g.conn;
    cs.rc_too_many = keel_conn_consume(c, cs.first_len + 1);
    cs.rc_three = keel_conn_consume(c, 3);
    cs.rc_zero = keel_conn_consume(c, 0);
    /* And two more from a timer, which then resumes. */
    if (keel_timer_start(w, 1, 0, consume_timer, c) == NULL)
        cs.rc_two = -1000;
    STORE(cs.post_done, 1);
}

/* From a post, with nothing buffered and not paused. */
static void consume_idle_post(keel_worker *w, void *ud)
{
    (void)w;
    (void)ud;
    if (g.conn != NULL) {
        cs.rc_idle_zero = keel_conn_consume(g.conn, 0);
        cs.rc_idle_one = keel_conn_consume(g.conn, 1);
        keel_conn_close(g.conn);
    }
    STORE(g.phase1, 2);
}

static const keel_protocol proto_consume = {
    .size = sizeof(keel_protocol),
    .name = "consume",
    .on_open = common_open,
    .on_data = consume_data,
    .on_close = common_close,
};

/* ---- (j) keel_conn_set_protocol from on_data --------------------------------------------- */

static struct {
    int a_data, a_close, b_open, b_data, b_close, switch_rc;
    void *b_arg;
    size_t left_at_switch;
    char got[256];
    int ngot;
} sw;

static int switch_marker;

static int switch_a_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    sw.a_data++;
    /* "SWITCH\n" and the eleven bytes after it, in one delivery. */
    if (len < 7 + 11 || memcmp(data, "SWITCH\n", 7) != 0) {
        *consumed = 0;
        return KEEL_OK;
    }
    sw.left_at_switch = len - 7;
    sw.switch_rc = keel_conn_set_protocol(c, "switch_b", &switch_marker);
    *consumed = 7;
    return KEEL_OK;
}

static void switch_a_close(keel_conn *c, int status)
{
    (void)c;
    (void)status;
    sw.a_close++;
}

static int switch_b_open(keel_conn *c, void *arg)
{
    (void)c;
    sw.b_open++;
    sw.b_arg = arg;
    return KEEL_OK;
}

static int switch_b_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)c;
    sw.b_data++;
    size_t room = sizeof sw.got - (size_t)sw.ngot;
    size_t n = len < room ? len : room;
    memcpy(sw.got + sw.ngot, data, n);
    STORE(sw.ngot, sw.ngot + (int)n);
    *consumed = len;
    return KEEL_OK;
}

static void switch_b_close(keel_conn *c, int status)
{
    common_close(c, status);
    sw.b_close++;
}

static const keel_protocol proto_switch_a = {
    .size = sizeof(keel_protocol),
    .name = "switch_a",
    .on_open = common_open,
    .on_data = switch_a_data,
    .on_close = switch_a_close,
};

static const keel_protocol proto_switch_b = {
    .size = sizeof(keel_protocol),
    .name = "switch_b",
    .on_open = switch_b_open,
    .on_data = switch_b_data,
    .on_close = switch_b_close,
};

/* ---- through a transport: pacing, a file read in pieces ---------------------------- */

/* An identity transport: the client reads plain bytes, but every write,
 * file piece and completion takes the transport's path (pacing, the
 * thread-pool file reader). */
static int ident_read(keel_conn *c, const char *data, size_t len)
{
    return keel_transport_deliver(c, data, len);
}

static int ident_write(keel_conn *c, const keel_buf *bufs, size_t nbufs)
{
    for (size_t i = 0; i < nbufs; i++) {
        int rc = keel_transport_send(c, bufs[i].base, bufs[i].len);
        if (rc < 0)
            return rc;
    }
    return KEEL_OK;
}

static const keel_transport transport_ident = {
    .size = sizeof(keel_transport),
    .name = "ident",
    .on_read = ident_read,
    .on_write = ident_write,
};

static int tfile_abort; /* the variant: abort instead of close */

/* Past the pacing threshold (the client does not read yet), then a file,
 * then a write held behind it; then close or abort. */
static int tfile_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (g.ndata++ > 0)
        return KEEL_OK;
    write_until_queued(c, 2 * HIGH_WATER, 256u << 20);
    write_file_rec(c, file_fd, file_offset, file_len);
    write_rec(c, file_tail, sizeof file_tail - 1);
    g.queued_after = keel_conn_write_queued(c);
    if (tfile_abort)
        keel_conn_abort(c);
    else
        record_close(c);
    STORE(g.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_tfile = {
    .size = sizeof(keel_protocol),
    .name = "tfile",
    .on_open = common_open,
    .on_data = tfile_data,
    .on_close = common_close,
};

/* ---- the module --------------------------------------------------------------------------- */

static int conntest_load(keel_module *m)
{
    const keel_protocol *all[] = {&proto_quick,    &proto_after_close, &proto_bp,
                                  &proto_abort,    &proto_file,        &proto_linger,
                                  &proto_timeouts, &proto_consume,     &proto_switch_a,
                                  &proto_switch_b, &proto_tfile,       &proto_qchain};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        int rc = keel_protocol_register(m, all[i]);
        if (rc != KEEL_OK)
            return rc;
    }
    return keel_transport_register(m, &transport_ident);
}

static int conntest_start(keel_module *m, keel_worker *w, void *state)
{
    (void)m;
    (void)state;
    g.worker = w;
    g.worker_thread = uv_thread_self();
    STORE(g.started, 1);
    return KEEL_OK;
}

KEEL_MODULE(conntest, .version = "1", .load = conntest_load, .start = conntest_start);

/* ---- the server on its thread ------------------------------------------------------------ */

static struct {
    keel_server *s;
    uv_thread_t thread;
    int rc;
    unsigned port;
} srv;

static void run_server(void *arg)
{
    (void)arg;
    srv.rc = keel_server_run(srv.s);
}

static int wait_for(int *flag, int value, int ms)
{
    for (int i = 0; i < ms; i++) {
        if (LOAD(*flag) >= value)
            return 1;
        uv_sleep(1);
    }
    return LOAD(*flag) >= value;
}

static void server_start(const char *protocol, const char *extra)
{
    char conf[1024];
    snprintf(
        conf, sizeof conf,
        "[keel]\nlisten = 127.0.0.1:0 %s\nworkers = 1\nlog_level = warn\nwrite_high_water = %d\n%s",
        protocol, HIGH_WATER, extra ? extra : "");
    pattern_init();
    srv.s = keel_server_new();
    cr_assert_not_null(srv.s);
    cr_assert_eq(keel_server_add_module(srv.s, &keel_module_conntest), KEEL_OK);
    cr_assert_eq(keel_server_load_config_string(srv.s, conf, "conn.conf"), KEEL_OK);
    srv.rc = -100;
    cr_assert_eq(uv_thread_create(&srv.thread, run_server, NULL), 0);
    cr_assert(wait_for(&g.started, 1, 5000), "the worker did not start");
    for (int i = 0; i < 5000 && (srv.port = keel_server_listener_port(srv.s, 0)) == 0; i++)
        uv_sleep(1);
    cr_assert_neq(srv.port, 0, "no bound port");
}

static void server_stop(void)
{
    keel_server_stop(srv.s);
    uv_thread_join(&srv.thread);
    cr_expect_eq(srv.rc, KEEL_OK, "keel_server_run: %d", srv.rc);
    keel_server_free(srv.s);
}

/* Makes the worker's loop turn at least twice (a post that posts again):
 * whatever was already readable or owed before this call has run. */
static int synced;
static void (*sync_fn)(void); /* run on the worker at the second turn */

static void sync_second(keel_worker *w, void *ud)
{
    (void)w;
    (void)ud;
    if (sync_fn != NULL)
        sync_fn();
    ADD(synced, 1);
}

static void sync_first(keel_worker *w, void *ud)
{
    if (keel_worker_post(w, sync_second, ud) != KEEL_OK)
        ADD(synced, 1000);
}

static void worker_sync_then(void (*fn)(void))
{
    int before = LOAD(synced);
    sync_fn = fn;
    cr_assert_eq(keel_worker_post(g.worker, sync_first, NULL), KEEL_OK);
    cr_assert(wait_for(&synced, before + 1, 5000), "the worker did not run a post");
}

static void worker_sync(void)
{
    worker_sync_then(NULL);
}

/* ---- the client ------------------------------------------------------------------------------ */

static int cl_connect(int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)srv.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s", strerror(errno));
    return fd;
}

static void cl_send(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        cr_assert(n > 0, "send: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

/* What a read to the end found. */
typedef struct rd {
    uint64_t total;    /* bytes received */
    uint64_t good;     /* leading bytes that matched */
    int err;           /* 0: EOF; an errno (ECONNRESET...); ETIMEDOUT */
    int mismatch_seen; /* a byte differed */
} rd;

/* The stream the client expects: pattern bytes [poff, poff + plen), then
 * `tail`. */
typedef struct expect {
    uint64_t poff, plen;
    const char *tail;
    size_t tail_len;
} expect;

static int expected_byte(const expect *e, uint64_t k, unsigned char *out)
{
    if (k < e->plen) {
        *out = pattern_at(e->poff + k);
        return 1;
    }
    if (k - e->plen < e->tail_len) {
        *out = (unsigned char)e->tail[k - e->plen];
        return 1;
    }
    return 0;
}

/* Reads until EOF, an error, `limit` bytes or timeout_ms; checks the bytes
 * against e (may be NULL). */
static rd cl_read(int fd, const expect *e, uint64_t limit, int timeout_ms)
{
    rd r = {0, 0, ETIMEDOUT, 0};
    static unsigned char buf[256 * 1024];
    uint64_t deadline = uv_hrtime() / 1000000 + (uint64_t)timeout_ms;
    while (r.total < limit) {
        uint64_t now = uv_hrtime() / 1000000;
        if (now >= deadline)
            return r;
        struct pollfd p = {fd, POLLIN, 0};
        int pr = poll(&p, 1, (int)(deadline - now));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        size_t want = sizeof buf;
        if (limit - r.total < want)
            want = (size_t)(limit - r.total);
        ssize_t n = recv(fd, buf, want, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r.err = errno;
            return r;
        }
        if (n == 0) {
            r.err = 0;
            return r;
        }
        for (ssize_t i = 0; i < n; i++) {
            unsigned char want_byte;
            if (!r.mismatch_seen && e != NULL &&
                (!expected_byte(e, r.total + (uint64_t)i, &want_byte) || buf[i] != want_byte))
                r.mismatch_seen = 1;
            if (!r.mismatch_seen)
                r.good++;
        }
        r.total += (uint64_t)n;
    }
    r.err = EAGAIN; /* stopped at the limit */
    return r;
}

static const char *err_name(int err)
{
    return err == 0 ? "EOF" : strerror(err);
}

/* Every write that returned KEEL_OK had its callback exactly once, with
 * `status_for(i)`, never from inside a keel call, on the worker thread, in
 * order, and before on_close. */
static void check_callbacks(int (*status_for)(int i))
{
    int last_seq = 0;
    for (int i = 0; i < g.nw; i++) {
        if (g.rc[i] != KEEL_OK) {
            cr_assert_eq(LOAD(g.cb_count[i]), 0, "write %d returned %d but had a callback", i,
                         g.rc[i]);
            continue;
        }
        cr_assert_eq(LOAD(g.cb_count[i]), 1, "write %d: %d callbacks", i, LOAD(g.cb_count[i]));
        int want = status_for ? status_for(i) : KEEL_OK;
        cr_assert_eq(g.cb_status[i], want, "write %d: callback status %d (%s), expected %d", i,
                     g.cb_status[i], keel_strerror(g.cb_status[i]), want);
        if (g.cb_seq[i] > last_seq)
            last_seq = g.cb_seq[i];
    }
    cr_assert_eq(LOAD(g.cb_inside_call), 0, "%d callbacks came from inside the call",
                 LOAD(g.cb_inside_call));
    cr_assert_eq(LOAD(g.cb_wrong_thread), 0, "callbacks off the worker thread");
    cr_assert_eq(g.cb_out_of_order, 0,
                 "%d callbacks out of order: the first, write %d's (status %d), came after "
                 "write %d's (-1: it came first)",
                 g.cb_out_of_order, g.first_out_of_order, g.cb_status[g.first_out_of_order],
                 g.before_out_of_order);
    if (LOAD(g.nclose) > 0)
        cr_assert_gt(g.close_seq, last_seq, "on_close came before a write's callback");
}

static int all_ok(int i)
{
    (void)i;
    return KEEL_OK;
}

/* ---- (a) ----------------------------------------------------------------------------------- */

Test(conn, writes_that_complete_at_once_call_back_from_the_loop, .timeout = 30)
{
    server_start("quick", NULL);
    int fd = cl_connect(0);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&g.phase1, 1, 5000), "on_data did not run");
    int n = QUICK_WRITES + 3; /* and the one from a callback */
    cr_assert(wait_for(&g.ncb, n, 5000), "%d of %d callbacks came", LOAD(g.ncb), n);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(g.rc[i], KEEL_OK, "write %d: %d", i, g.rc[i]);
        cr_assert(g.at_once[i], "write %d did not leave at once (the test needs it to)", i);
    }
    char want[QUICK_WRITES * 6 + 16];
    size_t wl = 0;
    for (int i = 0; i < QUICK_WRITES; i++)
        wl += (size_t)snprintf(want + wl, sizeof want - wl, "w%04d\n", i);
    memcpy(want + wl, "two\nend\n", 8);
    wl += 8;
    expect e = {0, 0, want, wl};
    rd r = cl_read(fd, &e, UINT64_MAX, 5000);
    cr_assert(r.err == 0 && r.good == wl && r.total == wl,
              "got %llu bytes (%llu as written) then %s", (unsigned long long)r.total,
              (unsigned long long)r.good, err_name(r.err));
    close(fd);
    cr_assert(wait_for(&g.nclose, 1, 5000), "on_close did not come");
    worker_sync(); /* a second callback would have come by now */
    cr_assert_eq(g.close_status, KEEL_OK);
    check_callbacks(NULL);
    server_stop();
}

Test(conn, a_write_from_a_queued_write_callback, .timeout = 30)
{
    server_start("qchain", NULL);
    int fd = cl_connect(16 * 1024);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&g.phase1, 1, 10000), "on_data did not run");
    cr_assert_gt(g.queued_after, 0, "nothing was queued (the test needs a queued write)");
    expect e = {0, g.total, "after\n", 6};
    rd r = cl_read(fd, &e, UINT64_MAX, 20000);
    uint64_t want = g.total + 6;
    cr_assert(r.err == 0 && r.total == want && r.good == want,
              "got %llu bytes (%llu as written) of %llu, then %s", (unsigned long long)r.total,
              (unsigned long long)r.good, (unsigned long long)want, err_name(r.err));
    close(fd);
    cr_assert(wait_for(&g.nclose, 1, 5000), "on_close did not come");
    cr_assert_eq(chain_rc, KEEL_OK, "keel_conn_write_copy from the callback: %d", chain_rc);
    cr_assert_eq(g.close_status, KEEL_OK);
    check_callbacks(all_ok);
    server_stop();
}

/* ---- (b) ----------------------------------------------------------------------------------- */

Test(conn, a_write_after_close_is_refused_without_callback, .timeout = 30)
{
    server_start("after_close", NULL);
    int fd = cl_connect(0);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&g.phase1, 1, 5000));
    cr_assert_eq(g.after_close_rc, KEEL_ERR_CLOSED, "keel_conn_write after close: %d",
                 g.after_close_rc);
    cr_assert_eq(g.after_close_copy_rc, KEEL_ERR_CLOSED, "keel_conn_write_copy after close: %d",
                 g.after_close_copy_rc);
    cr_assert_eq(g.after_close_file_rc, KEEL_ERR_CLOSED, "keel_conn_write_file after close: %d",
                 g.after_close_file_rc);
    expect e = {0, 0, "bye\n", 4};
    rd r = cl_read(fd, &e, 1 << 20, 5000);
    cr_assert(r.err == 0 && r.total == 4 && r.good == 4, "got %llu bytes then %s",
              (unsigned long long)r.total, err_name(r.err));
    close(fd);
    cr_assert(wait_for(&g.nclose, 1, 5000), "on_close did not come");
    worker_sync(); /* a late callback would have run by now */
    cr_assert_eq(LOAD(g.late_cb), 0, "a refused write's callback ran");
    cr_assert_eq(g.close_status, KEEL_OK);
    check_callbacks(NULL);
    server_stop();
}

/* ---- (c) ----------------------------------------------------------------------------------- */

static void sample_reading(void)
{
    g.ndata_at_sync = g.ndata;
    g.reading_flag = g.conn != NULL && (g.conn->flags & KL_CONN_READING) != 0;
}

/* The client does not read: keel queues past write_high_water and stops
 * reading; bytes the client sends meanwhile are not delivered. Returns the
 * client's socket. */
static int backpressure_begin(void)
{
    /* A small receive window, so that keel's queue fills quickly. */
    int fd = cl_connect(16 * 1024);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&g.phase1, 1, 10000), "on_data did not run");
    cr_assert_gt(g.queued_after, HIGH_WATER, "only %zu bytes queued", g.queued_after);
    cr_assert(g.backpressure_flag, "past write_high_water without back-pressure");
    cr_assert(!g.reading_flag, "still reading past write_high_water");
    cl_send(fd, "more data\n", 10);
    worker_sync_then(sample_reading);
    cr_assert_eq(g.ndata_at_sync, 1, "on_data ran for bytes sent under back-pressure");
    cr_assert(!g.reading_flag, "reading resumed while the queue is still full");
    return fd;
}

Test(conn, close_with_output_past_high_water_delivers_everything, .timeout = 60)
{
    bp_close_in_drain = 1;
    server_start("bp", NULL);
    int fd = backpressure_begin();
    /* Now read everything: on_drain comes while open, the protocol queues
     * past the high-water mark again and closes with all that queued. */
    expect e = {0, UINT64_MAX, NULL, 0};
    rd r = cl_read(fd, &e, UINT64_MAX, 30000);
    cr_assert(LOAD(g.closed), "the protocol never closed (on_drain: %d)", g.ndrain);
    cr_assert_eq(r.err, 0, "the stream ended with %s after %llu bytes", err_name(r.err),
                 (unsigned long long)r.total);
    cr_assert_eq(r.total, g.total, "got %llu of %llu bytes", (unsigned long long)r.total,
                 (unsigned long long)g.total);
    cr_assert_eq(r.good, g.total, "byte %llu differs", (unsigned long long)r.good);
    cr_assert_gt(g.queued_after, HIGH_WATER, "closed with only %zu bytes queued", g.queued_after);
    close(fd);
    cr_assert(wait_for(&g.nclose, 1, 5000), "on_close did not come");
    cr_assert_eq(g.ndrain, 1, "on_drain ran %d times", g.ndrain);
    cr_assert_eq(g.close_status, KEEL_OK, "on_close(%d)", g.close_status);
    cr_assert_eq(LOAD(g.ndata), 1, "bytes sent under back-pressure reached a closed protocol");
    check_callbacks(all_ok);
    server_stop();
}

Test(conn, backpressure_holds_input_until_drained, .timeout = 60)
{
    bp_close_in_drain = 0;
    server_start("bp", NULL);
    int fd = backpressure_begin();
    /* The client reads: the queue drains, on_drain runs, reading resumes
     * and the held bytes arrive, then the protocol answers and closes. */
    expect e = {0, g.total, "END\n", 4};
    rd r = cl_read(fd, &e, UINT64_MAX, 30000);
    cr_assert_eq(r.err, 0, "the stream ended with %s after %llu bytes", err_name(r.err),
                 (unsigned long long)r.total);
    cr_assert_eq(r.total, g.total + 4, "got %llu of %llu bytes", (unsigned long long)r.total,
                 (unsigned long long)g.total + 4);
    cr_assert_eq(r.good, r.total, "byte %llu differs", (unsigned long long)r.good);
    close(fd);
    cr_assert(wait_for(&g.nclose, 1, 5000), "on_close did not come");
    cr_assert_eq(g.ndrain, 1, "on_drain ran %d times", g.ndrain);
    cr_assert(g.nlate == 10 && memcmp(g.late, "more data\n", 10) == 0,
              "the bytes sent under back-pressure arrived as '%.*s'", (int)g.nlate, g.late);
    cr_assert_eq(g.close_status, KEEL_OK);
    check_callbacks(all_ok);
    server_stop();
}

/* ---- (d) ----------------------------------------------------------------------------------- */

static int ok_if_at_once(int i)
{
    return g.at_once[i] ? KEEL_OK : KEEL_ERR_CLOSED;
}

static void abort_now(void)
{
    if (g.conn != NULL)
        do_abort(g.conn);
}

static void abort_with_output_queued(int at_once)
{
    abort_at_once = at_once;
    server_start("abort", NULL);
    int fd = cl_connect(16 * 1024);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&g.phase1, 1, 10000), "on_data did not run");
    cr_assert_gt(g.queued_after, HIGH_WATER, "only %zu bytes queued", g.queued_after);
    cr_assert(g.at_once[0], "the first write did not leave at once");
    cr_assert(!g.at_once[g.nw - 1], "the last write left at once");
    if (!at_once)
        worker_sync_then(abort_now);
    cr_assert(wait_for(&g.nclose, 1, 5000), "on_close did not come after the abort");
    /* The client sees the connection end (the bytes that had reached its
     * socket first, perhaps). */
    rd r = cl_read(fd, NULL, UINT64_MAX, 10000);
    cr_assert(r.err == 0 || r.err == ECONNRESET, "after the abort the client saw %s",
              err_name(r.err));
    cr_assert_lt(r.total, g.total + 6, "every byte arrived: nothing was dropped");
    worker_sync();
    cr_assert_eq(abort_write_rc, KEEL_ERR_CLOSED, "a write after the abort: %d", abort_write_rc);
    cr_assert_eq(LOAD(g.late_cb), 0);
    cr_assert_eq(g.close_status, KEEL_ERR_CLOSED, "on_close(%d) after keel_conn_abort",
                 g.close_status);
    check_callbacks(ok_if_at_once);
    for (int i = 0; i < g.nw; i++)
        if (!g.at_once[i])
            cr_assert_gt(g.cb_seq[i], abort_seq, "write %d failed before the abort", i);
    cr_assert_gt(g.close_seq, abort_seq);
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

/* ---- (e) ----------------------------------------------------------------------------------- */

static void make_file(uint64_t size)
{
    char path[] = "/tmp/keel-conn-file-XXXXXX";
    file_fd = mkstemp(path);
    cr_assert(file_fd >= 0, "mkstemp: %s", strerror(errno));
    unlink(path);
    uint64_t done = 0;
    while (done < size) {
        size_t n = size - done < CHUNK ? (size_t)(size - done) : CHUNK;
        ssize_t w = write(file_fd, pattern + done % PERIOD, n);
        cr_assert(w > 0, "write: %s", strerror(errno));
        done += (uint64_t)w;
    }
}

static void file_then_write_then_close(uint64_t size, uint64_t offset, uint64_t len, int rcvbuf)
{
    server_start("file", NULL); /* also fills the pattern */
    make_file(size);
    file_offset = offset;
    file_len = len;
    int fd = cl_connect(rcvbuf);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&g.phase1, 1, 5000), "on_data did not run");
    cr_assert_eq(g.rc[0], KEEL_OK, "keel_conn_write_file: %d", g.rc[0]);
    cr_assert_eq(g.rc[1], KEEL_OK, "keel_conn_write after the file: %d", g.rc[1]);
    expect e = {offset, len, file_tail, sizeof file_tail - 1};
    rd r = cl_read(fd, &e, UINT64_MAX, 30000);
    uint64_t want = len + sizeof file_tail - 1;
    cr_assert_eq(r.err, 0, "the stream ended with %s after %llu bytes", err_name(r.err),
                 (unsigned long long)r.total);
    cr_assert_eq(r.total, want, "got %llu of %llu bytes", (unsigned long long)r.total,
                 (unsigned long long)want);
    cr_assert_eq(r.good, want, "byte %llu differs", (unsigned long long)r.good);
    close(fd);
    cr_assert(wait_for(&g.nclose, 1, 5000), "on_close did not come");
    cr_assert_eq(g.close_status, KEEL_OK);
    check_callbacks(all_ok);
    close(file_fd);
    server_stop();
}

Test(conn, file_then_write_then_close_in_order, .timeout = 60)
{
    /* 3 MiB through a small receive window: the file is still being sent
     * when the write and the close come. */
    file_then_write_then_close(3u << 20, 0, 3u << 20, 16 * 1024);
    cr_assert_gt(g.queued_after, 0, "the file left at once (the test needs it queued)");
}

Test(conn, small_file_sent_inside_the_call_still_calls_back_later, .timeout = 30)
{
    /* Small enough to leave inside keel_conn_write_file: its callback is
     * owed, not called from inside. A part of the file, by offset. */
    file_then_write_then_close(8192, 1000, 5000, 0);
    cr_assert_eq(g.queued_after, 0, "the small file did not leave at once");
}

/* ---- (f) ----------------------------------------------------------------------------------- */

Test(conn, lingering_close_delivers_the_response_despite_unread_input, .timeout = 60)
{
    linger_response = 2u << 20;
    server_start("linger", NULL);
    /* A small window keeps most of the response in keel and the kernel. */
    int fd = cl_connect(16 * 1024);
    cl_send(fd, "req\n", 4);
    cr_assert(wait_for(&g.closed, 1, 5000), "the protocol did not answer");
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
    cr_assert(wait_for(&g.nclose, 1, 5000), "on_close did not come after the client closed");
    cr_assert_eq(g.close_status, KEEL_OK);
    cr_assert_eq(LOAD(g.ndata), 1, "input after the close reached the protocol");
    check_callbacks(all_ok);
    server_stop();
}

/* ---- (g) ----------------------------------------------------------------------------------- */

Test(conn, lingering_close_is_bounded_when_the_peer_trickles, .timeout = 30)
{
    linger_response = 4096;
    server_start("linger", NULL);
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
    while (!LOAD(g.nclose) && uv_hrtime() / 1000000 - start < 6000) {
        ssize_t n = send(fd, "t", 1, MSG_NOSIGNAL);
        if (n == 1) {
            sent++;
        } else if (n < 0 && errno != EINTR) {
            send_failed = 1;
            break;
        }
        /* A real-time trickle (the point of the test), ended by on_close. */
        for (int i = 0; i < 200 && !LOAD(g.nclose); i++)
            uv_sleep(1);
    }
    cr_assert(wait_for(&g.nclose, 1, 100),
              "keel still held the connection after %llu ms (%d bytes trickled)",
              (unsigned long long)(uv_hrtime() / 1000000 - start), sent);
    uint64_t held_ms = (g.on_close_ns - g.close_called_ns) / 1000000;
    cr_assert_lt(held_ms, 4000, "the lingering close took %llu ms", (unsigned long long)held_ms);
    cr_assert_geq(sent, 3, "only %d bytes trickled (send failed: %d)", sent, send_failed);
    cr_assert_eq(g.close_status, KEEL_OK);
    cr_assert_eq(LOAD(g.ndata), 1, "trickled bytes reached the protocol");
    check_callbacks(all_ok);
    close(fd);
    server_stop();
}

/* ---- (h) ----------------------------------------------------------------------------------- */

Test(conn, many_connections_time_out_at_their_own_durations, .timeout = 60)
{
    tm.rng = 0x1234567;
    server_start("timeouts", NULL);
    static int fds[MANY_CONNS];
    for (int i = 0; i < MANY_CONNS; i++) {
        fds[i] = cl_connect(0);
        /* One at a time, so that record i is connection i. */
        cr_assert(wait_for(&tm.nopened, i + 1, 5000), "connection %d not opened", i);
    }
    /* Reads on every fourth connection move its deadline later. */
    for (int i = 0; i < MANY_CONNS; i += 4)
        cl_send(fds[i], "x", 1);
    cr_assert(wait_for(&tm.nfired, MANY_CONNS, 8000), "%d of %d timeouts fired", LOAD(tm.nfired),
              MANY_CONNS);
    for (int i = 0; i < MANY_CONNS; i++) {
        rd r = cl_read(fds[i], NULL, UINT64_MAX, 5000);
        cr_assert(r.err == 0 && r.total == 0, "connection %d: %llu bytes then %s", i,
                  (unsigned long long)r.total, err_name(r.err));
        close(fds[i]);
    }
    cr_assert(wait_for(&tm.nclosed, MANY_CONNS, 5000), "%d of %d closed", LOAD(tm.nclosed),
              MANY_CONNS);
    cr_assert_eq(LOAD(tm.bad_close_status), 0);
    uint64_t dmin = UINT64_MAX, dmax = 0;
    for (int i = 0; i < MANY_CONNS; i++) {
        const tconn *t = &tm.rec[i];
        uint64_t deadline = t->last_read + t->duration;
        if (t->duration < dmin)
            dmin = t->duration;
        if (t->duration > dmax)
            dmax = t->duration;
        cr_assert_geq(t->fired, deadline, "connection %d (%llu ms) timed out %llu ms early", i,
                      (unsigned long long)t->duration, (unsigned long long)(deadline - t->fired));
        cr_assert_leq(t->fired, deadline + 750, "connection %d (%llu ms) timed out %llu ms late", i,
                      (unsigned long long)t->duration, (unsigned long long)(t->fired - deadline));
        /* Deadline order: whoever's deadline had come when j timed out had
         * timed out by then. */
        for (int j = 0; j < MANY_CONNS; j++)
            if (deadline <= tm.rec[j].fired)
                cr_assert_leq(t->fired, tm.rec[j].fired,
                              "connection %d (deadline %llu) timed out after connection %d "
                              "(at %llu)",
                              i, (unsigned long long)deadline, j,
                              (unsigned long long)tm.rec[j].fired);
    }
    cr_assert(dmin < 200 && dmax > 1800, "durations %llu..%llu do not spread",
              (unsigned long long)dmin, (unsigned long long)dmax);
    int touched = 0;
    for (int i = 0; i < MANY_CONNS; i++)
        touched += tm.rec[i].last_read > tm.rec[i].opened;
    cr_assert_geq(touched, 10, "only %d deadlines were pushed back by a read", touched);
    server_stop();
}

/* ---- (i) ----------------------------------------------------------------------------------- */

Test(conn, consume_refuses_inside_on_data_and_drops_bytes_from_outside, .timeout = 30)
{
    server_start("consume", NULL);
    int fd = cl_connect(0);
    cl_send(fd, "0123456789", 10);
    cr_assert(wait_for(&g.phase1, 1, 5000), "on_data did not see the ten bytes");
    cr_assert_eq(cs.in_data_rc, KEEL_ERR_STATE, "keel_conn_consume inside on_data: %d",
                 cs.in_data_rc);
    cr_assert_eq(cs.first_len, 10);
    cr_assert_eq(keel_worker_post(g.worker, consume_post, NULL), KEEL_OK);
    cr_assert(wait_for(&cs.post_done, 1, 5000), "the post did not run");
    cr_assert_eq(cs.rc_too_many, KEEL_ERR_INVAL, "consuming more than buffered: %d",
                 cs.rc_too_many);
    cr_assert_eq(cs.rc_three, KEEL_OK, "consume(3) from a post: %d", cs.rc_three);
    cr_assert_eq(cs.rc_zero, KEEL_OK, "consume(0) from a post: %d", cs.rc_zero);
    cr_assert(wait_for(&g.closed, 1, 5000), "on_data did not run again after resume");
    cr_assert_eq(cs.rc_two, KEEL_OK, "consume(2) from a timer: %d", cs.rc_two);
    cr_assert_eq(cs.in_data_rc2, KEEL_ERR_STATE, "consume(0) inside on_data: %d", cs.in_data_rc2);
    cr_assert(cs.second_len == 5 && memcmp(cs.second, "56789", 5) == 0,
              "after consuming 3 + 2 bytes on_data got '%.*s'", (int)cs.second_len, cs.second);
    /* Nothing buffered, not paused: 0 is fine, 1 is too many. */
    cr_assert_eq(keel_worker_post(g.worker, consume_idle_post, NULL), KEEL_OK);
    cr_assert(wait_for(&g.phase1, 2, 5000));
    cr_assert_eq(cs.rc_idle_zero, KEEL_OK);
    cr_assert_eq(cs.rc_idle_one, KEEL_ERR_INVAL, "consume(1) with nothing buffered: %d",
                 cs.rc_idle_one);
    rd r = cl_read(fd, NULL, UINT64_MAX, 5000);
    cr_assert(r.err == 0 && r.total == 0, "%llu bytes then %s", (unsigned long long)r.total,
              err_name(r.err));
    close(fd);
    cr_assert(wait_for(&g.nclose, 1, 5000));
    server_stop();
}

/* ---- (j) ----------------------------------------------------------------------------------- */

Test(conn, set_protocol_hands_unconsumed_bytes_over_once, .timeout = 30)
{
    server_start("switch_a", NULL);
    int fd = cl_connect(0);
    cl_send(fd, "SWITCH\nhello world", 18);
    cr_assert(wait_for(&sw.ngot, 11, 5000), "the new protocol got %d bytes", LOAD(sw.ngot));
    worker_sync(); /* a second delivery of the same bytes would have come by now */
    cl_send(fd, " more", 5);
    cr_assert(wait_for(&sw.ngot, 16, 5000), "the new protocol got %d bytes", LOAD(sw.ngot));
    worker_sync();
    cr_assert_eq(sw.switch_rc, KEEL_OK, "keel_conn_set_protocol: %d", sw.switch_rc);
    cr_assert_eq(sw.left_at_switch, 11, "the switch saw %zu bytes after the line",
                 sw.left_at_switch);
    cr_assert_eq(sw.b_open, 1);
    cr_assert_eq(sw.b_arg, &switch_marker, "on_open did not get the argument");
    cr_assert(LOAD(sw.ngot) == 16 && memcmp(sw.got, "hello world more", 16) == 0,
              "the new protocol got '%.*s'", (int)LOAD(sw.ngot), sw.got);
    close(fd);
    cr_assert(wait_for(&g.nclose, 1, 5000), "on_close did not come");
    cr_assert_eq(sw.a_close, 0, "the old protocol's on_close ran");
    cr_assert_eq(sw.b_close, 1);
    server_stop();
}

/* ---- through a transport -------------------------------------------------------------------- */

/* Statuses in write order: some KEEL_OK, then only KEEL_ERR_CLOSED. */
static int ok_then_closed(int i)
{
    static int first_closed = -1;
    if (first_closed < 0) {
        first_closed = g.nw;
        for (int k = 0; k < g.nw; k++)
            if (g.cb_status[k] != KEEL_OK) {
                first_closed = k;
                break;
            }
    }
    return i < first_closed ? KEEL_OK : KEEL_ERR_CLOSED;
}

static void transport_file_case(int abort_it)
{
    tfile_abort = abort_it;
    char conf[64];
    snprintf(conf, sizeof conf, "tfile ident");
    server_start(conf, NULL);
    make_file(8192);
    file_offset = 100;
    file_len = 6000;
    int fd = cl_connect(16 * 1024);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&g.phase1, 1, 10000), "on_data did not run");
    cr_assert_gt(g.queued_after, HIGH_WATER, "only %zu bytes queued", g.queued_after);
    int nfile = g.nw - 2;
    cr_assert_eq(g.rc[nfile], KEEL_OK, "keel_conn_write_file: %d", g.rc[nfile]);
    cr_assert_eq(g.rc[nfile + 1], KEEL_OK, "the write after the file: %d", g.rc[nfile + 1]);
    if (abort_it) {
        cr_assert(wait_for(&g.nclose, 1, 5000), "on_close did not come after the abort");
        rd r = cl_read(fd, NULL, UINT64_MAX, 10000);
        cr_assert(r.err == 0 || r.err == ECONNRESET, "after the abort the client saw %s",
                  err_name(r.err));
        worker_sync();
        cr_assert_eq(g.close_status, KEEL_ERR_CLOSED);
        cr_assert_eq(g.cb_status[nfile], KEEL_ERR_CLOSED, "the file's callback: %d",
                     g.cb_status[nfile]);
        check_callbacks(ok_then_closed);
    } else {
        /* Pattern chunks, the file's part, the tail, EOF. */
        rd r = cl_read(fd, NULL, g.total, 30000);
        cr_assert_eq(r.total, g.total, "got %llu of the %llu written bytes then %s",
                     (unsigned long long)r.total, (unsigned long long)g.total, err_name(r.err));
        expect e = {file_offset, file_len, file_tail, sizeof file_tail - 1};
        r = cl_read(fd, &e, UINT64_MAX, 30000);
        uint64_t want = file_len + sizeof file_tail - 1;
        cr_assert(r.err == 0 && r.total == want && r.good == want,
                  "after the writes: %llu bytes (%llu as expected of %llu) then %s",
                  (unsigned long long)r.total, (unsigned long long)r.good, (unsigned long long)want,
                  err_name(r.err));
        close(fd);
        cr_assert(wait_for(&g.nclose, 1, 5000), "on_close did not come");
        cr_assert_eq(g.close_status, KEEL_OK);
        check_callbacks(all_ok);
    }
    close(fd);
    close(file_fd);
    server_stop();
}

Test(conn, transport_file_then_write_then_close_in_order, .timeout = 60)
{
    transport_file_case(0);
}

Test(conn, transport_abort_fails_paced_writes_file_and_held_write_in_order, .timeout = 60)
{
    transport_file_case(1);
}
