/* validate.c — the request checks of RFC 9110/9112 that llhttp does not
 * make, run once a head is complete, and the head handed to the core.
 *
 * Each refusal closes the connection (h1_fail): after a malformed head the
 * framing of whatever follows cannot be trusted, which is how request
 * smuggling starts.
 */
#include "h1.h"

#include <string.h>

/* Character classes (h1.h), one table lookup each: validation runs on
 * every request, so no strchr per byte. */
const unsigned char h1_char_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    0, 5, 4, 1, 5, 5, 5, 5, 4, 4, 5, 5, 4, 5, 5, 4, /* 0x20  !"#$%&'()*+,-./ */
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 4, /* 0x30 0-9:;<=>? */
    4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, /* 0x40 @A-O */
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 5, 5, /* 0x50 P-Z[\]^_ */
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, /* 0x60 `a-o */
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 4, 5, 4, 5, 0, /* 0x70 p-z{|}~ */
    /* 0x80..0xff: nothing */
};

int h1_is_tchar(unsigned char ch)
{
    return (h1_char_class[ch] & H1_CH_TCHAR) != 0;
}

int h1_is_token(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(h1_char_class[(unsigned char)s[i]] & H1_CH_TCHAR))
            return 0;
    return n > 0;
}

/* Case-insensitive compare of n bytes against a lower-case literal. */
static int ieq(const char *s, const char *lit, size_t n)
{
    return keel_ascii_iequal_lc(s, n, lit, n);
}

/* RFC 9110 7.2: Host = uri-host [ ":" port ] (the core's grammar, the same
 * for every protocol: keel_http_valid). An empty value is valid (a target
 * with no authority). */
static int valid_host(const char *s, size_t n)
{
    return n == 0 || keel_http_valid(KEEL_HTTP_AUTHORITY, s, n);
}

/* Whether n bytes at a and b are the same; most Host values ("localhost",
 * "example.com:8080") are 8 to 16 bytes: two overlapping words, no call. */
static int same_bytes(const char *a, const char *b, size_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t a0, b0, a1, b1;
        memcpy(&a0, a, 8);
        memcpy(&b0, b, 8);
        memcpy(&a1, a + n - 8, 8);
        memcpy(&b1, b + n - 8, 8);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    return memcmp(a, b, n) == 0;
}

int h1_valid_host_field(h1_worker *w, const char *s, size_t n)
{
    if (n > 0 && n == w->valid_host.len && same_bytes(s, w->valid_host.bytes, n))
        return 1;
    if (!valid_host(s, n))
        return 0;
    if (n > 0 && n <= sizeof w->valid_host.bytes) {
        memcpy(w->valid_host.bytes, s, n);
        w->valid_host.len = (uint8_t)n;
    }
    return 1;
}

/* RFC 9112 2.2: lines end in CRLF, and a bare CR MUST be rejected (or
 * replaced by SP). Loose llhttp takes a bare LF for the end of the header
 * section, a bare CR for the end of some lines, and even "\r" plus any
 * byte for the final empty line; so the line structure of the whole head is
 * checked here. RFC 9112 5.2: a line starting with whitespace is obs-fold,
 * which a server MUST reject with 400 (or rewrite); llhttp joins it to the
 * previous value. Byte by byte where no vector instructions are known. */
static int check_lines_bytes(const char *head, size_t len)
{
    const char *end = head + len;
    for (const char *p = head; (p = memchr(p, '\r', (size_t)(end - p))) != NULL; p++)
        if (p + 1 == end || p[1] != '\n')
            return 400;
    for (const char *p = head; (p = memchr(p, '\n', (size_t)(end - p))) != NULL;) {
        if (p == head || p[-1] != '\r')
            return 400;
        p++;
        if (p < end && (*p == ' ' || *p == '\t'))
            return 400;
    }
    return 0;
}

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>

/* The same in one pass over the head, sixteen bytes at a time (it runs on
 * every request): per block, a mask of its CRs and one of its LFs. Every
 * LF must sit right after a CR and every CR right before an LF, so the LF
 * mask equals the CR mask moved one byte on (the last CR of a block
 * carried into the next); a line start (after an LF) must be neither SP
 * nor HTAB. The last block overlaps the one before it, its bytes already
 * seen shifted out of the masks. */
static int check_lines(const char *head, size_t len)
{
    if (len < 4 || memcmp(head + len - 4, "\r\n\r\n", 4) != 0)
        return 400;
    if (len < 16)
        return check_lines_bytes(head, len);
    const __m128i cr_bytes = _mm_set1_epi8('\r'), lf_bytes = _mm_set1_epi8('\n');
    unsigned cr_before = 0, lf_before = 0;
    for (size_t i = 0; i < len; i += 16) {
        unsigned drop = i + 16 <= len ? 0 : (unsigned)(i + 16 - len);
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(head + i - drop));
        unsigned cr = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, cr_bytes)) >> drop;
        unsigned lf = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, lf_bytes)) >> drop;
        if ((((cr << 1) | cr_before) & 0xffffu) != lf)
            return 400;
        unsigned line_start = ((lf << 1) | lf_before) & 0xffffu;
        if (line_start != 0) {
            __m128i ws = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')),
                                      _mm_cmpeq_epi8(v, _mm_set1_epi8('\t')));
            if ((((unsigned)_mm_movemask_epi8(ws) >> drop) & line_start) != 0)
                return 400;
        }
        cr_before = cr >> 15;
        lf_before = lf >> 15;
    }
    return 0;
}
#else
static int check_lines(const char *head, size_t len)
{
    if (len < 4 || memcmp(head + len - 4, "\r\n\r\n", 4) != 0)
        return 400;
    return check_lines_bytes(head, len);
}
#endif

/* RFC 9112 3.2: the four forms of request-target. Records the authority of
 * an absolute-form target, which then stands for Host (3.2.2). */
static int check_target(h1_exch *exch, const char *head)
{
    const char *t = head + exch->url_off;
    size_t n = exch->url_len;
    /* Loose llhttp lets some of these by (HTAB, FF, bytes >= 0x80). */
    for (size_t i = 0; i < n; i++)
        if (!(h1_char_class[(unsigned char)t[i]] & H1_CH_TARGET))
            return 400;
    if (exch->method == HTTP_CONNECT)
        return 501; /* authority-form: keel is not a proxy */
    if (n > 0 && t[0] == '/')
        return 0; /* origin-form */
    if (n == 1 && t[0] == '*')
        return exch->method == HTTP_OPTIONS ? 0 : 400; /* asterisk-form */
    /* absolute-form: scheme "://" authority [path-abempty] ["?" query] */
    size_t i = 0;
    while (i < n && t[i] != ':')
        i++;
    if (!((i == 4 && ieq(t, "http", 4)) || (i == 5 && ieq(t, "https", 5))))
        return 400;
    if (n - i < 3 || t[i + 1] != '/' || t[i + 2] != '/')
        return 400;
    size_t a = i + 3, e = a;
    while (e < n && t[e] != '/' && t[e] != '?')
        e++;
    /* RFC 9110 4.2.1/4.2.4: an http(s) URI needs a host and must not
     * carry userinfo. */
    if (e == a || memchr(t + a, '@', e - a) != NULL || !valid_host(t + a, e - a))
        return 400;
    exch->auth_off = exch->url_off + (uint32_t)a;
    exch->auth_len = (uint32_t)(e - a);
    return 0;
}

/* RFC 9112 6.1: keel decodes only the chunked transfer coding. llhttp has
 * already made sure chunked is present and final; anything else listed
 * (gzip, chunked) is a coding we would have to undo: 501. */
static int check_transfer_encoding(const char *v, size_t n)
{
    const char *at = v, *el;
    size_t len;
    while (keel_list_next(&at, v + n, &el, &len))
        if (!(len == 7 && ieq(el, "chunked", 7)))
            return 501;
    return 0;
}
int h1_head_check(h1_conn *c, const char *head)
{
    h1_exch *exch = c->exch;

    /* RFC 9112 3: request-line = method SP request-target SP HTTP-version,
     * exactly one SP each; loose llhttp accepts runs of spaces. */
    if (exch->method_off == UINT32_MAX ||
        exch->url_off != exch->method_off + exch->method_len + 1 ||
        exch->version_off != exch->url_off + exch->url_len + 6)
        return 400;
    int status = check_lines(head, exch->head_len);
    if (status == 0)
        status = check_target(exch, head);
    if (status != 0)
        return status;

    int hosts = 0, te_fields = 0;
    exch->expect_continue = 0;
    for (size_t i = 0; i < exch->nheaders; i++) {
        const h1_span *s = &exch->spans[i];
        const char *value = head + s->value_off;
        switch (exch->tokens[i]) {
        case KEEL_HDR_HOST:
            hosts++;
            exch->host_index = (int)i;
            break;
        case KEEL_HDR_EXPECT:
            if (s->value_len > 0) {
                /* RFC 9110 10.1.1: 100-continue is the only expectation;
                 * an HTTP/1.0 client's one is ignored. Any other: 417. */
                if (s->value_len == 12 && ieq(value, "100-continue", 12))
                    exch->expect_continue = exch->head.version == 11;
                else
                    return 417;
            }
            break;
        case KEEL_HDR_TRANSFER_ENCODING:
            te_fields++;
            /* RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message means
             * the framing is faulty. */
            if (exch->head.version == 10)
                return 400;
            if ((status = check_transfer_encoding(value, s->value_len)) != 0)
                return status;
            break;
        default:
            break;
        }
    }
    /* RFC 9112 3.2: 400 for an HTTP/1.1 request without Host, for any
     * request with more than one Host, or with an invalid Host value. The
     * Host of an absolute-form request is checked too, then ignored. */
    if (hosts > 1 || (hosts == 0 && exch->head.version == 11))
        return 400;
    if (hosts == 1) {
        const h1_span *s = &exch->spans[exch->host_index];
        if (!h1_valid_host_field(c->w, head + s->value_off, s->value_len))
            return 400;
    }
    /* llhttp has refused Content-Length together with Transfer-Encoding
     * and every repeated Content-Length (RFC 9112 6.3 allows refusing
     * those with 400); make sure of the first, whatever its build. */
    if (exch->te_present && exch->cl_present)
        return 400;
    /* RFC 9112 6.3: a Transfer-Encoding whose final coding is not chunked
     * leaves the body's length unknowable: 400 and close. llhttp marks
     * the message chunked only when it saw chunked last; a field it did
     * not count (an empty or all-blank value) would otherwise let
     * Content-Length, or nothing, frame a body the sender meant otherwise
     * (request smuggling). */
    if (te_fields > 0 && !exch->te_present)
        return 400;
    /* A declared body over the limit is refused before a byte of it is
     * read, with or without 100-continue (RFC 9110 15.5.14). */
    if (exch->head.content_length > 0 && (uint64_t)exch->head.content_length > c->w->cfg->max_body)
        return 413;
    return 0;
}

void h1_head_build(h1_conn *c, const char *head)
{
    h1_exch *exch = c->exch;
    size_t n = exch->nheaders;
    for (size_t i = 0; i < n; i++) {
        const h1_span *s = &exch->spans[i];
        exch->headers[i].name = (keel_str){head + s->name_off, s->name_len};
        exch->headers[i].value = (keel_str){head + s->value_off, s->value_len};
    }
    if (exch->auth_off != UINT32_MAX) {
        /* RFC 9112 3.2.2: the target's authority replaces Host. */
        keel_str auth = {head + exch->auth_off, exch->auth_len};
        if (exch->host_index >= 0)
            exch->headers[exch->host_index].value = auth;
        else if (n < exch->headers_cap || h1_exch_grow(exch, n + 1) == KEEL_OK) {
            exch->tokens[n] = KEEL_HDR_HOST;
            exch->headers[n++] = (keel_header){{"Host", 4}, auth};
        }
    }
    keel_http_head *h = &exch->head;
    h->size = sizeof *h;
    h->method = (keel_str){head + exch->method_off, exch->method_len};
    h->target = (keel_str){head + exch->url_off, exch->url_len};
    h->headers = exch->headers;
    h->tokens = exch->tokens;
    h->nheaders = n;
    h->max_body = c->w->cfg->max_body;
    h->stream_id = 0; /* HTTP/1.1 has no id for an exchange (the head is reused) */
    /* keep_alive and expect_continue are deprecated and left 0: both are
     * ours to act on (exchange.c), not the core's. */
    h->keep_alive = 0;
    h->expect_continue = 0;
}
