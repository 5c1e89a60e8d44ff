/* serialize.c — response heads and body framing as bytes.
 *
 * A head is written straight into the connection's output buffer: the
 * status line from a table built at load from the core's reason phrases,
 * the handler's fields, then Date, Server, the framing field and
 * Connection. Its size is computed first so the buffer is reserved once.
 */
#include "h1.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int h1_status_lines_build(h1_config *cfg)
{
    /* Two passes over the same codes: sizes, then bytes. */
    size_t total = 0;
    for (int code = H1_STATUS_MIN; code <= H1_STATUS_MAX; code++)
        total += sizeof("HTTP/1.1 NNN \r\n") - 1 + strlen(keel_http_reason(code));
    if ((cfg->status_text = malloc(total)) == NULL)
        return KEEL_ERR_NOMEM;
    char *p = cfg->status_text;
    for (int code = H1_STATUS_MIN; code <= H1_STATUS_MAX; code++) {
        const char *reason = keel_http_reason(code);
        size_t rl = strlen(reason);
        cfg->status_off[code - H1_STATUS_MIN] = (uint32_t)(p - cfg->status_text);
        /* RFC 9112 4: status-line = HTTP-version SP status-code SP
         * [ reason-phrase ]; the second SP stays when there is no phrase. */
        memcpy(p, "HTTP/1.1 ", 9);
        p[9] = (char)('0' + code / 100);
        p[10] = (char)('0' + code / 10 % 10);
        p[11] = (char)('0' + code % 10);
        p[12] = ' ';
        memcpy(p + 13, reason, rl);
        memcpy(p + 13 + rl, "\r\n", 2);
        p += 15 + rl;
    }
    cfg->status_off[H1_STATUS_MAX - H1_STATUS_MIN + 1] = (uint32_t)total;
    return KEEL_OK;
}

const char *h1_status_line(const h1_config *cfg, int status, size_t *len)
{
    if (status < H1_STATUS_MIN || status > H1_STATUS_MAX)
        return NULL;
    size_t k = (size_t)(status - H1_STATUS_MIN);
    *len = cfg->status_off[k + 1] - cfg->status_off[k];
    return cfg->status_text + cfg->status_off[k];
}

size_t h1_u64_dec(char *p, uint64_t v)
{
    /* Most lengths written are small: one or two digits without a loop,
     * else counted and written from the last one back in place. */
    if (v < 10) {
        p[0] = (char)('0' + v);
        return 1;
    }
    if (v < 100) {
        p[0] = (char)('0' + v / 10);
        p[1] = (char)('0' + v % 10);
        return 2;
    }
    size_t n = 3;
    for (uint64_t rest = v / 1000; rest != 0; rest /= 10)
        n++;
    for (size_t i = n; i-- > 0; v /= 10)
        p[i] = (char)('0' + v % 10);
    return n;
}

size_t h1_u64_hex(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[16];
    size_t n = 0;
    do {
        tmp[n++] = digits[v & 15];
        v >>= 4;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

static int name_is(keel_str name, const char *lit, size_t n)
{
    return keel_ascii_iequal_lc(name.ptr, name.len, lit, n);
}

/* Fields the module writes itself; a handler's copy of a framing field is
 * dropped (the core takes them out already; this is the last line of
 * defence against a body framed twice). */
enum { FLD_KEEP = 0, FLD_SKIP, FLD_DATE, FLD_SERVER, FLD_CONNECTION, FLD_TRAILER, FLD_UPGRADE };

/* Whether a field_scan saw a field of kind k. */
#define HAS(scan, k) (((scan).seen >> (k)) & 1u)

static int classify(keel_str name)
{
    switch (name.len) {
    case 4:
        return name_is(name, "date", 4) ? FLD_DATE : FLD_KEEP;
    case 6:
        return name_is(name, "server", 6) ? FLD_SERVER : FLD_KEEP;
    case 7:
        return name_is(name, "trailer", 7)   ? FLD_TRAILER
               : name_is(name, "upgrade", 7) ? FLD_UPGRADE
                                             : FLD_KEEP;
    case 10:
        return name_is(name, "connection", 10) ? FLD_CONNECTION : FLD_KEEP;
    case 14:
        return name_is(name, "content-length", 14) ? FLD_SKIP : FLD_KEEP;
    case 17:
        return name_is(name, "transfer-encoding", 17) ? FLD_SKIP : FLD_KEEP;
    default:
        return FLD_KEEP;
    }
}

/* The same from the name's token (keel_field.token, 1 + keel_header_token):
 * an integer switch where the core classified the name already. */
static int classify_field(const keel_field *f)
{
    switch (f->token) {
    case 0:
        return classify(f->name);
    case 1 + KEEL_HDR_DATE:
        return FLD_DATE;
    case 1 + KEEL_HDR_SERVER:
        return FLD_SERVER;
    case 1 + KEEL_HDR_TRAILER:
        return FLD_TRAILER;
    case 1 + KEEL_HDR_UPGRADE:
        return FLD_UPGRADE;
    case 1 + KEEL_HDR_CONNECTION:
        return FLD_CONNECTION;
    case 1 + KEEL_HDR_CONTENT_LENGTH:
    case 1 + KEEL_HDR_TRANSFER_ENCODING:
        return FLD_SKIP;
    default:
        return FLD_KEEP;
    }
}

/* Does a Connection value list "close"? The core turns a handler's
 * Connection field into keel_http_request_keep_alive and never passes it
 * on; a field that reaches this far anyway still means what it says.
 * Never inlined: the list walker would bloat h1_head_serialize's field
 * loop, which every response runs, for this rare path
 * (docs/performance.md). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#elif defined(_MSC_VER)
__declspec(noinline)
#endif
static int
lists_close(keel_str v)
{
    return keel_list_has(v.ptr, v.len, "close");
}

static char *put(char *p, const void *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

#define PUT_LIT(p, lit) put(p, lit, sizeof(lit) - 1)

/* "Name: value\r\n", as the core handed it (already checked for CR/LF);
 * a prepared field's line as it is, in one move. */
static char *put_field(char *p, const keel_field *f)
{
    if (f->line != NULL)
        return put(p, f->line, f->line_len);
    p = put(p, f->name.ptr, f->name.len);
    p = PUT_LIT(p, ": ");
    p = put(p, f->value.ptr, f->value.len);
    return PUT_LIT(p, "\r\n");
}

/* What a head's fields are made of, from one pass before writing, and the
 * Date line to add if the handler wrote none. */
typedef struct field_scan {
    size_t bytes; /* the fields as written */
    /* 1 << FLD_* of each kind there: one OR a field, where a bit-field
     * each took a read-modify-write apiece (17 instructions a field). */
    unsigned seen;
    unsigned close : 1;
    unsigned dropped : 1; /* a framing or Connection field to leave out */
    const char *date_line;
    size_t date_len;
} field_scan;

static inline field_scan scan_fields(h1_conn *c, const keel_field *h, size_t n)
{
    field_scan f = {0};
    for (size_t i = 0; i < n; i++) {
        int kind = classify_field(&h[i]);
        if (kind == FLD_CONNECTION) {
            f.close |= lists_close(h[i].value);
            f.dropped = 1;
            continue;
        }
        if (kind == FLD_SKIP) {
            f.dropped = 1;
            continue;
        }
        f.seen |= 1u << kind;
        f.bytes += h[i].name.len + h[i].value.len + 4;
    }
    if (!HAS(f, FLD_DATE))
        f.date_line = date_cache_line(&c->w->date, c->w->worker, &f.date_len);
    return f;
}

/* The fields that are the handler's (framing and Connection left out:
 * the scan says whether any is there, so the usual head is copied without
 * looking at the names again). */
static inline char *put_fields(char *p, const keel_field *h, size_t n, const field_scan *f)
{
    for (size_t i = 0; i < n; i++) {
        if (f->dropped) {
            int kind = classify_field(&h[i]);
            if (kind == FLD_SKIP || kind == FLD_CONNECTION)
                continue;
        }
        p = put_field(p, &h[i]);
    }
    return p;
}

static char *put_status_line(h1_conn *c, char *p, int status)
{
    size_t sl_len;
    const char *sl = h1_status_line(c->w->cfg, status, &sl_len);
    if (sl != NULL)
        return put(p, sl, sl_len);
    /* A status without a phrase of its own (RFC 9110 15: an unregistered
     * code, classed by its first digit). */
    int w = snprintf(p, 64, "HTTP/1.1 %03d %.40s\r\n", status, keel_http_reason(status));
    return p + (w > 0 && w < 64 ? w : 0);
}

/* Date and Server, unless the handler wrote its own. */
static char *put_date_server(h1_conn *c, char *p, const field_scan *f)
{
    if (f->date_line != NULL)
        p = put(p, f->date_line, f->date_len);
    if (!HAS(*f, FLD_SERVER))
        p = put(p, c->w->cfg->server_line, c->w->cfg->server_line_len);
    return p;
}

/* Room put_status_line, put_date_server and a Connection field need. */
static size_t fixed_need(h1_conn *c, const field_scan *f)
{
    return 64 + f->date_len + (HAS(*f, FLD_SERVER) ? 0 : c->w->cfg->server_line_len) +
           sizeof("Connection: upgrade, keep-alive, close\r\n") + 2;
}

/* RFC 9110 7.6.1 options: close (9112 9.6), keep-alive for an HTTP/1.0
 * client (9112 C.2.2), and upgrade wherever an Upgrade field is sent
 * (RFC 9110 7.8: "A sender of Upgrade MUST also send an upgrade connection
 * option"). */
static char *put_connection(char *p, int upgrade, int keep_alive, int close)
{
    if (!upgrade && !keep_alive && !close)
        return p;
    p = PUT_LIT(p, "Connection: ");
    const char *sep = "";
    if (upgrade) {
        p = PUT_LIT(p, "upgrade");
        sep = ", ";
    }
    if (keep_alive) {
        p = put(p, sep, strlen(sep));
        p = PUT_LIT(p, "keep-alive");
        sep = ", ";
    }
    if (close) {
        p = put(p, sep, strlen(sep));
        p = PUT_LIT(p, "close");
    }
    return PUT_LIT(p, "\r\n");
}

int h1_head_serialize(h1_conn *c, int status, const keel_field *h, size_t n, int64_t length)
{
    int interim = status < 200;
    field_scan f = scan_fields(c, h, n);
    int close = c->close_after || f.close;

    /* Framing, RFC 9112 6.3. A response that announces trailer fields is
     * chunked even when its length is known: only chunked carries them. */
    int use_length = length >= 0 && !(HAS(f, FLD_TRAILER) && !c->version10);
    int framing;
    if (interim || status == 204 || status == 304) {
        framing = H1_BODY_NONE; /* never a body, never a length (RFC 9110 8.6) */
    } else if (c->is_head) {
        framing = H1_BODY_NONE; /* same fields as GET, no body (RFC 9110 9.3.2) */
    } else if (use_length) {
        framing = H1_BODY_LENGTH;
    } else if (!c->version10) {
        framing = H1_BODY_CHUNKED;
    } else {
        /* An HTTP/1.0 client knows no chunked coding: the body ends when
         * the connection does. */
        framing = H1_BODY_EOF;
        close = 1;
    }

    /* The size first, so the buffer is reserved once. */
    size_t need = f.bytes + fixed_need(c, &f) + sizeof("Content-Length: 18446744073709551615\r\n");
    char *start = h1_out_reserve(c, need);
    if (start == NULL)
        return KEEL_ERR_NOMEM;
    char *p = put_status_line(c, start, status);
    p = put_fields(p, h, n, &f);
    if (interim) {
        p = PUT_LIT(p, "\r\n");
        h1_out_commit(c, (size_t)(p - start));
        return KEEL_OK;
    }
    p = put_date_server(c, p, &f);
    if (framing == H1_BODY_LENGTH ||
        (framing == H1_BODY_NONE && c->is_head && use_length && status != 204 && status != 304)) {
        p = PUT_LIT(p, "Content-Length: ");
        p += h1_u64_dec(p, (uint64_t)length);
        p = PUT_LIT(p, "\r\n");
    } else if (framing == H1_BODY_CHUNKED) {
        p = PUT_LIT(p, "Transfer-Encoding: chunked\r\n");
    }
    p = put_connection(p, HAS(f, FLD_UPGRADE), c->version10 && !close, close);
    p = PUT_LIT(p, "\r\n");
    h1_out_commit(c, (size_t)(p - start));

    c->framing = (uint8_t)framing;
    c->exch->resp_left = framing == H1_BODY_LENGTH ? (uint64_t)length : 0;
    c->close_after = close ? 1u : 0u;
    c->head_sent = 1;
    return KEEL_OK;
}

int h1_upgrade_serialize(h1_conn *c, const keel_field *h, size_t n)
{
    field_scan f = scan_fields(c, h, n);
    /* RFC 9110 15.2.2: the server MUST generate an Upgrade field naming
     * the protocol(s) switched to; only the handler knows it. */
    if (!HAS(f, FLD_UPGRADE))
        return KEEL_ERR_INVAL;
    char *start = h1_out_reserve(c, f.bytes + fixed_need(c, &f));
    if (start == NULL)
        return KEEL_ERR_NOMEM;
    /* A 1xx ends at its empty line: no Content-Length (RFC 9110 8.6), no
     * Transfer-Encoding (RFC 9112 6.1). Date and Server as on every
     * response of this module (RFC 9110 6.6.1 allows Date on a 1xx). */
    char *p = put_status_line(c, start, 101);
    p = put_fields(p, h, n, &f);
    p = put_date_server(c, p, &f);
    p = put_connection(p, 1, 0, 0);
    p = PUT_LIT(p, "\r\n");
    h1_out_commit(c, (size_t)(p - start));
    c->head_sent = 1;
    return KEEL_OK;
}

size_t h1_trailers_size(const keel_header *t, size_t n)
{
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        need += t[i].name.len + t[i].value.len + 4;
    return need;
}

char *h1_trailers_put(char *p, const keel_header *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        /* Framing fields are never allowed in a trailer (RFC 9110 6.5.1). */
        if (classify(t[i].name) != FLD_KEEP)
            continue;
        keel_field f = {t[i].name, t[i].value, NULL, 0, 0};
        p = put_field(p, &f);
    }
    return p;
}
