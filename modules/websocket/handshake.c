/* handshake.c — the opening handshake (RFC 6455 4.2): the GET route of
 * every endpoint. The request has been through the HTTP layer like any
 * other: its request filters (auth, limits, logging) ran before this
 * handler, and a refusal here is an ordinary response they see.
 *
 * Refusals, in the order checked:
 *   400  HTTP/1.0 (4.1: HTTP/1.1 or higher), a method other than GET (HEAD
 *        reaches GET routes), a request with a body, no "upgrade" token in
 *        Connection, a missing or invalid Sec-WebSocket-Key (it must be the
 *        base64 of 16 bytes, 4.2.1 item 5);
 *   426  no "websocket" token in Upgrade (a plain HTTP client: told what
 *        to upgrade to, RFC 9110 15.5.22), or Sec-WebSocket-Version other
 *        than 13 (4.2.2 item 4: with Sec-WebSocket-Version: 13);
 *   403  an Origin not in the endpoint's list (10.2);
 *   the endpoint's on_handshake may refuse with any status >= 400.
 *
 * Over HTTP/2 the handshake is RFC 8441 5's: a CONNECT with :protocol
 * "websocket" (the h2 module shows it as the field ":protocol", and takes
 * it only where it offered SETTINGS_ENABLE_CONNECT_PROTOCOL), on the
 * endpoint's path. Sec-WebSocket-Version 13 is required as above; there
 * is no Sec-WebSocket-Key nor Accept, nor Upgrade or Connection (the
 * stream is the connection); subprotocols, extensions, Origin and
 * on_handshake are the same. keel_response_upgrade makes the h2 module
 * answer 200 and run the stream as the websocket connection. (http1
 * answers a CONNECT 501 itself: it never reaches the route.)
 */
#include "ws.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"; /* 1.3 */

static int ieq(const char *a, size_t alen, const char *b, size_t blen)
{
    return keel_ascii_iequal(a, alen, b, blen);
}

/* Calls fn on each comma-separated element (trimmed, non-empty) of every
 * field called name, until fn returns non-zero, which is returned. */
typedef int (*element_fn)(const char *s, size_t n, void *ud);
static int each_element(keel_request *req, const char *name, element_fn fn, void *ud)
{
    size_t count = keel_request_header_count(req), nlen = strlen(name);
    keel_header h;
    for (size_t i = 0; i < count; i++) {
        if (keel_request_header_at(req, i, &h) != KEEL_OK ||
            !ieq(h.name.ptr, h.name.len, name, nlen))
            continue;
        const char *at = h.value.ptr, *el;
        size_t n;
        while (h.value.ptr != NULL && keel_list_next(&at, h.value.ptr + h.value.len, &el, &n)) {
            int r = fn(el, n, ud);
            if (r)
                return r;
        }
    }
    return 0;
}

static int is_token(const char *s, size_t n, void *ud)
{
    return ieq(s, n, ud, strlen(ud));
}

/* How many fields called name the request has. */
static size_t field_count(keel_request *req, const char *name)
{
    size_t count = keel_request_header_count(req), nlen = strlen(name), n = 0;
    keel_header h;
    for (size_t i = 0; i < count; i++)
        if (keel_request_header_at(req, i, &h) == KEEL_OK &&
            ieq(h.name.ptr, h.name.len, name, nlen))
            n++;
    return n;
}

/* Subprotocol choice (4.2.2 item 5.4): the first the client offers that
 * the endpoint speaks. */
struct proto_pick {
    const char *const *list;
    const char *chosen;
};

static int pick_protocol(const char *s, size_t n, void *ud)
{
    struct proto_pick *pp = ud;
    for (const char *const *p = pp->list; *p; p++)
        if (strlen(*p) == n && memcmp(*p, s, n) == 0) { /* tokens are case-sensitive */
            pp->chosen = *p;
            return 1;
        }
    return 0;
}

/* keel_response_send_status would drop the fields a refusal carries
 * (Sec-WebSocket-Version, Upgrade): the same short text body, by hand. */
static int refuse(keel_response *res, int status)
{
    char text[96];
    int n = snprintf(text, sizeof text, "%d %s\n", status, keel_http_reason(status));
    int rc = keel_response_set_status(res, status);
    if (rc == KEEL_OK)
        rc = keel_response_header_set(res, "Content-Type", "text/plain; charset=utf-8");
    return rc == KEEL_OK ? keel_response_send_copy(res, text, (size_t)n) : rc;
}

int ws_handshake(keel_request *req, keel_response *res, void *userdata)
{
    ws_endpoint *wep = userdata;
    const keel_ws_endpoint *ep = wep->ep;

    keel_str method = keel_request_method(req);
    int http_version = keel_request_version(req);
    int is_connect = ieq(method.ptr, method.len, "CONNECT", 7);
    int over_h2 = http_version == 20 && is_connect; /* RFC 8441 */
    if (over_h2) {
        keel_str proto = keel_request_header(req, ":protocol");
        if (!ieq(proto.ptr, proto.len, "websocket", 9))
            return refuse(res, 400);
    } else {
        if (http_version != 11 || !ieq(method.ptr, method.len, "GET", 3))
            return refuse(res, 400);
        /* A handshake has no body; one announced is refused rather than read. */
        keel_str cl = keel_request_header(req, "Content-Length");
        if (keel_request_header(req, "Transfer-Encoding").ptr ||
            (cl.ptr && !(cl.len == 1 && cl.ptr[0] == '0')))
            return refuse(res, 400);
        if (!each_element(req, "Upgrade", is_token, "websocket")) {
            keel_response_header_set(res, "Upgrade", "websocket");
            return refuse(res, 426);
        }
        if (!each_element(req, "Connection", is_token, "upgrade"))
            return refuse(res, 400);
    }
    keel_str version = keel_request_header(req, "Sec-WebSocket-Version");
    if (field_count(req, "Sec-WebSocket-Version") != 1 || version.len != 2 ||
        memcmp(version.ptr, "13", 2) != 0) {
        keel_response_header_set(res, "Sec-WebSocket-Version", "13");
        return refuse(res, 426);
    }
    keel_str key = keel_request_header(req, "Sec-WebSocket-Key");
    uint8_t raw[18];
    if (!over_h2 && (field_count(req, "Sec-WebSocket-Key") != 1 || key.len != 24 ||
                     ws_base64_decode(key.ptr, key.len, raw, sizeof raw) != 16))
        return refuse(res, 400);
    if (ep->origins) {
        keel_str origin = keel_request_header(req, "Origin");
        if (origin.ptr) {
            const char *const *o = ep->origins;
            while (*o && !ieq(origin.ptr, origin.len, *o, strlen(*o)))
                o++;
            if (!*o)
                return refuse(res, 403);
        }
    }

    struct proto_pick pp = {ep->subprotocols, NULL};
    if (ep->subprotocols)
        each_element(req, "Sec-WebSocket-Protocol", pick_protocol, &pp);

    char ext[256] = "";
    ws_pmd *pmd = NULL;
    if (ws_g->deflate_ok && ws_g->cfg.compression &&
        ws_pmd_negotiate(req, &pmd, ext, sizeof ext) != KEEL_OK)
        return KEEL_ERR_NOMEM;

    void *data = NULL;
    if (ep->on_handshake) {
        int rc = ep->on_handshake(req, pp.chosen, &data, ep->userdata);
        if (rc != KEEL_OK) {
            ws_pmd_free(pmd);
            return rc >= 400 && rc <= 599 ? refuse(res, rc) : (rc < 0 ? rc : refuse(res, 500));
        }
    }

    keel_ws *ws = calloc(1, sizeof *ws);
    if (!ws) {
        ws_pmd_free(pmd);
        return KEEL_ERR_NOMEM;
    }
    ws->ep = wep;
    ws->data = data;
    ws->subprotocol = pp.chosen;
    ws->pmd = pmd;

    int rc = KEEL_OK;
    if (!over_h2) {
        /* Sec-WebSocket-Accept = base64(SHA-1(key + GUID)) (4.2.2 item 5.4). */
        char buf[24 + sizeof ws_guid];
        memcpy(buf, key.ptr, 24);
        memcpy(buf + 24, ws_guid, sizeof ws_guid - 1);
        uint8_t digest[20];
        ws_sha1(buf, 24 + sizeof ws_guid - 1, digest);
        char accept[29];
        ws_base64_encode(digest, 20, accept);
        if ((rc = keel_response_header_set(res, "Upgrade", "websocket")) == KEEL_OK)
            rc = keel_response_header_set(res, "Sec-WebSocket-Accept", accept);
    }
    if (rc != KEEL_OK ||
        (pp.chosen &&
         (rc = keel_response_header_set(res, "Sec-WebSocket-Protocol", pp.chosen)) != KEEL_OK) ||
        (ext[0] &&
         (rc = keel_response_header_set(res, "Sec-WebSocket-Extensions", ext)) != KEEL_OK) ||
        (rc = keel_response_upgrade(res, "websocket", ws)) != KEEL_OK) {
        /* Not switched: ws is still ours. The endpoint accepted, so it is
         * told the connection ended (on_close frees its data). */
        ws->flags |= WS_OPENED;
        ws_app_close(ws, KEEL_WS_CLOSE_ABNORMAL, "", 0);
        ws_pmd_free(ws->pmd);
        free(ws);
        if (rc == KEEL_ERR_CLOSED)
            return KEEL_OK; /* the client left: the request is gone */
        return rc == KEEL_ERR_UNSUPPORTED ? refuse(res, 400) : rc;
    }
    return KEEL_OK;
}
