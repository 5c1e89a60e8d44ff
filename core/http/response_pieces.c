/* Responses whose body is pieces (ABI 1.8, keel_response_send_pieces):
 * bytes and file ranges handed to the protocol in order, read here where
 * the protocol or a filter needs the bytes of a range. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

#include "http/http.h"
#include "net/output.h"
#include "net/worker.h"

/* ---- pieces (ABI 1.8) ------------------------------------------------------- */

/* A body of pieces on its way: bytes go to the protocol as send_body
 * pieces, file ranges as its send_file (the connection's ordered queue
 * takes them at once, in order) or, where the protocol cannot or a filter
 * needs the bytes, read here and sent as bytes, each after the previous
 * one was taken. */
typedef struct kl_body_pieces {
    keel_response *res;
    keel_free_fn release;
    void *userdata;
    size_t n, at;
    size_t end;       /* after the last piece with bytes */
    uint32_t pending; /* handed to the protocol, not yet called back */
    int failed;       /* the body cannot be whole: close after it */
    int last_sent;    /* the protocol has the piece that ends the body */
    int no_send_file; /* the protocol refused a range: read the rest */
    int reading;      /* `reader` is on the range before `at` */
    int read_busy;    /* a read, or the piece it gave, is on its way */
    int busy, again;  /* inside pieces_pump */
    /* At the end of the body filters' chain (ABI 1.9): the pieces the
     * last filter emitted, whose bytes are copied after pieces[]; they go
     * straight to the protocol, after the chain's earlier ones (`next`),
     * and `last` says whether they end the body. */
    int direct, last, trailers_due;
    uint64_t total;
    struct kl_body_pieces *next;
    kl_file_reader reader;
    keel_piece pieces[];
} kl_body_pieces;

/* A piece of bytes on its way: through the filters, or past them. */
static int send_bytes(kl_body_pieces *bp, const void *data, size_t len, int last, keel_free_fn done)
{
    if (bp->direct)
        return kl_response_send_direct(bp->res, data, len, last, done, bp);
    return kl_response_send_piece(bp->res, data, len, last, done, bp);
}

static void pieces_pump(kl_body_pieces *bp);

static void on_bytes_taken(void *data, void *userdata)
{
    kl_body_pieces *bp = userdata;
    (void)data;
    bp->pending--;
    pieces_pump(bp);
}

static void on_range_sent(keel_conn *conn, int status, void *userdata)
{
    kl_body_pieces *bp = userdata;
    (void)conn;
    if (status != KEEL_OK)
        bp->failed = 1;
    bp->pending--;
    pieces_pump(bp);
}

static void on_read_taken(void *data, void *userdata)
{
    kl_body_pieces *bp = userdata;
    (void)data;
    bp->pending--;
    bp->read_busy = 0;
    pieces_pump(bp);
}

static void on_range_read(kl_file_reader *r, int status, char *data, size_t len)
{
    kl_body_pieces *bp = r->owner;
    keel_response *res = bp->res;
    if (res->req->aborted || status != KEEL_OK) {
        bp->failed = 1; /* a read error, or the file is shorter than its range */
        bp->read_busy = 0;
        pieces_pump(bp);
        return;
    }
    int last = r->left == 0 && bp->at == bp->end && bp->last;
    bp->pending++;
    bp->last_sent |= last;
    if (send_bytes(bp, data, len, last, on_read_taken) != KEEL_OK)
        bp->failed = 1; /* on_read_taken has come or will */
}

/* Hands pieces to the protocol until one must wait (a read) or all are. */
static void pieces_step(kl_body_pieces *bp)
{
    keel_response *res = bp->res;
    keel_request *req = res->req;
    while (!bp->failed && !bp->read_busy && !req->aborted) {
        if (bp->reading) {
            if (bp->reader.left == 0) {
                bp->reading = 0;
                continue;
            }
            if (kl_file_reader_next(&bp->reader, &req->worker->loop) != KEEL_OK) {
                bp->failed = 1;
                return;
            }
            bp->read_busy = 1;
            return;
        }
        if (bp->at == bp->end)
            return;
        const keel_piece *p = &bp->pieces[bp->at];
        int last = bp->at + 1 == bp->end && bp->last;
        if (p->len == 0) {
            bp->at++;
            continue;
        }
        int rc;
        if (p->kind == KEEL_PIECE_BYTES) {
            bp->at++;
            bp->pending++;
            bp->last_sent |= last;
            rc = send_bytes(bp, p->base, (size_t)p->len, last, on_bytes_taken);
        } else if (!bp->no_send_file && (bp->direct || !kl_response_body_filtered(res)) &&
                   req->sink->send_file != NULL) {
            bp->pending++;
            res->body_bytes += p->len;
            rc = req->sink->send_file(req->exchange, p->fd, p->offset, p->len, last, on_range_sent,
                                      bp);
            if (rc == KEEL_OK) {
                bp->at++;
                bp->last_sent |= last;
                continue;
            }
            bp->pending--;
            res->body_bytes -= p->len;
            if (rc == KEEL_ERR_UNSUPPORTED) {
                bp->no_send_file = 1; /* nothing happened: read this range */
                continue;
            }
        } else {
            bp->at++;
            kl_file_reader_free(&bp->reader);
            kl_file_reader_init(&bp->reader, p->fd, p->offset, p->len, on_range_read, bp);
            bp->reading = 1;
            continue;
        }
        if (rc != KEEL_OK) {
            bp->failed = 1; /* refused: the callback of a bytes piece has come */
            return;
        }
    }
}

static void chain_start(kl_body_pieces *bp);

/* The end of the chain's pieces: what waited behind them goes on. */
static void chain_finish(kl_body_pieces *bp)
{
    keel_response *res = bp->res;
    keel_request *req = res->req;
    if (bp->failed)
        res->close_connection = 1; /* a range could not be sent whole */
    kl_file_reader_free(&bp->reader);
    res->chain_head = bp->next;
    if (res->chain_head == NULL)
        res->chain_tail = NULL;
    else
        chain_start(res->chain_head);
    free(bp);
    kl_response_piece_left(req);
    kl_request_unref(req); /* the chain piece's */
}

/* Everything is handed over and called back (or cannot be): the caller's
 * pieces are released and the response ends, after its last byte. */
static void pieces_finish(kl_body_pieces *bp)
{
    keel_response *res = bp->res;
    keel_request *req = res->req;
    if (bp->direct) {
        chain_finish(bp);
        return;
    }
    if (bp->failed || req->aborted)
        res->close_connection = 1; /* the promised length was not kept */
    kl_file_reader_free(&bp->reader);
    if (bp->release != NULL)
        bp->release(NULL, bp->userdata);
    if (!res->ended) {
        if (!bp->last_sent && !req->aborted)
            kl_response_send_piece(res, NULL, 0, 1, NULL, NULL);
        kl_response_end(res);
    }
    free(bp);
    kl_request_unref(req); /* the transfer's */
}

/* Runs steps until one waits; callbacks that come inside a step (a
 * protocol that copies a small last piece) only ask for another turn. */
static void pieces_pump(kl_body_pieces *bp)
{
    if (bp->busy) {
        bp->again = 1;
        return;
    }
    bp->busy = 1;
    do {
        bp->again = 0;
        pieces_step(bp);
    } while (bp->again);
    bp->busy = 0;
    int handed = bp->failed || bp->res->req->aborted || (bp->at == bp->end && !bp->reading);
    if (handed && bp->trailers_due && !bp->failed && !bp->res->req->aborted) {
        /* The trailer section follows the last byte (send_pieces has no
         * room for it). */
        bp->trailers_due = 0;
        bp->last_sent = 1;
        if (kl_response_send_direct(bp->res, NULL, 0, 1, NULL, NULL) != KEEL_OK)
            bp->failed = 1;
    }
    if (handed && bp->pending == 0 && !bp->read_busy)
        pieces_finish(bp);
}

/* The protocol takes the pieces all at once (HTTP/1.1 hands them to its
 * connection's queue): one callback for them; else (KEEL_ERR_UNSUPPORTED)
 * they go one by one from pieces_step. */
static void hand_whole(kl_body_pieces *bp)
{
    keel_response *res = bp->res;
    keel_request *req = res->req;
    bp->pending++;
    bp->busy = 1; /* cb may come inside the call: it only asks for a turn */
    int rc =
        req->sink->send_pieces(req->exchange, bp->pieces, bp->end, bp->last, on_range_sent, bp);
    bp->busy = 0;
    if (rc == KEEL_OK) {
        bp->at = bp->end;
        bp->last_sent = bp->last;
        res->body_bytes += bp->total;
    } else {
        bp->pending--;
        bp->failed = rc != KEEL_ERR_UNSUPPORTED;
    }
}

/* The chain's pieces go to the protocol: all at once where it takes them
 * (HTTP/1.1 and HTTP/2 do), else one by one (ranges it cannot send are
 * read here). */
static void chain_start(kl_body_pieces *bp)
{
    keel_response *res = bp->res;
    keel_request *req = res->req;
    if (bp->end > 0 && !req->aborted) {
        hand_whole(bp);
    } else if (bp->last && !bp->trailers_due && !req->aborted) {
        if (kl_response_send_direct(res, NULL, 0, 1, NULL, NULL) != KEEL_OK)
            bp->failed = 1;
    }
    pieces_pump(bp);
}

int kl_response_pieces_to_sink(keel_response *res, const keel_piece *pieces, size_t npieces,
                               int last)
{
    keel_request *req = res->req;
    if (req->aborted)
        return KEEL_ERR_CLOSED;
    /* The bytes are the filter's until it returns: copied, behind the
     * pieces, with the ranges in place. */
    size_t bytes = 0;
    for (size_t i = 0; i < npieces; i++)
        if (pieces[i].kind == KEEL_PIECE_BYTES)
            bytes += (size_t)pieces[i].len;
    kl_body_pieces *bp = malloc(sizeof *bp + npieces * sizeof *pieces + bytes);
    if (bp == NULL)
        return KEEL_ERR_NOMEM;
    *bp = (kl_body_pieces){.res = res, .n = npieces, .direct = 1};
    char *copy = (char *)(bp->pieces + npieces);
    for (size_t i = 0; i < npieces; i++) {
        bp->pieces[i] = pieces[i];
        if (pieces[i].kind == KEEL_PIECE_BYTES && pieces[i].len > 0) {
            memcpy(copy, pieces[i].base, (size_t)pieces[i].len);
            bp->pieces[i].base = copy;
            copy += pieces[i].len;
        }
        if (pieces[i].len > 0)
            bp->end = i + 1;
        bp->total += pieces[i].len;
    }
    bp->trailers_due = last && res->ntrailers > 0;
    bp->last = last && !bp->trailers_due;
    /* Counted as a piece in flight: a streamer's release and a file read
     * behind the filters wait for it, as for bytes. */
    res->pieces_in_flight++;
    kl_request_ref(req);
    if (res->chain_tail != NULL) {
        res->chain_tail->next = bp; /* behind a range being read */
        res->chain_tail = bp;
        return KEEL_OK;
    }
    res->chain_head = res->chain_tail = bp;
    chain_start(bp);
    return KEEL_OK;
}

/* The pieces went into the filters, which take pieces: what they made of
 * them is on its way (counted in pieces_in_flight); the caller's pieces
 * are borrowed until it has left. */
static void on_filtered_left(void *data, void *userdata)
{
    kl_body_pieces *bp = userdata;
    (void)data;
    bp->pending--;
    pieces_pump(bp);
}

static void filter_pieces(kl_body_pieces *bp)
{
    keel_response *res = bp->res;
    bp->pending++;
    bp->busy = 1;
    if (kl_response_run_piece_filters(res, 0, bp->pieces, bp->end, 1) != KEEL_OK)
        bp->failed = 1;
    bp->busy = 0;
    bp->at = bp->end;
    bp->last_sent = 1; /* the filters had last: the body's end is theirs */
    if (res->pieces_in_flight > 0 && res->held_free == NULL) {
        res->held_free = on_filtered_left;
        res->held_data = NULL;
        res->held_userdata = bp;
    } else {
        bp->pending--;
    }
    pieces_pump(bp);
}

int kl_response_send_pieces_body(keel_response *res, const keel_piece *pieces, size_t npieces,
                                 uint64_t total, keel_free_fn release, void *userdata)
{
    keel_request *req = res->req;
    kl_body_pieces *bp = malloc(sizeof *bp + npieces * sizeof *pieces);
    if (bp == NULL) {
        res->close_connection = 1; /* the head has gone without its body */
        if (release != NULL)
            release(NULL, userdata);
        kl_response_end(res);
        return KEEL_ERR_NOMEM;
    }
    *bp = (kl_body_pieces){
        .res = res, .release = release, .userdata = userdata, .n = npieces, .last = 1};
    if (!kl_response_body_filtered(res) && res->ntrailers > 0) {
        bp->last = 0; /* the trailer section follows the pieces */
        bp->trailers_due = 1;
    }
    memcpy(bp->pieces, pieces, npieces * sizeof *pieces);
    for (size_t i = 0; i < npieces; i++)
        if (pieces[i].len > 0)
            bp->end = i + 1;
    kl_request_ref(req); /* the transfer's, until pieces_finish */
    if (kl_response_pieces_filtered(res)) {
        filter_pieces(bp);
        return KEEL_OK;
    }
    bp->total = total;
    if (!kl_response_body_filtered(res) && req->sink->send_pieces != NULL)
        hand_whole(bp);
    pieces_pump(bp);
    return KEEL_OK;
}

int keel_response_send_pieces(keel_response *res, const keel_piece *pieces, size_t npieces,
                              keel_free_fn release, void *userdata)
{
    keel_request *req = res->req;
    uint64_t total;
    int files, rc = kl_pieces_check(pieces, npieces, &total, &files);
    if (res->ended || req->aborted)
        return kl_response_refuse(res, NULL, release, userdata);
    if (rc != KEEL_OK || res->head_sent) {
        if (release != NULL)
            release(NULL, userdata);
        return rc != KEEL_OK ? rc : KEEL_ERR_STATE;
    }
    res->from_file = files;
    rc = kl_response_send_head(res, (int64_t)total);
    keel_str method = req->head.method;
    int head_only = method.len == 4 && memcmp(method.ptr, "HEAD", 4) == 0;
    if (rc == KEEL_OK && total > 0 && !head_only)
        return kl_response_send_pieces_body(res, pieces, npieces, total, release, userdata);
    /* Refused, or no body to send (the head may have gone: the connection
     * must close). */
    if (rc == KEEL_OK)
        rc = kl_response_send_piece(res, NULL, 0, 1, NULL, NULL);
    else
        res->close_connection = 1;
    if (release != NULL)
        release(NULL, userdata);
    kl_response_end(res);
    return rc;
}
