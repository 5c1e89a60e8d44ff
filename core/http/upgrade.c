/* Protocol upgrades (keel_response_upgrade, RFC 9110 7.8).
 *
 * The exchange ends with 101 (Switching Protocols) and its connection goes
 * to another protocol. The core decides what does not depend on the wire:
 * whether the exchange is in a state to switch, whether the target protocol
 * exists, the head filters and the log phase. Whether this exchange's
 * protocol can switch at all (HTTP/1.1 can when the client asked; HTTP/1.0
 * and HTTP/2 cannot), the bytes of the 101 and the hand-over itself are the
 * sink's.
 */
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "net/worker.h"

/* What the head filters may change, kept so that a refused upgrade leaves
 * the response as the handler had it: the handler may still answer
 * normally (its documented recourse after KEEL_ERR_NOTFOUND and the like). */
typedef struct head_state {
    int status;
    int close_connection;
    size_t nheaders;
    kl_field *fields; /* `inline_fields`, or allocated for many fields */
    kl_field inline_fields[16];
} head_state;

static int head_save(head_state *st, const keel_response *res)
{
    size_t n = res->nheaders;
    st->status = res->status;
    st->close_connection = res->close_connection;
    st->nheaders = n;
    st->fields = n <= sizeof st->inline_fields / sizeof st->inline_fields[0]
                     ? st->inline_fields
                     : malloc(n * sizeof *st->fields);
    if (st->fields == NULL)
        return KEEL_ERR_NOMEM;
    if (n > 0)
        memcpy(st->fields, res->headers, n * sizeof *st->fields);
    return KEEL_OK;
}

static void head_forget(head_state *st)
{
    if (st->fields != st->inline_fields)
        free(st->fields);
    st->fields = NULL;
}

/* The field list only ever grows in capacity (filters append or remove in
 * place), so the saved fields fit where they came from. Their strings live
 * in the request's arena, which nothing shrinks. */
static void head_restore(head_state *st, keel_response *res)
{
    res->status = st->status;
    res->close_connection = st->close_connection;
    if (st->nheaders > 0)
        memcpy(res->headers, st->fields, st->nheaders * sizeof *st->fields);
    res->nheaders = st->nheaders;
    head_forget(st);
}

/* The checks that need no protocol and leave everything as it was. */
static int check_upgrade(keel_request *req, const char *protocol)
{
    if (protocol == NULL)
        return KEEL_ERR_INVAL;
    if (req->res.head_sent)
        return KEEL_ERR_STATE; /* a response was begun */
    /* The bytes after the head are the new protocol's: an unread body
     * would sit between them and the 101. */
    if (req->head.content_length != 0 && req->body_mode != KL_BODY_DONE)
        return KEEL_ERR_STATE;
    /* Checked here rather than left to keel_conn_set_protocol, which the
     * sink can only call once the 101 has gone. */
    if (kl_registry_protocol(req->worker->host->registry, protocol) == NULL)
        return KEEL_ERR_NOTFOUND;
    if (req->sink->upgrade == NULL)
        return KEEL_ERR_UNSUPPORTED;
    /* A connection handed over now would never hear of the shutdown (its
     * old protocol was told), and would be cut at shutdown_timeout. */
    if (keel_worker_stopping(req->worker))
        return KEEL_ERR_SHUTDOWN;
    return KEEL_OK;
}

/* Head filters, then the sink. On failure the response is as before. */
static int switch_protocols(keel_request *req, const char *protocol, void *arg)
{
    keel_response *res = &req->res;
    head_state saved;
    if (head_save(&saved, res) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    res->status = 101;
    res->upgrading = 1;
    kl_response_head_filters(res);
    res->upgrading = 0;
    /* No framing in a 1xx (RFC 9110 8.6, RFC 9112 6.1); the Connection
     * field, with its "upgrade" option, is the protocol's to write. */
    kl_response_take_framing(res);
    kl_views views;
    int rc = kl_views_make(&views, res, 0);
    /* The sink consumes the head before the log phase, which still shows
     * the request line and fields: keep a copy. */
    if (rc == KEEL_OK) {
        rc = kl_request_own_head(req);
        if (rc == KEEL_OK)
            rc = req->sink->upgrade(req->exchange, 101, views.h, views.n, protocol, arg);
        kl_views_free(&views);
    }
    if (rc != KEEL_OK)
        head_restore(&saved, res);
    else
        head_forget(&saved);
    return rc;
}

int keel_response_upgrade(keel_response *res, const char *protocol, void *arg)
{
    keel_request *req = res->req;
    if (res->ended)
        return KEEL_ERR_STATE;
    if (req->aborted) {
        /* As for every response call: the handler learns it here, and the
         * request is gone once this returns. */
        kl_response_finish(res);
        return KEEL_ERR_CLOSED;
    }
    int rc = check_upgrade(req, protocol);
    if (rc == KEEL_OK)
        rc = switch_protocols(req, protocol, arg);
    if (rc == KEEL_ERR_CLOSED) {
        /* The connection broke under the sink: the exchange ends as a
         * failed one (the sink still gets `done`). */
        kl_response_finish(res);
        return rc;
    }
    if (rc != KEEL_OK)
        return rc;
    /* The sink gave the exchange up as `done` would: no sink call for it
     * any more. The log phase sees the 101. */
    res->head_sent = 1;
    req->exchange_done = 1;
    kl_request_unref(req); /* the exchange's reference; the response holds one */
    kl_response_finish(res);
    return KEEL_OK;
}
