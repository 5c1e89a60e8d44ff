/* core/http/http.h — the protocol-neutral HTTP layer: requests, responses,
 * the router and the filter phases. Worker thread only, except the
 * registration functions (main thread, during load). */
#ifndef KEEL_CORE_HTTP_H
#define KEEL_CORE_HTTP_H

#include <keel/http.h>
#include <keel/types.h>
#include <keel/util.h>
#include <uv.h>
#include "base/freelist.h"
#include "net/file_reader.h"
#include "net/host.h"
#include "net/peer_addr.h"
#include "net/soon.h"

typedef struct kl_route_node kl_route_node;

/* One registered filter, in the host's layout, with its place. */
typedef struct kl_filter {
    keel_http_filter cb;
    keel_module *owner;
    size_t module_index;
} kl_filter;

/* A scope's pipeline (kl_http_prepare): the request and response head
 * hooks its requests run, in run order, each with the userdata its
 * filter's scope hook chose for the scope (keel_http_filter.scope, ABI
 * 1.11), and the filter's index (keel_request_continue's place, the body
 * masks' bit). */
typedef struct kl_request_stage {
    int (*on_request)(keel_request *req, keel_response *res, void *userdata);
    void *userdata;
    size_t filter;
} kl_request_stage;

typedef struct kl_head_stage {
    void (*on_response_head)(keel_request *req, keel_response *res, void *userdata);
    void *userdata;
    size_t filter;
} kl_head_stage;

typedef struct kl_pipeline {
    kl_request_stage *request;
    size_t nrequest;
    kl_head_stage *head;
    size_t nhead;
    struct kl_pipeline *next; /* the kl_http's list, freed with it */
} kl_pipeline;

/* Server-wide HTTP state: read-only once the modules have loaded. */
typedef struct kl_http {
    kl_route_node *routes;
    kl_filter *filters; /* sorted into run order by kl_http_prepare */
    size_t nfilters, filters_cap;
    int has_body_filters;
    uint64_t body_filter_mask;  /* filters (by index < 64) with a body hook */
    uint64_t bytes_filter_mask; /* those of them without on_response_pieces */
    /* The indexes of the filters with a log hook, in run order
     * (kl_http_prepare): a response runs past no filter that has nothing
     * to do there. */
    size_t *log_filters;
    size_t nlog_filters;
    /* The pipeline of requests outside every scope (a config without
     * scopes, a connection not accepted by a listener); each scope has its
     * own (kl_scope.pipeline). All of them are on the `pipelines` list. */
    const kl_pipeline *pipeline;
    kl_pipeline *pipelines;
    keel_http_error_fn error_fn; /* keel_http_error_handler_set (ABI 1.8), or NULL */
    void *error_ud;
    keel_module *error_owner;
} kl_http;

/* The HTTP layer of a server, made empty and freed by it (NULL is
 * ignored). Main thread. */
kl_http *kl_http_new(void);
void kl_http_free(kl_http *http);

/* Registration while modules load (main thread): a route, or a filter for
 * the module `owner`. KEEL_OK, or a keel_status (the caller logs). */
/* A route of module `owner`: on KEEL_ERR_EXISTS, *taken_by is the module
 * whose route (or whose :param name at that position) is in the way. */
int kl_http_route_add(kl_http *http, keel_module *owner, const char *method, const char *pattern,
                      keel_http_handler handler, void *userdata, keel_module **taken_by);
int kl_http_filter_add(kl_http *http, keel_module *owner, const keel_http_filter *f);

/* Once every module has loaded: orders the filters, builds each scope's
 * pipeline (asking the filters' scope hooks), and makes the HTTP layer a
 * subsystem of the host's workers (its slot, KL_SLOT_HTTP). */
int kl_http_prepare(kl_http *http, kl_host *host);

/* ---- router ---- */

#define KL_MAX_ROUTE_PARAMS 16

typedef struct kl_route_match {
    keel_http_handler handler;
    void *userdata;
    size_t nparams;
    keel_str names[KL_MAX_ROUTE_PARAMS];
    keel_str values[KL_MAX_ROUTE_PARAMS];
    char allow[128]; /* for 405: the methods the path does have */
} kl_route_match;

int kl_router_add(kl_route_node **root, const char *method, const char *pattern,
                  keel_http_handler handler, void *userdata);
/* kl_router_add recording `owner` (opaque) with the route; on
 * KEEL_ERR_EXISTS *taken_by (if not NULL) is the owner of what clashes. */
int kl_router_add_owned(kl_route_node **root, const char *method, const char *pattern,
                        keel_http_handler handler, void *userdata, void *owner, void **taken_by);
/* 200: found; 405: path known, method not (allow filled); 404. */
int kl_router_match(const kl_route_node *root, keel_str method, keel_str path,
                    kl_route_match *match);
void kl_router_free(kl_route_node *root);

/* ---- requests and responses ---- */

/* A bump allocator for per-request strings: an inline first block, more
 * blocks only for unusually large requests, all freed with the request. */
typedef struct kl_arena_block kl_arena_block;
typedef struct kl_arena {
    char *at, *end;
    kl_arena_block *blocks;
} kl_arena;

/* A response field (keel/http.h, keel_field): the list is handed as it is
 * to a sink's send_head_fields. token: 1 + the name's keel_header_token
 * for a prepared field, or once kl_response_take_framing classified it;
 * else 0. */
typedef keel_field kl_field;

/* keel_field_prepare's and keel_field_make's field: checked, classified
 * and copied once. The name and value follow the struct, each
 * NUL-terminated, then the field line (field.line); the module's list
 * frees a prepared one (`next` links it), keel_field_free a made one. */
struct keel_prepared_field {
    kl_field field;
    struct keel_prepared_field *next;
};

/* A prepared field of name[0..nl) and value[0..vl) into *out: KEEL_OK,
 * KEEL_ERR_INVAL (not a token, a control character, a name the protocol
 * owns) or KEEL_ERR_NOMEM. http/fields.c */
int kl_prepared_field_new(const char *name, size_t nl, const char *value, size_t vl,
                          keel_prepared_field **out);
void kl_prepared_fields_free(keel_prepared_field *list);

/* keel_log_name_prepare's name: its text follows the struct,
 * NUL-terminated; the module's list (`next`) frees it. http/log_fields.c */
struct keel_log_name {
    struct keel_log_name *next;
    keel_str name;
};
/* A prepared log field name into *out: KEEL_OK, KEEL_ERR_INVAL (a bad
 * name) or KEEL_ERR_NOMEM. */
int kl_log_name_new(const char *name, keel_log_name **out);
void kl_log_names_free(keel_log_name *list);

/* A borrowed body piece on its way to the protocol: released when the
 * protocol is done with it. */
typedef struct kl_body_piece {
    keel_request *req;
    keel_free_fn free_fn;
    void *data;
    void *userdata;
} kl_body_piece;

struct keel_response {
    keel_request *req;
    int status;
    kl_field *headers; /* inline_headers until more are needed */
    size_t nheaders, headers_cap;
    kl_field *trailers;
    size_t ntrailers, trailers_cap;
    int head_sent;
    int ended;
    int close_connection;   /* the connection ends after this exchange */
    int upgrading;          /* keel_response_upgrade is running the head filters */
    int64_t content_length; /* from a handler's Content-Length, else -1 */
    size_t filter_pos;      /* body filter being run (keel_response_filter_emit) */
    size_t head_filter;     /* 1 + the head filter being run, 0 outside them */
    uint64_t body_skipped;  /* filters (by index) that leave this body alone */
    uint64_t body_bytes;
    /* send_file */
    int file_fd;
    int file_close;
    int file_reading;          /* file_reader is set up (freed with the request) */
    int piece_busy;            /* `piece` below carries a body piece */
    uint32_t pieces_in_flight; /* handed to the protocol, not yet written */
    int file_paused;           /* send_file's read loop waits for them */
    /* A streamed piece that went through the body filters: its release
     * (the caller's pacing signal) waits until what the filters emitted
     * has been written (pieces_in_flight back to 0). */
    keel_free_fn held_free;
    void *held_data, *held_userdata;
    int64_t head_length; /* the length send_head was given, for keel_response_body_length */
    int from_file;       /* the body comes from keel_response_send_file */
    /* What the pieces filters emitted that waits behind a read (the end
     * of the chain keeps their order): see response_pieces.c. */
    struct kl_body_pieces *chain_head, *chain_tail;
    int cut;       /* ended by keel_response_abort: incomplete on purpose */
    int in_status; /* inside kl_response_send_status (its body's copy may fail) */
    /* Error pages (ABI 1.8): the status the error handler was asked about
     * (an error after that gets this status's short text), the status a
     * 2xx of an internal redirect goes out with, and how many there were. */
    int error_status;
    int forced_status;
    int redirects;
    /* A field added by name has a name of a framing or connection field's
     * length (kl_response_take_framing looks then); prepared fields never
     * are such fields. */
    int framing_fields;
    /* Not zeroed for each request (keel_http_request_start): set before use. */
    kl_field inline_headers[8];
    kl_body_piece piece;        /* the one piece most responses need, unallocated */
    kl_file_reader file_reader; /* send_file without the protocol's send_file */
};

enum { KL_BODY_NONE, KL_BODY_READ, KL_BODY_STREAM, KL_BODY_DONE };

/* keel_request.facts_kept */
enum {
    KL_KEPT_PEER = 1 << 0, /* facts.peer holds the peer's address */
    KL_KEPT_CONN = 1 << 1  /* facts.conn_id and .transport hold the connection's, and
                              the connection is not read again (it may be freed) */
};

struct keel_request {
    const kl_http *http; /* the server's routes and filters */
    keel_worker *worker;
    keel_conn *conn;
    const keel_http_sink *sink;
    void *exchange;
    keel_str path;
    keel_str query;
    void **module_data;              /* modules past the 16th: allocated, zeroed */
    uint16_t inline_module_data_set; /* the entries of inline_module_data set */
    uint64_t start_us;
    const struct kl_scope *scope; /* its listener, site and path (NULL: no scopes) */
    const kl_site_scope *site;    /* its site, for keel_request_set_path's new scope */
    int refs;                     /* the exchange, pending writes, offload, the handler */
    int aborted;                  /* the connection went away */
    int conn_gone;                /* ...and the log phase ran: keel_request_conn says NULL */
    int exchange_done;            /* sink->done was called (or abort) */
    int logged;
    int routed; /* the router ran: keel_request_set_path is too late */
    /* body */
    int body_mode;
    uint64_t body_max;
    char *body;
    size_t body_len, body_cap;
    uint64_t body_received;
    keel_body_cb body_cb;
    keel_body_chunk_cb chunk_cb;
    void *body_ud;
    int body_ended; /* the protocol delivered the body's last piece */
    /* The request's trailer fields (ABI 1.5), copied into the arena;
     * shown to the handler only once the body has been read whole. */
    const keel_header *trailers;
    size_t ntrailers;
    int trailers_given;   /* keel_http_request_trailers was called */
    int trailers_visible; /* the body's reader was told it is complete */
    /* keel_request_on_abort (ABI 1.6): told once if the client leaves
     * before the response ends and the handler has not learned it
     * otherwise; the call runs from the worker's loop (abort_soon). */
    keel_request_abort_fn abort_cb;
    void *abort_ud;
    kl_soon abort_soon;
    int abort_queued; /* abort_soon waits in the worker's queue (holds a reference) */
    /* keel_request_body_pause (ABI 1.6): the handler's wish, whether the
     * protocol (or, for a sink without body_pause, the connection's
     * count) holds the body now, and the resume on its way to it from the
     * loop (body_resume_soon, holding a reference while queued). Bytes, in
     * what was padding: a request that never pauses zeroes nothing more. */
    uint8_t body_pause_wanted;
    uint8_t body_pause_held;
    uint8_t body_resume_queued;
    uint8_t facts_kept; /* KL_KEPT_*: what `facts` below holds (the last byte of padding) */
    /* offload */
    uv_work_t *work;
    keel_offload_fn work_fn;
    keel_offload_done_fn work_done;
    void *work_ud;
    /* The request filter after the one that held the request (returned
     * KEEL_HTTP_DONE without answering): keel_request_continue starts
     * there. 0 while no filter holds it. */
    size_t filter_next;
    /* keel_request_set_log_field (ABI 1.8): in the arena, in the order of
     * their first setting; NULL for the many requests that have none. */
    struct kl_log_field *log_fields;
    /* Everything above, and `res` up to its inline_headers, is zeroed for
     * each request; the rest is large and set before use. */
    struct keel_response res;
    keel_http_sink sink_copy; /* host-layout copy of the protocol's sink */
    keel_http_head head;
    kl_route_match route;
    kl_arena arena;
    kl_soon body_resume_soon; /* set when queued */
    /* What the request keeps of its connection (ABI 1.7), so that the
     * request-scoped calls (keel_request_peer_name, _scheme, _conn_id)
     * answer after the connection is gone: read when the exchange goes
     * asynchronous or is abandoned (kl_request_keep_facts), never on the
     * path of a request answered at once. */
    struct {
        kl_peer_addr peer;
        uint64_t conn_id;
        const char *transport;
    } facts;
    char inline_arena[512];
    /* keel_request_set_data for the first 16 modules: it cannot report an
     * allocation failure (it returns nothing), so it must not need one
     * (tests/failalloc found the leaks that followed). An entry is valid
     * where inline_module_data_set has its bit, so that no request zeroes
     * the array (`rep stos` of 128 bytes, ~40 instructions). */
    void *inline_module_data[16];
};

/* The HTTP layer's per-worker slot (kl_slot_type, net/host.h): the
 * server-wide state its requests read, and spare request objects, so that
 * a request costs no allocation in the steady state. */
enum { KL_SLOT_HTTP = 0 };
_Static_assert(KL_SLOT_HTTP < KL_SLOT_MAX, "the HTTP layer's slot");
#define KL_HTTP_PEER_CACHE 64

/* The HTTP layer's per-worker slot (KL_SLOT_HTTP): spare request objects,
 * so that a request costs no allocation in the steady state. */
typedef struct kl_http_worker {
    const kl_http *http;
    kl_freelist pool;
    /* The peer addresses requests kept (kl_request_keep_facts), by
     * connection id (ids are never reused, so an entry is either right or
     * misses): the exchanges of one connection ask the kernel once. */
    struct {
        uint64_t conn_id;
        kl_peer_addr addr;
    } peers[KL_HTTP_PEER_CACHE];
    /* The site of the last Host seen (pipeline.c, select_scope): a
     * keep-alive connection, and most clients of one site, send the same
     * bytes request after request, so comparing them spares folding the
     * case and searching the names. */
    struct {
        const kl_site_scope *site; /* NULL: empty (or the status below) */
        size_t listener;
        int status;
        uint8_t len;
        char host[63];
    } last_site;
} kl_http_worker;

/* The pipeline of the request's scope (of the requests outside every
 * scope without one). */
static inline const kl_pipeline *kl_request_pipeline(const keel_request *req)
{
    return req->scope != NULL ? req->scope->pipeline : req->http->pipeline;
}

/* Sets the slot up (the worker allocated it zeroed; arg is the kl_http),
 * and frees its spare requests (when the worker is freed). */
void kl_http_worker_init(void *state, void *arg);
void kl_http_worker_dispose(void *state);

/* The token (keel/header_tokens.h) of the request's field i: the one the
 * protocol handed over or the core classified when the request started;
 * classified now if neither could be stored. */
unsigned kl_request_field_token_slow(const keel_request *req, size_t i);
static inline unsigned kl_request_field_token(const keel_request *req, size_t i)
{
    return req->head.tokens != NULL ? req->head.tokens[i] : kl_request_field_token_slow(req, i);
}

/* Case-insensitive comparison of a field name with b[0..blen). */
int kl_name_equals(keel_str a, const char *b, size_t blen);

/* What a module may put in a response field (http/response_fields.c): a name's
 * length, or 0 if it is not a token (RFC 9110 5.1); a value's length, or
 * SIZE_MAX if it holds a control character other than HTAB (5.5). */
size_t kl_field_name_length(const char *name);
size_t kl_field_value_length(const char *value);
/* 1 if value[0..len) holds no control character but HTAB (RFC 9110 5.5). */
int kl_field_value_clean(const char *value, size_t len);
/* Whether a field is what keel_response_fields_addn's caller vouches
 * for: a token name, a clean value, its token the name's or 0. */
int kl_field_vouched(const kl_field *f);

/* http/syntax.c: 0, or 400 if the head is not one HTTP/1.1 can carry
 * (a method that is not a token, a target, field or Host keel_http_valid
 * refuses): for protocols whose sink does not say it checked
 * (KEEL_HTTP_SINK_CHECKED). */
int kl_request_check_head(const keel_request *req);

/* http/syntax.c: the length of an authority's host (RFC 9110 7.2: the
 * bytes before ":port"), or 0 if p[0..n) is not a valid authority. */
size_t kl_http_authority_host(const char *p, size_t n);

/* Copies len bytes into the request's arena (NUL-terminated). */
char *kl_arena_dup(kl_arena *a, const char *s, size_t len);
void *kl_arena_alloc(kl_arena *a, size_t size);

void kl_request_ref(keel_request *req);
void kl_request_unref(keel_request *req);

/* Decodes the target's path into req->path (and req->query); 0 or 400. */
int kl_request_parse_target(keel_request *req);

/* A decoded path a module gives (keel_request_set_path), copied into the
 * request's arena with its dot segments removed: KEEL_OK and *out, or
 * KEEL_ERR_INVAL if it is empty, not rooted, holds a NUL or climbs above
 * "/"; KEEL_ERR_NOMEM. */
int kl_request_normalise_path(keel_request *req, const char *path, size_t len, keel_str *out);

/* The response has been handed over completely: log, then tell the
 * protocol. */
void kl_request_finish(keel_request *req);

/* Ends the response with the status's short text body. */
int kl_response_send_status(keel_response *res, int status);

/* The response is over (sent, refused or abandoned): the log phase runs,
 * the protocol is told (unless the exchange was already given up), and the
 * response's reference to the request is dropped. */
void kl_response_finish(keel_response *res);

/* Runs every filter's on_response_head. */
void kl_response_head_filters(keel_response *res);

/* Takes out of the response's fields what is the protocol's to write:
 * Content-Length (returned, the first valid one; -1 if none) and the
 * connection-specific fields of RFC 9110 7.6.1 (Connection, Keep-Alive,
 * Proxy-Connection, Transfer-Encoding); a Connection field listing
 * "close" sets close_connection. http/response_fields.c does the work,
 * only when a field added by name may be one (a prepared field never
 * is): the usual head is not looked at. */
int64_t kl_response_take_framing_fields(keel_response *res);
static inline int64_t kl_response_take_framing(keel_response *res)
{
    return res->framing_fields ? kl_response_take_framing_fields(res) : -1;
}

/* The response's fields as the keel_header views a sink takes, with room
 * for `room` more: inline for the usual few, allocated beyond. */
typedef struct kl_views {
    keel_header *h;
    size_t n;
    keel_header inline_views[16];
} kl_views;
int kl_views_make(kl_views *v, const keel_response *res, size_t room);
void kl_views_free(kl_views *v);

/* Copies what the request's head points to (method, target, fields) into
 * the request's arena, and moves the views derived from it (path, query,
 * route parameters) along: for an exchange whose protocol takes the head's
 * memory back before the log phase (an upgrade consumes the head). */
int kl_request_own_head(keel_request *req);

/* Copies what the request-scoped calls need of the connection (its id,
 * transport, the peer's address) into the request while the connection
 * still has them: when the handler leaves the request waiting (an
 * asynchronous answer), and when the exchange is abandoned. */
void kl_request_keep_facts(keel_request *req);

/* Body callbacks owed when the connection went away. */
void kl_request_fail_body(keel_request *req, int status);

/* The body or the exchange ended: a pause of the body (keel_request_body_pause)
 * ends with it; the connection's count, for a sink without body_pause, is
 * given back. Idempotent; inline for the requests that never pause. */
void kl_request_body_pause_release(keel_request *req);
static inline void kl_request_body_pause_end(keel_request *req)
{
    if (req->body_pause_wanted | req->body_pause_held)
        kl_request_body_pause_release(req);
}

/* After the client went away and the handler has been told so (a body or
 * offload callback with KEEL_ERR_CLOSED has returned), the response is
 * over: the handler may no longer touch the request. */
/* Whether this response's body goes through a filter: one that has a body
 * hook and did not skip it. Decided once the head filters have run; asked
 * for every body piece, so inline. */
static inline int kl_response_body_filtered(const keel_response *res)
{
    const kl_http *http = res->req->http;
    return http->has_body_filters && (http->body_filter_mask & ~res->body_skipped) != 0;
}

/* For response_pieces.c, from response.c: the head sent with
 * content_length; the response over; a call refused (the caller's release
 * run, as every body call promises). */
int kl_response_send_head(keel_response *res, int64_t content_length);
void kl_response_end(keel_response *res);
int kl_response_refuse(keel_response *res, const void *data, keel_free_fn free_fn, void *userdata);
/* One piece of body to the sink (or the body filters), its release called
 * once the protocol is done with the bytes. */
int kl_response_send_piece(keel_response *res, const void *data, size_t len, int last,
                           keel_free_fn free_fn, void *userdata);
void kl_response_release_if_aborted(keel_response *res);
/* Body filters that take pieces (ABI 1.9): whether this body goes through
 * them as pieces (every filter it has takes pieces, and so does the
 * protocol); one piece straight to the protocol, past the filters; the
 * filters from position `from`; the end of their chain. */
int kl_response_pieces_filtered(const keel_response *res);
/* body_filters.c: the bytes chain from filter position `from` (a
 * pieces-only filter gets bytes pieces); response.c: its end, the bytes
 * to the protocol (with `piece` the caller's bytes are borrowed until the
 * protocol is done, else copied). */
int kl_response_run_body_filters(keel_response *res, size_t from, const keel_buf *bufs,
                                 size_t nbufs, int last);
int kl_response_to_sink(keel_response *res, const keel_buf *bufs, size_t nbufs, int last,
                        kl_body_piece *piece);
int kl_response_send_direct(keel_response *res, const void *data, size_t len, int last,
                            keel_free_fn free_fn, void *userdata);
int kl_response_run_piece_filters(keel_response *res, size_t from, const keel_piece *pieces,
                                  size_t npieces, int last);
int kl_response_pieces_to_sink(keel_response *res, const keel_piece *pieces, size_t npieces,
                               int last);
/* A piece handed to the protocol has left: the accounting that paces a
 * streamer and a file read behind the filters. */
void kl_response_piece_left(keel_request *req);
/* The body of keel_response_send_pieces once the head went: total bytes,
 * release as that function's. */
int kl_response_send_pieces_body(keel_response *res, const keel_piece *pieces, size_t npieces,
                                 uint64_t total, keel_free_fn release, void *userdata);

#endif
