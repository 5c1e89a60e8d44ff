/* conn_harness.h — an in-process server for the connection core's unit
 * tests (tests/unit/test_conn_*.c; CMake links conn_harness.c into them).
 *
 * What it offers: a one-worker keel server on 127.0.0.1:0 running on a
 * thread of its own, with protocols compiled into the test program
 * (KEEL_LINKED, as in test_runtime.c); a recorder (`rec`) of what happened
 * on the worker; writes whose callbacks are recorded and checked
 * (check_callbacks); a periodic byte pattern, so that a lost or repeated
 * chunk shows; and a client over plain sockets for the test's thread.
 *
 * How a test file uses it:
 *   1. define its protocols, with common_open / common_close as their
 *      on_open / on_close where the test needs no other, and list them
 *      in conn_test_protocols (and its transports in conn_test_transports);
 *   2. in a Test: server_start("PROTOCOL"), cl_connect, cl_send, then
 *      wait_for the records, cl_read the answer, check_callbacks, and
 *      server_stop.
 *
 * Threads: protocol callbacks run on the worker thread and only record
 * (Criterion's asserts are for the test's thread); the test waits for the
 * records with bounded polls (wait_for), never with a sleep that "lets
 * things happen". A check that something did NOT happen first makes the
 * worker's loop turn at least once more (worker_sync). Criterion runs each
 * test in a process of its own, so every record starts at zero. POSIX. */
#ifndef KEEL_TEST_CONN_HARNESS_H
#define KEEL_TEST_CONN_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include <keel/embed.h>

/* Records are shared between the worker and the test's thread. */
#define LOAD(x)     __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)
#define ADD(x, v)   __atomic_add_fetch(&(x), (v), __ATOMIC_SEQ_CST)

#define HIGH_WATER (64 * 1024) /* the server's write_high_water */
#define CHUNK      (64 * 1024) /* the size of write_until_queued's writes */
#define MAXW       4096        /* writes recorded at most */
#define PERIOD     251         /* the pattern's period */

/* ---- what a test file defines ------------------------------------------------------------ */

/* The protocols and transports the harness's module registers when the
 * server loads, each list ending with NULL (conn_test_transports may be
 * just {NULL}). */
extern const keel_protocol *const conn_test_protocols[];
extern const keel_transport *const conn_test_transports[];

/* ---- what the worker records -------------------------------------------------------------- */

typedef struct conn_record {
    keel_worker *worker; /* the server's one worker, once started */
    int seq;             /* orders events on the worker thread */

    keel_conn *conn; /* the test's one connection (common_open; NULL after on_close) */
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

    size_t queued_after; /* keel_conn_write_queued, sampled by a protocol */
    int late_cb;         /* never_called's calls */
} conn_record;

extern conn_record rec;

/* ---- the pattern ---------------------------------------------------------------------------- */

/* pattern[k] == pattern_at(k), filled by server_start: `pattern + n % PERIOD`
 * is CHUNK bytes that continue a stream of n pattern bytes. */
extern unsigned char pattern[CHUNK + PERIOD];
unsigned char pattern_at(uint64_t k);

/* ---- writes with their callbacks recorded (worker thread) ----------------------------------- */

/* A keel_write_cb that records write (uintptr_t)ud's completion in rec:
 * its status, order, thread, and whether it came from inside a call. */
void on_written(keel_conn *c, int status, void *ud);

/* keel_conn_write of one buffer, as the next recorded write (callback
 * on_written); returns its status. */
int write_rec(keel_conn *c, const void *data, size_t len);

/* keel_conn_write_file, as the next recorded write; returns its status. */
int write_file_rec(keel_conn *c, int fd, uint64_t offset, uint64_t len);

/* Pattern bytes in CHUNK writes (rec.total counts them) until more than
 * `queued` wait in keel (the client does not read), at most `cap` bytes. */
void write_until_queued(keel_conn *c, size_t queued, uint64_t cap);

/* keel_conn_close, with the time (rec.close_called_ns) and rec.closed. */
void record_close(keel_conn *c);

/* A keel_write_cb for writes that must be refused: counts rec.late_cb. */
void never_called(keel_conn *c, int status, void *ud);

/* ---- the protocols' common callbacks (worker thread) ------------------------------------------
 */

/* on_open: rec.conn = c, counts rec.nopen. */
int common_open(keel_conn *c, void *arg);

/* on_close: the status, order and time, rec.conn = NULL, counts rec.nclose. */
void common_close(keel_conn *c, int status);

/* ---- the server (test thread) -----------------------------------------------------------------
 */

/* Starts the server: `listen = 127.0.0.1:0 PROTOCOL`, one worker,
 * write_high_water = HIGH_WATER. `protocol` is what follows the address
 * (a protocol, then its transports: "tfile ident"). Returns once the
 * worker runs and the port is bound; fills the pattern. */
void server_start(const char *protocol);

/* Stops the server and waits for its thread. */
void server_stop(void);

/* 1 once *flag >= value, polled every millisecond for up to ms; else 0. */
int wait_for(int *flag, int value, int ms);

/* Makes the worker's loop turn at least twice, then runs fn (if not NULL)
 * on the worker: whatever was readable or owed before the call has run. */
void worker_sync_then(void (*fn)(void));
void worker_sync(void);

/* ---- the client (test thread) -----------------------------------------------------------------
 */

/* A socket connected to the server; rcvbuf > 0 sets SO_RCVBUF first. */
int cl_connect(int rcvbuf);

/* Sends all of data. */
void cl_send(int fd, const void *data, size_t len);

/* What a read to the end found. */
typedef struct rd {
    uint64_t total;    /* bytes received */
    uint64_t good;     /* leading bytes that matched */
    int err;           /* 0: EOF; an errno (ECONNRESET...); ETIMEDOUT; EAGAIN: at the limit */
    int mismatch_seen; /* a byte differed */
} rd;

/* The stream the client expects: pattern bytes [poff, poff + plen), then
 * `tail`. */
typedef struct expect {
    uint64_t poff, plen;
    const char *tail;
    size_t tail_len;
} expect;

/* Reads until EOF, an error, `limit` bytes or timeout_ms; checks the bytes
 * against e (may be NULL). */
rd cl_read(int fd, const expect *e, uint64_t limit, int timeout_ms);

/* "EOF" for 0, else strerror(err). */
const char *err_name(int err);

/* Every write that returned KEEL_OK had its callback exactly once, with
 * `status_for(i)` (KEEL_OK if NULL), never from inside a keel call, on the
 * worker thread, in order, and before on_close. */
void check_callbacks(int (*status_for)(int i));

/* A status_for: KEEL_OK for every write. */
int all_ok(int i);

#endif
