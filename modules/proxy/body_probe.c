/* body_probe.c — whether an HTTP/2 request without content-length has a
 * body. HTTP/2 frames a body by END_STREAM (RFC 9113 8.1), content-length
 * is optional (8.1.1), so a request may carry a body with neither of the
 * fields forward.c decides by; nginx sends such a body upstream chunked,
 * and so does keel. The HEADERS frame's END_STREAM says whether one
 * follows, and the core knows it (the head's content_length: 0 for none,
 * -1 for one of unknown length) but does not tell a handler: CORE-NEEDS.md
 * 10 proposes keel_request_body_length(). Until then the body is asked for
 * at once and its first callback decides: (nothing, last) means none,
 * bytes mean a body, sent chunked. Bytes that come before the upstream is
 * ready are held (reading from the client paused past `buffer`), and go
 * after the head; retries stay possible while they are all still held.
 * Once the core says, this file reduces to px_body_unknown.
 */
#include "px.h"

#include <stdlib.h>
#include <string.h>

int px_body_unknown(const px_ex *ex)
{
    return ex->body_kind == PX_BODY_NONE && ex->req != NULL && keel_request_version(ex->req) == 20;
}

static int hold(px_ex *ex, const char *data, size_t len)
{
    if (ex->early_len + len > ex->early_cap) {
        size_t cap = ex->early_cap ? ex->early_cap : 4096;
        while (cap < ex->early_len + len)
            cap *= 2;
        char *grown = realloc(ex->early, cap);
        if (grown == NULL)
            return -1;
        ex->early = grown;
        ex->early_cap = cap;
    }
    if (len > 0)
        memcpy(ex->early + ex->early_len, data, len);
    ex->early_len += len;
    return 0;
}

static void probe_chunk(keel_request *req, const char *data, size_t len, int last, void *userdata)
{
    px_ex *ex = userdata;
    if (ex->req == NULL)
        return; /* answered already: the rest is dropped */
    if (ex->probe == PX_PROBE_PASSING) {
        px_body_chunk(req, data, len, last, ex);
        return;
    }
    int first = ex->probe == PX_PROBE_WAITING;
    if (first && len == 0 && last) {
        /* END_STREAM on HEADERS (or an empty DATA with it): no body, and
         * nothing was taken that a retry would lack. */
        ex->probe = PX_PROBE_NONE;
        px_ex_start(ex);
        return;
    }
    if (hold(ex, data, len) != 0) {
        /* Out of memory: the body cannot go whole. Nothing of it has left
         * (an upstream that had the head would have had it all), so the
         * client is answered and an attempt still connecting given up. */
        keel_log(ex->route->cfg->module, KEEL_LOG_WARN, "out of memory holding a request body");
        px_up *up = ex->up;
        if (up != NULL) {
            ex->up = NULL;
            px_up_abandon(up);
        }
        if (ex->peer != NULL && ex->peer_held) {
            ex->peer->active--;
            ex->peer_held = 0;
        }
        px_resume_client(ex);
        keel_response_send_status(ex->res, 500);
        px_ex_client_gone(ex);
        return;
    }
    ex->early_last |= last;
    if (first) {
        ex->probe = PX_PROBE_HOLDING;
        ex->body_kind = PX_BODY_CHUNKED;
        ex->body_done = 0;
        px_ex_start(ex);
        return;
    }
    /* Still waiting for an upstream: hold no more than `buffer` before the
     * client stops being read, as body_chunk does for a slow upstream. */
    keel_conn *client = keel_request_conn(ex->req);
    if (!last && ex->early_len > ex->route->cfg->buffer && !ex->client_paused && client != NULL) {
        ex->client_paused = 1;
        keel_conn_pause(client);
    }
}

void px_body_probe(px_ex *ex)
{
    ex->probe = PX_PROBE_WAITING;
    int rc = keel_request_stream_body(ex->req, probe_chunk, ex);
    if (rc == KEEL_ERR_CLOSED)
        return; /* the client left: the abort callback (forward.c) ends it */
    if (rc != KEEL_OK) {
        ex->probe = PX_PROBE_NONE;
        px_ex_start(ex); /* as before the probe: without the body */
    }
}

/* The upstream has the head: what was held goes as the first chunk, and
 * what comes next straight through (forward.c's start_body). */
void px_body_probe_flush(px_ex *ex)
{
    char *held = ex->early;
    size_t len = ex->early_len;
    int last = ex->early_last;
    ex->early = NULL;
    ex->early_len = ex->early_cap = 0;
    ex->probe = PX_PROBE_PASSING;
    if (ex->req != NULL && (len > 0 || last))
        px_body_chunk(ex->req, held, len, last, ex);
    free(held);
}
