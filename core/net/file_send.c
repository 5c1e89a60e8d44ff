/* Files written to connections (keel_conn_write_file), and the queue that
 * keeps every later write in order behind them.
 *
 * On plain TCP the file goes to the socket with sendfile(2), on the loop
 * thread: the socket is non-blocking, so each call takes what fits and the
 * rest waits for the socket to become writable. libuv allows one watcher
 * per descriptor and the connection's uv_tcp_t is that one, so the wait
 * uses a uv_poll_t on a dup() of the socket (epoll and kqueue key their
 * registrations on the descriptor), made only when a wait is needed and
 * closed with the transfer.
 *
 * With a transport (whose bytes must be transformed) or where sendfile is
 * missing (Windows, some file systems), the file is read in pieces through
 * libuv's thread pool, so the loop never waits for a disk, and each piece
 * is written as keel_conn_write would write it; the next read starts once
 * the piece has left (through a transport: once libuv's queue is down to
 * KL_PACE_BYTES, see output.c), which paces the transfer by the peer.
 *
 * Part of the output unit (net/output.h): its ops queue lives in the
 * connection's kl_output.
 *
 * Everything here runs on the connection's worker thread.
 */
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "net/file_reader.h"
#include "net/output.h"
#include "net/worker.h"
#include "platform/platform.h"

/* sendfile bytes per turn of the loop: a fast peer on a large file must not
 * starve the worker's other connections (nginx's sendfile_max_chunk). */
#define TURN_BYTES (2 * 1024 * 1024)

/* A watcher on a duplicate of the connection's socket. It lives until its
 * close callback, which may come after the connection is gone, so it
 * refers to nothing else. */
typedef struct kl_poll {
    uv_poll_t handle;
    kl_socket sock;
} kl_poll;

struct kl_op {
    kl_op *next;
    keel_write_cb cb;
    void *userdata;
    keel_conn *conn;
    int is_file;
    /* a held write */
    int owned;    /* the bytes follow bufs[] (keel_conn_write_copy) */
    size_t nbufs; /* in bufs[] */
    /* a file */
    int fd;
    int fallback; /* read and write instead of sendfile */
    int status;   /* what cb gets if the connection dies first (0: KEEL_ERR_CLOSED) */
    uint64_t offset;
    uint64_t bytes; /* held write: its size; file: what is left to send */
    kl_poll *poll;
    /* keel_conn_write_file_after: bytes that go before the file, copied
     * behind bufs[] (a file op has no bufs); prefix_sent of them left. */
    const char *prefix;
    size_t prefix_len, prefix_sent;
    /* Made before the first byte leaves, for a transfer that completes
     * inside keel_conn_write_file: its cb must still come from the loop. */
    kl_done *early;
    kl_file_reader reader; /* the fallback's, set up when it starts */
    keel_buf bufs[];
};

/* The queue exists before anything is appended to it. */
static int ensure_queue(keel_conn *c)
{
    return kl_output_get(c) != NULL ? KEEL_OK : KEEL_ERR_NOMEM;
}

static kl_op *head(const keel_conn *c)
{
    return c->out != NULL ? c->out->head : NULL;
}

static void append(keel_conn *c, kl_op *op)
{
    if (c->out->tail != NULL)
        c->out->tail->next = op;
    else
        c->out->head = op;
    c->out->tail = op;
}

static kl_op *pop(keel_conn *c)
{
    kl_op *op = c->out->head;
    c->out->head = op->next;
    if (c->out->head == NULL)
        c->out->tail = NULL;
    op->next = NULL;
    return op;
}

static void free_op(kl_op *op)
{
    kl_file_reader_free(&op->reader);
    if (op->early != NULL)
        free(op->early); /* never handed to the worker's cache: plain free */
    free(op);
}

static void on_poll_closed(uv_handle_t *handle)
{
    kl_poll *p = KL_CONTAINER_OF((uv_poll_t *)handle, kl_poll, handle);
    kl_socket_close(p->sock);
    free(p);
}

static void close_poll(kl_op *op)
{
    if (op->poll != NULL) {
        uv_close((uv_handle_t *)&op->poll->handle, on_poll_closed);
        op->poll = NULL;
    }
}

/* The transfer cannot go on and the byte stream cannot be repaired (the
 * peer would read what follows as the rest of the file): the connection is
 * aborted, and the op's callback comes with `status` from its teardown. */
static void fail(keel_conn *c, kl_op *op, int status)
{
    op->status = status;
    if (!kl_conn_handle_closed(c))
        kl_conn_abort_status(c, status);
}

/* ---- held writes --------------------------------------------------------- */

int kl_ops_hold(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud,
                int copy)
{
    size_t total = 0;
    for (size_t i = 0; i < nbufs; i++) {
        if (bufs[i].len > KEEL_BUF_MAX)
            return KEEL_ERR_INVAL;
        total += bufs[i].len;
    }
    if (ensure_queue(c) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    size_t nslots = copy ? 1 : nbufs;
    kl_op *op = calloc(1, sizeof *op + nslots * sizeof(keel_buf) + (copy ? total : 0));
    if (op == NULL)
        return KEEL_ERR_NOMEM;
    if (copy) {
        char *p = (char *)(op->bufs + 1);
        size_t at = 0;
        for (size_t i = 0; i < nbufs; i++) {
            if (bufs[i].len > 0)
                memcpy(p + at, bufs[i].base, bufs[i].len);
            at += bufs[i].len;
        }
        op->bufs[0] = (keel_buf){p, total};
        op->owned = 1;
    } else if (nbufs > 0) {
        memcpy(op->bufs, bufs, nbufs * sizeof *bufs);
    }
    op->nbufs = nslots;
    op->bytes = total;
    op->cb = cb;
    op->userdata = ud;
    op->conn = c;
    append(c, op);
    c->out->held_bytes += total;
    kl_conn_output_grew(c);
    return KEEL_OK;
}

static void on_owned_written(keel_conn *conn, int status, void *userdata)
{
    (void)conn;
    (void)status;
    free(userdata);
}

/* ---- sendfile ------------------------------------------------------------ */

static void pump(keel_conn *c, kl_op *op);
static void read_next(keel_conn *c, kl_op *op);

/* The file has gone out whole. */
static void file_finished(keel_conn *c)
{
    kl_op *op = pop(c);
    c->out->file_active = 0;
    close_poll(op);
    keel_write_cb cb = op->cb;
    void *ud = op->userdata;
    int inside_call = c->out->in_write_file;
    if (inside_call && op->early != NULL) {
        kl_output_owe_record(c, op->early);
        op->early = NULL;
        cb = NULL;
    }
    free_op(op);
    if (inside_call) {
        /* Nothing else was queued (the call started this op only because
         * the queue was empty): just leave the write timeout. */
        kl_conn_output_settled(c);
        return;
    }
    if (cb != NULL)
        cb(c, KEEL_OK, ud);
    if (kl_conn_handle_closed(c))
        return;
    kl_ops_run(c);
    if (kl_conn_handle_closed(c))
        return;
    kl_output_trim(c);
    kl_conn_output_settled(c);
}

static void on_writable(uv_poll_t *handle, int status, int events)
{
    keel_conn *c = handle->data;
    (void)events;
    /* Closing the connection closes this watcher first, so c is alive. */
    kl_op *op = c->out->head;
    if (status < 0) {
        fail(c, op, KEEL_ERR_IO);
        return;
    }
    pump(c, op);
}

/* Waits for room in the socket (or for the next turn of the loop: the
 * watcher fires at once while the socket is writable). The watcher stays
 * armed until the transfer ends. */
static void wait_writable(keel_conn *c, kl_op *op, kl_socket sock)
{
    if (op->poll != NULL)
        return;
    kl_poll *p = malloc(sizeof *p);
    if (p == NULL) {
        fail(c, op, KEEL_ERR_NOMEM);
        return;
    }
    int rc = kl_socket_dup(sock, &p->sock);
    if (rc == 0) {
        rc = uv_poll_init_socket(&kl_conn_worker(c)->loop, &p->handle, p->sock);
        if (rc != 0)
            kl_socket_close(p->sock);
    }
    if (rc != 0) {
        free(p);
        if (rc == UV_ENOSYS || rc == UV_EMFILE || rc == UV_ENFILE) {
            /* No way to wait on this platform, or no descriptor left for
             * the watcher: go on with reads, which need none, rather than
             * cut a response whose head has left. */
            op->fallback = 1;
            read_next(c, op);
        } else {
            fail(c, op, KEEL_ERR_IO);
        }
        return;
    }
    p->handle.data = c;
    op->poll = p;
    if (uv_poll_start(&p->handle, UV_WRITABLE, on_writable) != 0)
        fail(c, op, KEEL_ERR_IO);
}

static int socket_of(keel_conn *c, kl_socket *out)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0)
        return KEEL_ERR_IO;
    *out = (kl_socket)(uintptr_t)fd;
    return KEEL_OK;
}

static void count_sent(keel_conn *c, size_t n)
{
    keel_worker *w = kl_conn_worker(c);
    kl_metric_add_slot(w->metrics, w->host->core_metrics.bytes_out->slot, (int64_t)n);
    c->out->held_bytes -= n;
    kl_conn_output_progress(c);
}

/* The prefix goes first, marked as followed by more (kl_send_more), so
 * that with the file's first bytes it fills one segment. 1 once it has
 * left, 0 if the op waits or failed, -1 to go on with reads instead. */
static int pump_prefix(keel_conn *c, kl_op *op, kl_socket sock)
{
    while (op->prefix_sent < op->prefix_len) {
        size_t sent = 0;
        int rc = kl_send_more(sock, op->prefix + op->prefix_sent, op->prefix_len - op->prefix_sent,
                              op->bytes > 0, &sent);
        if (sent > 0) {
            op->prefix_sent += sent;
            count_sent(c, sent);
        }
        if (rc == UV_ENOSYS)
            return -1;
        if (rc == UV_EAGAIN) {
            wait_writable(c, op, sock);
            return 0;
        }
        if (rc < 0) {
            fail(c, op, KEEL_ERR_IO);
            return 0;
        }
    }
    return 1;
}

/* Sends until the file is out, the socket is full or this turn's share is
 * used. */
static void pump(keel_conn *c, kl_op *op)
{
    kl_socket sock;
    if (socket_of(c, &sock) != KEEL_OK) {
        fail(c, op, KEEL_ERR_IO);
        return;
    }
    int prefix = pump_prefix(c, op, sock);
    if (prefix < 0) {
        close_poll(op);
        op->fallback = 1;
        read_next(c, op);
        return;
    }
    if (prefix == 0)
        return;
    uint64_t budget = TURN_BYTES;
    while (op->bytes > 0) {
        if (budget == 0) {
            wait_writable(c, op, sock);
            return;
        }
        size_t want = (size_t)(op->bytes < budget ? op->bytes : budget);
        size_t sent = 0;
        int rc = kl_sendfile(sock, op->fd, op->offset, want, &sent);
        if (sent > want)
            sent = want;
        if (sent > 0) {
            op->offset += sent;
            op->bytes -= sent;
            budget -= sent;
            count_sent(c, sent);
        }
        if (rc == 0 && sent == 0) {
            fail(c, op, KEEL_ERR_IO); /* the file is shorter than promised */
            return;
        }
        if (rc == UV_EAGAIN) {
            wait_writable(c, op, sock);
            return;
        }
        if (rc == UV_ENOSYS) {
            close_poll(op);
            op->fallback = 1;
            read_next(c, op);
            return;
        }
        if (rc < 0) {
            fail(c, op, KEEL_ERR_IO);
            return;
        }
    }
    file_finished(c);
}

/* ---- reads through the thread pool ---------------------------------------- */

static void on_piece_written(keel_conn *c, int status, void *userdata)
{
    kl_op *op = userdata;
    /* A failed write aborts the connection right after this; a closed one
     * fails the op in its teardown. */
    if (status < 0 || kl_conn_handle_closed(c))
        return;
    kl_conn_output_progress(c);
    read_next(c, op);
}

static void on_piece_read(kl_file_reader *r, int status, char *data, size_t len)
{
    kl_op *op = r->owner;
    keel_conn *c = op->conn;
    if (kl_conn_handle_closed(c)) {
        if (c->phase == KL_PHASE_CLOSED) /* the handle's close waited for this read */
            kl_conn_teardown(c);
        return;
    }
    if (status != KEEL_OK) {
        fail(c, op, status); /* a read error, or the file is shorter */
        return;
    }
    op->offset += len;
    op->bytes -= len;
    c->out->held_bytes -= len;
    keel_buf piece = {data, len};
    int rc = kl_output_send(c, &piece, 1, on_piece_written, op);
    if (rc != KEEL_OK)
        fail(c, op, rc == KEEL_ERR_NOMEM ? rc : KEEL_ERR_IO);
}

static void on_prefix_written(keel_conn *c, int status, void *userdata)
{
    on_piece_written(c, status, userdata);
}

static void read_next(keel_conn *c, kl_op *op)
{
    /* Through a transport, or without sendfile: the prefix is written as
     * any bytes are, then the reads begin. */
    if (op->prefix_sent < op->prefix_len) {
        keel_buf rest = {op->prefix + op->prefix_sent, op->prefix_len - op->prefix_sent};
        c->out->held_bytes -= rest.len;
        op->prefix_sent = op->prefix_len;
        int rc = kl_output_send(c, &rest, 1, on_prefix_written, op);
        if (rc != KEEL_OK)
            fail(c, op, rc == KEEL_ERR_NOMEM ? rc : KEEL_ERR_IO);
        return;
    }
    if (op->bytes == 0) {
        file_finished(c);
        return;
    }
    /* The reader starts where sendfile stopped, if it ran first. */
    if (op->reader.on_piece == NULL)
        kl_file_reader_init(&op->reader, op->fd, op->offset, op->bytes, on_piece_read, op);
    int rc = kl_file_reader_next(&op->reader, &kl_conn_worker(c)->loop);
    if (rc != KEEL_OK)
        fail(c, op, rc == KEEL_ERR_NOMEM ? rc : KEEL_ERR_IO);
}

/* ---- the queue ------------------------------------------------------------- */

void kl_ops_run(keel_conn *c)
{
    while (head(c) != NULL && !kl_conn_handle_closed(c)) {
        kl_op *op = head(c);
        if (op->is_file) {
            if (c->out->file_active)
                return;
            /* sendfile bypasses libuv's queue: what is in it goes first.
             * The read path writes through that queue, in order anyway. */
            if (!op->fallback && c->out->in_flight > 0)
                return;
            c->out->file_active = 1;
            kl_conn_retime(c, 1); /* the write timeout runs from now */
            if (op->fallback)
                read_next(c, op);
            else
                pump(c, op);
            return;
        }
        pop(c);
        c->out->held_bytes -= op->bytes;
        int rc;
        if (op->owned) {
            rc = kl_output_send(c, op->bufs, op->nbufs, on_owned_written, op);
            if (rc != KEEL_OK)
                free(op);
        } else {
            rc = kl_output_send(c, op->bufs, op->nbufs, op->cb, op->userdata);
            if (rc != KEEL_OK && op->cb != NULL)
                op->cb(c, rc, op->userdata); /* it was accepted: the callback is owed */
            free(op);
        }
        if (rc != KEEL_OK) {
            if (!kl_conn_handle_closed(c))
                kl_conn_abort_status(c, rc);
            return;
        }
    }
}

void kl_ops_abort(keel_conn *c)
{
    if (head(c) != NULL)
        close_poll(head(c));
}

int kl_ops_reading(const keel_conn *c)
{
    return head(c) != NULL && head(c)->reader.reading;
}

void kl_ops_fail(keel_conn *c)
{
    while (head(c) != NULL) {
        kl_op *op = pop(c);
        close_poll(op);
        keel_write_cb cb = op->owned ? NULL : op->cb;
        void *ud = op->userdata;
        int status = op->is_file && op->status != 0 ? op->status : KEEL_ERR_CLOSED;
        free_op(op);
        if (cb != NULL)
            cb(c, status, ud);
    }
    if (c->out != NULL)
        c->out->file_active = 0;
}

/* ---- the API --------------------------------------------------------------- */

/* keel_conn_write_file, after `prefix` (copied) when plen > 0. */
static int write_file(keel_conn *c, const keel_buf *prefix, size_t nprefix, size_t plen, int fd,
                      uint64_t offset, uint64_t length, keel_write_cb cb, void *userdata)
{
    kl_op *op = ensure_queue(c) == KEEL_OK ? calloc(1, sizeof *op + plen) : NULL;
    if (op == NULL) {
        kl_output_trim(c);
        return KEEL_ERR_NOMEM;
    }
    char *copy = (char *)op->bufs;
    for (size_t i = 0, at = 0; i < nprefix; at += prefix[i].len, i++)
        if (prefix[i].len > 0)
            memcpy(copy + at, prefix[i].base, prefix[i].len);
    op->prefix = copy;
    op->prefix_len = plen;
    op->is_file = 1;
    op->fd = fd;
    op->offset = offset;
    op->bytes = length;
    op->cb = cb;
    op->userdata = userdata;
    op->conn = c;
    op->fallback = kl_conn_transport(c) != NULL;
    int first = c->out->head == NULL;
    if (first && cb != NULL && (op->early = kl_done_new(c, cb, userdata, KEEL_OK)) == NULL) {
        free(op);
        kl_output_trim(c);
        return KEEL_ERR_NOMEM;
    }
    append(c, op);
    c->out->held_bytes += plen + length;
    if (first) {
        /* A transfer that ends inside this call must still complete from
         * the loop (file_finished looks at this). */
        kl_output *o = c->out;
        int outer = o->in_write_file;
        o->in_write_file = 1;
        kl_ops_run(c);
        if (c->out == o)
            o->in_write_file = outer;
    }
    if (!kl_conn_handle_closed(c)) {
        kl_conn_output_grew(c);
        kl_output_trim(c);
    }
    return KEEL_OK;
}

int keel_conn_write_file(keel_conn *c, int fd, uint64_t offset, uint64_t length, keel_write_cb cb,
                         void *userdata)
{
    if (kl_conn_closing(c))
        return KEEL_ERR_CLOSED;
    if (fd < 0 || offset > (uint64_t)INT64_MAX || length > (uint64_t)INT64_MAX - offset)
        return KEEL_ERR_INVAL;
    return write_file(c, NULL, 0, 0, fd, offset, length, cb, userdata);
}

/* Larger prefixes than this go as an ordinary write first: the point is
 * one segment for a head and the start of a file, not a copy of a body. */
#define PREFIX_MAX (64 * 1024)

int keel_conn_write_file_after(keel_conn *c, const keel_buf *prefix, size_t nprefix, int fd,
                               uint64_t offset, uint64_t length, keel_write_cb cb, void *userdata)
{
    if (kl_conn_closing(c))
        return KEEL_ERR_CLOSED;
    if (fd < 0 || offset > (uint64_t)INT64_MAX || length > (uint64_t)INT64_MAX - offset ||
        (prefix == NULL && nprefix > 0))
        return KEEL_ERR_INVAL;
    size_t plen = 0;
    for (size_t i = 0; i < nprefix; i++) {
        if (prefix[i].len > KEEL_BUF_MAX || plen + prefix[i].len < plen)
            return KEEL_ERR_INVAL;
        plen += prefix[i].len;
    }
    if (plen > PREFIX_MAX) {
        for (size_t i = 0; i < nprefix; i++) {
            int rc = keel_conn_write_copy(c, prefix[i].base, prefix[i].len);
            if (rc != KEEL_OK)
                return rc;
        }
        plen = nprefix = 0;
    }
    return write_file(c, prefix, nprefix, plen, fd, offset, length, cb, userdata);
}
