/* The OCSP fetcher's reading of a responder's HTTP answer
 * (modules/tls_openssl/ocsp_http.c, compiled in alone): where the body
 * lies, when more must be read, and what is refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocsp_http.h"

static int parse(const char *text, int eof, ko_ocsp_http *out)
{
    return ko_ocsp_http_parse(text, strlen(text), eof, out);
}

Test(ocsp_http, content_length_delimits_the_body)
{
    ko_ocsp_http h;
    const char *r = "HTTP/1.0 200 OK\r\nContent-Type: application/ocsp-response\r\n"
                    "Content-Length: 4\r\n\r\nDERXtrailing";
    cr_assert_eq(parse(r, 0, &h), KO_OCSP_HTTP_DONE);
    cr_assert_eq(h.status, 200);
    cr_assert_eq(h.body_len, 4);
    cr_assert(memcmp(r + h.body, "DERX", 4) == 0);
}

Test(ocsp_http, incomplete_waits_and_truncated_is_refused)
{
    ko_ocsp_http h;
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\nContent-Le", 0, &h), KO_OCSP_HTTP_MORE);
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, &h),
                 KO_OCSP_HTTP_MORE);
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\nabc", 1, &h),
                 KO_OCSP_HTTP_BAD);
    cr_assert_str_eq(h.why, "response body truncated");
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\n", 1, &h), KO_OCSP_HTTP_BAD);
}

Test(ocsp_http, without_length_the_body_ends_with_the_connection)
{
    ko_ocsp_http h;
    const char *r = "HTTP/1.0 200 OK\nServer: x\n\nbody";
    cr_assert_eq(parse(r, 0, &h), KO_OCSP_HTTP_MORE);
    cr_assert_eq(parse(r, 1, &h), KO_OCSP_HTTP_DONE);
    cr_assert_eq(h.body_len, 4);
    cr_assert(memcmp(r + h.body, "body", 4) == 0);
}

Test(ocsp_http, status_other_than_200_is_reported)
{
    ko_ocsp_http h;
    cr_assert_eq(parse("HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n", 0, &h), KO_OCSP_HTTP_DONE);
    cr_assert_eq(h.status, 503);
}

Test(ocsp_http, refused)
{
    ko_ocsp_http h;
    const char *bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.0 20 OK\r\n\r\n",
        "ICY 200 OK\r\n\r\n",
        "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.0 200 OK\r\nContent-Length: 1x\r\n\r\n",
        "HTTP/1.0 200 OK\r\nContent-Length: \r\n\r\n",
        "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
        "HTTP/1.0 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert_eq(parse(bad[i], 1, &h), KO_OCSP_HTTP_BAD, "%s", bad[i]);
}

/* n bytes of fill behind prefix: refused, saying why. */
static void expect_too_large(const char *prefix, char fill, size_t n, int eof, const char *why)
{
    ko_ocsp_http h;
    char *big = malloc(n + 1);
    cr_assert(big != NULL);
    memset(big, fill, n);
    memcpy(big, prefix, strlen(prefix));
    big[n] = '\0';
    cr_assert_eq(parse(big, eof, &h), KO_OCSP_HTTP_BAD);
    cr_assert_str_eq(h.why, why);
    free(big);
}

Test(ocsp_http, sizes_are_bounded)
{
    expect_too_large("HTTP/1.0 200 OK\r\nX: ", 'a', KO_OCSP_HTTP_HEAD_MAX + 100, 0,
                     "response head too long");
    expect_too_large("HTTP/1.0 200 OK\r\n\r\n", 'b', 40 + KO_OCSP_HTTP_BODY_MAX + 1, 1,
                     "response body too large");
}
