/* h1.h — the http1 module's internal types, shared by its source files.
 *
 * The module turns bytes into keel_http_head + body for the core's HTTP
 * layer, and the core's sink calls back into bytes. Everything here runs on
 * one connection's worker thread; the only state shared between workers is
 * the read-only h1_config.
 *
 * Memory, which the design caps per idle connection: an idle keep-alive
 * connection holds only its h1_conn (88 bytes: keep it small; per-message
 * state belongs in h1_exch). The parser, the header arrays and the
 * output buffer (h1_exch, h1_obuf) come from per-worker free lists when a
 * request starts and go back when the connection is idle again, so the
 * steady state allocates nothing per request.
 */
#ifndef KEEL_HTTP1_H1_H
#define KEEL_HTTP1_H1_H

#include <keel/keel.h>
#include <keel/util.h>

#include <llhttp.h>

#include "date.h"

#include <stddef.h>
#include <stdint.h>

/* ---- configuration ([http1], read once in load) ------------------------- */

/* The status codes whose lines are prebuilt (RFC 9110 15: three digits,
 * 1xx to 5xx). */
#define H1_STATUS_MIN 100
#define H1_STATUS_MAX 599

typedef struct h1_config {
    uint64_t max_request_line; /* 414 above this */
    uint64_t max_header_bytes; /* the whole head; 431 above this */
    uint64_t max_headers;      /* 431 above this */
    uint64_t max_body;         /* 413 above this */
    uint64_t max_chunked;      /* a chunked body's data and framing: 413 above this (body.c) */
    uint64_t header_timeout_ms;
    uint64_t body_timeout_ms;
    uint64_t body_min_rate; /* bytes/s a body must average after body_timeout; 0: none */
    uint64_t keepalive_timeout_ms;
    uint64_t shutdown_idle_timeout_ms; /* idle connections stay this long on shutdown */
    uint64_t max_requests;             /* per connection; 0: unlimited */
    const char *server;                /* as declared; server_line is what is sent */
    char server_line[256];             /* "Server: keel\r\n", or "" */
    size_t server_line_len;
    /* "HTTP/1.1 NNN Reason\r\n" for each code, with the core's phrases
     * (serialize.c): code k's line is status_text[status_off[k - MIN],
     * status_off[k - MIN + 1]). */
    char *status_text;
    uint32_t status_off[H1_STATUS_MAX - H1_STATUS_MIN + 2];
} h1_config;

/* ---- output buffers ----------------------------------------------------- */

/* Bytes waiting to be written: response heads, copied small bodies, chunk
 * framing, error responses. While a zero-copy write is in flight the buffer
 * is lent to it (it holds the head that goes out with the borrowed body)
 * and the callback fields say whom to tell when it completes. */
typedef struct h1_obuf h1_obuf;
struct h1_obuf {
    h1_obuf *next; /* free list */
    struct h1_worker *w;
    keel_write_cb cb; /* the sink caller's callback while lent */
    void *cb_ud;
    size_t len, cap;
    char data[];
};

/* Pooled blocks. The outputs of pipelined requests are batched into one
 * write per on_data call, or per full block. A head that needs more grows
 * its block, which is then freed instead of pooled. */
#define H1_OBUF_SIZE (16 * 1024 - sizeof(h1_obuf))
/* A final body piece up to this size is copied behind its head (one write,
 * nothing to keep alive); larger ones and streamed pieces go out as
 * scatter-gather without a copy. */
#define H1_COPY_MAX (8 * 1024)

/* ---- per-request parse state -------------------------------------------- */

/* A header as offsets from the head's first byte: the connection's buffer
 * may move between two on_data calls while the head is incomplete, so
 * pointers are made only once the head is whole. */
typedef struct h1_span {
    uint32_t name_off, name_len;
    uint32_t value_off, value_len;
} h1_span;

#define H1_INLINE_HEADERS 32

/* Where the current message is. */
enum h1_read_state {
    H1_READ_HEAD = 0, /* reading the head */
    H1_READ_HOLD,     /* head done, body not wanted (yet): not reading */
    H1_READ_BODY,     /* handing body bytes to the core */
    H1_READ_DISCARD,  /* reading and dropping an unwanted body */
    H1_READ_DONE      /* the whole message has been read */
};

/* Where the exchange with the core is. */
enum h1_exch_state {
    H1_EXCH_NONE = 0, /* no request started for this message */
    H1_EXCH_ACTIVE,   /* the core holds the request */
    H1_EXCH_FINISHED  /* sink->done came */
};

/* Per-message state, pooled per worker; held while a request is parsed or
 * in flight. */
typedef struct h1_exch h1_exch;
struct h1_exch {
    h1_exch *next; /* free list */
    llhttp_t parser;

    /* Offsets of the request line, from the head's first byte. */
    uint32_t method_off, method_len;
    uint32_t url_off, url_len;
    uint32_t version_off, version_len;
    uint32_t head_len; /* once complete: up to and including the empty line */
    uint32_t line_done : 1;
    uint32_t head_done : 1;
    uint32_t has_body : 1;
    uint32_t in_name : 1; /* a header field has begun (its span is open) */
    uint32_t te_present : 1;
    uint32_t cl_present : 1;
    uint32_t expect_continue : 1;
    uint32_t keep_alive : 1;     /* the client's wish (RFC 9112 9.3), before our limits */
    uint32_t upgrade_asked : 1;  /* Upgrade with Connection: upgrade (RFC 9110 7.8) */
    uint8_t method;              /* llhttp's method number */
    int host_index;              /* the Host field, -1 if none */
    uint32_t auth_off, auth_len; /* absolute-form authority, or UINT32_MAX */

    /* Headers as offsets while parsing, then as views for the core. */
    size_t nheaders;
    size_t headers_cap; /* of spans and headers */
    h1_span *spans;     /* inline_spans or a grown array */
    keel_header *headers;
    /* Each name's token (keel_header_token), set once the name is whole
     * and handed to the core with the head; grown with headers (in the
     * same block, after them). */
    uint16_t *tokens;
    h1_span inline_spans[H1_INLINE_HEADERS];
    keel_header inline_headers[H1_INLINE_HEADERS];
    uint16_t inline_tokens[H1_INLINE_HEADERS];

    /* A request with a body has its head copied here, so the body can be
     * consumed from the connection's buffer while the core still refers to
     * the head (the buffer may move once reading resumes). */
    char *copy;
    size_t copy_cap;

    keel_http_head head;

    /* The message's progress (the connection's while it holds exch). */
    keel_request *req;         /* the request in flight */
    uint64_t head_deadline_ms; /* header_timeout, from the head's first byte */
    uint64_t body_seen;        /* request body bytes of this message */
    uint64_t overhead;         /* chunked framing bytes: sizes, extensions, CRLFs, trailers */
    uint64_t body_start_ms;    /* when reading (or discarding) the body began; 0: not yet */
    uint64_t paused_ms;        /* when the handler paused the body (keel_request_body_pause) */
    uint64_t body_left;        /* Content-Length bytes, or the chunk's, still to read */
    uint64_t resp_left;        /* H1_BODY_LENGTH: response body bytes still owed */
    int error_status;          /* set by a parser callback that returns HPE_USER */
    uint32_t line_len;         /* bytes of the current chunk-size or trailer line */
    uint8_t body_state;        /* body.c's decoder state */

    /* The trailer section of a chunked body (body.c), kept while the body
     * goes to the core: each field's name and value (OWS trimmed) copied
     * into tr_buf, since the lines may span several reads whose bytes are
     * consumed as they are parsed. Allocated only when a request has
     * trailers, and not kept in the pool. */
    char *tr_buf;
    uint32_t tr_len, tr_cap;
    h1_span *tr_spans;      /* where each field is in tr_buf */
    keel_header *tr_fields; /* the views handed to the core, made at the end */
    uint32_t ntr, tr_fields_cap;
    uint32_t tr_count; /* trailer fields seen (kept or not): max_headers */
    uint64_t tr_bytes; /* bytes of the trailer section: max_header_bytes */
};

/* ---- per-worker state (the module's worker_state) ----------------------- */

/* How many recently idle connections a worker keeps their h1_conn
 * (park.c): a power of two, at most 255 (h1_conn's warm_slot). */
#define H1_WARM_MAX 128

typedef struct h1_conn h1_conn;

typedef struct h1_worker {
    keel_worker *worker;
    keel_module *module;
    const h1_config *cfg;
    h1_exch *free_exch;
    unsigned nfree_exch;
    h1_obuf *free_obuf;
    unsigned nfree_obuf;
    struct h1_free_conn *free_conn;
    unsigned nfree_conn;
    date_cache date; /* the Date header line (date.c) */
    /* The last Host value found valid (validate.c): a keep-alive
     * connection, and most clients of one site, send the same bytes
     * request after request, and the grammar's answer for the same bytes
     * is the same. len 0: empty. */
    struct {
        uint8_t len;
        char bytes[63];
    } valid_host;
    /* The connections idle most recently, not parked (park.c): a ring,
     * oldest at warm_head; NULL where one left it. */
    h1_conn *warm[H1_WARM_MAX];
    uint32_t warm_head, warm_tail;
} h1_worker;

#define H1_POOL_MAX 256 /* free blocks kept per list and worker */

/* ---- per-connection state ----------------------------------------------- */

/* How the response body is framed. */
enum h1_framing {
    H1_BODY_NONE = 0, /* HEAD, 1xx, 204, 304: no body bytes at all */
    H1_BODY_LENGTH,   /* Content-Length */
    H1_BODY_CHUNKED,  /* Transfer-Encoding: chunked */
    H1_BODY_EOF       /* HTTP/1.0, unknown length: ends with the connection */
};

struct h1_conn {
    keel_conn *conn;
    h1_worker *w;
    h1_exch *exch; /* NULL while idle */
    h1_obuf *out;  /* NULL while nothing waits */

    /* The last bytes on_data saw; valid while reading is paused. */
    const char *data;
    size_t len;
    /* Offsets into the current delivery (see h1_process). */
    size_t pos;         /* parsed up to here */
    uint32_t head_base; /* where the current message's head starts */
    uint32_t skip;      /* bytes at the start of the next delivery already parsed */

    uint64_t timeout_ms; /* what keel_conn_set_timeout was last given */
    uint32_t nrequests;  /* requests started on this connection (saturates) */

    uint8_t read_state; /* enum h1_read_state */
    uint8_t exch_state; /* enum h1_exch_state */
    uint8_t framing;    /* enum h1_framing */

    unsigned in_process : 1;  /* inside h1_process: sink calls only set flags */
    unsigned paused : 1;      /* we paused reading */
    unsigned closing : 1;     /* keel_conn_close was called */
    unsigned close_after : 1; /* close once this exchange is over */
    unsigned shutdown : 1;    /* the server is stopping */
    unsigned want_body : 1;   /* the core asked for the body */
    unsigned expect_continue : 1;
    unsigned continue_sent : 1;
    unsigned head_sent : 1;  /* the final response head was serialised */
    unsigned resp_ended : 1; /* the last body piece came */
    unsigned is_head : 1;    /* HEAD request */
    unsigned version10 : 1;  /* HTTP/1.0 request */
    unsigned client_keepalive : 1;
    unsigned head_copied : 1;  /* the head's views point into exch->copy */
    unsigned had_request : 1;  /* keep-alive (not header) timeout when idle */
    unsigned head_started : 1; /* bytes of the current head have arrived */
    unsigned handed_over : 1;  /* the connection is another protocol's now */
    unsigned idle_marked : 1;  /* keel_conn_set_idle(conn, 1) is in force (http1.c) */
    unsigned deadline_set : 1; /* keel_conn_set_deadline holds an unfinished head (http1.c) */
    unsigned body_paused : 1;  /* the handler paused its body: not read (exchange.c) */
    unsigned end_owed : 1;     /* the body ended while paused: told when resumed */
    uint8_t warm_slot;         /* 1 + its place in w->warm; 0 if not there (park.c) */
};

/* Every connection between requests that has not parked pays for this
 * (malloc rounds 88 bytes up to a 96-byte chunk on 64-bit glibc), and every
 * one in a request: per-message state goes in h1_exch instead. */
_Static_assert(sizeof(void *) != 8 || sizeof(h1_conn) <= 88, "h1_conn outgrew its budget");

/* ---- http1.c ------------------------------------------------------------ */

/* Runs the state machine over c->data/c->len from c->pos. */
void h1_process(h1_conn *c);

/* Sets the connection's inactivity timeout if it changed. */
void h1_set_timeout(h1_conn *c, uint64_t ms);

/* The body's inactivity timeout, shortened to what is left of its total
 * time (body_timeout plus a second per body_min_rate bytes received); and
 * whether that total time is up. Reading the body starts its clock. */
void h1_body_clock_start(h1_conn *c);
uint64_t h1_body_timeout(h1_conn *c);
int h1_body_late(h1_conn *c);

/* Pauses / resumes reading (idempotent). */
void h1_pause(h1_conn *c);
void h1_resume(h1_conn *c);

/* The handler has paused the body it reads (keel_request_body_pause): no
 * byte of it is parsed or delivered, and the connection is not read. */
static inline int h1_body_held(const h1_conn *c)
{
    return c->body_paused && c->read_state == H1_READ_BODY && c->exch_state == H1_EXCH_ACTIVE;
}

/* Flushes pending output and closes the connection in order. */
void h1_close(h1_conn *c);

/* The exchange finished outside h1_process (an asynchronous response):
 * flush, then go on with the connection (next request, discard or close). */
void h1_after_exchange(h1_conn *c);

/* Hands the connection to `protocol` (keel_conn_set_protocol) once the
 * bytes up to c->pos are done with: consumed here from outside h1_process,
 * reported by h1_on_data from inside it. Returns KEEL_OK if the connection
 * is no longer http1's (c is then freed, or will be by h1_on_data), or the
 * error of keel_conn_set_protocol that left it http1's (KEEL_ERR_NOTFOUND,
 * KEEL_ERR_CLOSED). */
int h1_hand_over(h1_conn *c, const char *protocol, void *arg);

/* Frees the connection's state (on_close, or a hand-over). */
void h1_conn_free(h1_conn *c);

/* ---- park.c ------------------------------------------------------------- */

/* The connection is idle (between requests, or before the first): it joins
 * the worker's recently idle ones, and the oldest of those beyond
 * H1_WARM_MAX parks (its h1_conn goes back to the pool if nothing in it is
 * needed until the next byte). The caller must not touch c afterwards. */
void h1_idle(h1_conn *c);
/* A fresh h1_conn for conn, set as its data; NULL (out of memory). */
h1_conn *h1_conn_start(keel_conn *conn);
/* The connection's h1_conn, taken from the pool again if it was parked
 * (out of the recently idle ones if it is there); NULL if that ran out of
 * memory. */
h1_conn *h1_conn_of(keel_conn *conn);
int h1_conn_parked(keel_conn *conn);
/* Takes c out of the recently idle ones (before it is freed). */
void h1_conn_unwarm(h1_conn *c);

/* ---- pool.c ------------------------------------------------------------- */

h1_exch *h1_exch_get(h1_worker *w);
void h1_exch_put(h1_worker *w, h1_exch *exch);
/* A zeroed h1_conn, or NULL (out of memory); and back. */
h1_conn *h1_conn_get(h1_worker *w);
void h1_conn_put(h1_worker *w, h1_conn *c);
/* Makes room for n more headers (up to the configured maximum). */
int h1_exch_grow(h1_exch *exch, size_t want);
void h1_pool_free(h1_worker *w);

/* ---- output.c ----------------------------------------------------------- */

/* Returns room for at least n more bytes at the end of c->out (allocating
 * or growing it), or NULL if out of memory. Commit with h1_out_commit. */
char *h1_out_reserve(h1_conn *c, size_t n);
void h1_out_commit(h1_conn *c, size_t n);
int h1_out_append(h1_conn *c, const void *data, size_t len);

/* Writes what c->out holds (copying only what the socket does not take at
 * once) and keeps the buffer for reuse. */
int h1_out_flush(h1_conn *c);

/* Writes c->out (whatever is batched: a head, earlier pipelined
 * responses) and then the pieces as one ordered write
 * (keel_conn_write_pieces: the head with the first bytes, ranges with
 * sendfile on plain TCP); cb(conn, status, ud) runs when all have left.
 * c->out is lent to the write. */
int h1_out_write_pieces(h1_conn *c, const keel_piece *pieces, size_t npieces, keel_write_cb cb,
                        void *ud);

/* Writes c->out[0, prefix) + bufs + c->out[prefix, len) as one
 * scatter-gather write without copying bufs; cb(conn, status, ud) runs
 * when the write completed. c->out is lent to the write. */
int h1_out_write_with(h1_conn *c, size_t prefix, const keel_buf *bufs, size_t nbufs,
                      keel_write_cb cb, void *ud);

/* Returns c->out to the pool if it is empty. */
void h1_out_release(h1_conn *c);
void h1_obuf_free(h1_worker *w, h1_obuf *b);

/* ---- parse.c ------------------------------------------------------------ */

extern const llhttp_settings_t h1_llhttp_settings;

/* Starts a new message with exch: its body and exchange state reset. The
 * head's fields are set by whichever parser reads it (h1_fast_head, or
 * llhttp after h1_llhttp_start). */
void h1_parse_init(h1_conn *c, h1_exch *exch);

/* Results of h1_parse_head / h1_parse_body. */
enum { H1_NEED_MORE = 0, H1_READY = 1, H1_FAILED = -1 };

/* Parses head bytes from c->pos. H1_READY: the head is complete and valid
 * (c->pos is just after it); H1_NEED_MORE: every byte was taken and more
 * are needed; H1_FAILED: an error response was sent and the connection is
 * closing. A head is tried with h1_fast_head first when its first byte is
 * at c->pos, and given to llhttp otherwise. */
int h1_parse_head(h1_conn *c);

/* Fresh llhttp state and head fields for the head at c->head_base. */
void h1_llhttp_start(h1_conn *c, h1_exch *exch);

/* llhttp and the checks over head bytes from c->pos, without answering:
 * H1_READY (c->pos just after the head), H1_NEED_MORE, or the status to
 * refuse the head with (>= 400, or 500). */
int h1_llhttp_head(h1_conn *c);

/* The status for an llhttp error, given the bytes of the head so far. */
int h1_parse_error_status(h1_conn *c, llhttp_errno_t err, const char *base, size_t avail);

/* ---- fast_head.c --------------------------------------------------------- */

/* Reads the whole head at c->head_base if it is of the strict, common kind
 * fast_head.c describes, filling c->exch as llhttp and h1_head_check would:
 * 1, c->pos untouched (the head is exch->head_len bytes). 0: not one it
 * takes (or not whole yet); exch's head fields are then undefined and the
 * bytes are llhttp's (h1_llhttp_start). */
int h1_fast_head(h1_conn *c);

/* ---- body.c ------------------------------------------------------------- */

/* Sets up reading the body of the current message (Content-Length > 0 or
 * chunked). */
void h1_body_init(h1_conn *c);

/* Reads body bytes from c->pos, handing them to the core in H1_READ_BODY
 * and dropping them in H1_READ_DISCARD. H1_READY: the message is complete
 * (c->pos just after it); H1_NEED_MORE: every byte was taken; H1_FAILED:
 * an error response was sent (or the connection is closing). */
int h1_parse_body(h1_conn *c);

/* The message is complete and its body was the core's: hands the trailer
 * fields kept from a chunked body to the core (keel_http_request_trailers,
 * ABI 1.5), then the body's end, unless the exchange ended meanwhile. */
void h1_body_end(h1_conn *c);

/* Frees what the trailer section of a message held (pool.c). */
void h1_body_trailers_free(h1_exch *exch);

/* ---- validate.c --------------------------------------------------------- */

/* Character classes, one table lookup each:
 *   H1_CH_TCHAR   RFC 9110 5.6.2 tchar: ALPHA DIGIT and !#$%&'*+-.^_`|~
 *   H1_CH_TARGET  what a request-target may hold: VCHAR except '#' (RFC 3986
 *                 allows no CTL, SP, DEL or non-ASCII; a fragment is never
 *                 sent, RFC 9112 3.2) */
enum { H1_CH_TCHAR = 1, H1_CH_TARGET = 4 };
extern const unsigned char h1_char_class[256];

int h1_is_tchar(unsigned char ch);
/* RFC 9110 5.6.2: n > 0 bytes, all tchar. */
int h1_is_token(const char *s, size_t n);

/* Checks a complete head (at `head`) against RFC 9110/9112 beyond what
 * llhttp does. Returns 0 or the status of the error response to send. */
int h1_head_check(h1_conn *c, const char *head);

/* RFC 9110 7.2: whether n bytes at s are a valid Host value (empty
 * included), remembering the last valid one (h1_worker.valid_host): the
 * same bytes are not parsed again. */
int h1_valid_host_field(h1_worker *w, const char *s, size_t n);

/* Fills exch->head with views into `head` (the connection's buffer, or the
 * copy of the head made for a request with a body). */
void h1_head_build(h1_conn *c, const char *head);

/* ---- serialize.c -------------------------------------------------------- */

/* Builds cfg's status lines from keel_http_reason (load). */
int h1_status_lines_build(h1_config *cfg);
/* "HTTP/1.1 200 OK\r\n" for 100..599; NULL otherwise. */
const char *h1_status_line(const h1_config *cfg, int status, size_t *len);

/* Serialises a response head into c->out and decides the body's framing
 * (c->framing, c->resp_left) and whether the connection closes after it. */
int h1_head_serialize(h1_conn *c, int status, const keel_field *h, size_t n, int64_t length);

/* Serialises "101 Switching Protocols" with the handler's fields into
 * c->out; KEEL_ERR_INVAL (nothing written) if they hold no Upgrade. */
int h1_upgrade_serialize(h1_conn *c, const keel_field *h, size_t n);

/* A trailer section's size bound, and its bytes (framing fields left out). */
size_t h1_trailers_size(const keel_header *t, size_t n);
char *h1_trailers_put(char *p, const keel_header *t, size_t n);

/* Writes the decimal / hexadecimal form of v at p; returns its length. */
size_t h1_u64_dec(char *p, uint64_t v);
size_t h1_u64_hex(char *p, uint64_t v);

/* ---- exchange.c (the sink) ---------------------------------------------- */

extern const keel_http_sink h1_sink;

/* Starts the exchange for a complete, valid head and dispatches it. */
void h1_exchange_start(h1_conn *c);

/* The exchange is over and the message read: set up the next one (or
 * close). Returns 0 to go on parsing, -1 if the connection is closing. */
int h1_exchange_next(h1_conn *c);

/* Aborts the request in flight, if any (connection going away). */
void h1_exchange_abort(h1_conn *c);

/* The response ended before the body was read: discard it (H1_READ_DISCARD)
 * or close. Returns -1 if closing. */
int h1_body_unwanted(h1_conn *c);

/* ---- errors.c ----------------------------------------------------------- */

/* Answers status with a small text body and Connection: close, then closes
 * (aborting the request in flight first). */
void h1_fail(h1_conn *c, int status);

#endif
