/* conn_harness.c — the in-process server, recorder and client that
 * conn_harness.h describes, for the connection core's unit tests. */
#include "conn_harness.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

conn_record rec;

/* Set by the module's start, on the worker thread. */
static uv_thread_t worker_thread; /* on_written checks its callbacks' thread */
static int worker_started;

/* ---- a periodic pattern, so that a lost or repeated chunk shows -------------------------- */

unsigned char pattern[CHUNK + PERIOD];

unsigned char pattern_at(uint64_t k)
{
    return (unsigned char)((k % PERIOD) * 3 + 1);
}

static void pattern_init(void)
{
    for (size_t i = 0; i < sizeof pattern; i++)
        pattern[i] = pattern_at(i);
}

/* ---- writes with their callbacks recorded (worker thread) -------------------------------- */

void on_written(keel_conn *c, int status, void *ud)
{
    (void)c;
    int i = (int)(uintptr_t)ud;
    uv_thread_t self = uv_thread_self();
    if (LOAD(rec.in_call))
        ADD(rec.cb_inside_call, 1);
    if (!uv_thread_equal(&self, &worker_thread))
        ADD(rec.cb_wrong_thread, 1);
    rec.cb_status[i] = status;
    rec.cb_seq[i] = ++rec.seq;
    if (i != rec.next_cb && rec.cb_out_of_order++ == 0) {
        rec.first_out_of_order = i;
        rec.before_out_of_order = rec.next_cb - 1;
    }
    rec.next_cb = i + 1;
    ADD(rec.cb_count[i], 1);
    ADD(rec.ncb, 1);
}

int write_rec(keel_conn *c, const void *data, size_t len)
{
    int i = rec.nw++;
    keel_buf b = {data, len};
    STORE(rec.in_call, 1);
    int rc = keel_conn_write(c, &b, 1, on_written, (void *)(uintptr_t)i);
    STORE(rec.in_call, 0);
    rec.rc[i] = rc;
    rec.at_once[i] = rc == KEEL_OK && keel_conn_write_queued(c) == 0;
    return rc;
}

int write_file_rec(keel_conn *c, int fd, uint64_t offset, uint64_t len)
{
    int i = rec.nw++;
    STORE(rec.in_call, 1);
    int rc = keel_conn_write_file(c, fd, offset, len, on_written, (void *)(uintptr_t)i);
    STORE(rec.in_call, 0);
    rec.rc[i] = rc;
    return rc;
}

void write_until_queued(keel_conn *c, size_t queued, uint64_t cap)
{
    uint64_t start = rec.total;
    while (keel_conn_write_queued(c) <= queued && rec.total - start < cap && rec.nw < MAXW - 8) {
        if (write_rec(c, pattern + rec.total % PERIOD, CHUNK) != KEEL_OK)
            return;
        rec.total += CHUNK;
    }
}

void record_close(keel_conn *c)
{
    rec.close_called_ns = uv_hrtime();
    keel_conn_close(c);
    STORE(rec.closed, 1);
}

/* ---- the protocols' common callbacks (worker thread) --------------------------------------- */

int common_open(keel_conn *c, void *arg)
{
    (void)arg;
    rec.conn = c;
    ADD(rec.nopen, 1);
    return KEEL_OK;
}

void common_close(keel_conn *c, int status)
{
    (void)c;
    rec.close_status = status;
    rec.close_seq = ++rec.seq;
    rec.on_close_ns = uv_hrtime();
    rec.conn = NULL;
    ADD(rec.nclose, 1);
}

void never_called(keel_conn *c, int status, void *ud)
{
    (void)c;
    (void)status;
    (void)ud;
    ADD(rec.late_cb, 1);
}

/* ---- the module: the test file's protocols and transports ------------------------------- */

static int conntest_load(keel_module *m)
{
    for (size_t i = 0; conn_test_protocols[i] != NULL; i++) {
        int rc = keel_protocol_register(m, conn_test_protocols[i]);
        if (rc != KEEL_OK)
            return rc;
    }
    for (size_t i = 0; conn_test_transports[i] != NULL; i++) {
        int rc = keel_transport_register(m, conn_test_transports[i]);
        if (rc != KEEL_OK)
            return rc;
    }
    return KEEL_OK;
}

static int conntest_start(keel_module *m, keel_worker *w, void *state)
{
    (void)m;
    (void)state;
    rec.worker = w;
    worker_thread = uv_thread_self();
    STORE(worker_started, 1);
    return KEEL_OK;
}

KEEL_MODULE(conntest, .version = "1", .load = conntest_load, .start = conntest_start);

/* ---- the server on its thread (test thread) ------------------------------------------------ */

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

int wait_for(int *flag, int value, int ms)
{
    for (int i = 0; i < ms; i++) {
        if (LOAD(*flag) >= value)
            return 1;
        uv_sleep(1);
    }
    return LOAD(*flag) >= value;
}

void server_start(const char *protocol)
{
    char conf[1024];
    snprintf(
        conf, sizeof conf,
        "[keel]\nlisten = 127.0.0.1:0 %s\nworkers = 1\nlog_level = warn\nwrite_high_water = %d\n",
        protocol, HIGH_WATER);
    pattern_init();
    srv.s = keel_server_new();
    cr_assert_not_null(srv.s);
    cr_assert_eq(keel_server_add_module(srv.s, &keel_module_conntest), KEEL_OK);
    cr_assert_eq(keel_server_load_config_string(srv.s, conf, "conn.conf"), KEEL_OK);
    srv.rc = -100;
    cr_assert_eq(uv_thread_create(&srv.thread, run_server, NULL), 0);
    cr_assert(wait_for(&worker_started, 1, 5000), "the worker did not start");
    for (int i = 0; i < 5000 && (srv.port = keel_server_listener_port(srv.s, 0)) == 0; i++)
        uv_sleep(1);
    cr_assert_neq(srv.port, 0, "no bound port");
}

void server_stop(void)
{
    keel_server_stop(srv.s);
    uv_thread_join(&srv.thread);
    cr_expect_eq(srv.rc, KEEL_OK, "keel_server_run: %d", srv.rc);
    keel_server_free(srv.s);
}

/* worker_sync_then: a post that posts again makes the loop turn twice. */
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

void worker_sync_then(void (*fn)(void))
{
    int before = LOAD(synced);
    sync_fn = fn;
    cr_assert_eq(keel_worker_post(rec.worker, sync_first, NULL), KEEL_OK);
    cr_assert(wait_for(&synced, before + 1, 5000), "the worker did not run a post");
}

void worker_sync(void)
{
    worker_sync_then(NULL);
}

/* ---- the client (test thread) ------------------------------------------------------------ */

int cl_connect(int rcvbuf)
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

void cl_send(int fd, const void *data, size_t len)
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

rd cl_read(int fd, const expect *e, uint64_t limit, int timeout_ms)
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

const char *err_name(int err)
{
    return err == 0 ? "EOF" : strerror(err);
}

void check_callbacks(int (*status_for)(int i))
{
    int last_seq = 0;
    for (int i = 0; i < rec.nw; i++) {
        if (rec.rc[i] != KEEL_OK) {
            cr_assert_eq(LOAD(rec.cb_count[i]), 0, "write %d returned %d but had a callback", i,
                         rec.rc[i]);
            continue;
        }
        cr_assert_eq(LOAD(rec.cb_count[i]), 1, "write %d: %d callbacks", i, LOAD(rec.cb_count[i]));
        int want = status_for ? status_for(i) : KEEL_OK;
        cr_assert_eq(rec.cb_status[i], want, "write %d: callback status %d (%s), expected %d", i,
                     rec.cb_status[i], keel_strerror(rec.cb_status[i]), want);
        if (rec.cb_seq[i] > last_seq)
            last_seq = rec.cb_seq[i];
    }
    cr_assert_eq(LOAD(rec.cb_inside_call), 0, "%d callbacks came from inside the call",
                 LOAD(rec.cb_inside_call));
    cr_assert_eq(LOAD(rec.cb_wrong_thread), 0, "callbacks off the worker thread");
    cr_assert_eq(rec.cb_out_of_order, 0,
                 "%d callbacks out of order: the first, write %d's (status %d), came after "
                 "write %d's (-1: it came first)",
                 rec.cb_out_of_order, rec.first_out_of_order, rec.cb_status[rec.first_out_of_order],
                 rec.before_out_of_order);
    if (LOAD(rec.nclose) > 0)
        cr_assert_gt(rec.close_seq, last_seq, "on_close came before a write's callback");
}

int all_ok(int i)
{
    (void)i;
    return KEEL_OK;
}
