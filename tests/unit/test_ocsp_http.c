/* The OCSP fetcher's reading of a responder's HTTP answer
 * (modules/tls_openssl/ocsp_http.c on llhttp, compiled in alone): the
 * body it keeps, when more must be read, and what is refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocsp_http.h"

static ko_ocsp_http h;

/* The answer `text` read in one piece, then the connection's end if eof. */
static int parse(const char *text, int eof)
{
    ko_ocsp_http_init(&h);
    int rc = ko_ocsp_http_feed(&h, text, strlen(text));
    return eof ? ko_ocsp_http_end(&h) : rc;
}

/* The same answer read a byte at a time: the same outcome. */
static int parse_bytewise(const char *text, int eof)
{
    ko_ocsp_http_init(&h);
    int rc = KO_OCSP_HTTP_MORE;
    for (size_t i = 0; text[i] != '\0'; i++)
        rc = ko_ocsp_http_feed(&h, text + i, 1);
    return eof ? ko_ocsp_http_end(&h) : rc;
}

Test(ocsp_http, content_length_delimits_the_body)
{
    const char *r = "HTTP/1.0 200 OK\r\nContent-Type: application/ocsp-response\r\n"
                    "Content-Length: 4\r\n\r\nDERXtrailing";
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        cr_assert_eq(bytewise ? parse_bytewise(r, 0) : parse(r, 0), KO_OCSP_HTTP_DONE);
        cr_assert_eq(h.status, 200);
        cr_assert_eq(h.body_len, 4);
        cr_assert(memcmp(h.body, "DERX", 4) == 0);
        /* What follows a whole answer is not read; the end changes nothing. */
        cr_assert_eq(ko_ocsp_http_feed(&h, "more", 4), KO_OCSP_HTTP_DONE);
        cr_assert_eq(ko_ocsp_http_end(&h), KO_OCSP_HTTP_DONE);
        cr_assert_eq(h.body_len, 4);
    }
}

Test(ocsp_http, incomplete_waits_and_truncated_is_refused)
{
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\nContent-Le", 0), KO_OCSP_HTTP_MORE);
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0), KO_OCSP_HTTP_MORE);
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\nabc", 1), KO_OCSP_HTTP_BAD);
    cr_assert_str_eq(h.why, "response body truncated");
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\n", 1), KO_OCSP_HTTP_BAD);
    cr_assert_str_eq(h.why, "connection closed before the response head");
}

Test(ocsp_http, without_length_the_body_ends_with_the_connection)
{
    const char *r = "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nbody";
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        cr_assert_eq(bytewise ? parse_bytewise(r, 0) : parse(r, 0), KO_OCSP_HTTP_MORE);
        cr_assert_eq(ko_ocsp_http_end(&h), KO_OCSP_HTTP_DONE);
        cr_assert_eq(h.status, 200);
        cr_assert_eq(h.body_len, 4);
        cr_assert(memcmp(h.body, "body", 4) == 0);
    }
}

Test(ocsp_http, status_other_than_200_is_reported)
{
    cr_assert_eq(parse("HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n", 0), KO_OCSP_HTTP_DONE);
    cr_assert_eq(h.status, 503);
    cr_assert_eq(h.body_len, 0);
}

Test(ocsp_http, refused)
{
    const char *bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.0 20 OK\r\n\r\n",
        "ICY 200 OK\r\n\r\n",
        "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "HTTP/1.0 200 OK\r\nTransfer-Encoding: identity\r\n\r\nabc",
        "HTTP/1.0 200 OK\r\nContent-Length: 1x\r\n\r\n",
        "HTTP/1.0 200 OK\r\nContent-Length: \r\n\r\n",
        "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
        "HTTP/1.0 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "HTTP/1.0 200 OK\r\nContent-Length: 32769\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(parse(bad[i], 1), KO_OCSP_HTTP_BAD, "%s", bad[i]);
        cr_assert(h.why != NULL && h.why[0] != '\0', "%s", bad[i]);
        cr_assert_eq(parse_bytewise(bad[i], 1), KO_OCSP_HTTP_BAD, "%s", bad[i]);
    }
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0),
                 KO_OCSP_HTTP_BAD);
    cr_assert_str_eq(h.why, "Transfer-Encoding in an answer to HTTP/1.0");
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\nContent-Length: 32769\r\n\r\n", 0), KO_OCSP_HTTP_BAD);
    cr_assert_str_eq(h.why, "bad or too large Content-Length");
}

/* n bytes of fill behind prefix: refused, saying why, in one piece and a
 * byte at a time. */
static void expect_too_large(const char *prefix, char fill, size_t n, int eof, const char *why)
{
    char *big = malloc(n + 1);
    cr_assert(big != NULL);
    memset(big, fill, n);
    memcpy(big, prefix, strlen(prefix));
    big[n] = '\0';
    cr_assert_eq(parse(big, eof), KO_OCSP_HTTP_BAD);
    cr_assert_str_eq(h.why, why);
    cr_assert_eq(parse_bytewise(big, eof), KO_OCSP_HTTP_BAD);
    cr_assert_str_eq(h.why, why);
    free(big);
}

Test(ocsp_http, sizes_are_bounded)
{
    expect_too_large("HTTP/1.0 200 OK\r\nX: ", 'a', KO_OCSP_HTTP_HEAD_MAX + 100, 0,
                     "response head too long");
    expect_too_large("HTTP/1.0 200 OK\r\n\r\n", 'b', 19 + KO_OCSP_HTTP_BODY_MAX + 1, 0,
                     "response body too large");
    /* Exactly at the bounds: read. */
    char *big = malloc(19 + KO_OCSP_HTTP_BODY_MAX + 1);
    cr_assert(big != NULL);
    memset(big, 'c', 19 + KO_OCSP_HTTP_BODY_MAX);
    memcpy(big, "HTTP/1.0 200 OK\r\n\r\n", 19);
    big[19 + KO_OCSP_HTTP_BODY_MAX] = '\0';
    cr_assert_eq(parse(big, 1), KO_OCSP_HTTP_DONE);
    cr_assert_eq(h.body_len, KO_OCSP_HTTP_BODY_MAX);
    free(big);
}
