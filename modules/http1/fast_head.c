/* fast_head.c — a request head of the common, unambiguous kind read in one
 * scan, in front of llhttp.
 *
 * It takes a head only when all of it is in the buffer and every byte of it
 * is inside a strict subset of RFC 9112 on which llhttp and the checks of
 * parse.c and validate.c have exactly one answer, and that answer is "a
 * valid request":
 *
 *   method SP origin-form SP ("HTTP/1.1" | "HTTP/1.0") CRLF
 *   *( token ":" OWS value OWS CRLF )
 *   CRLF
 *
 * with a registered method llhttp knows for HTTP (GET HEAD POST PUT DELETE
 * OPTIONS PATCH TRACE), a target of the bytes check_target allows starting
 * with '/', values of HTAB, SP, VCHAR and obs-text, within max_request_line,
 * max_header_bytes and max_headers, one valid Host (none for HTTP/1.0),
 * Content-Length only once and only as digits, Connection only as one
 * "close" or "keep-alive", Expect only empty or "100-continue". Anything else
 * (Transfer-Encoding, Upgrade, Proxy-Connection, other forms of target,
 * bare CR or LF, obs-fold, control bytes, a limit reached, a head not yet
 * whole) is "not mine": llhttp then parses the same bytes from the first
 * one, as if this file did not exist, so every refusal and every odd input
 * keeps llhttp's and the checks' answer. It leaves h1_exch as llhttp's
 * callbacks, on_headers_complete and h1_head_check would have
 * (tests/unit/test_h1_fast_head.c and tests/fuzz/fuzz_h1_head.c compare the
 * two paths).
 */
#include "h1.h"

#include <string.h>

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#endif
#define H1_FAST_SSE2 1
#endif

static int is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* RFC 9110 5.5: field-vchar / SP / HTAB, obs-text included (both llhttp
 * builds take it in a value; the checks pass it on). */
static int is_value_byte(unsigned char ch)
{
    return (ch >= 0x20 && ch != 0x7f) || ch == '\t';
}

#ifdef H1_FAST_SSE2
/* Masks of the bytes of one 16-byte block that end a run. */
static unsigned target_stops(__m128i v)
{
    /* Signed compares: bytes >= 0x80 are negative, so not above 0x20. */
    __m128i ok = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8(0x20)),
                               _mm_cmplt_epi8(v, _mm_set1_epi8(0x7f)));
    ok = _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('#')), ok);
    return ~(unsigned)_mm_movemask_epi8(ok) & 0xffffu;
}

static unsigned value_stops(__m128i v)
{
    __m128i ctl = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
    ctl = _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\t')), ctl);
    ctl = _mm_or_si128(ctl, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
    return (unsigned)_mm_movemask_epi8(ctl);
}
#endif

#ifdef H1_FAST_SSE2
/* The index of the lowest set bit of a nonzero mask (MSVC has no
 * __builtin_ctz; x64 MSVC takes the SSE2 path too). */
static inline unsigned lowest_bit(unsigned mask)
{
#if defined(_MSC_VER) && !defined(__clang__)
    unsigned long i;
    _BitScanForward(&i, mask);
    return (unsigned)i;
#else
    return (unsigned)__builtin_ctz(mask);
#endif
}
#endif

enum run_kind { RUN_TARGET, RUN_VALUE };

#ifdef H1_FAST_SSE2
static unsigned stops_of(enum run_kind kind, const char *at)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)at);
    return kind == RUN_TARGET ? target_stops(v) : value_stops(v);
}
#endif

static int in_run(enum run_kind kind, unsigned char ch)
{
    return kind == RUN_TARGET ? (h1_char_class[ch] & H1_CH_TARGET) != 0 : is_value_byte(ch);
}

/* How many bytes from `at` (before `end`) a request-target may hold
 * (check_target's class, VCHAR but '#'), or a value (is_value_byte).
 * `base` is where the head starts: a last block shorter than 16 bytes is
 * read overlapping the bytes before it when there are that many, its bytes
 * already seen shifted out. */
static inline size_t run_of(enum run_kind kind, const char *base, const char *at, const char *end)
{
    const char *p = at;
#ifdef H1_FAST_SSE2
    for (; end - p >= 16; p += 16) {
        unsigned stop = stops_of(kind, p);
        if (stop != 0)
            return (size_t)(p - at) + lowest_bit(stop);
    }
    if (p < end && end - base >= 16) {
        unsigned stop = stops_of(kind, end - 16) >> (16 - (unsigned)(end - p));
        return (size_t)(p - at) + (stop != 0 ? lowest_bit(stop) : (size_t)(end - p));
    }
#else
    (void)base;
#endif
    while (p < end && in_run(kind, (unsigned char)*p))
        p++;
    return (size_t)(p - at);
}

/* The method token before the first SP, as llhttp numbers it, for the
 * methods llhttp takes with an HTTP version (case matters: RFC 9110 9.1);
 * its length in *len. -1: not one of them. */
static int method_of(const char *s, size_t avail, uint32_t *len)
{
    size_t n = 0;
    while (n < avail && n < 8 && s[n] != ' ')
        n++;
    if (n == avail || s[n] != ' ')
        return -1;
    *len = (uint32_t)n;
    switch (n) {
    case 3:
        if (memcmp(s, "GET", 3) == 0)
            return HTTP_GET;
        if (memcmp(s, "PUT", 3) == 0)
            return HTTP_PUT;
        return -1;
    case 4:
        if (memcmp(s, "HEAD", 4) == 0)
            return HTTP_HEAD;
        if (memcmp(s, "POST", 4) == 0)
            return HTTP_POST;
        return -1;
    case 5:
        if (memcmp(s, "PATCH", 5) == 0)
            return HTTP_PATCH;
        if (memcmp(s, "TRACE", 5) == 0)
            return HTTP_TRACE;
        return -1;
    case 6:
        return memcmp(s, "DELETE", 6) == 0 ? HTTP_DELETE : -1;
    case 7:
        return memcmp(s, "OPTIONS", 7) == 0 ? HTTP_OPTIONS : -1;
    default:
        return -1;
    }
}

/* n bytes at s equal the lower-case literal lit, ASCII case ignored. */
static int ieq(const char *s, size_t n, const char *lit, size_t lit_len)
{
    return n == lit_len && keel_ascii_iequal_lc(s, n, lit, n);
}

int h1_fast_head(h1_conn *c)
{
    h1_exch *exch = c->exch;
    const h1_config *cfg = c->w->cfg;
    const char *head = c->data + c->head_base;
    size_t avail = c->len - c->head_base;
    /* A head past max_header_bytes is llhttp's (431): none of it is
     * looked at beyond that. */
    if (avail > cfg->max_header_bytes)
        avail = (size_t)cfg->max_header_bytes;
    const char *end = head + avail;

    /* ---- request line ---- */
    uint32_t method_len;
    int method;
    if (avail >= 4 && memcmp(head, "GET ", 4) == 0) {
        method = HTTP_GET;
        method_len = 3;
    } else if ((method = method_of(head, avail, &method_len)) < 0) {
        return 0;
    }
    uint32_t url_off = method_len + 1;
    if (url_off >= avail || head[url_off] != '/')
        return 0;
    uint32_t url_len = (uint32_t)run_of(RUN_TARGET, head, head + url_off, end);
    uint32_t version_off = url_off + url_len + 6; /* after " HTTP/" */
    uint32_t line_len = version_off + 3 + 2;
    if (line_len > avail || line_len > cfg->max_request_line)
        return 0;
    const char *sp = head + url_off + url_len;
    uint64_t version_word;
    memcpy(&version_word, sp + 1, 8);
    int version;
    if (version_word == 0x312e312f50545448u) /* "HTTP/1.1", little-endian */
        version = 11;
    else if (version_word == 0x302e312f50545448u) /* "HTTP/1.0" */
        version = 10;
    else
        return 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "fast_head.c: the version words are little-endian"
#endif
    if (sp[0] != ' ' || sp[9] != '\r' || sp[10] != '\n')
        return 0;

    /* ---- header fields ---- */
    size_t n = 0, hosts = 0;
    int host_index = -1;
    const char *host = NULL;
    size_t host_len = 0;
    /* The arrays in locals: the stores into them would otherwise make the
     * compiler load exch's fields again for every field. */
    h1_span *spans = exch->spans;
    uint16_t *tokens = exch->tokens;
    size_t cap = exch->headers_cap, max_headers = (size_t)cfg->max_headers;
    unsigned conn_close = 0, conn_keep_alive = 0, expect_continue = 0, cl_present = 0;
    uint64_t content_length = 0;
    const char *p = head + line_len;
    for (;;) {
        if (end - p < 2)
            return 0; /* not whole (yet), or past max_header_bytes */
        if (p[0] == '\r') {
            if (p[1] != '\n')
                return 0;
            p += 2;
            break;
        }
        const char *name = p;
        while (p < end && (h1_char_class[(unsigned char)*p] & H1_CH_TCHAR))
            p++;
        if (p == name || p == end || *p != ':')
            return 0;
        size_t name_len = (size_t)(p - name);
        p++;
        while (p < end && is_ows(*p))
            p++;
        const char *value = p;
        p += run_of(RUN_VALUE, head, p, end);
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
            return 0;
        const char *value_end = p;
        while (value_end > value && is_ows(value_end[-1]))
            value_end--;
        size_t value_len = (size_t)(value_end - value);
        p += 2;

        if (n >= max_headers)
            return 0;
        if (n == cap) {
            if (h1_exch_grow(exch, n + 1) != KEEL_OK)
                return 0;
            spans = exch->spans;
            tokens = exch->tokens;
            cap = exch->headers_cap;
        }
        unsigned token = keel_header_token(name, name_len);
        h1_span *s = &spans[n];
        s->name_off = (uint32_t)(name - head);
        s->name_len = (uint32_t)name_len;
        /* An empty value is a view of no bytes where llhttp reports one:
         * just after its line. */
        s->value_off = (uint32_t)((value_len > 0 ? value : p) - head);
        s->value_len = (uint32_t)value_len;
        tokens[n] = (uint16_t)token;
        switch (token) {
        case KEEL_HDR_HOST:
            hosts++;
            host_index = (int)n;
            host = value;
            host_len = value_len;
            break;
        case KEEL_HDR_CONTENT_LENGTH:
            /* Digits alone, once, and a length keel takes (max_body: 413
             * is llhttp's path's). */
            if (cl_present || value_len == 0 || value_len > 15 || value_end != p - 2)
                return 0;
            for (size_t i = 0; i < value_len; i++) {
                if (value[i] < '0' || value[i] > '9')
                    return 0;
                content_length = content_length * 10 + (uint64_t)(value[i] - '0');
            }
            if (content_length > cfg->max_body)
                return 0;
            cl_present = 1;
            break;
        case KEEL_HDR_CONNECTION:
            /* One option, as llhttp reads it (RFC 9112 9.3: close, and
             * HTTP/1.0's keep-alive); lists and "upgrade" are llhttp's. */
            if (value_end != p - 2)
                return 0;
            if (ieq(value, value_len, "close", 5))
                conn_close = 1;
            else if (ieq(value, value_len, "keep-alive", 10))
                conn_keep_alive = 1;
            else
                return 0;
            break;
        case KEEL_HDR_EXPECT:
            /* RFC 9110 10.1.1: 100-continue only, ignored from HTTP/1.0;
             * anything else is 417 on llhttp's path. */
            if (value_len > 0) {
                if (!ieq(value, value_len, "100-continue", 12))
                    return 0;
                expect_continue = version == 11;
            }
            break;
        case KEEL_HDR_TRANSFER_ENCODING:
        case KEEL_HDR_UPGRADE:
        case KEEL_HDR_PROXY_CONNECTION: /* llhttp reads it as Connection */
            return 0;
        default:
            break;
        }
        n++;
    }
    /* RFC 9112 3.2: one valid Host; HTTP/1.0 may have none. */
    if (hosts > 1 || (hosts == 0 && version == 11))
        return 0;
    if (hosts == 1 && !h1_valid_host_field(c->w, host, host_len))
        return 0;

    exch->method_off = 0;
    exch->method_len = method_len;
    exch->url_off = url_off;
    exch->url_len = url_len;
    exch->version_off = version_off;
    exch->version_len = 3;
    exch->head_len = (uint32_t)(p - head);
    exch->line_done = exch->head_done = 1;
    exch->in_name = 0;
    exch->has_body = content_length > 0;
    exch->te_present = 0;
    exch->cl_present = cl_present;
    exch->expect_continue = expect_continue;
    /* RFC 9112 9.3, as llhttp_should_keep_alive: HTTP/1.1 persists unless
     * "close", HTTP/1.0 only with "keep-alive". */
    exch->keep_alive = version == 11 ? !conn_close : conn_keep_alive;
    exch->upgrade_asked = 0;
    exch->method = (uint8_t)method;
    exch->host_index = host_index;
    exch->auth_off = UINT32_MAX;
    exch->auth_len = 0;
    exch->nheaders = n;
    exch->head.content_length = (int64_t)content_length;
    exch->head.version = version;
    return 1;
}
