/* Request bodies: read whole (keel_request_read_body) or streamed
 * (keel_request_stream_body) as the protocol delivers them
 * (keel_http_request_body), paused per exchange (keel_request_body_pause,
 * ABI 1.6), failed when the client leaves, and the trailer fields that
 * come after them (ABI 1.5). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/conn.h"
#include "base/util.h"
#include "http/http.h"
#include "net/worker.h"

/* ---- body -------------------------------------------------------------- */

static void body_complete(keel_request *req, int status)
{
    kl_request_body_pause_end(req);
    keel_body_cb cb = req->body_cb;
    keel_body_chunk_cb chunk = req->chunk_cb;
    int mode = req->body_mode;
    if (status == KEEL_OK)
        req->trailers_visible = 1; /* the body was read whole */
    req->body_mode = KL_BODY_DONE;
    req->body_cb = NULL;
    req->chunk_cb = NULL;
    if (mode == KL_BODY_READ && cb != NULL)
        cb(req, status, req->body_ud);
    else if (mode == KL_BODY_STREAM && chunk != NULL && status == KEEL_OK)
        chunk(req, NULL, 0, 1, req->body_ud);
}

/* A streamed body's chunk callback has no status: a failed stream tells
 * its reader nothing, so the request must stay for the handler to learn
 * otherwise (a response call, its abort callback). Released here, it
 * would be recycled under a handler still holding it. */
void kl_request_fail_body(keel_request *req, int status)
{
    if (req->body_mode == KL_BODY_READ || req->body_mode == KL_BODY_STREAM) {
        int told = req->body_mode == KL_BODY_READ;
        kl_request_ref(req);
        body_complete(req, status);
        if (told)
            kl_response_release_if_aborted(&req->res);
        kl_request_unref(req);
    }
}

static void on_empty_body(keel_conn *conn, int status, void *userdata)
{
    keel_request *req = userdata;
    (void)conn;
    (void)status;
    if (req->body_mode != KL_BODY_DONE) {
        int told = req->body_mode == KL_BODY_READ || !req->aborted;
        body_complete(req, req->aborted ? KEEL_ERR_CLOSED : KEEL_OK);
        if (told)
            kl_response_release_if_aborted(&req->res);
    }
    kl_request_unref(req);
}

static int start_body(keel_request *req, int mode, uint64_t max)
{
    if (req->body_mode != KL_BODY_NONE)
        return KEEL_ERR_STATE;
    if (req->aborted)
        return KEEL_ERR_CLOSED;
    req->body_mode = mode;
    req->body_max = max;
    if (req->head.content_length > 0 && max > 0 && (uint64_t)req->head.content_length > max) {
        /* What becomes of the unread body (skipped, the stream reset, the
         * connection closed) is the protocol's call. */
        kl_response_send_status(&req->res, 413);
        kl_request_fail_body(req, KEEL_ERR_LIMIT);
        return KEEL_OK;
    }
    if (req->head.content_length == 0) {
        /* Nothing to read: complete from the loop, not inside this call. */
        kl_request_ref(req);
        if (kl_worker_defer_write_cb(req->worker, req->conn, on_empty_body, req, KEEL_OK) !=
            KEEL_OK) {
            kl_request_unref(req);
            return KEEL_ERR_NOMEM;
        }
        return KEEL_OK;
    }
    if (req->sink->want_body != NULL)
        req->sink->want_body(req->exchange);
    return KEEL_OK;
}

uint64_t keel_request_body_limit(keel_request *req)
{
    return req->head.max_body;
}

int keel_request_read_body(keel_request *req, uint64_t max, keel_body_cb cb, void *userdata)
{
    if (cb == NULL)
        return KEEL_ERR_INVAL;
    req->body_cb = cb;
    req->body_ud = userdata;
    int rc = start_body(req, KL_BODY_READ, max);
    if (rc != KEEL_OK)
        req->body_cb = NULL;
    return rc;
}

int keel_request_stream_body(keel_request *req, keel_body_chunk_cb cb, void *userdata)
{
    if (cb == NULL)
        return KEEL_ERR_INVAL;
    req->chunk_cb = cb;
    req->body_ud = userdata;
    int rc = start_body(req, KL_BODY_STREAM, 0);
    if (rc != KEEL_OK)
        req->chunk_cb = NULL;
    return rc;
}

/* ---- body back-pressure (ABI 1.6) ---------------------------------------- */

/* Tells the protocol, or for a sink without body_pause counts on the
 * connection (which then stops being read for every exchange it carries:
 * all such a protocol offers). */
static int body_pause_tell(keel_request *req, int paused)
{
    if (req->sink->body_pause != NULL)
        return req->sink->body_pause(req->exchange, paused);
    return kl_conn_exchange_pause(req->conn, paused);
}

void kl_request_body_pause_release(keel_request *req)
{
    req->body_pause_wanted = 0;
    if (!req->body_pause_held)
        return;
    req->body_pause_held = 0;
    /* A protocol forgets its own pause with the body or the exchange
     * (keel/http.h); the connection's count is the core's to give back. */
    if (req->sink->body_pause == NULL)
        kl_conn_exchange_pause(req->conn, 0);
}

static void run_body_resume(kl_soon *soon)
{
    keel_request *req = KL_CONTAINER_OF(soon, keel_request, body_resume_soon);
    req->body_resume_queued = 0;
    /* Paused again meanwhile, or the pause ended with the body or the
     * exchange: nothing to tell. */
    if (!req->body_pause_wanted && req->body_pause_held) {
        req->body_pause_held = 0;
        body_pause_tell(req, 0);
    }
    kl_request_unref(req); /* the queue's */
}

int keel_request_body_pause(keel_request *req, int paused)
{
    if (req->aborted)
        return KEEL_ERR_CLOSED;
    if (!paused) {
        if (!req->body_pause_wanted)
            return KEEL_OK;
        req->body_pause_wanted = 0;
        /* What was held is delivered from the loop, never inside the
         * handler's call (it may be resuming from a write callback, with
         * its own state half updated), as keel_conn_resume's bytes are. */
        if (req->body_pause_held && !req->body_resume_queued) {
            req->body_resume_queued = 1;
            req->body_resume_soon.fn = run_body_resume;
            kl_request_ref(req);
            kl_worker_soon(req->worker, &req->body_resume_soon);
        }
        return KEEL_OK;
    }
    if (req->body_mode != KL_BODY_STREAM || req->body_ended || req->exchange_done ||
        req->head.content_length == 0)
        return KEEL_ERR_STATE;
    if (req->body_pause_wanted)
        return KEEL_OK;
    /* Held still when a resume waits in the queue: it finds the body
     * paused again and leaves it so, and the protocol hears nothing. */
    if (!req->body_pause_held) {
        int rc = body_pause_tell(req, 1);
        if (rc != KEEL_OK)
            return rc;
        req->body_pause_held = 1;
    }
    req->body_pause_wanted = 1;
    return KEEL_OK;
}

keel_str keel_request_body(keel_request *req)
{
    if (req->body_mode != KL_BODY_DONE || req->body_cb != NULL)
        return (keel_str){NULL, 0};
    return (keel_str){req->body ? req->body : "", req->body_len};
}

/* A body piece (or its trailers) the core cannot hold: the client gets 500
 * rather than a request missing its end, and the reader learns it. */
static int fail_nomem(keel_request *req)
{
    kl_request_ref(req);
    kl_response_send_status(&req->res, 500);
    kl_request_fail_body(req, KEEL_ERR_NOMEM);
    kl_request_unref(req);
    return KEEL_ERR_NOMEM;
}

int keel_http_request_body(keel_request *req, const char *data, size_t len, int last)
{
    if (req->aborted)
        return KEEL_ERR_CLOSED;
    if (last) {
        req->body_ended = 1; /* trailers after this are refused */
        kl_request_body_pause_end(req);
    }
    if (req->body_mode != KL_BODY_READ && req->body_mode != KL_BODY_STREAM)
        return KEEL_OK; /* nobody wants it: dropped */
    req->body_received += len;
    if (req->body_mode == KL_BODY_READ) {
        /* The status ends the response, which may end the exchange and
         * drop the last reference before fail_body runs: hold one. */
        if (req->body_max > 0 && req->body_received > req->body_max) {
            kl_request_ref(req);
            kl_response_send_status(&req->res, 413);
            kl_request_fail_body(req, KEEL_ERR_LIMIT);
            kl_request_unref(req);
            return KEEL_ERR_LIMIT;
        }
        if (req->body_len + len > req->body_cap) {
            size_t cap = req->body_cap ? req->body_cap : 4096;
            while (cap < req->body_len + len)
                cap *= 2;
            char *grown = realloc(req->body, cap);
            if (grown == NULL)
                return fail_nomem(req);
            req->body = grown;
            req->body_cap = cap;
        }
        if (len > 0)
            memcpy(req->body + req->body_len, data, len);
        req->body_len += len;
        if (last) {
            kl_request_ref(req);
            body_complete(req, KEEL_OK);
            kl_request_unref(req);
        }
    } else {
        kl_request_ref(req);
        if (last)
            req->trailers_visible = 1; /* the last call sees them */
        if (len > 0 || last)
            req->chunk_cb(req, data, len, last, req->body_ud);
        if (last) {
            req->body_mode = KL_BODY_DONE;
            req->chunk_cb = NULL;
        }
        kl_request_unref(req);
    }
    return KEEL_OK;
}

/* ---- trailers (ABI 1.5) -------------------------------------------------- */

/* The fields RFC 9110 6.5.1 rules out of a trailer section: "many fields
 * cannot be processed outside the header section because their evaluation
 * is necessary prior to receiving the content, such as those that describe
 * message framing, routing, authentication, request modifiers, response
 * controls, or content format". A sender must not send them; a recipient
 * that acted on one would act on something the request's processing
 * already went by (a Content-Length after the body, an Authorization after
 * the handler ran). The core drops them for every protocol alike; they are
 * the names flagged KEEL_HDR_FLAG_NOT_TRAILER (tools/gen-header-tokens.py
 * says which and why). Response controls never come in a request. */
static int trailer_allowed(keel_str name)
{
    /* Pseudo-fields route an HTTP/2 request (RFC 9113 8.3) and are never
     * trailers (8.1); empty names are no field at all. */
    if (name.ptr == NULL || name.len == 0 || name.ptr[0] == ':')
        return 0;
    unsigned token = keel_header_token(name.ptr, name.len);
    return !(keel_header_token_flags(token) & KEEL_HDR_FLAG_NOT_TRAILER);
}

int keel_http_request_trailers(keel_request *req, const keel_header *fields, size_t n)
{
    if (req->aborted)
        return KEEL_ERR_CLOSED;
    if (fields == NULL && n > 0)
        return KEEL_ERR_INVAL;
    /* RFC 9112 7.1.2 and RFC 9113 8.1: one trailer section, after the
     * content and before the message ends. */
    if (req->body_ended || req->body_mode == KL_BODY_DONE || req->trailers_given)
        return KEEL_ERR_STATE;
    req->trailers_given = 1;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        kept += trailer_allowed(fields[i].name);
    if (kept == 0)
        return KEEL_OK;
    keel_header *copy = kl_arena_alloc(&req->arena, kept * sizeof *copy);
    size_t k = 0;
    for (size_t i = 0; copy != NULL && i < n; i++) {
        if (!trailer_allowed(fields[i].name))
            continue;
        const keel_str *v = &fields[i].value;
        char *name = kl_arena_dup(&req->arena, fields[i].name.ptr, fields[i].name.len);
        char *value = kl_arena_dup(&req->arena, v->ptr ? v->ptr : "", v->ptr ? v->len : 0);
        if (name == NULL || value == NULL) {
            copy = NULL;
            break;
        }
        copy[k].name = (keel_str){name, fields[i].name.len};
        copy[k].value = (keel_str){value, v->ptr ? v->len : 0};
        k++;
    }
    if (copy == NULL) {
        /* As a body piece the core cannot hold: the reader learns it, and
         * the client gets 500 rather than a request missing its end. */
        if (req->body_mode == KL_BODY_READ || req->body_mode == KL_BODY_STREAM)
            return fail_nomem(req);
        return KEEL_ERR_NOMEM;
    }
    req->trailers = copy;
    req->ntrailers = kept;
    return KEEL_OK;
}

keel_str keel_request_trailer(keel_request *req, const char *name)
{
    if (!req->trailers_visible)
        return (keel_str){NULL, 0};
    size_t len = strlen(name);
    for (size_t i = 0; i < req->ntrailers; i++)
        if (kl_name_equals(req->trailers[i].name, name, len))
            return req->trailers[i].value;
    return (keel_str){NULL, 0};
}

size_t keel_request_trailer_count(keel_request *req)
{
    return req->trailers_visible ? req->ntrailers : 0;
}

int keel_request_trailer_at(keel_request *req, size_t index, keel_header *out)
{
    if (index >= keel_request_trailer_count(req))
        return KEEL_ERR_NOTFOUND;
    *out = req->trailers[index];
    return KEEL_OK;
}
