/* buf.c — the growable buffer every page is built in. A page is built
 * whole, then handed to keel_response_send with free() as its release:
 * one allocation that doubles, no copy on the way out. */
#include "stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void stats_buf_init(stats_buf *b)
{
    memset(b, 0, sizeof *b);
}

void stats_buf_free(stats_buf *b)
{
    free(b->data);
    stats_buf_init(b);
}

/* Room for `more` bytes plus a NUL; 0 once failed. */
static int reserve(stats_buf *b, size_t more)
{
    if (b->failed)
        return 0;
    if (more > ST_BUF_MAX || b->len + more + 1 > ST_BUF_MAX) {
        b->failed = 1;
        return 0;
    }
    size_t need = b->len + more + 1;
    if (need <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (p == NULL) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void stats_buf_put(stats_buf *b, const void *data, size_t len)
{
    if (len == 0 || !reserve(b, len))
        return;
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void stats_buf_puts(stats_buf *b, const char *s)
{
    stats_buf_put(b, s, strlen(s));
}

void stats_buf_putc(stats_buf *b, char c)
{
    stats_buf_put(b, &c, 1);
}

void stats_buf_printf(stats_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small_buf[256];
    int n = vsnprintf(small_buf, sizeof small_buf, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small_buf) {
        stats_buf_put(b, small_buf, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void stats_buf_put_double(stats_buf *b, double v)
{
    /* The exposition format's spellings (Go's ParseFloat reads them). */
    if (isnan(v)) {
        stats_buf_puts(b, "NaN");
        return;
    }
    if (isinf(v)) {
        stats_buf_puts(b, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    /* Whole numbers print in full, without an exponent: the common case
     * of counters with scale 1 (a byte count past 1e15 included). */
    if (v == floor(v) && fabs(v) < 1e18) {
        stats_buf_printf(b, "%.0f", v);
        return;
    }
    /* 15 significant digits, what a double carries reliably in decimal:
     * a stored integer times its scale is not exact in binary, and
     * 100000 * 1e-6 should read 0.1, not 0.09999999999999999. */
    stats_buf_printf(b, "%.15g", v);
}

void stats_buf_put_json_str(stats_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    static const char escaped[] = "\"\\\n\r\t", escapes[] = "\"\\nrt";
    stats_buf_putc(b, '"');
    size_t run = 0; /* bytes copied as they are, in one put */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
            continue;
        stats_buf_put(b, s + run, i - run);
        run = i + 1;
        /* RFC 8259 7: the two-character escapes where there is one, else
         * \u00XX. */
        const char *short_esc = memchr(escaped, c, sizeof escaped - 1);
        if (short_esc != NULL) {
            char two[2] = {'\\', escapes[short_esc - escaped]};
            stats_buf_put(b, two, sizeof two);
        } else {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            stats_buf_put(b, u, sizeof u);
        }
    }
    stats_buf_put(b, s + run, len - run);
    stats_buf_putc(b, '"');
}
