/* The h2 module's HPACK encoder, each block decoded back: names by their
 * static index (Appendix A), literals with every name and value shape,
 * :status, and a whole response head as sink.c builds it. */
#include <criterion/criterion.h>

#include "hpack_harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the encoder ------------------------------------------------------------------------- */

/* RFC 7541 Appendix A, the names from 15 on (those a response may name). */
static const char *const static_names[62] = {
    [15] = "accept-charset",
    [16] = "accept-encoding",
    [17] = "accept-language",
    [18] = "accept-ranges",
    [19] = "accept",
    [20] = "access-control-allow-origin",
    [21] = "age",
    [22] = "allow",
    [23] = "authorization",
    [24] = "cache-control",
    [25] = "content-disposition",
    [26] = "content-encoding",
    [27] = "content-language",
    [28] = "content-length",
    [29] = "content-location",
    [30] = "content-range",
    [31] = "content-type",
    [32] = "cookie",
    [33] = "date",
    [34] = "etag",
    [35] = "expect",
    [36] = "expires",
    [37] = "from",
    [38] = "host",
    [39] = "if-match",
    [40] = "if-modified-since",
    [41] = "if-none-match",
    [42] = "if-range",
    [43] = "if-unmodified-since",
    [44] = "last-modified",
    [45] = "link",
    [46] = "location",
    [47] = "max-forwards",
    [48] = "proxy-authenticate",
    [49] = "proxy-authorization",
    [50] = "range",
    [51] = "referer",
    [52] = "refresh",
    [53] = "retry-after",
    [54] = "server",
    [55] = "set-cookie",
    [56] = "strict-transport-security",
    [57] = "transfer-encoding",
    [58] = "user-agent",
    [59] = "vary",
    [60] = "via",
    [61] = "www-authenticate",
};

Test(hpack_encode, static_name, .timeout = 60)
{
    for (unsigned i = 15; i <= 61; i++)
        cr_assert_eq(h2_hpack_static_name(static_names[i], strlen(static_names[i])), i, "%s",
                     static_names[i]);
    static const char *const absent[] = {"x-custom",
                                         "content",
                                         "content-typ",
                                         "content-types",
                                         "accepts",
                                         "b",
                                         "z",
                                         "zz",
                                         "wwwx",
                                         "Content-Type",
                                         "ACCEPT",
                                         "-",
                                         "",
                                         "set-cookie2",
                                         "ag",
                                         "cookie ",
                                         "strict-transport-security-extra-long-name"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        cr_assert_eq(h2_hpack_static_name(absent[i], strlen(absent[i])), 0, "%s", absent[i]);
    /* The request pseudo-fields and :status are not response field names. */
    cr_assert_eq(h2_hpack_static_name(":status", 7), 0);
    cr_assert_eq(h2_hpack_static_name(":path", 5), 0);
    /* Only len bytes are read: a longer buffer with a static name in front. */
    cr_assert_eq(h2_hpack_static_name("dateXYZ", 4), 33);
}

static void literal_round_trip(unsigned name_index, const char *name, const char *value,
                               size_t vlen)
{
    size_t nlen = name_index > 0 ? 0 : strlen(name);
    size_t max = H2_HPACK_LITERAL_MAX(nlen, vlen);
    uint8_t *out = malloc(max + 1);
    cr_assert(out != NULL);
    out[max] = 0x5a;
    size_t n = h2_hpack_literal(out, name_index, name, nlen, value, vlen);
    cr_assert_leq(n, max, "%s: %zu bytes, more than H2_HPACK_LITERAL_MAX", name, n);
    cr_assert_eq(out[max], 0x5a);
    /* 6.2.2: without indexing: 0000 and a 4-bit index. */
    cr_assert_eq(out[0] & 0xf0, 0x00);
    h2_hpack d;
    h2_scratch s = {0};
    h2_hpack_init(&d, 4096);
    fields *f = malloc(sizeof *f);
    cr_assert(f != NULL);
    cr_assert_eq(decode(&d, &s, out, n, f), 0, "%s", name);
    cr_assert_eq(f->n, 1);
    cr_assert_str_eq(f->name[0], name_index > 0 ? static_names[name_index] : name);
    cr_assert_eq(f->vlen[0], vlen);
    cr_assert(memcmp(f->value[0], value, vlen) == 0);
    cr_assert_eq(d.count, 0, "a literal without indexing went into the table");
    free(f);
    free(out);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

Test(hpack_encode, literal_round_trip, .timeout = 60)
{
    char value[500];
    for (size_t i = 0; i < sizeof value; i++)
        value[i] = (char)('a' + i % 26);
    literal_round_trip(31, NULL, "text/plain", 10);
    literal_round_trip(15, NULL, "", 0);
    literal_round_trip(61, NULL, "Basic", 5);
    literal_round_trip(0, "x-custom", "v", 1);
    literal_round_trip(0, "x-empty", "", 0);
    /* Lengths at and around the 7-bit prefix's 127 (5.1). */
    static const size_t lens[] = {126, 127, 128, 255, 256, 499};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        literal_round_trip(54, NULL, value, lens[i]);
        literal_round_trip(0, "x-long", value, lens[i]);
    }
    /* A name of 127 bytes and more (its length takes two bytes too). */
    char name[128];
    memset(name, 'n', 127);
    name[127] = '\0';
    literal_round_trip(0, name, "v", 1);
    /* Every static name by index. */
    for (unsigned i = 15; i <= 61; i++)
        literal_round_trip(i, NULL, "x", 1);
}

Test(hpack_encode, status, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    h2_hpack_init(&d, 4096);
    for (int status = 100; status <= 599; status++) {
        uint8_t out[16];
        size_t n = h2_hpack_status(out, status);
        cr_assert_leq(n, H2_HPACK_LITERAL_MAX(0, 3));
        /* Appendix A: 8..14 are :status 200 204 206 304 400 404 500. */
        int indexed = status == 200 || status == 204 || status == 206 || status == 304 ||
                      status == 400 || status == 404 || status == 500;
        cr_assert_eq(n == 1, indexed, "%d: %zu bytes", status, n);
        fields f;
        cr_assert_eq(decode(&d, &s, out, n, &f), 0, "%d", status);
        char want[4];
        snprintf(want, sizeof want, "%d", status);
        cr_assert_eq(f.n, 1);
        cr_assert_str_eq(f.name[0], ":status", "%d", status);
        cr_assert_str_eq(f.value[0], want);
    }
    /* Nothing the encoder writes is indexed into the table (hpack.h). */
    cr_assert_eq(d.count, 0);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* A whole response head as sink.c would build it, in one block. */
Test(hpack_encode, response_head, .timeout = 60)
{
    uint8_t block[512];
    size_t n = h2_hpack_status(block, 404);
    static const field head[] = {{"content-type", "text/html; charset=utf-8"},
                                 {"content-length", "1234"},
                                 {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                 {"server", "keel"},
                                 {"x-request-id", "abc"}};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++) {
        size_t nlen = strlen(head[i].name), vlen = strlen(head[i].value);
        unsigned idx = h2_hpack_static_name(head[i].name, nlen);
        n += h2_hpack_literal(block + n, idx, head[i].name, nlen, head[i].value, vlen);
    }
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode(&d, &s, block, n, &f), 0);
    cr_assert_eq(f.n, 6);
    cr_assert_str_eq(f.name[0], ":status");
    cr_assert_str_eq(f.value[0], "404");
    for (size_t i = 0; i < 5; i++) {
        cr_assert_str_eq(f.name[i + 1], head[i].name);
        cr_assert_str_eq(f.value[i + 1], head[i].value);
    }
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}
