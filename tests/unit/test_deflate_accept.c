/* The deflate module's field parsing (modules/deflate/accept.c and
 * fields.c), compiled straight into this program: Accept-Encoding with
 * q-values (RFC 9110 12.5.3), media types with parameters, token lists. */
#include <criterion/criterion.h>

#include <string.h>

#include "kd.h"

static int choose(const char *value)
{
    kd_accept acc;
    kd_accept_init(&acc);
    if (value != NULL)
        kd_accept_add(&acc, value, strlen(value));
    return kd_accept_choose(&acc);
}

static int choose2(const char *a, const char *b)
{
    kd_accept acc;
    kd_accept_init(&acc);
    kd_accept_add(&acc, a, strlen(a));
    kd_accept_add(&acc, b, strlen(b));
    return kd_accept_choose(&acc);
}

Test(deflate_accept, plain_lists, .timeout = 10)
{
    cr_assert_eq(choose("gzip"), KD_GZIP);
    cr_assert_eq(choose("deflate"), KD_DEFLATE);
    cr_assert_eq(choose("gzip, deflate, br"), KD_GZIP);
    cr_assert_eq(choose("deflate, gzip"), KD_GZIP, "a tie goes to gzip");
    cr_assert_eq(choose("br, zstd"), KD_IDENTITY);
    cr_assert_eq(choose("GZIP"), KD_GZIP, "codings are case-insensitive");
    cr_assert_eq(choose("x-gzip"), KD_GZIP, "RFC 9110 8.4.1.3");
    cr_assert_eq(choose(NULL), KD_IDENTITY, "no field: no compression");
    cr_assert_eq(choose(""), KD_IDENTITY, "an empty field: no coding wanted");
    cr_assert_eq(choose("identity"), KD_IDENTITY);
}

Test(deflate_accept, qvalues, .timeout = 10)
{
    cr_assert_eq(choose("gzip;q=0.5, deflate;q=0.8"), KD_DEFLATE);
    cr_assert_eq(choose("gzip;q=0.8, deflate;q=0.5"), KD_GZIP);
    cr_assert_eq(choose("gzip; q=0.5 , deflate ; q=0.5"), KD_GZIP);
    cr_assert_eq(choose("gzip;q=0, deflate"), KD_DEFLATE);
    cr_assert_eq(choose("gzip;q=0, deflate;q=0"), KD_IDENTITY);
    cr_assert_eq(choose("gzip;Q=0.001"), KD_GZIP, "the parameter name is case-insensitive");
    cr_assert_eq(choose("gzip;q=0.000"), KD_IDENTITY);
    cr_assert_eq(choose("gzip;q=1.000"), KD_GZIP);
    cr_assert_eq(choose("deflate;q=1, gzip;q=0.999"), KD_DEFLATE);
}

Test(deflate_accept, star_and_identity, .timeout = 10)
{
    cr_assert_eq(choose("*"), KD_GZIP);
    cr_assert_eq(choose("*;q=0.5"), KD_GZIP);
    cr_assert_eq(choose("*;q=0"), KD_IDENTITY);
    cr_assert_eq(choose("gzip;q=0, *"), KD_DEFLATE, "gzip excluded, deflate through *");
    cr_assert_eq(choose("deflate, *;q=0"), KD_DEFLATE);
    cr_assert_eq(choose("identity;q=0, gzip"), KD_GZIP);
    cr_assert_eq(choose("identity;q=0"), KD_IDENTITY, "nothing acceptable: send as is");
    cr_assert_eq(choose("identity, gzip;q=0.5"), KD_IDENTITY, "identity rated higher");
    cr_assert_eq(choose("identity;q=0.2, gzip;q=0.5"), KD_GZIP);
}

Test(deflate_accept, several_field_lines, .timeout = 10)
{
    cr_assert_eq(choose2("br", "gzip"), KD_GZIP);
    cr_assert_eq(choose2("gzip;q=0", "deflate"), KD_DEFLATE);
    cr_assert_eq(choose2("gzip;q=0.1", "gzip;q=0.9, deflate;q=0.5"), KD_GZIP);
}

/* Garbage is skipped element by element, never trusted, never fatal. */
Test(deflate_accept, malformed_fields, .timeout = 10)
{
    cr_assert_eq(choose("gzip;q=2"), KD_IDENTITY, "q above 1 drops the element");
    cr_assert_eq(choose("gzip;q=0.12345"), KD_IDENTITY);
    cr_assert_eq(choose("gzip;q=abc, deflate"), KD_DEFLATE);
    cr_assert_eq(choose("gzip;q="), KD_IDENTITY);
    cr_assert_eq(choose("gzip;q=-1"), KD_IDENTITY);
    cr_assert_eq(choose(";;;,,,"), KD_IDENTITY);
    cr_assert_eq(choose(",,gzip,,"), KD_GZIP);
    cr_assert_eq(choose("gzip;foo=\"a,b;q=0\";q=0.5, deflate;q=0.4"), KD_GZIP,
                 "a quoted string hides its comma and semicolon");
    cr_assert_eq(choose("gzip;foo=\"unterminated"), KD_GZIP);
    cr_assert_eq(choose("gzipx, xgzip, gzi"), KD_IDENTITY);
    cr_assert_eq(choose("=, ;q=1, \t"), KD_IDENTITY);
    cr_assert_eq(choose("gzip;q"), KD_GZIP, "a parameter without a value is ignored");
    /* Every prefix of a tricky value parses without reading past it. */
    const char *tricky = "gzip ; q = 0.5 ;x=\"\\\"\" , deflate;q=1.0";
    for (size_t n = 0; n <= strlen(tricky); n++) {
        kd_accept acc;
        kd_accept_init(&acc);
        char buf[64];
        memcpy(buf, tricky, n);
        kd_accept_add(&acc, buf, n);
        (void)kd_accept_choose(&acc);
    }
}

static int type_ok(const char *ct)
{
    static const char *const types[] = {"text/*", "application/json", "image/svg+xml"};
    keel_str s = {ct, ct ? strlen(ct) : 0};
    return kd_type_matches(s, types, 3);
}

Test(deflate_accept, media_types, .timeout = 10)
{
    cr_assert(type_ok("text/html"));
    cr_assert(type_ok("text/plain; charset=utf-8"));
    cr_assert(type_ok("Text/HTML;charset=utf-8"));
    cr_assert(type_ok("application/json"));
    cr_assert(type_ok(" application/json ; charset=utf-8"));
    cr_assert(type_ok("image/svg+xml"));
    cr_assert(!type_ok("image/png"));
    cr_assert(!type_ok("application/jsonx"));
    cr_assert(!type_ok("application/octet-stream"));
    cr_assert(!type_ok("text"));
    cr_assert(!type_ok("text/"));
    cr_assert(!type_ok("/html"));
    cr_assert(!type_ok(""));
    cr_assert(!type_ok(NULL));
    static const char *const any[] = {"*"};
    cr_assert(kd_type_matches((keel_str){"video/mp4", 9}, any, 1));
}

Test(deflate_accept, token_lists, .timeout = 10)
{
    cr_assert(kd_list_has((keel_str){"no-transform", 12}, "no-transform"));
    cr_assert(kd_list_has((keel_str){"max-age=0, No-Transform", 23}, "no-transform"));
    cr_assert(!kd_list_has((keel_str){"no-transformx", 13}, "no-transform"));
    cr_assert(kd_list_has((keel_str){"Origin,accept-encoding ", 23}, "Accept-Encoding"));
    cr_assert(!kd_list_has((keel_str){"", 0}, "x"));
    cr_assert(!kd_list_has((keel_str){NULL, 0}, "x"));
}

/* Among every coding (the HTTP filter with br and zstd built in): the
 * highest q-value, ties to zstd, br, gzip, deflate; q=0 excludes; "*"
 * stands for the unlisted; identity rated higher keeps the body as is. */
static int choose_all(const char *value)
{
    kd_accept acc;
    kd_accept_init(&acc);
    kd_accept_add(&acc, value, strlen(value));
    return kd_accept_choose_from(&acc, (1u << KD_GZIP) | (1u << KD_DEFLATE) | (1u << KD_BR) |
                                           (1u << KD_ZSTD));
}

Test(deflate_accept, br_and_zstd_by_qvalue, .timeout = 10)
{
    cr_assert_eq(choose_all("gzip;q=0.5, br"), KD_BR, "RFC 9110 12.5.3's example shape");
    cr_assert_eq(choose_all("br;q=0.5, zstd"), KD_ZSTD);
    cr_assert_eq(choose_all("br, zstd;q=0.9, gzip;q=0.8"), KD_BR);
    cr_assert_eq(choose_all("gzip, deflate, br, zstd"), KD_ZSTD, "a tie goes to zstd");
    cr_assert_eq(choose_all("gzip, br"), KD_BR, "then br");
    cr_assert_eq(choose_all("zstd;q=0, br;q=0, gzip;q=0.1"), KD_GZIP);
    cr_assert_eq(choose_all("br;q=0, *"), KD_ZSTD, "br excluded, zstd through *");
    cr_assert_eq(choose_all("zstd;q=0, br;q=0, gzip;q=0, deflate;q=0"), KD_IDENTITY);
    cr_assert_eq(choose_all("identity, br;q=0.5"), KD_IDENTITY);
    cr_assert_eq(choose_all("BR"), KD_BR, "case-insensitive");
    /* Offered without br (not built in): the next best. */
    kd_accept acc;
    kd_accept_init(&acc);
    kd_accept_add(&acc, "br, gzip;q=0.5", 14);
    cr_assert_eq(kd_accept_choose_from(&acc, (1u << KD_GZIP) | (1u << KD_DEFLATE)), KD_GZIP);
}
