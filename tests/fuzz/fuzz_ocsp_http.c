/* fuzz_ocsp_http — the OCSP fetcher's reading of a responder's HTTP answer
 * (modules/tls_openssl/ocsp_http.c, compiled in alone: no keel, no
 * OpenSSL). The first byte cuts the rest in two; the answer is parsed as
 * the fetcher does, after the first piece (not at the end) and after
 * both (at the end, and not).
 *
 * Checked besides ASan/UBSan: the outcome is one of the three; a body
 * lies within the bytes given and within KO_OCSP_HTTP_BODY_MAX; its
 * start follows a head of at most KO_OCSP_HTTP_HEAD_MAX; a status is
 * 100..999; a refusal says why; the same bytes give the same answer
 * whether or not more was read before; at the end nothing is still
 * wanted. */
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

static int parse(const char *buf, size_t len, int eof, ko_ocsp_http *h)
{
    int rc = ko_ocsp_http_parse(buf, len, eof, h);
    CHECK(rc == KO_OCSP_HTTP_MORE || rc == KO_OCSP_HTTP_DONE || rc == KO_OCSP_HTTP_BAD,
          "outcome %d", rc);
    if (rc == KO_OCSP_HTTP_DONE) {
        CHECK(h->status >= 100 && h->status <= 999, "status %d", h->status);
        CHECK(h->body <= len && h->body_len <= len - h->body, "body outside the input");
        CHECK(h->body <= KO_OCSP_HTTP_HEAD_MAX, "head longer than its bound");
        CHECK(h->body_len <= KO_OCSP_HTTP_BODY_MAX, "body longer than its bound");
    }
    if (rc == KO_OCSP_HTTP_BAD)
        CHECK(h->why != NULL && h->why[0] != '\0', "a refusal without a reason");
    if (eof)
        CHECK(rc != KO_OCSP_HTTP_MORE, "more wanted after the end");
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    size_t cut = len > 0 ? data[0] % (len + 1) : 0;
    ko_ocsp_http first, again, open, end;
    parse(buf, cut, 0, &first);
    int rc_open = parse(buf, len, 0, &open);
    int rc_again = parse(buf, len, 0, &again);
    CHECK(rc_open == rc_again && memcmp(&open, &again, sizeof open) == 0, "not deterministic");
    int rc_end = parse(buf, len, 1, &end);
    /* What was complete before the end stays so at the end. */
    if (rc_open == KO_OCSP_HTTP_DONE)
        CHECK(rc_end == KO_OCSP_HTTP_DONE && end.status == open.status && end.body == open.body,
              "complete, then not at the end");
    return 0;
}
