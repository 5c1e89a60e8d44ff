/* keel/header_tokens.h (through keel/util.h): every well-known name maps to
 * its id and back in any case, near misses map to 0, the HPACK static
 * table's names map straight to their tokens, and the flags the core acts
 * on are where the RFCs put them. */
#include <criterion/criterion.h>
#include <string.h>

#include <keel/util.h>

static void upper(char *s)
{
    for (; *s; s++)
        if (*s >= 'a' && *s <= 'z')
            *s = (char)(*s - 'a' + 'A');
}

Test(header_tokens, every_name_maps_to_its_id_and_back)
{
    cr_assert_eq(keel_header_token_info_of(0), NULL);
    cr_assert_eq(keel_header_token_info_of(KEEL_HDR_COUNT_), NULL);
    for (unsigned id = 1; id < KEEL_HDR_COUNT_; id++) {
        const keel_header_token_info *t = keel_header_token_info_of(id);
        cr_assert_not_null(t, "id %u", id);
        cr_assert_eq(strlen(t->name), t->len, "%s", t->name);
        cr_assert_eq(keel_header_token(t->name, t->len), id, "%s", t->name);
        char buf[64];
        cr_assert_lt(t->len, sizeof buf);
        memcpy(buf, t->name, t->len + 1u);
        upper(buf);
        cr_assert_eq(keel_header_token(buf, t->len), id, "%s", buf);
        buf[0] = t->name[0]; /* mixed case: "cONTENT-TYPE" */
        cr_assert_eq(keel_header_token(buf, t->len), id, "%s", buf);
        for (unsigned other = 1; other < id; other++)
            cr_assert_str_neq(keel_header_token_info_of(other)->name, t->name);
    }
}

/* A name that differs from a listed one by a byte, or is one byte shorter
 * or longer, is unknown, unless it is itself listed. */
static void expect_unknown_or_itself(const char *s, size_t n)
{
    unsigned id = keel_header_token(s, n);
    if (id == 0)
        return;
    const keel_header_token_info *t = keel_header_token_info_of(id);
    cr_assert(keel_ascii_iequal(s, n, t->name, t->len), "%.*s classified as %s", (int)n, s,
              t->name);
}

Test(header_tokens, near_misses_are_unknown)
{
    static const char swaps[] = {'x', '-', '0', '\r', '\0', (char)0xc5, ' '};
    for (unsigned id = 1; id < KEEL_HDR_COUNT_; id++) {
        const keel_header_token_info *t = keel_header_token_info_of(id);
        char buf[64];
        for (size_t i = 0; i < t->len; i++) {
            for (size_t k = 0; k < sizeof swaps; k++) {
                memcpy(buf, t->name, t->len);
                if (buf[i] == swaps[k])
                    continue;
                buf[i] = swaps[k];
                expect_unknown_or_itself(buf, t->len);
            }
        }
        memcpy(buf, t->name, t->len);
        buf[t->len] = 's';
        expect_unknown_or_itself(buf, t->len + 1u);
        expect_unknown_or_itself(buf, t->len - 1u);
        expect_unknown_or_itself(buf + 1, t->len - 1u);
    }
    /* Folding is ASCII letters only: '\r' | 0x20 is '-', and 0xc5 is not
     * 'e' however it is folded. */
    cr_assert_eq(keel_header_token("content\rlength", 14), 0);
    cr_assert_eq(keel_header_token("ho\0t", 4), 0);
    cr_assert_eq(keel_header_token("", 0), 0);
    cr_assert_eq(keel_header_token(NULL, 0), 0);
    cr_assert_eq(keel_header_token("x-custom", 8), 0);
    cr_assert_eq(keel_header_token("host ", 5), 0);
    cr_assert_eq(keel_header_token(":Path", 5), KEEL_HDR_PSEUDO_PATH);
}

/* RFC 7541 Appendix A, by index. */
static const char *const hpack_names[62] = {
    NULL,
    ":authority",
    ":method",
    ":method",
    ":path",
    ":path",
    ":scheme",
    ":scheme",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "accept",
    "access-control-allow-origin",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-range",
    "content-type",
    "cookie",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "link",
    "location",
    "max-forwards",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "refresh",
    "retry-after",
    "server",
    "set-cookie",
    "strict-transport-security",
    "transfer-encoding",
    "user-agent",
    "vary",
    "via",
    "www-authenticate",
};

Test(header_tokens, hpack_static_names)
{
    cr_assert_eq(keel_header_token_of_hpack(0), 0);
    cr_assert_eq(keel_header_token_of_hpack(62), 0);
    cr_assert_eq(keel_header_token_of_hpack(1000), 0);
    for (unsigned i = 1; i < 62; i++) {
        unsigned id = keel_header_token_of_hpack(i);
        const keel_header_token_info *t = keel_header_token_info_of(id);
        cr_assert_not_null(t, "index %u", i);
        cr_assert_str_eq(t->name, hpack_names[i], "index %u", i);
        /* the first index with the name */
        cr_assert_str_eq(hpack_names[t->hpack_index], t->name);
        cr_assert_leq(t->hpack_index, i);
        cr_assert(t->hpack_index == 1 || strcmp(hpack_names[t->hpack_index - 1], t->name) != 0);
    }
    /* ...and a name the table lacks has none. */
    cr_assert_eq(keel_header_token_info_of(KEEL_HDR_CONNECTION)->hpack_index, 0);
    cr_assert_eq(keel_header_token_info_of(KEEL_HDR_TE)->hpack_index, 0);
}

Test(header_tokens, flags)
{
    /* RFC 9113 8.2.2 / RFC 9110 7.6.1: exactly these are connection-specific. */
    static const unsigned connection[] = {KEEL_HDR_CONNECTION,        KEEL_HDR_KEEP_ALIVE,
                                          KEEL_HDR_PROXY_CONNECTION,  KEEL_HDR_TE,
                                          KEEL_HDR_TRANSFER_ENCODING, KEEL_HDR_UPGRADE};
    unsigned n = 0;
    for (unsigned id = 1; id < KEEL_HDR_COUNT_; id++) {
        unsigned f = keel_header_token_flags(id);
        if (f & KEEL_HDR_FLAG_CONNECTION_SPECIFIC) {
            n++;
            cr_assert(f & KEEL_HDR_FLAG_HOP_BY_HOP, "%u", id);
            cr_assert(f & KEEL_HDR_FLAG_NOT_TRAILER, "%u", id);
        }
        const keel_header_token_info *t = keel_header_token_info_of(id);
        cr_assert_eq((f & KEEL_HDR_FLAG_PSEUDO) != 0, t->name[0] == ':', "%s", t->name);
    }
    cr_assert_eq(n, sizeof connection / sizeof connection[0]);
    for (size_t i = 0; i < n; i++)
        cr_assert(keel_header_token_flags(connection[i]) & KEEL_HDR_FLAG_CONNECTION_SPECIFIC);
    cr_assert(keel_header_token_flags(KEEL_HDR_TRAILER) & KEEL_HDR_FLAG_HOP_BY_HOP);
    cr_assert(keel_header_token_flags(KEEL_HDR_HTTP2_SETTINGS) & KEEL_HDR_FLAG_HOP_BY_HOP);
    cr_assert(keel_header_token_flags(KEEL_HDR_HOST) & KEEL_HDR_FLAG_NOT_TRAILER);
    cr_assert(keel_header_token_flags(KEEL_HDR_CONTENT_LENGTH) & KEEL_HDR_FLAG_NOT_TRAILER);
    cr_assert_eq(keel_header_token_flags(KEEL_HDR_USER_AGENT), 0);
    cr_assert_eq(keel_header_token_flags(0), 0);
    cr_assert_eq(keel_header_token_flags(KEEL_HDR_COUNT_ + 7), 0);
}

/* Ids are ABI: the first and a few later ones never move. */
Test(header_tokens, ids_are_stable)
{
    cr_assert_eq(KEEL_HDR_PSEUDO_AUTHORITY, 1);
    cr_assert_eq(KEEL_HDR_CONTENT_LENGTH, 19);
    cr_assert_eq(KEEL_HDR_HOST, 29);
    cr_assert_eq(KEEL_HDR_WWW_AUTHENTICATE, 52);
    cr_assert_eq(KEEL_HDR_CONNECTION, 53);
    cr_assert_eq(KEEL_HDR_X_FRAME_OPTIONS, 81);
}
