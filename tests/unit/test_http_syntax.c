/* keel_http_valid (ABI 1.6, http/syntax.c): the grammars every protocol
 * checks a request against, against the RFCs' own examples and the
 * requests issue 23 found forwarded or routed when they must not be; every
 * byte value for the character classes, against references written from
 * the ABNF. */
#include <criterion/criterion.h>

#include <string.h>

#include <keel/keel.h>

static int valid(int syntax, const char *s)
{
    return keel_http_valid(syntax, s, strlen(s));
}

Test(http_syntax, tokens)
{
    cr_assert(valid(KEEL_HTTP_TOKEN, "GET"));
    cr_assert(valid(KEEL_HTTP_TOKEN, "M-SEARCH"));
    cr_assert(valid(KEEL_HTTP_TOKEN, "!#$%&'*+-.^_`|~09azAZ"));
    cr_assert(!valid(KEEL_HTTP_TOKEN, ""));
    cr_assert(!valid(KEEL_HTTP_TOKEN, "GET /admin"));
    cr_assert(!valid(KEEL_HTTP_TOKEN, "GE\tT"));
    cr_assert(!valid(KEEL_HTTP_TOKEN, "a:b"));
    cr_assert(!valid(KEEL_HTTP_TOKEN, "caf\xc3\xa9"));
}

Test(http_syntax, field_values)
{
    cr_assert(valid(KEEL_HTTP_FIELD_VALUE, ""));
    cr_assert(keel_http_valid(KEEL_HTTP_FIELD_VALUE, NULL, 0));
    cr_assert(valid(KEEL_HTTP_FIELD_VALUE, "text/html; q=0.9"));
    cr_assert(valid(KEEL_HTTP_FIELD_VALUE, "a\tb"));
    cr_assert(valid(KEEL_HTTP_FIELD_VALUE, "obs-text \xe9"));
    cr_assert(!valid(KEEL_HTTP_FIELD_VALUE, " lead"));
    cr_assert(!valid(KEEL_HTTP_FIELD_VALUE, "trail\t"));
    cr_assert(!valid(KEEL_HTTP_FIELD_VALUE, "a\r\nX-Injected: 1"));
    cr_assert(!valid(KEEL_HTTP_FIELD_VALUE, "a\x01"));
    cr_assert(!valid(KEEL_HTTP_FIELD_VALUE, "a\x7f"));
    cr_assert(!keel_http_valid(KEEL_HTTP_FIELD_VALUE, "a\0b", 3));
}

Test(http_syntax, schemes)
{
    cr_assert(valid(KEEL_HTTP_SCHEME, "http"));
    cr_assert(valid(KEEL_HTTP_SCHEME, "coap+tcp"));
    cr_assert(valid(KEEL_HTTP_SCHEME, "A1.-+"));
    cr_assert(!valid(KEEL_HTTP_SCHEME, ""));
    cr_assert(!valid(KEEL_HTTP_SCHEME, "1http"));
    cr_assert(!valid(KEEL_HTTP_SCHEME, "ht tp"));
    cr_assert(!valid(KEEL_HTTP_SCHEME, "http:"));
}

Test(http_syntax, authorities)
{
    static const char *const good[] = {
        "example.com", "example.com:8080",      "127.0.0.1:80",    "[::1]", "[::1]:443", "a%20b",
        "x:",          "sub-delims!$&'()*+,;=", "[v1.fe80::a+en1]"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        cr_assert(valid(KEEL_HTTP_AUTHORITY, good[i]), "%s", good[i]);
    static const char *const bad[] = {
        "",       ":80",         "user@example.com", "a b", "a/b",  "example.com:8o",
        "[::1",   "[]",          "[::1]x",           "a%2", "a%zz", "evil.example\r\n",
        "x#frag", "caf\xc3\xa9", "[::1]:80:80"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert(!valid(KEEL_HTTP_AUTHORITY, bad[i]), "%s", bad[i]);
}

Test(http_syntax, targets)
{
    cr_assert(valid(KEEL_HTTP_ORIGIN_FORM, "/"));
    cr_assert(valid(KEEL_HTTP_ORIGIN_FORM, "/a/b?c=d&e=%20"));
    cr_assert(!valid(KEEL_HTTP_ORIGIN_FORM, ""));
    cr_assert(!valid(KEEL_HTTP_ORIGIN_FORM, "*"));
    cr_assert(!valid(KEEL_HTTP_ORIGIN_FORM, "http://evil.example/x"));
    /* issue 23: routed as /public/x while an upstream serves /admin */
    cr_assert(!valid(KEEL_HTTP_ORIGIN_FORM, "/admin#/../public/x"));
    /* issue 23: forwarded as "GET /admin /public HTTP/1.1" */
    cr_assert(!valid(KEEL_HTTP_ORIGIN_FORM, "/admin /public"));
    cr_assert(!valid(KEEL_HTTP_ORIGIN_FORM, "/a\tb"));
    cr_assert(valid(KEEL_HTTP_TARGET, "http://example.com/x?y"));
    cr_assert(valid(KEEL_HTTP_TARGET, "*"));
    cr_assert(!valid(KEEL_HTTP_TARGET, ""));
    cr_assert(!valid(KEEL_HTTP_TARGET, "/x#y"));
    cr_assert(!valid(KEEL_HTTP_TARGET, "/\x80"));
}

static int ref_tchar(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* RFC 3986 2.2 sub-delims and 2.3 unreserved: a reg-name's bytes. */
static int ref_host(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("-._~!$&'()*+,;=", c) != NULL);
}

Test(http_syntax, every_byte)
{
    for (int c = 0; c < 256; c++) {
        char t[4] = {'a', (char)c, 'b', 0};
        cr_assert_eq(keel_http_valid(KEEL_HTTP_TOKEN, t, 3), ref_tchar(c), "token byte %d", c);
        cr_assert_eq(keel_http_valid(KEEL_HTTP_AUTHORITY, t, 3), ref_host(c), "authority byte %d",
                     c);
        char p[3] = {'/', (char)c, 0};
        cr_assert_eq(keel_http_valid(KEEL_HTTP_ORIGIN_FORM, p, 2), c > 0x20 && c < 0x7f && c != '#',
                     "target byte %d", c);
        cr_assert_eq(keel_http_valid(KEEL_HTTP_FIELD_VALUE, t, 3),
                     c == '\t' || (c >= 0x20 && c != 0x7f), "value byte %d", c);
    }
}

Test(http_syntax, unknown_syntax)
{
    cr_assert(!valid(0, "x"));
    cr_assert(!valid(99, "x"));
    cr_assert(!keel_http_valid(KEEL_HTTP_TOKEN, NULL, 1));
}
