/* fuzz_fcgi — the proxy's FastCGI reader and CGI head parser
 * (modules/proxy/fcgi.c), which call no keel function and are compiled in
 * alone: the bytes a hostile FastCGI application may send.
 *
 * The input's first byte chooses how the rest is cut into reads (1..256
 * bytes each, as a socket might deliver them); the rest is what the
 * application sent. It is read twice, whole and in those pieces, and the
 * STDOUT stream gathered as fastcgi.c gathers a head (at most 4 KiB, its
 * end searched as more arrives) and parsed.
 *
 * Checked besides ASan/UBSan: every span lies within the read it came
 * from and consumption never passes its end; both readings give the same
 * STDOUT and STDERR bytes and the same outcome (error, end with the same
 * statuses, or more wanted); nothing is read after an error or the end; a
 * parsed head's fields lie within it, their count is the same whether
 * counted or filled, and the status is within 200..599. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fcgi.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_fcgi: " __VA_ARGS__);                                            \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define HEAD_MAX 4096

typedef struct outcome {
    unsigned char out[1 << 16], err[1 << 16];
    size_t out_len, err_len;
    int last; /* FCGI_EV_MORE, _END or _ERROR */
    uint32_t app_status;
    int protocol_status;
} outcome;

static void gather(unsigned char *buf, size_t *len, const char *span, size_t n)
{
    size_t room = (1u << 16) - *len;
    size_t take = n < room ? n : room;
    memcpy(buf + *len, span, take);
    *len += take;
}

static void read_all(const uint8_t *data, size_t size, size_t piece, outcome *o)
{
    fcgi_reader r;
    memset(&r, 0, sizeof r);
    memset(o, 0, offsetof(outcome, out));
    o->out_len = o->err_len = 0;
    o->last = FCGI_EV_MORE;
    size_t at = 0;
    while (at < size && o->last == FCGI_EV_MORE) {
        size_t len = size - at < piece ? size - at : piece;
        /* a copy of its own, so that ASan sees a span that strays */
        char *read = malloc(len);
        CHECK(read != NULL, "malloc");
        memcpy(read, data + at, len);
        size_t off = 0;
        while (off < len) {
            size_t used = 0, span_len = 0;
            const char *span = NULL;
            int ev = fcgi_read(&r, read + off, len - off, &used, &span, &span_len);
            CHECK(used <= len - off, "consumed %zu of %zu", used, len - off);
            if (ev == FCGI_EV_STDOUT || ev == FCGI_EV_STDERR) {
                CHECK(span >= read + off && span + span_len <= read + off + used,
                      "span outside what was consumed");
                CHECK(span_len > 0, "an empty span");
                if (ev == FCGI_EV_STDOUT)
                    gather(o->out, &o->out_len, span, span_len);
                else
                    gather(o->err, &o->err_len, span, span_len);
            } else {
                CHECK(span == NULL && span_len == 0, "a span with event %d", ev);
            }
            off += used;
            if (ev == FCGI_EV_END || ev == FCGI_EV_ERROR) {
                o->last = ev;
                o->app_status = r.app_status;
                o->protocol_status = r.protocol_status;
                /* the reader refuses anything after the end */
                size_t rest = size - at - off;
                if (ev == FCGI_EV_END && rest > 0) {
                    CHECK(fcgi_read(&r, (const char *)data + at + off, rest, &used, &span,
                                    &span_len) == FCGI_EV_ERROR,
                          "bytes after the end were taken");
                    o->last = FCGI_EV_ERROR;
                }
                break;
            }
            CHECK(ev != FCGI_EV_MORE || off == len, "MORE before the read was consumed");
        }
        at += len;
        free(read);
    }
}

static void parse_head(const unsigned char *out, size_t len, size_t piece)
{
    /* gathered as fastcgi.c does: the end searched from where the last
     * search stopped */
    char *head = malloc(HEAD_MAX);
    CHECK(head != NULL, "malloc");
    size_t hlen = 0, end = 0;
    for (size_t at = 0; at < len && end == 0;) {
        size_t n = len - at < piece ? len - at : piece;
        if (hlen + n > HEAD_MAX)
            break; /* too large: a 502 */
        size_t from = hlen;
        memcpy(head + hlen, out + at, n);
        hlen += n;
        at += n;
        end = fcgi_head_end(head, hlen, from);
        CHECK(end <= hlen, "end %zu past %zu", end, hlen);
        /* the same as a search from the start */
        CHECK(end == fcgi_head_end(head, hlen, 0), "incremental end differs");
    }
    if (end > 0) {
        size_t n = 0, n2 = 0;
        int status = 0, status2 = 0;
        int rc = fcgi_head_parse(head, end, NULL, 0, &n, &status);
        if (rc == 0) {
            CHECK(status >= 200 && status <= 599, "status %d", status);
            fcgi_field *f = calloc(n ? n : 1, sizeof *f);
            CHECK(f != NULL, "calloc");
            CHECK(fcgi_head_parse(head, end, f, n, &n2, &status2) == 0, "second parse failed");
            CHECK(n2 == n && status2 == status, "counted %zu, filled %zu", n, n2);
            for (size_t i = 0; i < n; i++) {
                CHECK(f[i].name_len > 0 && (size_t)f[i].name + f[i].name_len <= end,
                      "field name out of the head");
                CHECK((size_t)f[i].value + f[i].value_len <= end, "field value out of the head");
                CHECK(memchr(head + f[i].value, '\n', f[i].value_len) == NULL, "LF in a value");
            }
            free(f);
        }
    }
    free(head);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = (size_t)data[0] + 1;
    data++;
    size--;
    static outcome whole, cut;
    read_all(data, size, size ? size : 1, &whole);
    read_all(data, size, piece, &cut);
    CHECK(whole.last == cut.last, "whole: %d, in pieces: %d", whole.last, cut.last);
    CHECK(whole.out_len == cut.out_len && memcmp(whole.out, cut.out, whole.out_len) == 0,
          "STDOUT differs");
    CHECK(whole.err_len == cut.err_len && memcmp(whole.err, cut.err, whole.err_len) == 0,
          "STDERR differs");
    if (whole.last == FCGI_EV_END)
        CHECK(whole.app_status == cut.app_status && whole.protocol_status == cut.protocol_status,
              "END_REQUEST read differently");
    parse_head(whole.out, whole.out_len, piece);
    return 0;
}
