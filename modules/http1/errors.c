/* errors.c — the responses to malformed or oversized requests, timeouts,
 * unsupported features: through the core when no request exists yet (its
 * filters and error pages apply), else written here.
 *
 * Every one ends the connection (Connection: close): once a request is
 * refused at this level, the position of the next request in the stream is
 * unknown or the client is misbehaving. The body is the same short text the
 * core uses for its own status responses ("400 Bad Request\n").
 */
#include "h1.h"

#include <string.h>

#define PUT_LIT(p, lit) (memcpy(p, lit, sizeof(lit) - 1), (p) + sizeof(lit) - 1)

static size_t error_response(h1_conn *c, int status, char *p0)
{
    char *p = p0;
    size_t sl_len, date_len;
    const char *sl = h1_status_line(c->w->cfg, status, &sl_len);
    const char *reason = keel_http_reason(status);
    if (sl == NULL || reason[0] == '\0') {
        status = 500;
        sl = h1_status_line(c->w->cfg, status, &sl_len);
        reason = keel_http_reason(status);
    }
    memcpy(p, sl, sl_len);
    p += sl_len;
    const char *date = date_cache_line(&c->w->date, c->w->worker, &date_len);
    memcpy(p, date, date_len);
    p += date_len;
    memcpy(p, c->w->cfg->server_line, c->w->cfg->server_line_len);
    p += c->w->cfg->server_line_len;
    p = PUT_LIT(p, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: ");
    size_t body_len = 4 + strlen(reason) + 1; /* "400 " reason "\n" */
    p += h1_u64_dec(p, body_len);
    p = PUT_LIT(p, "\r\nConnection: close\r\n\r\n");
    p += h1_u64_dec(p, (uint64_t)status);
    *p++ = ' ';
    memcpy(p, reason, strlen(reason));
    p += strlen(reason);
    *p++ = '\n';
    return (size_t)(p - p0);
}

/* A head refused before a request existed (400, 408, 414, 431, 413 on a
 * declared length, 505...) is answered through the core
 * (keel_http_request_refuse), so that the listener's configured fields
 * (the headers module's `always`) and error pages apply to it, as nginx's
 * add_header ... always and error_page do to its own 400s. The request
 * is started on an empty head: nothing of the refused one is trusted.
 * Returns 0 once the core took the answer over; the connection closes
 * after it (where the next message starts is unknown). -1: answer here. */
static int refuse_through_core(h1_conn *c, int status)
{
    static const keel_http_head empty = {
        .size = sizeof(keel_http_head), .method = {"", 0}, .target = {"", 0}, .version = 11};
    if (c->exch == NULL || c->exch_state != H1_EXCH_NONE || c->head_sent || status < 400)
        return -1;
    c->close_after = 1;
    c->read_state = H1_READ_DONE; /* nothing more is read */
    c->is_head = c->version10 = 0;
    c->expect_continue = c->continue_sent = 0;
    c->exch_state = H1_EXCH_ACTIVE;
    keel_request *req = keel_http_request_start(c->conn, &h1_sink, c, &empty);
    if (req == NULL) {
        c->exch_state = H1_EXCH_NONE;
        return -1;
    }
    c->exch->req = req;
    keel_log(c->w->module, KEEL_LOG_DEBUG, "connection %llu: %d through the core, closing",
             (unsigned long long)keel_conn_id(c->conn), status);
    keel_http_request_refuse(req, status);
    /* Answered at once from inside h1_process: done came while the loop
     * ran, which then leaves without closing (the head failed). */
    if (c->exch_state != H1_EXCH_ACTIVE)
        h1_close(c);
    return 0;
}

void h1_fail(h1_conn *c, int status)
{
    if (c->closing)
        return;
    if (refuse_through_core(c, status) == 0)
        return;
    /* The core must not call the sink any more: it is told first. */
    h1_exchange_abort(c);
    if (!c->head_sent) {
        char *p = h1_out_reserve(c, 512);
        if (p != NULL)
            h1_out_commit(c, error_response(c, status, p));
        c->head_sent = 1;
    }
    c->close_after = 1;
    keel_log(c->w->module, KEEL_LOG_DEBUG, "connection %llu: %d, closing",
             (unsigned long long)keel_conn_id(c->conn), status);
    h1_close(c);
}
