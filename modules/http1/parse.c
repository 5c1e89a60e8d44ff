/* parse.c — driving llhttp, and the RFC 9112 checks llhttp leaves to us.
 *
 * llhttp runs without lenient flags. It is built in its default (loose)
 * mode wherever a system library is used, so every rule that loose mode
 * relaxes and that matters for request smuggling is checked again here:
 * line endings, obs-fold, whitespace before the colon, empty field names,
 * the request-line's single spaces and the request-target's characters.
 *
 * Header fields are recorded as offsets from the head's first byte while
 * the head is incomplete (the connection's buffer may move between two
 * deliveries); views are made only once the head is whole.
 */
#include "h1.h"

#include <string.h>

/* Offset of `at` from the first byte of the current head. */
static uint32_t off_of(const h1_conn *c, const char *at)
{
    return (uint32_t)((size_t)(at - c->data) - c->head_base);
}

static int fail_with(h1_conn *c, llhttp_t *p, int status, const char *why)
{
    c->exch->error_status = status;
    llhttp_set_error_reason(p, why);
    return HPE_USER;
}

/* Extends a span that may arrive in pieces (one execute call per delivery). */
static void span_add(uint32_t *off, uint32_t *len, uint32_t at, size_t n)
{
    if (*off == UINT32_MAX)
        *off = at;
    *len = (uint32_t)(at + n - *off);
}

/* ---- request line ------------------------------------------------------ */

static int on_method(llhttp_t *p, const char *at, size_t n)
{
    h1_conn *c = p->data;
    span_add(&c->exch->method_off, &c->exch->method_len, off_of(c, at), n);
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    h1_conn *c = p->data;
    h1_exch *exch = c->exch;
    uint32_t off = off_of(c, at);
    /* RFC 9112 3: a server that receives a request-target longer than it
     * wishes to parse MUST respond with 414. Checked as the target arrives
     * so a huge one is refused before it is buffered whole. */
    if (off + n > c->w->cfg->max_request_line)
        return fail_with(c, p, 414, "request-target too long");
    span_add(&exch->url_off, &exch->url_len, off, n);
    return 0;
}

static int on_version(llhttp_t *p, const char *at, size_t n)
{
    h1_conn *c = p->data;
    span_add(&c->exch->version_off, &c->exch->version_len, off_of(c, at), n);
    return 0;
}

static int on_version_complete(llhttp_t *p)
{
    h1_conn *c = p->data;
    h1_exch *exch = c->exch;
    exch->line_done = 1;
    if ((uint64_t)exch->version_off + exch->version_len + 2 > c->w->cfg->max_request_line)
        return fail_with(c, p, 414, "request line too long");
    /* RFC 9110 6.2: only HTTP/1.0 and HTTP/1.1 are spoken here; llhttp
     * accepts "HTTP/0.9" and "HTTP/2.0" request lines. */
    if (p->http_major != 1 || p->http_minor > 1)
        return fail_with(c, p, 505, "unsupported HTTP version");
    return 0;
}

/* ---- header fields ----------------------------------------------------- */

static int check_head_size(h1_conn *c, llhttp_t *p, uint32_t off, size_t n)
{
    if (off + n > c->w->cfg->max_header_bytes)
        return fail_with(c, p, 431, "header section too large");
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    h1_conn *c = p->data;
    h1_exch *exch = c->exch;
    uint32_t off = off_of(c, at);
    if (check_head_size(c, p, off, n))
        return HPE_USER;
    if (!exch->in_name) {
        if (exch->nheaders >= c->w->cfg->max_headers)
            return fail_with(c, p, 431, "too many header fields");
        if (exch->nheaders == exch->headers_cap &&
            h1_exch_grow(exch, exch->nheaders + 1) != KEEL_OK)
            return fail_with(c, p, 500, "out of memory");
        h1_span *s = &exch->spans[exch->nheaders];
        s->name_off = off;
        s->name_len = 0;
        s->value_off = UINT32_MAX;
        s->value_len = 0;
        exch->in_name = 1;
    }
    h1_span *s = &exch->spans[exch->nheaders];
    s->name_len = (uint32_t)(off + n - s->name_off);
    return 0;
}

static int on_header_field_complete(llhttp_t *p)
{
    h1_conn *c = p->data;
    h1_exch *exch = c->exch;
    /* RFC 9110 5.1: a field name is a token, so never empty (llhttp
     * reports ": value" as a field with an empty name). */
    if (!exch->in_name || exch->spans[exch->nheaders].name_len == 0)
        return fail_with(c, p, 400, "empty field name");
    /* Loose llhttp lets spaces into a name: "X A: a", and "Host : a"
     * (RFC 9112 5.1: no whitespace between name and colon, a server MUST
     * reject it with 400). Check the whole token. */
    const h1_span *s = &exch->spans[exch->nheaders];
    const char *name = c->data + c->head_base + s->name_off;
    if (!h1_is_token(name, s->name_len))
        return fail_with(c, p, 400, "invalid field name");
    /* Classified once, here: validate.c and the core (the head's tokens)
     * ask the integer what they would otherwise ask the bytes. */
    exch->tokens[exch->nheaders] = (uint16_t)keel_header_token(name, s->name_len);
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    h1_conn *c = p->data;
    h1_exch *exch = c->exch;
    uint32_t off = off_of(c, at);
    if (check_head_size(c, p, off, n))
        return HPE_USER;
    if (!exch->in_name)
        return fail_with(c, p, 400, "empty field name");
    h1_span *s = &exch->spans[exch->nheaders];
    /* Pieces of one value are contiguous; a gap means llhttp skipped a
     * CRLF and joined an obs-fold continuation line (RFC 9112 5.2: reject
     * with 400). The scan in check_lines catches the same thing. */
    if (s->value_off != UINT32_MAX && off != s->value_off + s->value_len)
        return fail_with(c, p, 400, "obsolete line folding");
    span_add(&s->value_off, &s->value_len, off, n);
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    h1_conn *c = p->data;
    h1_exch *exch = c->exch;
    if (!exch->in_name)
        return fail_with(c, p, 400, "empty field name");
    h1_span *s = &exch->spans[exch->nheaders];
    if (s->value_off == UINT32_MAX) {
        /* An empty value: point just after the name, never at NULL
         * (a NULL view means "absent" to the core). */
        s->value_off = s->name_off + s->name_len;
        s->value_len = 0;
    }
    /* RFC 9110 5.5: the value excludes trailing whitespace (llhttp has
     * already skipped the leading one). */
    const char *v = c->data + c->head_base + s->value_off;
    while (s->value_len > 0 && (v[s->value_len - 1] == ' ' || v[s->value_len - 1] == '\t'))
        s->value_len--;
    exch->nheaders++;
    exch->in_name = 0;
    return 0;
}

/* ---- message ------------------------------------------------------------ */

static int on_headers_complete(llhttp_t *p)
{
    h1_conn *c = p->data;
    h1_exch *exch = c->exch;
    exch->head_done = 1;
    exch->has_body = (p->flags & F_CHUNKED) || p->content_length > 0;
    exch->keep_alive = llhttp_should_keep_alive(p) != 0;
    exch->head.content_length = (p->flags & F_CHUNKED) ? -1 : (int64_t)p->content_length;
    exch->head.version = p->http_major * 10 + p->http_minor;
    exch->te_present = (p->flags & F_TRANSFER_ENCODING) != 0;
    exch->cl_present = (p->flags & F_CONTENT_LENGTH) != 0;
    exch->method = p->method;
    /* RFC 9110 7.8: a client asks to switch with an Upgrade field and the
     * "upgrade" connection option (llhttp reads both token lists). Whether
     * to switch is the handler's call (keel_response_upgrade); the request
     * is an ordinary one until then, so llhttp's own upgrade flag is
     * cleared to keep it parsing what follows as HTTP. CONNECT is refused
     * with 501 later. */
    exch->upgrade_asked = (p->flags & F_UPGRADE) && (p->flags & F_CONNECTION_UPGRADE);
    p->upgrade = 0;
    /* Stop before the body: it is read only when the core asks for it,
     * and framed by body.c, not by llhttp. A message without a body stops
     * at on_message_complete instead, which comes right after this without
     * consuming a byte. */
    return exch->has_body ? HPE_PAUSED : 0;
}

static int on_message_complete(llhttp_t *p)
{
    (void)p;
    /* One message at a time: the next request waits until this exchange
     * is over. */
    return HPE_PAUSED;
}

const llhttp_settings_t h1_llhttp_settings = {
    .on_method = on_method,
    .on_url = on_url,
    .on_version = on_version,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_message_complete = on_message_complete,
    .on_version_complete = on_version_complete,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value_complete = on_header_value_complete,
};

void h1_parse_init(h1_conn *c, h1_exch *exch)
{
    (void)c;
    exch->error_status = 0;
    exch->req = NULL;
    exch->body_seen = exch->body_left = exch->resp_left = 0;
    exch->overhead = exch->body_start_ms = 0;
    exch->line_len = 0;
    exch->body_state = 0;
}

void h1_llhttp_start(h1_conn *c, h1_exch *exch)
{
    llhttp_init(&exch->parser, HTTP_REQUEST, &h1_llhttp_settings);
    exch->parser.data = c;
    exch->method_off = exch->url_off = exch->version_off = UINT32_MAX;
    exch->method_len = exch->url_len = exch->version_len = 0;
    exch->head_len = 0;
    exch->line_done = exch->head_done = exch->has_body = exch->in_name = 0;
    exch->te_present = exch->cl_present = exch->expect_continue = 0;
    exch->keep_alive = exch->upgrade_asked = 0;
    exch->nheaders = 0;
    exch->host_index = -1;
    exch->auth_off = UINT32_MAX;
    exch->auth_len = 0;
}

/* ---- driving llhttp ------------------------------------------------------ */

/* A callback's own status wins: llhttp reports an error returned from an
 * on_*_complete or on_chunk_header callback as its own HPE_CB_* code. */
static int parse_failure(h1_conn *c, llhttp_errno_t err)
{
    if (c->exch->error_status != 0)
        return c->exch->error_status;
    return h1_parse_error_status(c, err, c->data + c->head_base, c->len - c->head_base);
}

int h1_llhttp_head(h1_conn *c)
{
    h1_exch *exch = c->exch;
    const char *start = c->data + c->pos;
    llhttp_errno_t err = llhttp_execute(&exch->parser, start, c->len - c->pos);
    if (err == HPE_OK) {
        c->pos = c->len;
        /* Incomplete: refuse now if it already exceeds a limit, else wait
         * for more (the head is kept in the buffer and parsing goes on from
         * here next time). */
        size_t have = c->len - c->head_base;
        if (!exch->line_done && have > c->w->cfg->max_request_line)
            return 414;
        if (have > c->w->cfg->max_header_bytes)
            return 431;
        return H1_NEED_MORE;
    }
    if (err == HPE_PAUSED && exch->head_done) {
        c->pos = (size_t)(llhttp_get_error_pos(&exch->parser) - c->data);
        llhttp_resume(&exch->parser);
        exch->head_len = (uint32_t)(c->pos - c->head_base);
        if (exch->head_len > c->w->cfg->max_header_bytes)
            return 431;
        int status = h1_head_check(c, c->data + c->head_base);
        return status != 0 ? status : H1_READY;
    }
    return parse_failure(c, err);
}

int h1_parse_head(h1_conn *c)
{
    /* A head read by neither parser yet: the fast path's if it is whole
     * and of its kind, llhttp's from its first byte otherwise. */
    if (c->pos == c->head_base) {
        if (h1_fast_head(c)) {
            c->pos = c->head_base + c->exch->head_len;
            return H1_READY;
        }
        h1_llhttp_start(c, c->exch);
    }
    int r = h1_llhttp_head(c);
    if (r != H1_READY && r != H1_NEED_MORE) {
        h1_fail(c, r);
        return H1_FAILED;
    }
    return r;
}

int h1_parse_error_status(h1_conn *c, llhttp_errno_t err, const char *base, size_t avail)
{
    (void)c;
    if (err == HPE_INVALID_METHOD) {
        /* RFC 9110 9.1: a method that is a valid token but unknown here is
         * 501; anything else on the request line is 400. llhttp knows only
         * the registered methods, so look at the token ourselves. */
        size_t i = 0;
        while (i < avail && (base[i] == '\r' || base[i] == '\n'))
            i++;
        size_t start = i;
        while (i < avail && h1_is_tchar((unsigned char)base[i]))
            i++;
        return i > start && i < avail && base[i] == ' ' ? 501 : 400;
    }
    if (err == HPE_INVALID_VERSION) {
        /* A well-formed "HTTP/d.d" that is not 1.0 or 1.1 (llhttp refuses
         * 1.2 and up itself): 505; a malformed version: 400. */
        const char *nl = memchr(base, '\n', avail);
        size_t line = nl ? (size_t)(nl - base) : avail;
        for (size_t i = 0; i + 9 <= line; i++) {
            const char *v = base + i + 6;
            if (memcmp(base + i, " HTTP/", 6) == 0 && v[0] >= '0' && v[0] <= '9' && v[1] == '.' &&
                v[2] >= '0' && v[2] <= '9')
                /* 1.0 and 1.1 are fine: then the error is elsewhere (a bad
                 * line end after the version, say). */
                return v[0] == '1' && (v[2] == '0' || v[2] == '1') ? 400 : 505;
        }
        return 400;
    }
    if (err == HPE_PAUSED_H2_UPGRADE)
        return 505; /* the HTTP/2 connection preface "PRI * HTTP/2.0" */
    return 400;
}
