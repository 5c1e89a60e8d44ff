/* A connection's input, in process (conn_harness.h): many inactivity
 * timeouts of arbitrary durations, each at its own deadline and in
 * deadline order; keel_conn_consume from inside and outside on_data; and
 * keel_conn_set_protocol handing the unconsumed bytes over once. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <keel/embed.h>

#include "conn_harness.h"

/* ---- many timeouts of arbitrary durations ------------------------------------------------ */

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

Test(conn, many_connections_time_out_at_their_own_durations, .timeout = 60)
{
    tm.rng = 0x1234567;
    server_start("timeouts");
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

/* ---- keel_conn_consume ------------------------------------------------------------------- */

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
    int n = ++rec.ndata;
    if (n == 1 || !rec.phase1) {
        if (len < 10) {
            *consumed = 0; /* wait for the ten bytes */
            return KEEL_OK;
        }
        cs.in_data_rc = keel_conn_consume(c, 1);
        cs.first_len = len;
        *consumed = 0;
        keel_conn_pause(c);
        STORE(rec.phase1, 1);
        return KEEL_OK;
    }
    cs.in_data_rc2 = keel_conn_consume(c, 0);
    size_t m = len < sizeof cs.second ? len : sizeof cs.second;
    memcpy(cs.second, data, m);
    cs.second_len = m;
    *consumed = len;
    if (m >= 5) {
        /* Nothing buffered now (on_data consumed all): consume refuses. */
        STORE(rec.closed, 1);
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
    keel_conn *c = rec.conn;
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
    if (rec.conn != NULL) {
        cs.rc_idle_zero = keel_conn_consume(rec.conn, 0);
        cs.rc_idle_one = keel_conn_consume(rec.conn, 1);
        keel_conn_close(rec.conn);
    }
    STORE(rec.phase1, 2);
}

static const keel_protocol proto_consume = {
    .size = sizeof(keel_protocol),
    .name = "consume",
    .on_open = common_open,
    .on_data = consume_data,
    .on_close = common_close,
};

Test(conn, consume_refuses_inside_on_data_and_drops_bytes_from_outside, .timeout = 30)
{
    server_start("consume");
    int fd = cl_connect(0);
    cl_send(fd, "0123456789", 10);
    cr_assert(wait_for(&rec.phase1, 1, 5000), "on_data did not see the ten bytes");
    cr_assert_eq(cs.in_data_rc, KEEL_ERR_STATE, "keel_conn_consume inside on_data: %d",
                 cs.in_data_rc);
    cr_assert_eq(cs.first_len, 10);
    cr_assert_eq(keel_worker_post(rec.worker, consume_post, NULL), KEEL_OK);
    cr_assert(wait_for(&cs.post_done, 1, 5000), "the post did not run");
    cr_assert_eq(cs.rc_too_many, KEEL_ERR_INVAL, "consuming more than buffered: %d",
                 cs.rc_too_many);
    cr_assert_eq(cs.rc_three, KEEL_OK, "consume(3) from a post: %d", cs.rc_three);
    cr_assert_eq(cs.rc_zero, KEEL_OK, "consume(0) from a post: %d", cs.rc_zero);
    cr_assert(wait_for(&rec.closed, 1, 5000), "on_data did not run again after resume");
    cr_assert_eq(cs.rc_two, KEEL_OK, "consume(2) from a timer: %d", cs.rc_two);
    cr_assert_eq(cs.in_data_rc2, KEEL_ERR_STATE, "consume(0) inside on_data: %d", cs.in_data_rc2);
    cr_assert(cs.second_len == 5 && memcmp(cs.second, "56789", 5) == 0,
              "after consuming 3 + 2 bytes on_data got '%.*s'", (int)cs.second_len, cs.second);
    /* Nothing buffered, not paused: 0 is fine, 1 is too many. */
    cr_assert_eq(keel_worker_post(rec.worker, consume_idle_post, NULL), KEEL_OK);
    cr_assert(wait_for(&rec.phase1, 2, 5000));
    cr_assert_eq(cs.rc_idle_zero, KEEL_OK);
    cr_assert_eq(cs.rc_idle_one, KEEL_ERR_INVAL, "consume(1) with nothing buffered: %d",
                 cs.rc_idle_one);
    rd r = cl_read(fd, NULL, UINT64_MAX, 5000);
    cr_assert(r.err == 0 && r.total == 0, "%llu bytes then %s", (unsigned long long)r.total,
              err_name(r.err));
    close(fd);
    cr_assert(wait_for(&rec.nclose, 1, 5000));
    server_stop();
}

/* ---- keel_conn_set_protocol from on_data ------------------------------------------------- */

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

Test(conn, set_protocol_hands_unconsumed_bytes_over_once, .timeout = 30)
{
    server_start("switch_a");
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
    cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come");
    cr_assert_eq(sw.a_close, 0, "the old protocol's on_close ran");
    cr_assert_eq(sw.b_close, 1);
    server_stop();
}

/* ---- what the server offers (conn_harness.h) -------------------------------------------- */

const keel_protocol *const conn_test_protocols[] = {
    &proto_timeouts, &proto_consume, &proto_switch_a, &proto_switch_b, NULL,
};
const keel_transport *const conn_test_transports[] = {NULL};
