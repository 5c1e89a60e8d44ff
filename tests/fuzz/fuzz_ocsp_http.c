/* fuzz_ocsp_http — the OCSP fetcher's reading of a responder's HTTP answer
 * (modules/tls_openssl/ocsp_http.c on llhttp, compiled in alone: no keel,
 * no OpenSSL). The first byte cuts the rest in two; the answer is read as
 * the fetcher reads it, in those two pieces then the connection's end,
 * and again in one piece.
 *
 * Checked besides ASan/UBSan: the outcome is one of the three; a body
 * lies within the bytes given and within KO_OCSP_HTTP_BODY_MAX; the head
 * read is at most KO_OCSP_HTTP_HEAD_MAX; a status is 100..999; a refusal
 * says why; the outcome, status and body do not depend on where the
 * bytes were cut; at the end nothing is still wanted; a whole answer
 * stays whole. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocsp_http.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_ocsp_http: " __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check(const ko_ocsp_http *h, int rc, size_t len, int end)
{
    CHECK(rc == KO_OCSP_HTTP_MORE || rc == KO_OCSP_HTTP_DONE || rc == KO_OCSP_HTTP_BAD,
          "outcome %d", rc);
    CHECK(rc == h->state, "outcome %d, state %d", rc, h->state);
    CHECK(h->head_seen <= KO_OCSP_HTTP_HEAD_MAX, "head longer than its bound");
    CHECK(h->body_len <= KO_OCSP_HTTP_BODY_MAX && h->body_len <= len, "body outside the input");
    if (rc == KO_OCSP_HTTP_DONE)
        CHECK(h->status >= 100 && h->status <= 999, "status %d", h->status);
    if (rc == KO_OCSP_HTTP_BAD)
        CHECK(h->why != NULL && h->why[0] != '\0', "a refusal without a reason");
    if (end)
        CHECK(rc != KO_OCSP_HTTP_MORE, "more wanted after the end");
}

static ko_ocsp_http cut_h, whole_h;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    size_t cut = len > 0 ? data[0] % (len + 1) : 0;

    ko_ocsp_http_init(&cut_h);
    check(&cut_h, ko_ocsp_http_feed(&cut_h, buf, cut), cut, 0);
    int rc_cut = ko_ocsp_http_feed(&cut_h, buf + cut, len - cut);
    check(&cut_h, rc_cut, len, 0);

    ko_ocsp_http_init(&whole_h);
    int rc_whole = ko_ocsp_http_feed(&whole_h, buf, len);
    check(&whole_h, rc_whole, len, 0);
    CHECK(rc_cut == rc_whole, "cut at %zu: %d, whole: %d", cut, rc_cut, rc_whole);

    int end_cut = ko_ocsp_http_end(&cut_h);
    check(&cut_h, end_cut, len, 1);
    int end_whole = ko_ocsp_http_end(&whole_h);
    check(&whole_h, end_whole, len, 1);
    CHECK(end_cut == end_whole, "at the end, cut at %zu: %d, whole: %d", cut, end_cut, end_whole);
    if (rc_whole == KO_OCSP_HTTP_DONE)
        CHECK(end_whole == KO_OCSP_HTTP_DONE, "complete, then not at the end");
    if (end_whole == KO_OCSP_HTTP_DONE)
        CHECK(cut_h.status == whole_h.status && cut_h.body_len == whole_h.body_len &&
                  memcmp(cut_h.body, whole_h.body, whole_h.body_len) == 0,
              "the answer depends on where it was cut");
    return 0;
}
