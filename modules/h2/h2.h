/* h2.h — the h2 module's internal types, shared by its source files.
 *
 * libnghttp2 does the framing, HPACK and the flow-control arithmetic of
 * HTTP/2 (RFC 9113, RFC 7541); everything above it is keel's: each stream
 * is an exchange of the core's HTTP layer (stream.c), output leaves in
 * batches through the connection (output.c), and the floods of the
 * published HTTP/2 attacks are counted and answered (limits.c).
 *
 * Everything here runs on one connection's worker thread; the only state
 * shared between workers is read-only (h2_config, the nghttp2 callbacks and
 * options made once in load).
 */
#ifndef KEEL_H2_H2_H
#define KEEL_H2_H2_H

#include <keel/keel.h>

#include <nghttp2/nghttp2.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- configuration ([h2], read once in load) ---------------------------- */

typedef struct h2_config {
    /* Advertised in our SETTINGS (RFC 9113 6.5.2) and enforced. */
    uint32_t max_concurrent_streams; /* more → RST_STREAM REFUSED_STREAM (5.1.2) */
    uint32_t initial_window;         /* per stream; what a slow handler lets a client buffer */
    uint32_t conn_window;            /* the connection's receive window (6.9.2) */
    uint32_t max_frame_size;         /* larger frames → FRAME_SIZE_ERROR (4.2) */
    uint32_t header_table_size;      /* HPACK dynamic table (RFC 7541 4.2) */
    uint32_t max_header_list;        /* decoded fields (6.5.2) → 431; far beyond → calm */
    uint64_t max_body;               /* request body → 413 */
    uint64_t idle_timeout_ms;        /* no stream open → GOAWAY NO_ERROR and close */
    uint64_t stream_timeout_ms;      /* a stream waiting on its peer without progress */
    uint64_t max_requests;           /* streams per connection, then GOAWAY; 0: no limit */
    uint64_t body_buffer;            /* unread request bodies per connection */
    /* Flood limits (limits.c): events per 10 s, as token buckets. */
    uint32_t max_resets;        /* streams the client reset before their end (CVE-2023-44487) */
    uint32_t max_pings;         /* PING frames (CVE-2019-9512) */
    uint32_t max_settings;      /* SETTINGS frames (CVE-2019-9515) */
    uint32_t max_empty_frames;  /* empty DATA/HEADERS/CONTINUATION (CVE-2019-9518) */
    uint32_t max_priority;      /* PRIORITY frames and priority changes (CVE-2019-9513) */
    uint32_t max_continuations; /* CONTINUATION frames per header block (CVE-2024-27316) */
    uint32_t max_header_block;  /* wire bytes of one header block, all its frames */
    char server[208];           /* value of the server field, "" for none */
    size_t server_len;
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
    H2_FLOOD_OUTBOUND, /* nghttp2's own: too many queued ACKs (peer not reading) */
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
    H2_LIMIT_COUNT
};

#define H2_ERROR_CODES 14 /* RFC 9113 7: NO_ERROR (0x0) .. HTTP_1_1_REQUIRED (0xd) */

typedef struct h2_metrics {
    keel_metric *streams;      /* h2_streams_total */
    keel_metric *conns;        /* h2_connections_total */
    keel_metric *open_conns;   /* h2_connections (gauge) */
    keel_metric *open_streams; /* h2_streams (gauge) */
    keel_metric *flood[H2_FLOOD_COUNT];
    keel_metric *limit[H2_LIMIT_COUNT];
    keel_metric *rst_sent[H2_ERROR_CODES];
    keel_metric *goaway_sent[H2_ERROR_CODES];
    keel_metric *rst_recv[H2_ERROR_CODES];
} h2_metrics;

/* Module-wide, made in load, read-only afterwards. */
typedef struct h2_module {
    h2_config cfg;
    nghttp2_session_callbacks *callbacks;
    nghttp2_option *option;
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

/* ---- streams (stream.c) ------------------------------------------------- */

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

#define H2_INLINE_FIELDS 16
#define H2_HEAD_INLINE   768 /* bytes: a static file's head is ~600 */

typedef struct h2_stream h2_stream;
struct h2_stream {
    h2_stream *prev, *next; /* the connection's list of streams */
    struct h2_conn *c;
    int32_t id;
    keel_request *req;

    /* The request head: views into nghttp2's reference-counted buffers
     * (rcbufs), held until the stream is freed: no copy of any field. */
    keel_http_head head;
    keel_header *fields;
    nghttp2_rcbuf **refs; /* two per field */
    size_t nfields, cap;
    keel_header inline_fields[H2_INLINE_FIELDS];
    nghttp2_rcbuf *inline_refs[2 * H2_INLINE_FIELDS];
    /* The final response head: nv array, then names and values. */
    _Alignas(8) char head_inline[H2_HEAD_INLINE];
    keel_str method, path, authority, scheme;
    nghttp2_rcbuf *pseudo_refs[4];
    size_t npseudo;
    size_t head_nfields; /* the fields the core sees (cookies joined, host added) */
    char *cookie;        /* the cookie fields joined (RFC 9113 8.2.3), or NULL */
    uint64_t conn_held;  /* buffered bytes whose connection window is held back */
    char status[4];
    uint64_t list_size; /* RFC 9113 6.5.2: name + value + 32 per field */

    /* The request body, held until the handler asks for it. */
    char *body;
    size_t body_len, body_cap;
    uint64_t body_seen;
    int64_t content_length; /* declared, or -1 */
    /* The request's trailer fields (RFC 9113 8.1): views into nghttp2's
     * rcbufs, held as the head's are, handed to the core before the body's
     * end (ABI 1.5). */
    keel_header *tr_fields;
    nghttp2_rcbuf **tr_refs; /* two per field */
    size_t ntr, tr_cap;

    /* The response body waiting for the peer's windows. */
    h2_piece *queue, *queue_tail;
    uint64_t queued;       /* bytes not yet in a batch */
    uint32_t nfiles;       /* file pieces in the queue */
    int64_t resp_left;     /* declared length still owed, or -1 */
    keel_header *trailers; /* copied, for nghttp2_submit_trailer */
    nghttp2_nv *trailer_nv;
    size_t ntrailers;
    char *trailer_mem;
    char *head_heap;     /* a response head larger than head_inline */
    nghttp2_nv *head_nv; /* the final head, held until its body can follow */
    size_t head_n;
    h2_stream *held_next; /* the connection's list of held heads */

    uint64_t progress_ms; /* last time the stream moved (stream_timeout) */

    unsigned exchange : 1;    /* the core holds req (until done or abort) */
    unsigned dispatching : 1; /* inside keel_http_request_dispatch */
    unsigned want_body : 1;
    unsigned remote_ended : 1; /* END_STREAM received */
    unsigned body_ended : 1;   /* the end was handed to the core */
    unsigned head_sent : 1;
    unsigned final_sent : 1; /* a final (non-1xx) head was submitted */
    unsigned resp_ended : 1; /* the last body piece came */
    unsigned no_body : 1;    /* HEAD, 204, 304: the body is dropped */
    unsigned deferred : 1;   /* nghttp2 waits for data (NGHTTP2_ERR_DEFERRED) */
    unsigned has_data : 1;   /* a data provider was submitted */
    unsigned closed : 1;     /* nghttp2 closed the stream */
    unsigned too_large : 1;  /* the header list passed max_header_list */
    unsigned bad : 1;        /* answered by the module itself */
    unsigned counted : 1;    /* in c->nactive */
    unsigned held : 1;       /* final head not yet submitted (c->held) */
    unsigned busy : 4;       /* inside a call that may end the exchange: do not free */
};

/* ---- per-worker state (the module's worker_state) ----------------------- */

#define H2_MEM_CLASSES 16  /* 64-byte steps up to 1 KiB (mem.c) */
#define H2_MEM_KEEP    512 /* free blocks kept per class and worker */
struct h2_mem_block;

typedef struct h2_worker {
    keel_worker *worker;
    nghttp2_mem mem; /* what nghttp2 allocates with (mem.c) */
    struct h2_mem_block *mem_free[H2_MEM_CLASSES];
    uint32_t mem_nfree[H2_MEM_CLASSES];
    keel_module *module;
    const h2_module *mod;
    const h2_config *cfg;
    h2_batch *free_batches;
    unsigned nfree_batches;
    h2_stream *free_streams;
    unsigned nfree_streams;
    h2_piece *free_pieces;
    unsigned nfree_pieces;
    uint64_t date_checked_ms;
    int64_t date_sec;
    char date[40]; /* "Sun, 06 Nov 1994 08:49:37 GMT" */
    size_t date_len;
} h2_worker;

#define H2_POOL_MAX 256

/* ---- per-connection state ----------------------------------------------- */

/* A token bucket: `tokens` events allowed now, refilled at cap/10 per
 * second up to cap (limits.c). */
typedef struct h2_bucket {
    uint32_t tokens;
    uint64_t at_ms;
} h2_bucket;

/* A block of whole pages nghttp2 allocated for one connection (mem.c):
 * its pages can go back to the kernel while the connection is idle. */
typedef struct h2_mem_page {
    void *p;
    size_t len;
    unsigned framebuf; /* nghttp2's frame buffer: dead while nothing is sent */
} h2_mem_page;

#define H2_MEM_PAGES 4 /* more go to malloc with a header, never trimmed */

typedef struct h2_conn {
    keel_conn *conn;
    h2_worker *w;
    nghttp2_session *ng;
    h2_stream *streams; /* every stream the module holds */
    h2_stream *hot;     /* the stream a callback last looked up (session.c) */
    h2_stream *held;    /* streams whose final head waits for h2_pump (stream.c) */
    h2_stream *held_tail;
    h2_batch *out;         /* being filled; NULL when nothing is */
    h2_batch *flying;      /* written, not yet completed */
    size_t inflight;       /* bytes written and not yet completed */
    keel_timer *tick;      /* stream timeouts; only while streams exist */
    h2_load_item *pending; /* small files for the next thread-pool job (fileload.c) */
    size_t npending, pending_cap;
    h2_load *loads;           /* jobs in flight */
    uint32_t nactive;         /* streams with an exchange or a response going */
    uint32_t nstreams;        /* requests started */
    uint32_t nopen;           /* streams open in nghttp2 (h2_stream objects not closed) */
    int32_t last_sid;         /* the highest stream id a HEADERS frame opened */
    uint64_t body_buffered;   /* request body bytes held for handlers */
    uint64_t conn_unconsumed; /* connection window held back (body_buffer) */
    uint64_t timeout_ms;

    /* Header block accounting (CONTINUATION flood). */
    uint32_t block_frames;
    uint32_t block_bytes;

    h2_bucket b_reset, b_ping, b_settings, b_empty, b_priority, b_rst_sent;

    h2_mem_page pages[H2_MEM_PAGES]; /* nghttp2's large blocks (mem.c) */
    unsigned npages;

    unsigned depth : 8;     /* nesting of nghttp2 calls: send only at 0 */
    unsigned want_send : 1; /* output became possible while depth > 0 */
    unsigned blocked : 1;   /* output stopped at the in-flight limit */
    unsigned closing : 1;   /* keel_conn_close/abort called */
    unsigned goaway : 1;    /* a graceful GOAWAY was submitted */
    unsigned calm : 1;      /* ENHANCE_YOUR_CALM: no more input */
    unsigned eof : 1;       /* the peer shut its side */
    unsigned idle_marked : 1;
    unsigned tick_idle : 1; /* the tick found no stream once */
    unsigned opening : 1;   /* inside nghttp2_session_server_new3 (mem.c) */
} h2_conn;

/* Bytes in flight (written, not yet confirmed) above which output stops
 * being produced until writes complete: the peer's reading paces us, and
 * a peer that stops reading holds at most this much of our memory plus
 * the core's queue (RFC 9113 10.5: limit the resources a peer commits). */
#define H2_INFLIGHT_MAX (1024 * 1024)
/* Body chunks up to this size are copied into the batch (stream.c). */
#define H2_COPY_MAX 64
/* A batch is written once it holds this much, even within one on_data. */
#define H2_BATCH_MAX (64 * 1024)

/* ---- h2.c --------------------------------------------------------------- */

extern const keel_protocol h2_protocol;

/* Produces output (nghttp2_session_send) and writes the batch, unless
 * inside an nghttp2 call (then it happens when that returns); then closes
 * the connection if the session is finished. */
void h2_pump(h2_conn *c);

/* Ends the connection now: GOAWAY (code) if not yet sent, flushed, then
 * an orderly close. */
void h2_fail(h2_conn *c, uint32_t code);

/* Graceful end (RFC 9113 6.8): GOAWAY NO_ERROR naming the last stream
 * taken; streams in flight finish, then the connection closes. */
void h2_goaway(h2_conn *c);

/* Starts the per-connection tick that checks stream timeouts. */
void h2_tick_start(h2_conn *c);

const char *h2_date(h2_worker *w, size_t *len);

void h2_count(h2_conn *c, keel_metric *m);

/* ---- session.c ---------------------------------------------------------- */

/* The callbacks table for every session (load). */
int h2_callbacks_new(nghttp2_session_callbacks **out);
/* Has nghttp2 show us frames of unknown types (to count them). */
void h2_option_extensions(nghttp2_option *option);

/* ---- stream.c ----------------------------------------------------------- */

extern const keel_http_sink h2_sink;

h2_stream *h2_stream_new(h2_conn *c, int32_t id);
/* Frees the stream once nghttp2 closed it and the core let go of it. */
void h2_stream_maybe_free(h2_stream *s);
/* stream.c: drops a request body held for the handler; puts the status
 * of a response head into the stream's fields. sink.c: lets a held
 * response head go (or forgets it). */
void h2_stream_drop_body(h2_stream *s);
void h2_stream_put_status(h2_stream *s, int status);
void h2_stream_unhold(h2_stream *s);

/* s equals the literal lit (case-sensitive: HTTP/2 field names are lower
 * case, methods are case-sensitive). */
static inline int h2_str_is(keel_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}
/* One decoded request field; 0 or an nghttp2 error code for the callback. */
int h2_stream_field(h2_stream *s, nghttp2_rcbuf *name, nghttp2_rcbuf *value);
/* One trailer field of the request (on_header); 0 or an nghttp2 error. */
int h2_stream_trailer(h2_stream *s, nghttp2_rcbuf *name, nghttp2_rcbuf *value);
/* The request head is complete: check it and start the exchange. */
void h2_stream_headers_done(h2_stream *s);
/* Request body bytes arrived; the end of the request body. */
void h2_stream_data(h2_stream *s, const uint8_t *data, size_t len);
void h2_stream_remote_end(h2_stream *s);
/* nghttp2 closed the stream (error_code from the peer or ours). */
void h2_stream_on_close(h2_stream *s, uint32_t error_code);
/* Hands the core what is buffered if it asked for it. */
void h2_stream_pump_body(h2_stream *s);
/* Releases the body bytes the core took: the stream's window, and the
 * connection's if it was held back. */
void h2_stream_consumed(h2_stream *s, size_t n);
/* Resets a stream (RST_STREAM code) and ends its exchange. */
void h2_stream_reset(h2_stream *s, uint32_t code);
/* Submits the final heads held since the last h2_pump, except those of
 * streams whose body is a small file still being read (h2_pump). */
void h2_stream_submit_held(h2_conn *c);
/* Answers a request the module refuses itself (431, 413, 400, 501). */
void h2_stream_answer(h2_stream *s, int status);

/* nghttp2 data provider: how much may go now (NO_COPY). */
ssize_t h2_stream_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                       uint32_t *flags, nghttp2_data_source *src, void *ud);
/* The same from the file piece at the head of the queue (never more than
 * it holds): header and file range leave as one write of their own. */
int h2_stream_take_file(h2_stream *s, const uint8_t *framehd, size_t length);
/* Moves `length` body bytes of s into the batch (send_data_callback). */
int h2_stream_take(h2_stream *s, size_t length);
void h2_piece_unref(h2_piece *p, int status);
/* A piece from the worker's free list (a malloc per response body was
 * ~250 instructions with its free, callgrind); h2_piece_unref returns it. */
h2_piece *h2_piece_new(h2_conn *c);
/* Frees the worker's list (stop). */
void h2_piece_pool_free(h2_worker *w);

/* ---- output.c ----------------------------------------------------------- */

/* Appends copied bytes / borrowed bytes to the current batch. */
int h2_out_copy(h2_conn *c, const void *data, size_t len);
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

/* ---- mem.c -------------------------------------------------------------- */

void h2_mem_init(h2_worker *w);
/* The allocator for c's session: the worker's, with c as its user data. */
nghttp2_mem h2_mem_for(h2_conn *c);
/* Idle: gives the pages of nghttp2's large blocks back where their
 * contents are dead (the frame buffer with nothing to send) or all zero. */
void h2_mem_trim(h2_conn *c);
void h2_mem_release(h2_worker *w);

/* ---- fileload.c --------------------------------------------------------- */

/* Files up to this size are read on the thread pool, many per job, instead
 * of going out frame by frame with sendfile. */
#define H2_LOAD_MAX (64 * 1024)

int h2_load_supported(void);
/* Queues the file piece p of s for the next job. */
int h2_load_add(h2_conn *c, h2_stream *s, h2_piece *p);
/* Starts one job for everything queued (from h2_pump). */
void h2_load_submit(h2_conn *c);
/* The connection goes: jobs in flight forget it. */
void h2_load_orphan(h2_conn *c);
void h2_slab_unref(h2_slab *slab);

/* ---- limits.c ----------------------------------------------------------- */

void h2_limits_init(h2_conn *c);
/* Takes one event from the bucket; 0 if the limit is passed (the caller
 * then calls h2_calm). */
int h2_bucket_take(h2_conn *c, h2_bucket *b, uint32_t cap);
/* GOAWAY ENHANCE_YOUR_CALM, counted by kind; input is ignored from now. */
void h2_calm(h2_conn *c, enum h2_flood kind);
/* Frame header seen: CONTINUATION and empty-frame accounting. 0 to go on,
 * else an nghttp2 error to return from the callback. */
int h2_limits_frame(h2_conn *c, const nghttp2_frame_hd *hd);
/* A whole frame arrived: PING, SETTINGS, PRIORITY, RST_STREAM floods. */
int h2_limits_frame_recv(h2_conn *c, const nghttp2_frame *frame, h2_stream *s);
/* We sent an RST_STREAM (a peer that provokes them). */
int h2_limits_rst_sent(h2_conn *c);
void h2_metrics_register(keel_module *m, h2_metrics *mx);
void h2_count_code(h2_conn *c, keel_metric *const *family, uint32_t code);

#endif
