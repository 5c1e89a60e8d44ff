/* h2.h — the h2 module's internal types, shared by its source files.
 *
 * Everything above the codec (frame.h, hpack.h: no keel in them): the
 * connection's state (input.c parses frames where they lie in the read
 * buffer, stream.c, window.c for the receive windows, limits.c for the
 * floods of the published HTTP/2 attacks), the scheduler and output
 * (send.c, queue.c, output.c, fileload.c, headcache.c: frames written
 * straight into the batch that leaves as one write), and the module
 * (h2.c, request.c, sink.c: each stream an exchange of the core's HTTP
 * layer). README.md has the table.
 *
 * Everything here runs on one connection's worker thread; the only state
 * shared between workers is read-only (h2_config, made once in load).
 */
#ifndef KEEL_H2_H2_H
#define KEEL_H2_H2_H

#include <keel/keel.h>

#include "frame.h"
#include "hpack.h"

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
    uint64_t header_timeout_ms;      /* a header block (or a frame) whole, from its first byte */
    uint64_t body_min_rate;          /* bytes/s a request body must average after its grace */
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
    int enable_connect_protocol; /* SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 (RFC 8441 3) */
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
#define H2_HEAD_INLINE   320 /* bytes: a static file's head, encoded, is ~170 */

typedef struct h2_stream h2_stream;
struct h2_stream {
    h2_stream *prev, *next; /* the connection's list of streams */
    h2_stream *hnext;       /* the connection's table by id (stream.c) */
    h2_stream *ready_next;  /* the connection's list of streams with DATA to go */
    h2_stream *reset_next;  /* the connection's list of resets to send */
    struct h2_conn *c;
    int32_t id;
    keel_request *req;

    /* The request head. While its block is decoded, names and values are
     * copied into hmem and the views hold offsets into it; once the block
     * is complete they become pointers (request.c). */
    keel_http_head head;
    keel_header *fields;
    uint16_t *tokens; /* each field's token (keel_header_token), after fields when grown */
    size_t nfields, cap;
    keel_header inline_fields[H2_INLINE_FIELDS];
    uint16_t inline_tokens[H2_INLINE_FIELDS];
    char *hmem;
    size_t hlen, hcap;
    keel_str method, path, authority, scheme;
    keel_str protocol;        /* RFC 8441 4: :protocol of an extended CONNECT */
    struct h2_tunnel *tunnel; /* the stream runs a protocol (tunnel.c) */
    uint32_t host_at;         /* the host field's index + 1 in fields, 0: none (request.c) */
    /* The final response head, HPACK-encoded, until it is sent. */
    _Alignas(8) uint8_t head_inline[H2_HEAD_INLINE];
    uint8_t *head_block; /* head_inline or head_heap */
    size_t head_len;
    size_t head_nfields; /* the fields the core sees (cookies joined, host added) */
    char *cookie;        /* the cookie fields joined (RFC 9113 8.2.3), or NULL */
    uint64_t conn_held;  /* buffered bytes whose connection window is held back */
    uint64_t list_size;  /* RFC 9113 6.5.2: name + value + 32 per field */
    uint8_t seen_pseudo; /* which of the four request pseudo-fields came */

    /* Flow control (RFC 9113 6.9): what we may send, what the peer may. */
    int64_t send_window;
    int64_t recv_window;
    uint32_t recv_unacked; /* body bytes consumed and not yet given back */

    /* The request body, held until the handler asks for it. */
    char *body;
    size_t body_len, body_cap;
    uint64_t body_seen;
    int64_t content_length; /* declared, or -1 */
    /* The request's trailer fields (RFC 9113 8.1), in tmem as the head is
     * in hmem, handed to the core before the body's end (ABI 1.5). */
    keel_header *tr_fields;
    size_t ntr, tr_cap;
    char *tmem;
    size_t tlen, tcap;

    /* The response body waiting for the peer's windows. */
    h2_piece *queue, *queue_tail;
    uint64_t queued;        /* bytes not yet in a batch */
    uint32_t nfiles;        /* file pieces in the queue */
    int64_t resp_left;      /* declared length still owed, or -1 */
    uint8_t *trailer_block; /* the response trailers, encoded */
    size_t trailer_len;
    uint8_t *head_heap;   /* a response head larger than head_inline */
    h2_stream *held_next; /* the connection's list of held heads */
    uint32_t rst_code;    /* with reset_pending or rst_after */

    uint64_t progress_ms;   /* last time the stream moved (stream_timeout) */
    uint64_t body_start_ms; /* the handler asked for the body (body_min_rate); 0: not yet */
    uint64_t paused_ms;     /* the handler paused its body (keel_request_body_pause) at */

    unsigned exchange : 1;    /* the core holds req (until done or abort) */
    unsigned dispatching : 1; /* inside keel_http_request_dispatch */
    unsigned want_body : 1;
    unsigned remote_ended : 1; /* END_STREAM received */
    unsigned body_ended : 1;   /* the end was handed to the core */
    unsigned head_sent : 1;
    unsigned final_sent : 1;    /* a final (non-1xx) head was given */
    unsigned resp_ended : 1;    /* the last body piece came */
    unsigned no_body : 1;       /* HEAD, 204, 304: the body is dropped */
    unsigned has_data : 1;      /* the final head is followed by DATA */
    unsigned closed : 1;        /* the stream is closed (RFC 9113 5.1) */
    unsigned too_large : 1;     /* the header list passed max_header_list */
    unsigned malformed : 1;     /* RFC 9113 8.1.1: reset with PROTOCOL_ERROR */
    unsigned in_trailers : 1;   /* the block being decoded is the trailers */
    unsigned regular_seen : 1;  /* a regular field came (pseudo-fields go first) */
    unsigned bad : 1;           /* answered by the module itself */
    unsigned counted : 1;       /* in c->nactive */
    unsigned held : 1;          /* final head not yet sent (c->held) */
    unsigned ready : 1;         /* on c->ready */
    unsigned reset_pending : 1; /* on c->resets */
    unsigned rst_after : 1;     /* RST_STREAM rst_code once the response has gone */
    unsigned local_ended : 1;   /* our END_STREAM went; the request's end is awaited */
    unsigned early : 1;         /* opened before our SETTINGS were acknowledged */
    unsigned body_paused : 1;   /* the handler paused its body: DATA is held, its window too */
    unsigned ext_connect : 1;   /* RFC 8441 extended CONNECT: DATA is a tunnel's, not a body */
    unsigned busy : 4;          /* inside a call that may end the exchange: do not free */
};

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

/* Stream ids recently closed, to tell a frame on a closed stream from one
 * on a stream never opened (RFC 9113 5.1) and to ignore what a peer sent
 * before it saw our RST_STREAM. The top bit marks "ignore". */
#define H2_CLOSED_RING   32
#define H2_CLOSED_IGNORE 0x80000000u

/* The last final response head, kept encoded (headcache.c). */
typedef struct h2_headcache {
    uint8_t *mem; /* the key (date and fields), then the encoded block */
    size_t cap, key_len, block_len;
    size_t nfields;
    int64_t content_length;
    int status;
} h2_headcache;

#define H2_HEADCACHE_MAX 2048 /* bytes of key and block; larger heads are not kept */

typedef struct h2_conn {
    keel_conn *conn;
    h2_worker *w;
    h2_stream *streams; /* every stream the module holds */
    h2_stream **table;  /* open streams by id, chained (stream.c) */
    uint32_t table_mask;
    h2_stream *hot;  /* the stream last looked up */
    h2_stream *held; /* streams whose final head waits for h2_pump (sink.c) */
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

/* Sends what is due (resets, held heads, DATA as the windows allow) and
 * writes the batch, unless inside input or another pump (then it happens
 * when that returns); then closes the connection if it is finished. */
void h2_pump(h2_conn *c);

/* A connection error (RFC 9113 5.4.1): GOAWAY (code), no more input, and
 * the connection closes once the GOAWAY is written. */
void h2_fail(h2_conn *c, uint32_t code);

/* Graceful end (RFC 9113 6.8): GOAWAY NO_ERROR naming the last stream
 * taken; streams in flight finish, then the connection closes. */
void h2_goaway(h2_conn *c);

/* Starts the per-connection tick that checks stream timeouts. */
void h2_tick_start(h2_conn *c);

const char *h2_date(h2_worker *w, size_t *len);

void h2_count(h2_conn *c, keel_metric *m);

/* ---- input.c ------------------------------------------------------------ */

/* Parses the frames in data; *consumed is what was used (a partial frame
 * stays in the connection's buffer, except a DATA payload, read as it
 * comes). */
void h2_input(h2_conn *c, const uint8_t *data, size_t len, size_t *consumed);

/* ---- send.c ------------------------------------------------------------- */

/* Our SETTINGS and the connection window beyond 65,535 (RFC 9113 3.4). */
void h2_send_preface(h2_conn *c);
/* The acknowledgements of the peer's SETTINGS (6.5.3) and PING (6.7). */
void h2_send_settings_ack(h2_conn *c);
void h2_send_ping_ack(h2_conn *c, const uint8_t opaque[8]);
/* RST_STREAM for an id with no stream object (counted; see limits.c). */
void h2_send_rst(h2_conn *c, uint32_t sid, uint32_t code);
/* GOAWAY: the last stream id never goes up (RFC 9113 6.8). */
void h2_send_goaway(h2_conn *c, uint32_t code);
void h2_send_window_update(h2_conn *c, uint32_t sid, uint32_t inc);
/* HEADERS (and CONTINUATION past the peer's frame size) with the block. */
void h2_send_headers(h2_conn *c, uint32_t sid, const uint8_t *block, size_t len, int end_stream);
/* Puts s on the list of streams whose DATA may go (if it has some). */
void h2_ready(h2_stream *s);
/* DATA frames from the ready streams while windows and output allow. */
void h2_send_data(h2_conn *c);

/* ---- stream.c ----------------------------------------------------------- */

extern const keel_http_sink h2_sink;

h2_stream *h2_stream_new(h2_conn *c, int32_t id);
/* The open stream of id, or NULL (closed ones are not found). */
h2_stream *h2_stream_find(h2_conn *c, int32_t id);
/* Whether id was closed recently and later frames on it are ignored
 * (1), closed and not ignored (0), or not known (-1). */
int h2_closed_lookup(h2_conn *c, int32_t id);
/* The stream closes (RFC 9113 5.1): off the table, its exchange ended
 * unless complete, freed once the core let go of it. ignore: frames the
 * peer still sends on it are dropped (we reset it, or ended first). */
void h2_stream_close(h2_stream *s, uint32_t error_code, int ignore);
/* Frees the stream once it is closed and the core let go of it. */
void h2_stream_maybe_free(h2_stream *s);
/* Our END_STREAM was written: the stream closes (with RST_STREAM
 * NO_ERROR if the request was still coming, RFC 9113 8.1). */
void h2_stream_local_end(h2_stream *s);
/* stream.c: drops a request body held for the handler. sink.c: lets a
 * held response head go (or forgets it). */
void h2_stream_drop_body(h2_stream *s);
void h2_stream_unhold(h2_stream *s);

/* s equals the literal lit (case-sensitive: HTTP/2 field names are lower
 * case, methods are case-sensitive). */
static inline int h2_str_is(keel_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}
/* One decoded field of the stream's head or trailers (hpack emit); 0, or
 * nonzero to stop decoding (a flood: the connection ends). */
int h2_stream_field(void *stream, const char *name, size_t nlen, unsigned name_index,
                    const char *value, size_t vlen);
/* The request head is complete: check it and start the exchange. */
void h2_stream_headers_done(h2_stream *s);
/* The trailers' block is complete (END_STREAM with it). */
void h2_stream_trailers_done(h2_stream *s);
/* Request body bytes arrived; the end of the request body. */
void h2_stream_data(h2_stream *s, const uint8_t *data, size_t len);
/* Keeps DATA for a reader to come (the handler, a tunnel's protocol), the
 * stream's window with it (window.c); out of memory, 500. */
void h2_stream_hold_data(h2_stream *s, const uint8_t *data, size_t len);
void h2_stream_remote_end(h2_stream *s);
/* The stream closed (error_code from the peer or ours). */
void h2_stream_on_close(h2_stream *s, uint32_t error_code);
/* Hands the core what is buffered if it asked for it (and has not
 * paused it). */
void h2_stream_pump_body(h2_stream *s);
/* Resets a stream (RST_STREAM code, sent at the next h2_pump) and ends
 * its exchange. */
void h2_stream_reset(h2_stream *s, uint32_t code);
/* A stream error the client's request caused (RFC 9113 5.4.2): as
 * h2_stream_reset, but a response already complete goes out first, the
 * reset after it (8.1). */
void h2_stream_error(h2_stream *s, uint32_t code);
/* The request is malformed (8.1.1): counted, stream error PROTOCOL_ERROR. */
void h2_stream_malformed(h2_stream *s);
/* Request body bytes nobody will read (the exchange ended, or the module
 * answered): their windows go back, and they still count toward the
 * declared content-length (8.1.1). */
void h2_stream_data_unread(h2_stream *s, size_t len);
/* Sends the resets asked for (h2_pump). */
void h2_stream_send_resets(h2_conn *c);
/* Sends the final heads held since the last h2_pump, except those of
 * streams whose body is a small file still being read (h2_pump). */
void h2_stream_submit_held(h2_conn *c);
/* Queues the encoded final head (block in the stream) to go at the next
 * h2_pump, in the order heads came. */
void h2_stream_hold(h2_stream *s);
/* The encoded head of status with date, server and the given fields
 * (RFC 9113 8.2.2: connection-specific ones left out), into the stream's
 * head memory, or into out (cap bytes) for a 1xx; NULL if out of memory
 * or a field is not allowed. */
uint8_t *h2_encode_head(h2_stream *s, int status, const keel_header *h, size_t n,
                        int64_t content_length, uint8_t *out, size_t cap, size_t *len);
/* Answers a request the module refuses itself (431, 413, 400, 501, 500, 408; sink.c). */
void h2_stream_answer(h2_stream *s, int status);

/* ---- tunnel.c: a stream as a connection (RFC 8441) ----------------------- */

typedef struct h2_tunnel h2_tunnel;
/* The sink's upgrade: an extended CONNECT's handler switched protocols;
 * 200, and the stream becomes the protocol's connection. */
int h2_tunnel_upgrade(void *exchange, int status, const keel_header *headers, size_t nheaders,
                      const char *protocol, void *arg);
/* DATA of an extended CONNECT: the tunnel's, or kept for it until the
 * handler has answered. */
void h2_tunnel_data(h2_stream *s, const uint8_t *data, size_t len);
/* The client's END_STREAM: the protocol's EOF. */
void h2_tunnel_remote_end(h2_stream *s);
/* The stream closed or the connection ends: the protocol's connection is
 * aborted. */
void h2_tunnel_stream_gone(h2_stream *s);
/* The client's FIN: nothing more can come on any tunnel (their EOF). */
void h2_tunnel_conn_eof(h2_conn *c);

/* ---- window.c: the receive windows (RFC 9113 6.9) ------------------------ */

/* The connection's window as [h2] conn_window sets it, and the
 * WINDOW_UPDATE that opens it past 65,535 after our SETTINGS (6.9.2). */
void h2_window_conn_init(h2_conn *c);
void h2_window_open(h2_conn *c);
/* A new stream's window: initial_window, or 65,535 until our SETTINGS are
 * acknowledged, when h2_window_settings_acked takes the difference off. */
void h2_window_stream_init(h2_stream *s);
void h2_window_settings_acked(h2_conn *c);
/* A DATA frame of length bytes against the connection's / the stream's
 * window: taken, or -1 (nothing taken) if it does not fit (6.9.1). */
int h2_window_take_conn(h2_conn *c, uint32_t length);
int h2_window_take_stream(h2_stream *s, uint32_t length);
/* The stream's window is used up: the client cannot send more. */
int h2_window_spent(const h2_stream *s);
/* left more body bytes fit in both windows as they are. */
int h2_window_can_carry(const h2_stream *s, int64_t left);
/* n bytes the connection's window gives back (WINDOW_UPDATE in steps of
 * half of it). */
void h2_window_conn_back(h2_conn *c, size_t n);
/* n bytes nobody will read (padding, a stream answered without reading):
 * both windows given back. */
void h2_window_back(h2_stream *s, size_t n);
/* n body bytes held for the handler (the connection's window given back
 * unless the connection holds past body_buffer); n of them read by it
 * (the stream's given back, and the connection's if it was held); all
 * held ones dropped (the connection's held back given back). */
void h2_window_hold(h2_stream *s, size_t n);
void h2_window_read(h2_stream *s, size_t n);
void h2_window_drop_held(h2_stream *s);
static inline void h2_window_drop(h2_stream *s)
{
    if (s->body_len > 0 || s->conn_held > 0) /* most streams hold none: no call */
        h2_window_drop_held(s);
}
/* n body bytes after the exchange ended: the stream's window stays spent
 * if the response went first (stream.c), else both are given back. */
void h2_window_unread(h2_stream *s, size_t n);

/* ---- queue.c: a stream's response body queue --------------------------- */

/* Appends p (its bufs set, len bytes in all) to s's queue, which holds
 * one reference to it until its bytes are in a batch. Inline: every
 * response body piece comes here. */
static inline void h2_stream_queue(h2_stream *s, h2_piece *p, size_t len)
{
    p->left = len;
    p->refs = 1; /* the queue's */
    if (s->queue == NULL)
        s->progress_ms = keel_worker_now_ms(s->c->w->worker); /* the stall clock starts */
    if (s->queue_tail != NULL)
        s->queue_tail->next = p;
    else
        s->queue = p;
    s->queue_tail = p;
    s->queued += len;
}

/* The bytes of s's queue that may go in one DATA frame now: never across
 * a file piece's edge, nothing while a small file is being read. */
size_t h2_stream_sendable(const h2_stream *s);
/* The same from the file piece at the head of the queue (never more than
 * it holds): header and file range leave as one write of their own. */
int h2_stream_take_file(h2_stream *s, const uint8_t *framehd, size_t length);
/* Moves `length` body bytes of s into the batch. */
int h2_stream_take(h2_stream *s, size_t length);

/* ---- headcache.c -------------------------------------------------------- */

/* The encoded block of the connection's last final head if this one
 * (status, fields as given, content length, date) is the same; NULL if not.
 * Valid until the next store. */
const uint8_t *h2_headcache_find(h2_conn *c, int status, const keel_header *h, size_t n,
                                 int64_t content_length, const char *date, size_t date_len,
                                 size_t *len);
/* Keeps this head and its block as the connection's last (not if larger
 * than H2_HEADCACHE_MAX, or out of memory: then nothing matches). */
void h2_headcache_store(h2_conn *c, int status, const keel_header *h, size_t n,
                        int64_t content_length, const char *date, size_t date_len,
                        const uint8_t *block, size_t len);
void h2_headcache_free(h2_conn *c);

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
 * ~250 instructions with its free, callgrind); h2_piece_unref returns it. */
h2_piece *h2_piece_new(h2_conn *c);
/* Frees the worker's list (stop). */
void h2_piece_pool_free(h2_worker *w);

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
/* A frame's header arrived: CONTINUATION, empty-frame, PING, SETTINGS and
 * PRIORITY accounting. 0 to go on, -1 if the connection was calmed. */
int h2_limits_frame(h2_conn *c, uint8_t type, uint8_t flags, uint32_t length);
/* The peer reset s (RST_STREAM): rapid reset accounting, as above. */
int h2_limits_reset(h2_conn *c, h2_stream *s, uint32_t code);
/* We sent an RST_STREAM (a peer that provokes them). */
int h2_limits_rst_sent(h2_conn *c);
void h2_metrics_register(keel_module *m, h2_metrics *mx);
void h2_count_code(h2_conn *c, keel_metric *const *family, uint32_t code);

#endif
