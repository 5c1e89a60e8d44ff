/* keel/http.h — the types of keel's protocol-neutral HTTP layer (ABI 1.1).
 *
 * The HTTP layer lives in the core: request and response handles, the
 * router and the middleware phases. Protocol modules (http1 today, an
 * HTTP/2 module tomorrow) turn bytes into requests with the keel_http_*
 * functions and turn responses back into bytes through a keel_http_sink;
 * handler and middleware modules see only keel_request and keel_response.
 *
 * Phases of one exchange, in order:
 *   request filters   (on_request: auth, limits, CORS; may answer early,
 *                      or hold the request and resume it later with
 *                      keel_request_continue, ABI 1.8)
 *   router + handler  (keel_route_add)
 *   response filters  (on_response_head, once, before the head is sent;
 *                      on_response_body, chunk by chunk)
 *   log               (on_log, after the response is complete)
 * Filters run in the order of the config's module list unless a filter
 * asks for a place (order, before, after).
 *
 * Responses keel makes itself:
 *   - the core's answers to a request (404 and 405 from the router, 500
 *     for a handler or filter error, 413 over keel_request_read_body's
 *     limit, keel_response_send_status) are ordinary responses: the
 *     response filters and the log phase run for them. The 400 for a path
 *     that does not decode (or climbs above "/") is sent before the request
 *     filters, so on_request does not see that request; 404 and 405 come
 *     after them.
 *   - a protocol module's own answers are written by the protocol: no
 *     filter sees them. For http1 these are a malformed, oversized or
 *     unsupported head (400, 414, 417, 431, 501), a declared
 *     Content-Length over max_body (413) and a head not complete within
 *     header_timeout (408), all before any request exists, so no phase
 *     runs and nothing is logged; and, once the request was dispatched,
 *     broken chunked framing (400), a chunked body over max_body (413) and
 *     a body timeout (408): the exchange is then aborted, and on_log runs
 *     with completed 0 and the status the core had sent (0 if none), not
 *     the protocol's.
 *   - an error page module (keel_http_error_handler_set, ABI 1.8) may
 *     answer any of the core's answers of 400 and over but 405, and those a
 *     handler makes with keel_response_send_status, with another path's
 *     response (keel_response_redirect_internal); never a protocol's own.
 */
#ifndef KEEL_HTTP_H
#define KEEL_HTTP_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct keel_request keel_request;   /* one request; valid until its log phase ends */
typedef struct keel_response keel_response; /* the response to it; same lifetime */

/* A borrowed string: not NUL-terminated, ptr is NULL for "absent". Arrays of
 * these cross the boundary, so this struct never grows. */
typedef struct keel_str {
    const char *ptr;
    size_t len;
} keel_str;

/* One header field, as views. Never grows. */
typedef struct keel_header {
    keel_str name;
    keel_str value;
} keel_header;

/* (ABI 1.11) A response field as the core keeps it, handed as it is to a
 * protocol whose sink has send_head_fields: the views of send_head's
 * keel_header, and what the core knows of the field besides. Protocols
 * read it; since ABI 1.13 a module also builds arrays of it for
 * keel_response_fields_addn (name, value and token; line NULL). Arrays of
 * it cross the ABI both ways, so its size is fixed: it does not grow. */
typedef struct keel_field {
    keel_str name;
    keel_str value;
    /* The whole field line, name ": " value CRLF (RFC 9112 5), line_len
     * bytes, for a prepared field (keel_field_prepare at load, or
     * keel_field_make at run time, ABI 1.12): a protocol that writes
     * HTTP/1.1 may copy it in one move. NULL for any other field. */
    const char *line;
    uint32_t line_len;
    /* 1 + the name's keel_header_token (keel/header_tokens.h, this host's
     * list) when the core knows it, else 0: a protocol may classify the
     * field by it instead of comparing its name. */
    uint32_t token;
} keel_field;

/* A response field checked and laid out once, then added to responses by
 * pointer (keel_response_field_add): at load (keel_field_prepare, ABI 1.8;
 * the core owns it) or at run time (keel_field_make, ABI 1.12; the caller
 * owns it and frees it with keel_field_free). Opaque. */
typedef struct keel_prepared_field keel_prepared_field;

/* A log field's name checked and copied once, at load
 * (keel_log_name_prepare, ABI 1.13), then set on requests by pointer
 * (keel_request_set_log_field_named). Opaque; the core owns it. */
typedef struct keel_log_name keel_log_name;

/* What filters and handlers return. */
enum {
    KEEL_HTTP_NEXT = 0, /* go on to the next filter / the router */
    KEEL_HTTP_DONE = 1  /* this filter answered (or will, asynchronously) */
};

/* A handler: answer with the keel_response_* functions, now or later (from
 * a timer, an offload's completion, a post). Return KEEL_OK, or a negative
 * status to have the core answer 500 (only if nothing was sent yet).
 *
 * If the client goes away first, the request stays valid until the handler
 * learns it: a response call returns KEEL_ERR_CLOSED, a body or offload
 * callback gets KEEL_ERR_CLOSED, or the abort callback runs
 * (keel_request_on_abort, ABI 1.6: a handler that waits on anything but
 * keel's own body and offload callbacks registers one). After that call (or
 * callback) returns, the request is gone. A handler that cancels its own
 * pending work (a timer, say) must still end the response (keel_response_end)
 * to release it. */
typedef int (*keel_http_handler)(keel_request *req, keel_response *res, void *userdata);

/* Called once the request body has been read whole (status KEEL_OK; the
 * body is then keel_request_body()), or could not be (KEEL_ERR_LIMIT: it
 * exceeded the limit and 413 is being sent; KEEL_ERR_CLOSED). */
typedef void (*keel_body_cb)(keel_request *req, int status, void *userdata);

/* Streaming body delivery: called for each piece (valid during the call
 * only), with last != 0 on the final call (len may be 0 then). */
typedef void (*keel_body_chunk_cb)(keel_request *req, const char *data, size_t len, int last,
                                   void *userdata);

/* Runs on libuv's thread pool: it may block, and must not call keel. */
typedef void (*keel_offload_fn)(void *userdata);
/* Runs back on the request's worker thread when the offloaded work is done
 * (status KEEL_ERR_CLOSED if the client went away meanwhile: then only
 * release your data, the request is gone). */
typedef void (*keel_offload_done_fn)(keel_request *req, int status, void *userdata);

/* Called on the request's worker when the exchange is abandoned before its
 * response ended, if the handler has not learned it otherwise first
 * (keel_request_on_abort, ABI 1.6). It never runs inside a keel_* call: the
 * core queues it and runs it from the worker's loop, ahead of any module's
 * stop. Release what the handler holds for the request here (stop its
 * timer, close its upstream connection); req may be read during the call,
 * and response calls made from it return KEEL_ERR_CLOSED; once it returns
 * the request is gone. */
typedef void (*keel_request_abort_fn)(keel_request *req, void *userdata);

/* Asked before the core answers an error with its short text (ABI 1.8,
 * keel_http_error_handler_set): `status` (400..599) is about to go out as
 * "404 Not Found\n". Return KEEL_HTTP_DONE when the response was answered
 * otherwise (keel_response_redirect_internal to an error page), or
 * KEEL_HTTP_NEXT to let the text go. Worker thread of the request. */
typedef int (*keel_http_error_fn)(keel_request *req, keel_response *res, int status,
                                  void *userdata);

/* The grammars keel_http_valid checks (ABI 1.6). */
enum {
    KEEL_HTTP_TOKEN = 1,   /* RFC 9110 5.6.2: a method, a field name; not empty */
    KEEL_HTTP_FIELD_VALUE, /* RFC 9110 5.5: no control byte but HTAB, no SP or HTAB at either
                              end; may be empty */
    KEEL_HTTP_SCHEME,      /* RFC 3986 3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) */
    KEEL_HTTP_AUTHORITY,   /* RFC 9110 7.2: host [ ":" port ], the host an IP-literal, IPv4
                              address or reg-name, not empty; no userinfo (RFC 9110 4.2.4) */
    KEEL_HTTP_TARGET,      /* every byte one a request-target may hold: VCHAR but '#' (no
                              fragment is ever sent, RFC 9110 4.2.4); not empty */
    KEEL_HTTP_ORIGIN_FORM  /* RFC 9112 3.2.1: "/" and then KEEL_HTTP_TARGET's bytes */
};

/* keel_request_set_path's flags (ABI 1.8). */
#define KEEL_PATH_RESCOPE 0x1u /* choose the request's path scope again for the new path */
#define KEEL_PATH_QUERY   0x2u /* replace the query too */

/* Called when a borrowed response body is no longer needed. */
typedef void (*keel_free_fn)(void *data, void *userdata);

/* What the log phase is told about a finished exchange. Grows at the end. */
typedef struct keel_http_log_info {
    size_t size;
    int status;             /* status sent (0 if the connection died first) */
    uint64_t body_bytes;    /* response body bytes handed to the protocol */
    uint64_t request_bytes; /* request body bytes received */
    uint64_t duration_us;   /* from the request head to the response's end */
    int completed;          /* 1 if the whole response was handed over */
    /* (ABI 1.8) The protocol's id of the exchange on its connection
     * (keel_http_head.stream_id): the HTTP/2 stream, 0 where the protocol
     * has none. Read it only if size covers it. */
    uint64_t stream_id;
} keel_http_log_info;

/* Where a filter wants to run within its phase. */
enum { KEEL_ORDER_FIRST = -1, KEEL_ORDER_MIDDLE = 0, KEEL_ORDER_LAST = 1 };

/* Middleware: a small vtable in the spirit of h2o's filters and loggers.
 * Any callback may be NULL. All run on the request's worker thread. */
typedef struct keel_http_filter {
    size_t size; /* sizeof(keel_http_filter) as the module was built */
    const char *name;
    int order;          /* KEEL_ORDER_FIRST, _MIDDLE (default) or _LAST */
    const char *before; /* run before this module's filters (NULL: no constraint) */
    const char *after;  /* run after this module's filters */
    void *userdata;

    /* Before routing. Return KEEL_HTTP_NEXT to go on, KEEL_HTTP_DONE when
     * this filter has answered (or will, or holds the request until it
     * calls keel_request_continue, ABI 1.8), a negative status for a 500. */
    int (*on_request)(keel_request *req, keel_response *res, void *userdata);

    /* Once, before the response head leaves: change status or headers. */
    void (*on_response_head)(keel_request *req, keel_response *res, void *userdata);

    /* Each piece of the response body on its way out. Pass the (possibly
     * transformed) bytes on with keel_response_filter_emit() — zero, one or
     * several times — before returning; last is set on the final call.
     * A filter that leaves a response alone says so from on_response_head
     * with keel_response_filter_skip_body (ABI 1.4): registering this hook
     * otherwise costs every response a copy, and files their sendfile. */
    int (*on_response_body)(keel_request *req, keel_response *res, const keel_buf *bufs,
                            size_t nbufs, int last, void *userdata);

    /* After the exchange is finished (also when it failed). */
    void (*on_log)(keel_request *req, keel_response *res, const keel_http_log_info *info,
                   void *userdata);

    /* (ABI 1.9, optional.) The response body as pieces (keel_piece: bytes
     * and file ranges), for a filter that can pass a file range on without
     * its bytes: one that frames, prefixes or counts a body, as nginx's
     * output filters pass in-file buffers along. Pass the pieces on (the
     * same, others, or new ones) with keel_response_filter_emit_pieces
     * before returning; last is set on the final call. When every body
     * filter of a response has this hook (and the protocol can take
     * pieces: http1, h2), file ranges reach the filters unread and leave
     * by sendfile where the transport allows; if any filter of the
     * response has only on_response_body, everything arrives here as bytes
     * pieces instead (the core reads the files for that filter). A filter
     * that sets both hooks gets this one whenever pieces go through the
     * chain, else on_response_body. The pieces are borrowed for the call:
     * bytes until it returns, a file range's descriptor until the
     * response has ended. */
    int (*on_response_pieces)(keel_request *req, keel_response *res, const keel_piece *pieces,
                              size_t npieces, int last, void *userdata);

    /* (ABI 1.11, optional.) The filter's part in each scope
     * (docs/configuration.md), so that the core builds each scope's
     * pipeline once instead of every filter asking for its scope on every
     * request. Called at load (main thread), after every module has loaded
     * and seen its scopes, once for each distinct struct of this module's
     * in a scope (conf: what keel_request_config answers for a request
     * there; the module's own struct for requests outside every scope,
     * also when the config has no scopes), with the filter's userdata.
     * Return 1 to run on_request and on_response_head for that scope's
     * requests with *scope_userdata (preset to userdata, the module's to
     * set: data it prepared for that struct, which it keeps until unload)
     * as their userdata; 0 to leave those two hooks out of that scope's
     * requests (the filter has nothing to do there); a negative keel_status
     * fails the load. The body and log hooks always run with userdata. A
     * request whose scope changes (keel_request_set_path with
     * KEEL_PATH_RESCOPE, an internal redirect) goes on with the filters of
     * its new scope. NULL, or a filter built before ABI 1.11: the hooks run
     * in every scope with userdata. */
    int (*scope)(const void *conf, void *userdata, void **scope_userdata);
} keel_http_filter;

/* ---- For HTTP protocol modules (http1, h2) -------------------------------- */

/* The request head as a protocol module parsed it. The views must stay valid
 * until the sink's `done` is called. Grows at the end. */
typedef struct keel_http_head {
    size_t size;
    keel_str method;
    keel_str target; /* request-target as received: origin- or absolute-form */
    int version;     /* 10 for HTTP/1.0, 11 for HTTP/1.1, 20 for HTTP/2 */
    const keel_header *headers;
    size_t nheaders;
    int64_t content_length; /* -1: unknown (chunked), 0: no body */
    /* Deprecated (ABI 1.3), kept for the layout: HTTP/1 notions the core
     * never reads. Persistence is the protocol's own business, told to it
     * by keel_http_request_keep_alive and done's keep_alive; a
     * "100 Continue" is sent when the core calls want_body. A protocol may
     * leave both 0. */
    int keep_alive;
    int expect_continue;
    /* (ABI 1.8) The token of each field's name (keel_header_token,
     * keel/header_tokens.h), in the order of `headers`, or NULL. A protocol
     * that learns the tokens while it parses (HTTP/1.1 when a name is
     * complete, HTTP/2 from the HPACK static table's index) hands them
     * over, valid as long as `headers`, so that no name is classified
     * twice; given NULL (or by a protocol built before 1.8), the core
     * classifies the names itself. */
    const uint16_t *tokens;
    /* (ABI 1.8) The exchange's id on its connection where the protocol has
     * one (the HTTP/2 stream id, RFC 9113 5.1.1), or 0. For the log phase
     * (keel_http_log_info.stream_id, the access log's $stream_id). */
    uint64_t stream_id;
    /* (ABI 1.8) The most body bytes the protocol takes for this request
     * (its max_body as configured): what
     * keel_request_body_limit tells a handler. 0: the protocol sets no
     * limit, or was built before 1.8. */
    uint64_t max_body;
} keel_http_head;

/* How the core hands a response back to the protocol module that owns the
 * exchange. `exchange` is the protocol's pointer given to
 * keel_http_request_start. All calls come on the connection's worker thread.
 * Any field may be NULL except send_head, send_body and done; a sink built
 * before a field was appended (a smaller size) has it NULL. */
typedef struct keel_http_sink {
    size_t size;

    /* The final status and headers (filters applied). content_length is the
     * body size, or -1 when it is not known (the protocol frames it: chunked
     * for HTTP/1.1). The headers never hold Content-Length or the
     * connection-specific fields of RFC 9110 7.6.1 (Connection, Keep-Alive,
     * Proxy-Connection, Transfer-Encoding): framing and the connection are
     * the protocol's, which adds what its version needs (Date, Server,
     * framing), and asks keel_http_request_keep_alive (ABI 1.3) whether
     * this response ends the connection. (A sink built before ABI 1.3,
     * smaller than this struct, still gets "Connection: close" then, as
     * it always did.) Upgrade is passed on (a 426 needs it, RFC 9110
     * 15.5.22); HTTP/2 drops it (RFC 9113 8.2.2). Status 101 never comes
     * here (see upgrade). */
    int (*send_head)(void *exchange, int status, const keel_header *headers, size_t nheaders,
                     int64_t content_length);

    /* Body bytes in order; last != 0 ends the body (trailers, if any, are
     * passed then, else NULL/0). cb (may be NULL) is called once the bytes
     * may be released; the protocol must call it exactly once if it returns
     * KEEL_OK. */
    int (*send_body)(void *exchange, const keel_buf *bufs, size_t nbufs, int last,
                     const keel_header *trailers, size_t ntrailers, keel_write_cb cb,
                     void *userdata);

    /* The handler wants the request body: deliver it (or the rest of it)
     * with keel_http_request_body(). For HTTP/1.1 with Expect: 100-continue
     * this is when "100 Continue" is sent. */
    void (*want_body)(void *exchange);

    /* The exchange is over: the response was fully handed over (or failed)
     * and the core holds no reference to the head's views any more.
     * keep_alive is 0 if the handler, a filter or the core asked to close
     * (keel_http_request_keep_alive said so, or the response was cut
     * short). */
    void (*done)(void *exchange, int keep_alive);

    /* (ABI 1.2, optional.) The body, or the next part of it, straight from
     * an open file: bytes [offset, offset + length) of fd, which stays the
     * core's (open until cb). The protocol hands it to its connection
     * (keel_conn_write_file: sendfile on plain TCP) after whatever it
     * still holds of the head, and calls cb exactly once when the bytes
     * have left or cannot (a short file or a lost connection: an error
     * status, and the connection is closing). last != 0 ends the body as
     * in send_body (without trailers); the core always passes 1 today, and
     * ends the exchange (done) only after cb. A protocol that cannot send
     * this response from a file (it frames the body in chunks, say)
     * returns KEEL_ERR_UNSUPPORTED without side effects, and the core
     * falls back to reading the file into send_body pieces; NULL means the
     * same for every response. The core calls it only when no body filter
     * is registered (filters need the bytes). */
    int (*send_file)(void *exchange, int fd, uint64_t offset, uint64_t length, int last,
                     keel_write_cb cb, void *userdata);

    /* (ABI 1.3, optional.) The handler switched protocols
     * (keel_response_upgrade): send `status` (101) with these headers (the
     * filters have run; as in send_head, no framing or connection-specific
     * field), give up the exchange as `done` would (the core calls no sink
     * function for it afterwards and keeps its own copy of what the head's
     * views showed), consume the request's bytes, and hand the connection
     * to `protocol` with keel_conn_set_protocol(conn, protocol, arg), so
     * that the bytes after the request go to the new protocol. Outside the
     * protocol's on_data (an asynchronous handler), keel_conn_consume drops
     * the request's bytes first, or the new protocol would be given them.
     *
     * The core has checked that `protocol` is registered, that no response
     * was begun and that any request body was read whole. Return KEEL_OK
     * once the connection is handed over, whatever the new protocol's
     * on_open then did with it. Refuse with nothing sent and the exchange
     * unchanged: KEEL_ERR_UNSUPPORTED where this exchange cannot switch
     * (HTTP/2; HTTP/1.0; a request that did not ask to), KEEL_ERR_INVAL
     * for headers the switch cannot go with, KEEL_ERR_STATE.
     * KEEL_ERR_CLOSED if the connection is closing or broke while
     * switching: the exchange is then still the protocol's, and the core
     * ends it with `done`. NULL means KEEL_ERR_UNSUPPORTED. */
    int (*upgrade)(void *exchange, int status, const keel_header *headers, size_t nheaders,
                   const char *protocol, void *arg);

    /* (ABI 1.6, optional.) The handler streaming the request body
     * (keel_request_stream_body) paused it (paused 1) or resumed it (0):
     * keel_request_body_pause. While paused, the protocol hands the core
     * none of this body (keel_http_request_body, the last piece
     * included) and holds back what lets the client send more of it,
     * without holding the connection's other exchanges: HTTP/2 keeps the
     * DATA it receives and gives the stream's window back only for the
     * bytes it delivers (RFC 9113 5.2, 6.9), HTTP/1.1 stops reading the
     * connection (it carries only this exchange). On resume it delivers
     * what it held, and may do so inside this call: the core calls it with
     * 0 from the worker's loop, never from inside a handler's call.
     *
     * The core calls it only when the state changes, between want_body
     * and the body's last piece, and never after done; a pause still in
     * force when the body ends or the exchange ends (done,
     * keel_http_request_abort) is the protocol's to forget, without a call
     * with 0. Return KEEL_OK, or an error with nothing changed (the
     * handler's call returns it). NULL, or a sink built before ABI 1.6
     * (smaller): the core pauses the whole connection (keel_conn_pause's
     * effect) for as long as any of its exchanges is paused, counted per
     * exchange and apart from the protocol's own keel_conn_pause. */
    int (*body_pause)(void *exchange, int paused);

    /* (ABI 1.6.) KEEL_HTTP_SINK_CHECKED if the protocol refuses, before
     * keel_http_request_start, every request whose method is not a token,
     * whose target or field names and values fail keel_http_valid
     * (KEEL_HTTP_TARGET, _TOKEN, _FIELD_VALUE), or whose Host is neither
     * empty nor a valid authority (http1 and h2 do, each with its own
     * answer: 400, RST_STREAM). 0, or a sink built before it: the core
     * checks the head itself before the request filters run and answers
     * 400. Either way every request a handler sees is one that HTTP/1.1
     * can carry, whatever protocol brought it (a gateway relies on it). */
    unsigned flags;

    /* (ABI 1.8, optional.) The body, or the next part of it, as pieces
     * (keel_piece: bytes and file ranges) in order, after whatever the
     * protocol still holds of the head: keel_response_send_pieces. The
     * array is read during the call only; the bytes and descriptors are
     * the core's until cb, which the protocol calls exactly once if it
     * returns KEEL_OK: once everything has left, or with an error status
     * when it cannot (a file shorter than its range, a lost connection:
     * the connection is then closing). last != 0 ends the body as in
     * send_body (without trailers, which follow in a send_body of no
     * bytes); the core ends the exchange (done) only after cb. Since ABI
     * 1.9 the core may pass a part of the body with last = 0, and a body
     * of unknown length (chunked in HTTP/1.1): what a body filter that
     * takes pieces emitted. A protocol that cannot send
     * them as they are (it frames the body in chunks, say) returns
     * KEEL_ERR_UNSUPPORTED without side effects, and the core hands them
     * over one by one through send_body and send_file instead, reading
     * the ranges those cannot take; NULL, or a sink built before ABI 1.8,
     * means the same. The core calls it only when no body filter takes
     * the body. */
    int (*send_pieces)(void *exchange, const keel_piece *pieces, size_t npieces, int last,
                       keel_write_cb cb, void *userdata);

    /* (ABI 1.11, optional.) send_head with the fields as the core keeps
     * them (keel_field) instead of keel_header views: the core builds no
     * views, and a field prepared at load carries its field line and
     * token, which HTTP/1.1 copies whole without looking at the name.
     * The same contract as send_head in every other way (which fields
     * never come, when it is called, what it returns); the array is read
     * during the call only. Where set, the core calls it instead of
     * send_head (which must still be set: an older host calls that);
     * NULL, or a sink built before ABI 1.11, gets send_head. */
    int (*send_head_fields)(void *exchange, int status, const keel_field *fields, size_t nfields,
                            int64_t content_length);
} keel_http_sink;

#define KEEL_HTTP_SINK_CHECKED 1u

#ifdef __cplusplus
}
#endif

#endif
