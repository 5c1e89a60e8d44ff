/* ocsp_http.c — an OCSP responder's HTTP/1.x answer (ocsp_http.h), read
 * with llhttp (as http1 reads requests and the proxy its upstreams'
 * answers): the status, where the body ends, every size bounded. The
 * body itself is DER that OpenSSL parses (ocsp.c). */
#include "ocsp_http.h"

#include <string.h>

static int refuse(ko_ocsp_http *h, const char *why)
{
    h->why = why;
    return -1; /* llhttp stops with an error: the state becomes BAD */
}

static int on_headers_complete(llhttp_t *p)
{
    ko_ocsp_http *h = p->data;
    h->head_done = 1;
    if (p->http_major != 1)
        return refuse(h, "not an HTTP/1.x status line");
    if (p->status_code < 100 || p->status_code > 999)
        return refuse(h, "bad status code");
    if (p->flags & (F_TRANSFER_ENCODING | F_CHUNKED))
        return refuse(h, "Transfer-Encoding in an answer to HTTP/1.0");
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > KO_OCSP_HTTP_BODY_MAX)
        return refuse(h, "bad or too large Content-Length");
    h->status = p->status_code;
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    ko_ocsp_http *h = p->data;
    if (len > sizeof h->body - h->body_len)
        return refuse(h, "response body too large");
    memcpy(h->body + h->body_len, at, len);
    h->body_len += len;
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    ko_ocsp_http *h = p->data;
    h->state = KO_OCSP_HTTP_DONE;
    return HPE_PAUSED; /* the answer is whole: what follows is not read */
}

static const llhttp_settings_t settings = {
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void ko_ocsp_http_init(ko_ocsp_http *h)
{
    h->state = KO_OCSP_HTTP_MORE;
    h->head_done = 0;
    h->head_seen = 0;
    h->status = 0;
    h->why = NULL;
    h->body_len = 0;
    llhttp_init(&h->parser, HTTP_RESPONSE, &settings);
    h->parser.data = h;
}

/* llhttp stopped with err: DONE if the answer was whole, else BAD. */
static int stopped(ko_ocsp_http *h, llhttp_errno_t err, const char *why)
{
    if (h->state == KO_OCSP_HTTP_DONE)
        return h->state;
    if (err == HPE_OK)
        return KO_OCSP_HTTP_MORE;
    if (h->why == NULL)
        h->why = why;
    if (h->why == NULL)
        h->why = "malformed HTTP answer";
    h->state = KO_OCSP_HTTP_BAD;
    return h->state;
}

int ko_ocsp_http_feed(ko_ocsp_http *h, const char *data, size_t len)
{
    while (h->state == KO_OCSP_HTTP_MORE && len > 0) {
        size_t n = len;
        if (!h->head_done) {
            /* The head is given at most its bound: one that does not end
             * within it is refused however the bytes arrive. */
            if (h->head_seen == KO_OCSP_HTTP_HEAD_MAX) {
                h->why = "response head too long";
                h->state = KO_OCSP_HTTP_BAD;
                break;
            }
            if (n > KO_OCSP_HTTP_HEAD_MAX - h->head_seen)
                n = KO_OCSP_HTTP_HEAD_MAX - h->head_seen;
            h->head_seen += n;
        }
        llhttp_errno_t err = llhttp_execute(&h->parser, data, n);
        if (stopped(h, err, llhttp_get_error_reason(&h->parser)) != KO_OCSP_HTTP_MORE)
            break;
        data += n;
        len -= n;
    }
    return h->state;
}

int ko_ocsp_http_end(ko_ocsp_http *h)
{
    if (h->state != KO_OCSP_HTTP_MORE)
        return h->state;
    if (!h->head_done) {
        h->why = "connection closed before the response head";
        h->state = KO_OCSP_HTTP_BAD;
        return h->state;
    }
    /* A body without Content-Length ends here (llhttp completes it);
     * one with Content-Length is short. */
    llhttp_errno_t err = llhttp_finish(&h->parser);
    if (stopped(h, err, "response body truncated") == KO_OCSP_HTTP_MORE) {
        h->why = "response body truncated";
        h->state = KO_OCSP_HTTP_BAD;
    }
    return h->state;
}
