/* errors.c — the responses the module sends on its own: malformed or
 * oversized requests, timeouts, unsupported features.
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
    const char *date = h1_date_line(c->w, &date_len);
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

void h1_fail(h1_conn *c, int status)
{
    if (c->closing)
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
