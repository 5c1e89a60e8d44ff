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
 * KL_PACE_BYTES, see kl_ops_park), which paces the transfer by the peer.
 *
 * Everything here runs on the connection's worker thread.
 */
#include <stdlib.h>
#include <string.h>

#include "net/conn.h"
#include "platform/platform.h"
#include "base/util.h"
#include "net/worker.h"

/* One read of the fallback path. */
#define FILE_CHUNK (64 * 1024)
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
    int reading;  /* fs is in the thread pool */
    int status;   /* what cb gets if the connection dies first (0: KEEL_ERR_CLOSED) */
    uint64_t offset;
    uint64_t bytes; /* held write: its size; file: what is left to send */
    kl_poll *poll;
    char *buf;
    /* Made before the first byte leaves, for a transfer that completes
     * inside keel_conn_write_file: its cb must still come from the loop. */
    kl_deferred *early;
    uv_fs_t fs;
    keel_buf bufs[];
};

struct kl_ops {
    kl_op *head, *tail;
    uint64_t bytes;      /* held bytes plus file bytes not yet sent */
    kl_deferred *parked; /* transport write completions (kl_ops_park) */
};

int kl_ops_pending(const keel_conn *c)
{
    return c->ops != NULL && c->ops->head != NULL;
}

uint64_t kl_ops_bytes(const keel_conn *c)
{
    return c->ops != NULL ? c->ops->bytes : 0;
}

void kl_ops_trim(keel_conn *c)
{
    if (c->ops != NULL && c->ops->head == NULL && c->ops->parked == NULL) {
        free(c->ops);
        c->ops = NULL;
    }
}

/* The queue exists before anything is appended to it. */
static int ensure_queue(keel_conn *c)
{
    if (c->ops == NULL && (c->ops = calloc(1, sizeof *c->ops)) == NULL)
        return KEEL_ERR_NOMEM;
    return KEEL_OK;
}

static kl_op *head(keel_conn *c)
{
    return c->ops != NULL ? c->ops->head : NULL;
}

static void append(keel_conn *c, kl_op *op)
{
    if (c->ops->tail != NULL)
        c->ops->tail->next = op;
    else
        c->ops->head = op;
    c->ops->tail = op;
}

static kl_op *pop(keel_conn *c)
{
    kl_op *op = c->ops->head;
    c->ops->head = op->next;
    if (c->ops->head == NULL)
        c->ops->tail = NULL;
    op->next = NULL;
    return op;
}

static void free_op(kl_op *op)
{
    free(op->buf);
    free(op->early);
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
    if (!(c->flags & KL_CONN_HANDLE_CLOSED))
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
    c->ops->bytes += total;
    kl_conn_check_pressure(c);
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
    c->flags &= ~KL_CONN_FILE_ACTIVE;
    close_poll(op);
    keel_write_cb cb = op->cb;
    void *ud = op->userdata;
    int inside_call = (c->flags & KL_CONN_IN_WRITE_FILE) != 0;
    if (inside_call && op->early != NULL) {
        kl_worker_defer(kl_conn_worker(c), op->early);
        op->early = NULL;
        cb = NULL;
    }
    free_op(op);
    if (inside_call) {
        /* Nothing else was queued (the call started this op only because
         * the queue was empty): just leave the write timeout. */
        kl_conn_settle(c);
        return;
    }
    if (cb != NULL)
        cb(c, KEEL_OK, ud);
    if (c->flags & KL_CONN_HANDLE_CLOSED)
        return;
    kl_ops_run(c);
    kl_conn_settle(c);
}

static void on_writable(uv_poll_t *handle, int status, int events)
{
    keel_conn *c = handle->data;
    (void)events;
    /* Closing the connection closes this watcher first, so c is alive. */
    kl_op *op = c->ops->head;
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
        if (rc == UV_ENOSYS) {
            /* No way to wait on this platform: go on with reads. */
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

/* Sends until the file is out, the socket is full or this turn's share is
 * used. */
static void pump(keel_conn *c, kl_op *op)
{
    kl_socket sock;
    if (socket_of(c, &sock) != KEEL_OK) {
        fail(c, op, KEEL_ERR_IO);
        return;
    }
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
            c->ops->bytes -= sent;
            budget -= sent;
            kl_conn_progress(c);
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
    if (status < 0 || (c->flags & KL_CONN_HANDLE_CLOSED))
        return;
    kl_conn_progress(c);
    read_next(c, op);
}

static void on_read_done(uv_fs_t *fs)
{
    kl_op *op = fs->data;
    keel_conn *c = op->conn;
    ssize_t n = fs->result;
    uv_fs_req_cleanup(fs);
    op->reading = 0;
    if (c->flags & KL_CONN_HANDLE_CLOSED) {
        if (c->flags & KL_CONN_TEARDOWN_WAIT)
            kl_conn_teardown(c);
        return;
    }
    if (n <= 0) {
        fail(c, op, KEEL_ERR_IO); /* a read error, or the file is shorter */
        return;
    }
    if ((uint64_t)n > op->bytes)
        n = (ssize_t)op->bytes;
    op->offset += (uint64_t)n;
    op->bytes -= (uint64_t)n;
    c->ops->bytes -= (uint64_t)n;
    keel_buf piece = {op->buf, (size_t)n};
    int rc = kl_conn_send(c, &piece, 1, on_piece_written, op);
    if (rc != KEEL_OK)
        fail(c, op, rc == KEEL_ERR_NOMEM ? rc : KEEL_ERR_IO);
}

static void read_next(keel_conn *c, kl_op *op)
{
    if (op->bytes == 0) {
        file_finished(c);
        return;
    }
    if (op->buf == NULL && (op->buf = malloc(FILE_CHUNK)) == NULL) {
        fail(c, op, KEEL_ERR_NOMEM);
        return;
    }
    size_t want = op->bytes < FILE_CHUNK ? (size_t)op->bytes : FILE_CHUNK;
    uv_buf_t buf = uv_buf_init(op->buf, (unsigned)want);
    op->fs.data = op;
    op->reading = 1;
    if (uv_fs_read(&kl_conn_worker(c)->loop, &op->fs, op->fd, &buf, 1, (int64_t)op->offset,
                   on_read_done) != 0) {
        op->reading = 0;
        fail(c, op, KEEL_ERR_IO);
    }
}

/* ---- pacing writes through a transport ------------------------------------ */

int kl_ops_park(keel_conn *c, kl_deferred *completion)
{
    if (ensure_queue(c) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    kl_deferred_append(&c->ops->parked, completion);
    return KEEL_OK;
}

void kl_ops_on_drain(keel_conn *c)
{
    if (c->ops == NULL || c->ops->parked == NULL || (c->flags & KL_CONN_HANDLE_CLOSED) ||
        c->tcp.write_queue_size > KL_PACE_BYTES)
        return;
    kl_worker_defer_all(kl_conn_worker(c), c->ops->parked);
    c->ops->parked = NULL;
    kl_ops_trim(c);
}

/* ---- the queue ------------------------------------------------------------- */

void kl_ops_run(keel_conn *c)
{
    while (head(c) != NULL && !(c->flags & KL_CONN_HANDLE_CLOSED)) {
        kl_op *op = head(c);
        if (op->is_file) {
            if (c->flags & KL_CONN_FILE_ACTIVE)
                return;
            /* sendfile bypasses libuv's queue: what is in it goes first.
             * The read path writes through that queue, in order anyway. */
            if (!op->fallback && c->writes_pending > 0)
                return;
            c->flags |= KL_CONN_FILE_ACTIVE;
            kl_conn_arm_write_timeout(c);
            if (op->fallback)
                read_next(c, op);
            else
                pump(c, op);
            return;
        }
        pop(c);
        c->ops->bytes -= op->bytes;
        int rc;
        if (op->owned) {
            rc = kl_conn_send(c, op->bufs, op->nbufs, on_owned_written, op);
            if (rc != KEEL_OK)
                free(op);
        } else {
            rc = kl_conn_send(c, op->bufs, op->nbufs, op->cb, op->userdata);
            if (rc != KEEL_OK && op->cb != NULL)
                op->cb(c, rc, op->userdata); /* it was accepted: the callback is owed */
            free(op);
        }
        if (rc != KEEL_OK) {
            if (!(c->flags & KL_CONN_HANDLE_CLOSED))
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

int kl_ops_reading(keel_conn *c)
{
    return head(c) != NULL && head(c)->reading;
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
    if (c->ops != NULL) {
        /* The bytes may never have left: the callers learn it. */
        kl_deferred_fail_all(c->ops->parked, KEEL_ERR_CLOSED);
        free(c->ops);
        c->ops = NULL;
    }
    c->flags &= ~KL_CONN_FILE_ACTIVE;
}

/* ---- the API --------------------------------------------------------------- */

int keel_conn_write_file(keel_conn *c, int fd, uint64_t offset, uint64_t length, keel_write_cb cb,
                         void *userdata)
{
    if (c->flags & KL_CONN_CLOSING)
        return KEEL_ERR_CLOSED;
    if (fd < 0 || offset > (uint64_t)INT64_MAX || length > (uint64_t)INT64_MAX - offset)
        return KEEL_ERR_INVAL;
    kl_op *op = ensure_queue(c) == KEEL_OK ? calloc(1, sizeof *op) : NULL;
    if (op == NULL)
        return KEEL_ERR_NOMEM;
    op->is_file = 1;
    op->fd = fd;
    op->offset = offset;
    op->bytes = length;
    op->cb = cb;
    op->userdata = userdata;
    op->conn = c;
    op->fallback = kl_conn_transport(c) != NULL;
    int first = c->ops->head == NULL;
    if (first && cb != NULL && (op->early = kl_deferred_new(c, cb, userdata, KEEL_OK)) == NULL) {
        free(op);
        return KEEL_ERR_NOMEM;
    }
    append(c, op);
    c->ops->bytes += length;
    if (first) {
        uint32_t outer = c->flags & KL_CONN_IN_WRITE_FILE;
        c->flags |= KL_CONN_IN_WRITE_FILE;
        kl_ops_run(c);
        c->flags = (c->flags & ~(uint32_t)KL_CONN_IN_WRITE_FILE) | outer;
    }
    if (!(c->flags & KL_CONN_HANDLE_CLOSED))
        kl_conn_check_pressure(c);
    return KEEL_OK;
}
