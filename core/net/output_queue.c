/* The output unit's queue of ops (see net/output.h): writes of pieces
 * that hold file ranges (keel_conn_write_pieces, keel_conn_write_file,
 * _after), and every write made while one is queued, held in order behind
 * it. An op's pieces leave one after another: runs of bytes from memory,
 * file ranges from the file.
 *
 * On plain TCP a file range goes to the socket with sendfile(2), on the
 * loop thread: the socket is non-blocking, so each call takes what fits
 * and the rest waits for the socket to become writable. The bytes just
 * before a range are sent marked as followed by more (MSG_MORE, nginx's
 * TCP_CORK), so that a head and a small file leave in one segment; the
 * bytes after the last range go as any write does (one writev). libuv
 * allows one watcher per descriptor and the connection's uv_tcp_t is that
 * one, so the wait uses a uv_poll_t on a dup() of the socket (epoll and
 * kqueue key their registrations on the descriptor), made only when a wait
 * is needed and closed with the op.
 *
 * With a transport (whose bytes must be transformed) or where sendfile is
 * missing (Windows, some file systems), each range is read in pieces
 * through libuv's thread pool, so the loop never waits for a disk, and
 * each piece, as each run of bytes, is written as keel_conn_write would
 * write it; the next step starts once it has left (through a transport:
 * once libuv's queue is down to KL_PACE_BYTES, see output.c), which paces
 * the transfer by the peer.
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
    int ranged; /* pieces with file ranges, below; else a held write */
    /* a held write */
    int owned;    /* the bytes follow bufs[] (keel_conn_write_copy) */
    size_t nbufs; /* in bufs[] */
    /* pieces, copied behind bufs[] (with the bytes of a copied prefix) */
    keel_piece *pieces;
    size_t npieces;
    size_t at;           /* the next piece to start */
    uint64_t piece_sent; /* of the bytes piece `at`, sent with kl_send_more */
    int fallback;        /* read and write instead of sendfile */
    int status;          /* what cb gets if the connection dies first (0: KEEL_ERR_CLOSED) */
    /* the file range in progress */
    int fd;
    uint64_t offset; /* its next byte */
    uint64_t bytes;  /* held write: its size; range: what is left to send */
    int reader_set;  /* `reader` is set up for this range */
    kl_poll *poll;
    /* Made before the first byte leaves, for a transfer that completes
     * inside the call that queued it: its cb must still come from the loop. */
    kl_done *early;
    kl_file_reader reader; /* the fallback's */
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

/* ---- an op's pieces -------------------------------------------------------- */

static void advance(keel_conn *c, kl_op *op);

/* What a step of an op did: went to its end, must wait (a watcher, a read
 * or a write is on its way, or the op failed), or found no sendfile. */
enum { STEP_DONE, STEP_WAIT, STEP_FALLBACK };

/* Ends the op at the head: its last piece has gone, or is on its way with
 * the op's callback. called: that callback is taken care of already. */
static void op_finished(keel_conn *c, int called)
{
    kl_op *op = pop(c);
    c->out->file_active = 0;
    close_poll(op);
    keel_write_cb cb = called ? NULL : op->cb;
    void *ud = op->userdata;
    int inside_call = c->out->in_write_file;
    if (inside_call && op->early != NULL && cb != NULL) {
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
    advance(c, op);
}

/* Waits for room in the socket (or for the next turn of the loop: the
 * watcher fires at once while the socket is writable). The watcher stays
 * armed until the op ends. */
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
            advance(c, op);
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

/* Whether a piece after `i` has bytes: the kernel may then hold a partial
 * segment for them (kl_send_more). */
static int more_follows(const kl_op *op, size_t i)
{
    for (size_t j = i + 1; j < op->npieces; j++)
        if (op->pieces[j].len > 0)
            return 1;
    return 0;
}

/* Sends the bytes pieces [at, end), which a file range follows, straight
 * to the socket, each marked as followed by more. */
static int send_run_more(keel_conn *c, kl_op *op, size_t end, kl_socket sock)
{
    for (; op->at < end; op->at++, op->piece_sent = 0) {
        const keel_piece *p = &op->pieces[op->at];
        while (op->piece_sent < p->len) {
            size_t sent = 0;
            int rc =
                kl_send_more(sock, (const char *)p->base + op->piece_sent,
                             (size_t)(p->len - op->piece_sent), more_follows(op, op->at), &sent);
            if (sent > 0) {
                op->piece_sent += sent;
                count_sent(c, sent);
            }
            if (rc == UV_ENOSYS)
                return STEP_FALLBACK;
            if (rc == UV_EAGAIN) {
                wait_writable(c, op, sock);
                return STEP_WAIT;
            }
            if (rc < 0) {
                fail(c, op, KEEL_ERR_IO);
                return STEP_WAIT;
            }
        }
    }
    return STEP_DONE;
}

/* Sends the range in progress until it is out, the socket is full or this
 * turn's share is used. */
static int send_range(keel_conn *c, kl_op *op, kl_socket sock, uint64_t *budget)
{
    while (op->bytes > 0) {
        if (*budget == 0) {
            wait_writable(c, op, sock);
            return STEP_WAIT;
        }
        size_t want = (size_t)(op->bytes < *budget ? op->bytes : *budget);
        size_t sent = 0;
        int rc = kl_sendfile(sock, op->fd, op->offset, want, &sent);
        if (sent > want)
            sent = want;
        if (sent > 0) {
            op->offset += sent;
            op->bytes -= sent;
            *budget -= sent;
            count_sent(c, sent);
        }
        if (rc == 0 && sent == 0) {
            fail(c, op, KEEL_ERR_IO); /* the file is shorter than promised */
            return STEP_WAIT;
        }
        if (rc == UV_EAGAIN) {
            wait_writable(c, op, sock);
            return STEP_WAIT;
        }
        if (rc == UV_ENOSYS)
            return STEP_FALLBACK;
        if (rc < 0) {
            fail(c, op, KEEL_ERR_IO);
            return STEP_WAIT;
        }
    }
    return STEP_DONE;
}

/* Up to BUFS_RUN bytes pieces from `at` (not past `end`) as bufs;
 * moves `at` past them and takes them out of the held bytes. */
#define BUFS_RUN 16
static size_t take_run(keel_conn *c, kl_op *op, size_t end, keel_buf *bufs)
{
    size_t n = 0;
    for (; op->at < end && n < BUFS_RUN; op->at++, op->piece_sent = 0) {
        const keel_piece *p = &op->pieces[op->at];
        if (p->len == op->piece_sent)
            continue;
        bufs[n++] =
            (keel_buf){(const char *)p->base + op->piece_sent, (size_t)(p->len - op->piece_sent)};
        c->out->held_bytes -= p->len - op->piece_sent;
    }
    return n;
}

/* The bytes after the last range: they go as any write does, the last of
 * them with the op's callback, and the op is over. */
static void send_tail(keel_conn *c, kl_op *op)
{
    keel_buf bufs[BUFS_RUN];
    int rc = KEEL_OK, called = 0;
    while (rc == KEEL_OK && op->at < op->npieces) {
        size_t n = take_run(c, op, op->npieces, bufs);
        int last = op->at == op->npieces;
        if (n == 0)
            break; /* only empty pieces were left */
        rc = kl_output_send(c, bufs, n, last ? op->cb : NULL, last ? op->userdata : NULL);
        called = last;
    }
    if (rc == KEEL_OK) {
        op_finished(c, called);
        return;
    }
    /* The stream is cut (kl_output_send aborts on KEEL_ERR_IO; out of
     * memory, the rest cannot follow what left): the op's callback comes
     * with the error from the teardown. */
    for (; op->at < op->npieces; op->at++, op->piece_sent = 0)
        c->out->held_bytes -= op->pieces[op->at].len - op->piece_sent;
    fail(c, op, rc == KEEL_ERR_NOMEM ? rc : KEEL_ERR_IO);
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
    advance(c, op);
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

/* Through a transport, or without sendfile: the next piece of the range
 * in progress is read (the reader starts where sendfile stopped, if it ran
 * first), written once read, and the op advances once it has left. */
static void read_next(keel_conn *c, kl_op *op)
{
    if (!op->reader_set) {
        kl_file_reader_free(&op->reader);
        kl_file_reader_init(&op->reader, op->fd, op->offset, op->bytes, on_piece_read, op);
        op->reader_set = 1;
    }
    int rc = kl_file_reader_next(&op->reader, &kl_conn_worker(c)->loop);
    if (rc != KEEL_OK)
        fail(c, op, rc == KEEL_ERR_NOMEM ? rc : KEEL_ERR_IO);
}

/* A run of bytes before a range, through a transport or without sendfile:
 * written as any bytes are; the op advances once it has left. */
static void write_run(keel_conn *c, kl_op *op, size_t end)
{
    keel_buf bufs[BUFS_RUN];
    size_t n = take_run(c, op, end, bufs);
    int rc = kl_output_send(c, bufs, n, on_piece_written, op);
    if (rc != KEEL_OK)
        fail(c, op, rc == KEEL_ERR_NOMEM ? rc : KEEL_ERR_IO);
}

/* ---- the op at the head ---------------------------------------------------- */

/* Sends the op's pieces from where it stands until a step must wait or the
 * last piece has gone. */
static void advance(keel_conn *c, kl_op *op)
{
    kl_socket sock = 0;
    if (!op->fallback && socket_of(c, &sock) != KEEL_OK) {
        fail(c, op, KEEL_ERR_IO);
        return;
    }
    uint64_t budget = TURN_BYTES;
    for (;;) {
        int step = STEP_DONE;
        if (op->bytes > 0) {
            if (op->fallback) {
                read_next(c, op);
                return;
            }
            step = send_range(c, op, sock, &budget);
        } else if (op->at == op->npieces) {
            op_finished(c, 0);
            return;
        } else if (op->pieces[op->at].kind == KEEL_PIECE_BYTES &&
                   op->pieces[op->at].len == op->piece_sent) {
            op->at++; /* empty, or sent whole */
            op->piece_sent = 0;
        } else if (op->pieces[op->at].kind == KEEL_PIECE_FILE) {
            const keel_piece *p = &op->pieces[op->at++];
            op->fd = p->fd;
            op->offset = p->offset;
            op->bytes = p->len;
            op->reader_set = 0;
        } else {
            size_t end = op->at;
            while (end < op->npieces && op->pieces[end].kind == KEEL_PIECE_BYTES)
                end++;
            if (end == op->npieces) {
                send_tail(c, op);
                return;
            }
            if (op->fallback) {
                write_run(c, op, end);
                return;
            }
            step = send_run_more(c, op, end, sock);
        }
        if (step == STEP_WAIT)
            return;
        if (step == STEP_FALLBACK) {
            close_poll(op);
            op->fallback = 1;
        }
    }
}

/* ---- the queue ------------------------------------------------------------- */

void kl_ops_run(keel_conn *c)
{
    while (head(c) != NULL && !kl_conn_handle_closed(c)) {
        kl_op *op = head(c);
        if (op->ranged) {
            if (c->out->file_active)
                return;
            /* sendfile bypasses libuv's queue: what is in it goes first.
             * The read path writes through that queue, in order anyway. */
            if (!op->fallback && c->out->in_flight > 0)
                return;
            c->out->file_active = 1;
            kl_conn_retime(c, 1); /* the write timeout runs from now */
            advance(c, op);
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
        int status = op->ranged && op->status != 0 ? op->status : KEEL_ERR_CLOSED;
        free_op(op);
        if (cb != NULL)
            cb(c, status, ud);
    }
    if (c->out != NULL)
        c->out->file_active = 0;
}

/* ---- the API --------------------------------------------------------------- */

int kl_pieces_check(const keel_piece *pieces, size_t n, uint64_t *total, int *files)
{
    if (pieces == NULL && n > 0)
        return KEEL_ERR_INVAL;
    *total = 0;
    *files = 0;
    for (size_t i = 0; i < n; i++) {
        const keel_piece *p = &pieces[i];
        if (p->kind == KEEL_PIECE_BYTES) {
            if (p->len > KEEL_BUF_MAX || (p->base == NULL && p->len > 0))
                return KEEL_ERR_INVAL;
        } else if (p->kind == KEEL_PIECE_FILE) {
            if (p->fd < 0 || p->offset > (uint64_t)INT64_MAX ||
                p->len > (uint64_t)INT64_MAX - p->offset)
                return KEEL_ERR_INVAL;
            *files = 1;
        } else {
            return KEEL_ERR_INVAL;
        }
        if (p->len > (uint64_t)INT64_MAX - *total)
            return KEEL_ERR_INVAL;
        *total += p->len;
    }
    return KEEL_OK;
}

/* Queues an op of pieces: `prefix` (plen bytes, copied into the op) as
 * its first piece when plen > 0, then the caller's pieces (borrowed). */
static int queue_pieces(keel_conn *c, const keel_buf *prefix, size_t nprefix, size_t plen,
                        const keel_piece *pieces, size_t npieces, uint64_t total, keel_write_cb cb,
                        void *userdata)
{
    size_t nslots = npieces + (plen > 0);
    kl_op *op = ensure_queue(c) == KEEL_OK
                    ? calloc(1, sizeof *op + nslots * sizeof(keel_piece) + plen)
                    : NULL;
    if (op == NULL) {
        kl_output_trim(c);
        return KEEL_ERR_NOMEM;
    }
    op->pieces = (keel_piece *)(void *)op->bufs;
    if (plen > 0) {
        char *copy = (char *)(op->pieces + nslots);
        for (size_t i = 0, at = 0; i < nprefix; at += prefix[i].len, i++)
            if (prefix[i].len > 0)
                memcpy(copy + at, prefix[i].base, prefix[i].len);
        op->pieces[0] = keel_piece_bytes(copy, plen);
    }
    if (npieces > 0)
        memcpy(op->pieces + (plen > 0), pieces, npieces * sizeof *pieces);
    op->npieces = nslots;
    op->ranged = 1;
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
    c->out->held_bytes += plen + total;
    if (first) {
        /* A transfer that ends inside this call must still complete from
         * the loop (op_finished looks at this). */
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

int keel_conn_write_pieces(keel_conn *c, const keel_piece *pieces, size_t npieces, keel_write_cb cb,
                           void *userdata)
{
    if (kl_conn_closing(c))
        return KEEL_ERR_CLOSED;
    uint64_t total;
    int files;
    int rc = kl_pieces_check(pieces, npieces, &total, &files);
    if (rc != KEEL_OK)
        return rc;
    if (files)
        return queue_pieces(c, NULL, 0, 0, pieces, npieces, total, cb, userdata);
    /* Bytes only: keel_conn_write's path, without an op. */
    if (npieces == 0)
        return keel_conn_write(c, NULL, 0, cb, userdata);
    keel_buf stack[BUFS_RUN], *bufs = npieces <= BUFS_RUN ? stack : malloc(npieces * sizeof *bufs);
    if (bufs == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < npieces; i++)
        bufs[i] = (keel_buf){pieces[i].base, (size_t)pieces[i].len};
    rc = keel_conn_write(c, bufs, npieces, cb, userdata);
    if (bufs != stack)
        free(bufs);
    return rc;
}

int keel_conn_write_file(keel_conn *c, int fd, uint64_t offset, uint64_t length, keel_write_cb cb,
                         void *userdata)
{
    keel_piece file = keel_piece_file(fd, offset, length);
    return keel_conn_write_pieces(c, &file, 1, cb, userdata);
}

/* Larger prefixes than this go as an ordinary write first: the point is
 * one segment for a head and the start of a file, not a copy of a body. */
#define PREFIX_MAX (64 * 1024)

int keel_conn_write_file_after(keel_conn *c, const keel_buf *prefix, size_t nprefix, int fd,
                               uint64_t offset, uint64_t length, keel_write_cb cb, void *userdata)
{
    if (kl_conn_closing(c))
        return KEEL_ERR_CLOSED;
    keel_piece file = keel_piece_file(fd, offset, length);
    uint64_t total;
    int files;
    if (kl_pieces_check(&file, 1, &total, &files) != KEEL_OK || (prefix == NULL && nprefix > 0))
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
    return queue_pieces(c, prefix, nprefix, plen, &file, 1, total, cb, userdata);
}
