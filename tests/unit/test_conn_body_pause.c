/* keel_request_body_pause through a protocol that predates it
 * (conn_harness.h): its sink ends before body_pause, as one built for
 * ABI 1.5 does, so the core pauses the connection for the exchange
 * instead. Several exchanges on one connection (a multiplexing protocol)
 * each count: the connection is read again only once none of them, and
 * not the protocol itself either, holds it. With keel_conn_pause and
 * keel_conn_resume (what the proxy called before, one flag for every
 * exchange) the first exchange's resume undid the other's pause, and
 * the protocol's own resume undid both.
 *
 * The protocol "mux" starts two exchanges when its first bytes come, has
 * each stream its body (nothing ever arrives: the test reads whether the
 * connection is read at all), and pauses both bodies. The test then
 * resumes, ends or pauses from the worker (worker_sync_then) and counts
 * the on_data calls that bytes sent meanwhile cause. */
#include <criterion/criterion.h>

#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <keel/embed.h>

#include "conn_harness.h"
#include "http/http.h" /* a request's response, for a test that dispatches nothing */

static struct {
    keel_conn *conn;
    keel_request *req[2];
    int ndata;
    int started;      /* the two exchanges are under way */
    int pause_rc[2];  /* keel_request_body_pause(req[i], 1) */
    int resume_rc[2]; /* ... (req[i], 0) */
    int again_rc;     /* a second pause of req[0] */
} mx;

/* ---- a sink as a protocol built for ABI 1.5 has it ----------------------------------------- */

static int mux_send_head(void *exchange, int status, const keel_header *headers, size_t nheaders,
                         int64_t content_length)
{
    (void)exchange, (void)status, (void)headers, (void)nheaders, (void)content_length;
    return KEEL_OK;
}

static int mux_send_body(void *exchange, const keel_buf *bufs, size_t nbufs, int last,
                         const keel_header *trailers, size_t ntrailers, keel_write_cb cb,
                         void *userdata)
{
    (void)exchange, (void)bufs, (void)nbufs, (void)last, (void)trailers, (void)ntrailers;
    if (cb != NULL)
        cb(mx.conn, KEEL_OK, userdata);
    return KEEL_OK;
}

static void mux_done(void *exchange, int keep_alive)
{
    (void)exchange, (void)keep_alive;
}

static const keel_http_sink mux_sink = {
    .size = offsetof(keel_http_sink, body_pause),
    .send_head = mux_send_head,
    .send_body = mux_send_body,
    .done = mux_done,
};

static void mux_chunk(keel_request *req, const char *data, size_t len, int last, void *userdata)
{
    (void)req, (void)data, (void)len, (void)last, (void)userdata;
}

/* ---- the protocol -------------------------------------------------------------------------- */

static const keel_header no_fields[1];
static int exchange_tag[2];

static int mux_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    ADD(mx.ndata, 1);
    if (mx.started)
        return KEEL_OK;
    mx.conn = c;
    keel_http_head head = {
        .size = sizeof head,
        .method = {"POST", 4},
        .target = {"/", 1},
        .version = 20,
        .headers = no_fields,
        .nheaders = 0,
        .content_length = -1, /* a body of unknown length: streamed */
    };
    for (int i = 0; i < 2; i++) {
        mx.req[i] = keel_http_request_start(c, &mux_sink, &exchange_tag[i], &head);
        if (mx.req[i] == NULL || keel_request_stream_body(mx.req[i], mux_chunk, NULL) != KEEL_OK)
            return KEEL_ERR_NOMEM;
        mx.pause_rc[i] = keel_request_body_pause(mx.req[i], 1);
    }
    mx.again_rc = keel_request_body_pause(mx.req[0], 1); /* a state, not a count */
    STORE(mx.started, 1);
    return KEEL_OK;
}

/* The protocol gives up exchange i (a stream reset, the client gone);
 * the "handler" learns it from its next response call, which releases
 * the request. */
static void abandon(int i)
{
    keel_request *req = mx.req[i];
    mx.req[i] = NULL;
    keel_http_request_abort(req);
    keel_response_send_status(&req->res, 200);
}

static void mux_close(keel_conn *c, int status)
{
    for (int i = 0; i < 2; i++)
        if (mx.req[i] != NULL)
            abandon(i);
    common_close(c, status);
}

static const keel_protocol proto_mux = {
    .size = sizeof(keel_protocol),
    .name = "mux",
    .on_open = common_open,
    .on_data = mux_data,
    .on_close = mux_close,
};

const keel_protocol *const conn_test_protocols[] = {&proto_mux, NULL};
const keel_transport *const conn_test_transports[] = {NULL};

/* ---- what the test does on the worker ------------------------------------------------------ */

static void resume_0(void)
{
    mx.resume_rc[0] = keel_request_body_pause(mx.req[0], 0);
}

static void resume_1(void)
{
    mx.resume_rc[1] = keel_request_body_pause(mx.req[1], 0);
}

/* Resumed and paused again in one go: the resume, queued for the loop,
 * finds the body paused and leaves it so. */
static void resume_then_pause_0(void)
{
    mx.resume_rc[0] = keel_request_body_pause(mx.req[0], 0);
    mx.again_rc = keel_request_body_pause(mx.req[0], 1);
}

/* The handler answers without reading the rest: the exchange is done. */
static void answer_0(void)
{
    keel_request *req = mx.req[0];
    mx.req[0] = NULL;
    keel_response_send_status(&req->res, 200);
}

static void abandon_1(void)
{
    abandon(1);
}

static void proto_pause(void)
{
    keel_conn_pause(mx.conn);
}

static void proto_resume(void)
{
    keel_conn_resume(mx.conn);
}

/* Bytes sent now reach on_data only if nothing pauses the connection:
 * the worker's loop turns until they would have (a resume's delivery is
 * queued from the loop, its own turn later). */
static int delivered_after(int fd, int ndata_before)
{
    cl_send(fd, "x", 1);
    for (int i = 0; i < 4; i++)
        worker_sync();
    return wait_for(&mx.ndata, ndata_before + 1, 200);
}

static int start(void)
{
    server_start("mux");
    int fd = cl_connect(0);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&mx.started, 1, 5000), "the exchanges did not start");
    cr_assert_eq(mx.pause_rc[0], KEEL_OK);
    cr_assert_eq(mx.pause_rc[1], KEEL_OK);
    cr_assert_eq(mx.again_rc, KEEL_OK);
    return fd;
}

static void finish(int fd)
{
    close(fd);
    cr_assert(wait_for(&rec.nclose, 1, 5000), "the connection did not close");
    server_stop();
}

/* Two exchanges pause one connection: one resuming leaves it paused,
 * both resuming read it again. */
Test(conn_body_pause, two_exchanges_are_counted, .timeout = 30)
{
    int fd = start();
    cr_assert(!delivered_after(fd, 1), "read while both exchanges paused it");
    worker_sync_then(resume_0);
    cr_assert_eq(mx.resume_rc[0], KEEL_OK);
    cr_assert(!delivered_after(fd, 1), "the first exchange's resume undid the second one's pause");
    worker_sync_then(resume_1);
    cr_assert_eq(mx.resume_rc[1], KEEL_OK);
    cr_assert(wait_for(&mx.ndata, 2, 2000), "not read once no exchange paused it");
    finish(fd);
}

/* An exchange that ends holding its pause (answered, or abandoned) gives
 * it back: nothing else would, the handler that paused is done. */
Test(conn_body_pause, an_ended_exchange_gives_its_pause_back, .timeout = 30)
{
    int fd = start();
    worker_sync_then(answer_0);
    cr_assert(!delivered_after(fd, 1), "the first exchange's end undid the second one's pause");
    worker_sync_then(abandon_1);
    cr_assert(wait_for(&mx.ndata, 2, 2000), "not read once both exchanges ended");
    finish(fd);
}

/* The protocol's own keel_conn_pause and keel_conn_resume and the
 * exchanges' pauses hold apart: neither undoes the other. */
Test(conn_body_pause, apart_from_the_protocols_own_pause, .timeout = 30)
{
    int fd = start();
    worker_sync_then(proto_pause);
    worker_sync_then(proto_resume);
    cr_assert(!delivered_after(fd, 1), "the protocol's resume undid the exchanges' pauses");
    worker_sync_then(proto_pause);
    worker_sync_then(resume_0);
    worker_sync_then(resume_1);
    cr_assert(!delivered_after(fd, 1), "the exchanges' resumes undid the protocol's pause");
    worker_sync_then(proto_resume);
    cr_assert(wait_for(&mx.ndata, 2, 2000), "not read once nothing paused it");
    finish(fd);
}

/* A pause made before a resume reached the connection (resumes go from
 * the loop) stands. */
Test(conn_body_pause, a_pause_before_the_resume_runs_stands, .timeout = 30)
{
    int fd = start();
    worker_sync_then(resume_1);
    worker_sync_then(resume_then_pause_0);
    cr_assert_eq(mx.resume_rc[0], KEEL_OK);
    cr_assert_eq(mx.again_rc, KEEL_OK);
    cr_assert(!delivered_after(fd, 1), "the queued resume undid the pause made after it");
    worker_sync_then(resume_0);
    cr_assert(wait_for(&mx.ndata, 2, 2000), "not read once resumed");
    finish(fd);
}
