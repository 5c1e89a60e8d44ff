/* writer.h — the frame writer: the layer between the codec (frame.h,
 * hpack.h) and the connection's state (state.h).
 *
 * What every layer above shares: the configuration, the metrics, the
 * per-worker pools, and the connection (h2_conn: each layer's part of it
 * in one allocation, each part saying whose it is; only its owner's
 * functions change it). What this layer does: batches of output that leave
 * as one write (output.c), the control frames the codec encodes into them
 * and connection errors (writer.c), the flood accounting beside them
 * (limits.c). The layers above learn of events through the connection's
 * h2_events, which the module fills: nothing here calls up by name.
 *
 * Everything here runs on one connection's worker thread; the only state
 * shared between workers is read-only (h2_config, made once in load).
 */
#ifndef KEEL_H2_WRITER_H
#define KEEL_H2_WRITER_H

#include <keel/keel.h>
#include <keel/util.h>

#include "../http1/date.h"
#include "frame.h"
#include "hpack.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration ([h2], read once in load) ---------------------------- */

/* The [h2] section as declared (h2.c's key table, keel/config.h): the core
 * validates it and fills this struct, whose fields are the types the
 * table's keys write (INT int64_t, SIZE and DURATION uint64_t); load
 * adds what follows from them. */
typedef struct h2_config {
    /* Advertised in our SETTINGS (RFC 9113 6.5.2) and enforced; the
     * table's bounds keep each within its 32-bit setting. */
    int64_t max_concurrent_streams; /* more → RST_STREAM REFUSED_STREAM (5.1.2) */
    uint64_t initial_window;        /* per stream; what a slow handler lets a client buffer */
    uint64_t conn_window;           /* the connection's receive window (6.9.2) */
    uint64_t max_frame_size;        /* larger frames → FRAME_SIZE_ERROR (4.2) */
    uint64_t header_table_size;     /* HPACK dynamic table (RFC 7541 4.2) */
    uint64_t max_header_list;       /* decoded fields (6.5.2) → 431; far beyond → calm */
    uint64_t max_header_block;      /* wire bytes of one header block, all its frames (load:
                                       0 becomes twice max_header_list plus a frame) */
    uint64_t max_body;              /* request body → 413 */
    uint64_t body_buffer;           /* unread request bodies per connection */
    uint64_t idle_timeout_ms;       /* no stream open → GOAWAY NO_ERROR and close */
    uint64_t stream_timeout_ms;     /* a stream waiting on its peer without progress */
    uint64_t header_timeout_ms;     /* a header block (or a frame) whole, from its first byte */
    uint64_t body_min_rate;         /* bytes/s a request body must average after its grace */
    int64_t max_requests;           /* streams per connection, then GOAWAY; 0: no limit */
    /* Flood limits (limits.c): events per 10 s, as token buckets. */
    int64_t max_resets;          /* streams the client reset before their end (CVE-2023-44487) */
    int64_t max_pings;           /* PING frames (CVE-2019-9512) */
    int64_t max_settings;        /* SETTINGS frames (CVE-2019-9515) */
    int64_t max_empty_frames;    /* empty DATA/HEADERS/CONTINUATION (CVE-2019-9518) */
    int64_t max_priority;        /* PRIORITY frames and priority changes (CVE-2019-9513) */
    int64_t max_continuations;   /* CONTINUATION frames per header block (CVE-2024-27316) */
    const char *server;          /* value of the server field, "" for none */
    int enable_connect_protocol; /* SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 (RFC 8441 3) */
    size_t server_len;           /* load: strlen(server) */
} h2_config;

/* ---- metrics ------------------------------------------------------------ */

/* Why a connection was told to calm down (GOAWAY ENHANCE_YOUR_CALM). */
enum h2_flood {
    H2_FLOOD_RESET = 0,
    H2_FLOOD_PING,
    H2_FLOOD_SETTINGS,
    H2_FLOOD_EMPTY,
    H2_FLOOD_PRIORITY,
    H2_FLOOD_CONTINUATION,
    H2_FLOOD_HPACK,
    H2_FLOOD_OUTBOUND, /* answers (ACKs, resets) piling up: the peer does not read */
    H2_FLOOD_RST_SENT, /* a peer provoking our RST_STREAMs (CVE-2019-9514) */
    H2_FLOOD_COUNT
};

/* Limits that answer one stream (or an idle connection), counted. */
enum h2_limit {
    H2_LIMIT_HEADER_LIST = 0, /* 431 */
    H2_LIMIT_BODY,            /* 413 */
    H2_LIMIT_STREAMS,         /* REFUSED_STREAM over max_concurrent_streams */
    H2_LIMIT_STREAM_TIMEOUT,  /* RST_STREAM CANCEL */
    H2_LIMIT_IDLE_TIMEOUT,    /* GOAWAY NO_ERROR */
    H2_LIMIT_REQUESTS,        /* GOAWAY NO_ERROR after max_requests */
    H2_LIMIT_HEADER_TIMEOUT,  /* GOAWAY ENHANCE_YOUR_CALM: a header block not whole in time */
    H2_LIMIT_BODY_RATE,       /* 408 or RST_STREAM CANCEL: a body under body_min_rate */
    H2_LIMIT_COUNT
};

#define H2_ERROR_CODES 14 /* RFC 9113 7: NO_ERROR (0x0) .. HTTP_1_1_REQUIRED (0xd) */

typedef struct h2_metrics {
    keel_metric *streams;      /* h2_streams_total */
    keel_metric *conns;        /* h2_connections_total */
    keel_metric *open_conns;   /* h2_connections (gauge) */
    keel_metric *open_streams; /* h2_streams (gauge) */
    keel_metric *malformed;    /* h2_malformed_total: requests reset (RFC 9113 8.1.1) */
    keel_metric *tunnels;      /* h2_tunnels_total: extended CONNECTs handed to a protocol */
    keel_metric *open_tunnels; /* h2_tunnels (gauge) */
    keel_metric *flood[H2_FLOOD_COUNT];
    keel_metric *limit[H2_LIMIT_COUNT];
    keel_metric *rst_sent[H2_ERROR_CODES];
    keel_metric *goaway_sent[H2_ERROR_CODES];
    keel_metric *rst_recv[H2_ERROR_CODES];
} h2_metrics;

/* Module-wide, made in load, read-only afterwards. */
typedef struct h2_module {
    h2_config cfg;
    h2_metrics m;
} h2_module;

/* ---- output batches (output.c) ------------------------------------------ */

typedef struct h2_piece h2_piece;
typedef struct h2_load_item h2_load_item;
typedef struct h2_load h2_load;

/* The bytes of the small files one job read (fileload.c), shared by their
 * pieces: freed when the last is. */
typedef struct h2_slab {
    unsigned refs;
    char data[];
} h2_slab;

/* One segment of a batch: copied frame bytes, or borrowed body bytes. */
typedef struct h2_seg {
    const char *base; /* NULL: at copy_off in the batch's own bytes */
    size_t off, len;
} h2_seg;

/* Everything produced within one on_data (or one asynchronous event)
 * leaves in one keel_conn_write: frame headers and control frames are
 * copied into `bytes`, response bodies are borrowed (segs). Pieces whose
 * last byte is in the batch are released when the write completes. */
typedef struct h2_batch h2_batch;
struct h2_batch {
    h2_batch *next; /* free list, or the connection's list of batches in flight */
    h2_batch *prev; /* in flight: the previous one */
    struct h2_conn *c;
    size_t len, cap; /* bytes */
    char *bytes;
    size_t nsegs, segs_cap;
    h2_seg *segs;
    size_t npieces, pieces_cap;
    h2_piece **pieces; /* released (one reference each) when written */
    size_t total;      /* bytes in the batch */
};

/* ---- response body pieces (output.c) ----------------------------------- */

/* A response body piece as the core handed it: borrowed until cb. Freed
 * when the last reference goes: the stream's queue holds one until every
 * byte is in a batch, each batch holding some of its bytes one more. */
struct h2_piece {
    h2_piece *next;      /* the stream's queue, or the worker's free list */
    struct h2_worker *w; /* whose free list takes it back; NULL: free() */
    keel_write_cb cb;
    void *ud;
    keel_conn *conn;
    int status; /* the worst outcome seen */
    unsigned refs;
    size_t nbufs, idx, off; /* where sending is: bufs[idx] + off */
    size_t left;            /* bytes not yet in a batch */
    keel_buf *bufs;         /* inline_bufs or allocated */
    keel_buf inline_bufs[2];
    int fd; /* >= 0: a file piece, bytes [foff, foff + left) of fd */
    uint64_t foff;
    h2_slab *slab;    /* a small file read into memory (fileload.c): its bytes' owner */
    unsigned loading; /* being read by a thread-pool job: nothing to send yet */
};
typedef struct h2_stream h2_stream; /* state.h */
typedef struct h2_conn h2_conn;

/* What the connection's state tells the layers above it (the module fills
 * the table, h2.c): the state calls none of them by name, so that the
 * dependencies between the layers point down. Each is called on the
 * connection's worker thread, from inside input or a pump. */
typedef struct h2_events {
    /* Frames are due (a reset, a WINDOW_UPDATE, a GOAWAY) or output may go
     * on (a write completed): send what is due now, or when the current
     * input or pump returns (h2_pump). */
    void (*output)(h2_conn *c);
    /* A deadline runs (a stream opened, a header block began): the
     * connection's tick must be running. */
    void (*timer)(h2_conn *c);
    /* One field of a stream's header block (the request's head or its
     * trailers), as HPACK decodes it; nonzero to stop decoding. */
    h2_hpack_emit field;
    /* The request's head / trailers' block is complete. */
    void (*headers)(h2_stream *s);
    void (*trailers)(h2_stream *s);
    /* Request body bytes of an open stream, as they arrive; its windows
     * taken (window.c). */
    void (*data)(h2_stream *s, const uint8_t *data, size_t len);
    /* END_STREAM, on a HEADERS or a DATA frame. */
    void (*end)(h2_stream *s);
    /* The stream closed (RFC 9113 5.1; code: the peer's RST_STREAM or
     * ours, NO_ERROR otherwise): off the table, its request body dropped;
     * what the layers above hold of it is theirs to end. */
    void (*closed)(h2_stream *s, uint32_t code);
    /* About to be freed: a held head, a place on the ready list or queued
     * pieces the layers above still hold of s go. */
    void (*release)(h2_stream *s);
    /* The peer's window grew (WINDOW_UPDATE, SETTINGS): s's, or with
     * s NULL every stream's (the connection's, or the initial window). */
    void (*window)(h2_conn *c, h2_stream *s);
} h2_events;

/* ---- per-worker state (the module's worker_state) ----------------------- */

typedef struct h2_worker {
    keel_worker *worker;
    h2_scratch scratch; /* Huffman strings being decoded (hpack.c) */
    keel_module *module;
    const h2_module *mod;
    const h2_config *cfg;
    h2_batch *free_batches;
    unsigned nfree_batches;
    h2_stream *free_streams;
    unsigned nfree_streams;
    h2_piece *free_pieces;
    unsigned nfree_pieces;
    date_cache date; /* the Date field, http1's date.c */
} h2_worker;

/* The worker's free lists (free_batches, free_streams, free_pieces, with
 * their counts, linked through each block's `next`: keel/util.h's
 * KEEL_FREELIST_*): what a connection is done with waits there for the
 * next one to take without a malloc; a list holds at most H2_POOL_MAX (the
 * caller checks, and frees the rest). */
#define H2_POOL_MAX 256

/* ---- per-connection state ----------------------------------------------- */

/* A token bucket: `tokens` events allowed now, refilled at cap/10 per
 * second up to cap (limits.c). */
typedef struct h2_bucket {
    uint32_t tokens;
    uint64_t at_ms;
} h2_bucket;

/* Stream ids recently closed, to tell a frame on a closed stream from one
 * on a stream never opened (RFC 9113 5.1) and to ignore what a peer sent
 * before it saw our RST_STREAM. The top bit marks "ignore". */
#define H2_CLOSED_RING   32
#define H2_CLOSED_IGNORE 0x80000000u

/* The last final response head, kept encoded (headcache.c, the
 * scheduler's: scheduler.h). */
typedef struct h2_headcache {
    uint8_t *mem; /* the key (the fields), then the encoded block */
    size_t cap, key_len, block_len;
    size_t nfields;
    int64_t content_length;
    int64_t date_sec; /* the second the block's Date shows */
    int status;
} h2_headcache;

#define H2_HEADCACHE_MAX 2048 /* bytes of key and block; larger heads are not kept */

struct h2_conn {
    keel_conn *conn;
    h2_worker *w;
    const h2_events *ev; /* the layers above (h2.c fills it) */
    h2_stream *streams;  /* every stream the module holds */
    h2_stream **table;   /* open streams by id, chained (stream.c) */
    uint32_t table_mask;
    h2_stream *hot;  /* the stream last looked up */
    h2_stream *held; /* streams whose final head waits for h2_pump (send.c) */
    h2_stream *held_tail;
    h2_stream *ready; /* streams with DATA that may go (send.c) */
    h2_stream *ready_tail;
    h2_stream *resets;     /* streams to reset at the next h2_pump */
    h2_batch *out;         /* being filled; NULL when nothing is */
    h2_batch *flying;      /* written, not yet completed */
    size_t inflight;       /* bytes written and not yet completed */
    keel_timer *tick;      /* stream timeouts; only while streams exist */
    h2_load_item *pending; /* small files for the next thread-pool job (fileload.c) */
    size_t npending, pending_cap;
    uint64_t pending_bytes;   /* their bytes */
    h2_load *loads;           /* jobs in flight */
    uint32_t nactive;         /* streams with an exchange or a response going */
    uint32_t nstreams;        /* requests started */
    uint32_t nopen;           /* streams open (RFC 9113 5.1.2's count) */
    int32_t last_sid;         /* the highest stream id a HEADERS frame opened */
    int32_t goaway_sid;       /* the last stream id our first GOAWAY named */
    uint64_t body_buffered;   /* request body bytes held for handlers */
    uint64_t conn_unconsumed; /* connection window held back (body_buffer) */
    uint64_t timeout_ms;

    /* Input (input.c). */
    h2_hpack dec;
    uint8_t *block; /* a header block spanning CONTINUATION frames */
    size_t block_len, block_cap;
    int32_t block_sid;
    uint8_t block_flags;   /* the HEADERS frame's END_STREAM */
    uint32_t block_frames; /* CONTINUATION flood accounting (limits.c) */
    uint32_t block_bytes;
    uint64_t block_deadline_ms; /* header_timeout for the block or frame in progress; 0: none */
    h2_stream *data_s;          /* the stream the DATA frame being read goes to */
    int32_t data_sid;
    uint32_t data_left; /* payload bytes of that frame not yet read */
    uint32_t pad_left;  /* then its padding */
    uint8_t data_flags;
    uint32_t closed_ids[H2_CLOSED_RING];
    unsigned closed_at;

    /* Flow control and the peer's settings (RFC 9113 6.5.2, 6.9). */
    int64_t send_window;
    int64_t recv_window;
    uint32_t recv_unacked;
    uint32_t peer_initial_window;
    uint32_t peer_max_frame;

    h2_bucket b_reset, b_ping, b_settings, b_empty, b_priority, b_rst_sent;
    h2_headcache headcache;

    unsigned depth : 8;       /* nesting of input and pump: send only at 0 */
    unsigned want_send : 1;   /* output became possible while depth > 0 */
    unsigned blocked : 1;     /* output stopped at the in-flight limit */
    unsigned closing : 1;     /* keel_conn_close/abort called */
    unsigned goaway : 1;      /* a graceful GOAWAY was sent */
    unsigned goaway_sent : 1; /* any GOAWAY was sent (goaway_sid holds) */
    unsigned goaway_recv : 1; /* the peer sent GOAWAY */
    unsigned failed : 1;      /* a connection error: GOAWAY, then close */
    unsigned calm : 1;        /* ENHANCE_YOUR_CALM: no more input */
    unsigned eof : 1;         /* the peer shut its side */
    unsigned idle_marked : 1;
    unsigned tick_idle : 1;      /* the tick found no stream once */
    unsigned preface : 1;        /* the client's preface came */
    unsigned settings_seen : 1;  /* its first SETTINGS came (RFC 9113 3.4) */
    unsigned settings_acked : 1; /* ours was acknowledged */
    unsigned in_block : 1;       /* a header block waits for CONTINUATION */
    unsigned in_data : 1;        /* a DATA frame is being read */
    unsigned data_to_stream : 1; /* its payload goes to stream data_sid */
    unsigned block_self_dep : 1; /* the block's HEADERS depended on itself */
    unsigned enc_update : 1;     /* the next header block starts with a size update */
    unsigned core_deadline : 1;  /* block_deadline_ms is also the core's (input.c) */
};

/* Bytes in flight (written, not yet confirmed) above which output stops
 * being produced until writes complete: the peer's reading paces us, and
 * a peer that stops reading holds at most this much of our memory plus
 * the core's queue (RFC 9113 10.5: limit the resources a peer commits). */
#define H2_INFLIGHT_MAX (1024 * 1024)
/* Body chunks up to this size are copied into the batch (queue.c). */
#define H2_COPY_MAX 64
/* A batch is written once it holds this much, even within one on_data. */
#define H2_BATCH_MAX (64 * 1024)

/* ---- writer.c: frames and connection errors ----------------------------- */

void h2_count(h2_conn *c, keel_metric *m);

/* A connection error (RFC 9113 5.4.1): GOAWAY (code), no more input, and
 * the connection closes once the GOAWAY is written (the pump, through
 * ev->output). */
void h2_fail(h2_conn *c, uint32_t code);

/* Our SETTINGS and the connection window beyond 65,535 (RFC 9113 3.4). */
void h2_send_preface(h2_conn *c);
/* The acknowledgements of the peer's SETTINGS (6.5.3) and PING (6.7). */
void h2_send_settings_ack(h2_conn *c);
void h2_send_ping_ack(h2_conn *c, const uint8_t opaque[8]);
/* RST_STREAM (counted; see limits.c). */
void h2_send_rst(h2_conn *c, uint32_t sid, uint32_t code);
/* GOAWAY: the last stream id never goes up (RFC 9113 6.8). */
void h2_send_goaway(h2_conn *c, uint32_t code);
void h2_send_window_update(h2_conn *c, uint32_t sid, uint32_t inc);
/* HEADERS (and CONTINUATION past the peer's frame size) with the block. */
void h2_send_headers(h2_conn *c, uint32_t sid, const uint8_t *block, size_t len, int end_stream);

/* ---- output.c ----------------------------------------------------------- */

/* Appends copied bytes / borrowed bytes to the current batch. */
int h2_out_copy(h2_conn *c, const void *data, size_t len);
/* Room for len bytes (len > 0) at the end of the current batch, to be
 * written in place (a frame the codec encodes); NULL if out of memory. */
uint8_t *h2_out_room(h2_conn *c, size_t len);
int h2_out_borrow(h2_conn *c, const void *data, size_t len);
/* The batch will release a reference to p when written. */
int h2_out_hold(h2_conn *c, h2_piece *p);
/* Bytes in the current batch. */
size_t h2_out_pending(h2_conn *c);
/* Writes the current batch (one keel_conn_write). */
int h2_out_flush(h2_conn *c);
void h2_out_discard(h2_conn *c);
/* Writes what is batched, then a DATA frame whose payload is len bytes of
 * a file piece (hd: its 9-byte header), with sendfile where the connection
 * allows it; p is released (one reference) once it has left. */
int h2_out_file(h2_conn *c, const uint8_t *hd, size_t hdlen, h2_piece *p, size_t len);
/* The connection's state goes: batches still in flight forget it. */
void h2_out_orphan(h2_conn *c);
void h2_batch_pool_free(h2_worker *w);
/* Releases one reference to a response body piece (its callback runs with
 * the last). */
void h2_piece_unref(h2_piece *p, int status);
/* A piece from the worker's free list (a malloc per response body was
 * ~250 instructions with its free, callgrind); h2_piece_unref returns it.
 * It comes empty (no bytes, no file: fd -1, bufs the inline ones), for c,
 * with cb(ud) to run when its last reference goes; NULL: out of memory.
 * Inline, so that each caller's compiler merges the clearing with the
 * stores to the piece that follow it (a response's hot path). */
static inline h2_piece *h2_piece_new(h2_conn *c, keel_write_cb cb, void *ud)
{
    h2_worker *w = c->w;
    h2_piece *p;
    KEEL_FREELIST_TAKE(p, w->free_pieces, w->nfree_pieces, next);
    if (p == NULL && (p = malloc(sizeof *p)) == NULL)
        return NULL;
    *p = (h2_piece){.cb = cb, .ud = ud, .conn = c->conn, .w = w, .status = KEEL_OK, .fd = -1};
    p->bufs = p->inline_bufs;
    return p;
}
/* Frees the worker's list (stop). */
void h2_piece_pool_free(h2_worker *w);
/* Frees the worker's list of streams (stop; stream.c). */
void h2_stream_pool_free(h2_worker *w);
/* One reference to a slab less (its last frees it). */
void h2_slab_unref(h2_slab *slab);

/* ---- limits.c ----------------------------------------------------------- */

void h2_limits_init(h2_conn *c);
/* Takes one event from the bucket; 0 if the limit is passed (the caller
 * then calls h2_calm). */
int h2_bucket_take(h2_conn *c, h2_bucket *b, uint32_t cap);
/* GOAWAY ENHANCE_YOUR_CALM, counted by kind; input is ignored from now. */
void h2_calm(h2_conn *c, enum h2_flood kind);
/* A frame's header arrived: CONTINUATION, empty-frame, PING, SETTINGS and
 * PRIORITY accounting. 0 to go on, -1 if the connection was calmed. */
int h2_limits_frame(h2_conn *c, uint8_t type, uint8_t flags, uint32_t length);
/* The peer reset a stream (RST_STREAM code); wasted: one we were still
 * answering (rapid reset accounting, CVE-2023-44487), as above. */
int h2_limits_reset(h2_conn *c, uint32_t code, int wasted);
/* We sent an RST_STREAM (a peer that provokes them). */
int h2_limits_rst_sent(h2_conn *c);
void h2_metrics_register(keel_module *m, h2_metrics *mx);
void h2_count_code(h2_conn *c, keel_metric *const *family, uint32_t code);

#endif
