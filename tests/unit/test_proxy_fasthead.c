/* The proxy's fast reader of a plain upstream response
 * (modules/proxy/fasthead.c, compiled in alone): what it must take, read
 * as llhttp reads it, and every shape it must leave to llhttp.
 * tests/fuzz/fuzz_proxy_head.c compares what it takes with llhttp; this
 * also holds that the plain responses are taken at all. */
#include <criterion/criterion.h>

#include <string.h>

#include <keel/header_tokens.h>

#include "fasthead.h"

#define NGINX_HEAD                                                                                 \
    "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Fri, 04 Dec 2026 20:00:00 GMT\r\n"           \
    "Content-Type: text/plain\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\n"

static fcgi_field fields[16];
static px_fast_head head;

static int scan(const char *s)
{
    memset(&head, 0, sizeof head);
    return px_fast_head_scan(s, strlen(s), fields, sizeof fields / sizeof fields[0], &head);
}

static void field_is(const char *s, size_t i, const char *name, const char *value, unsigned token)
{
    cr_assert_lt(i, head.nfields);
    cr_assert_eq(fields[i].name_len, strlen(name), "field %zu's name", i);
    cr_assert(memcmp(s + fields[i].name, name, strlen(name)) == 0, "field %zu's name", i);
    cr_assert_eq(fields[i].value_len, strlen(value), "field %zu's value: %.*s", i,
                 (int)fields[i].value_len, s + fields[i].value);
    cr_assert(memcmp(s + fields[i].value, value, strlen(value)) == 0, "field %zu's value", i);
    cr_assert_eq(fields[i].token, token, "field %zu's token", i);
}

Test(proxy_fasthead, nginx_response_taken, .timeout = 10)
{
    const char *s = NGINX_HEAD "Hello, World!";
    cr_assert_eq(scan(s), 1);
    cr_assert_eq(head.status, 200);
    cr_assert_eq(head.keep_alive, 1);
    cr_assert_eq(head.head_len, strlen(NGINX_HEAD));
    cr_assert_eq(head.nfields, 5);
    field_is(s, 0, "Server", "nginx/1.22.1", KEEL_HDR_SERVER);
    field_is(s, 1, "Date", "Fri, 04 Dec 2026 20:00:00 GMT", KEEL_HDR_DATE);
    field_is(s, 2, "Content-Type", "text/plain", KEEL_HDR_CONTENT_TYPE);
    field_is(s, 3, "Content-Length", "13", KEEL_HDR_CONTENT_LENGTH);
    field_is(s, 4, "Connection", "keep-alive", KEEL_HDR_CONNECTION);
}

/* Leading blanks skipped, trailing ones and inner HTABs kept (llhttp's
 * value), over more than a word; an unknown name; an empty reason and
 * value; close in any case. */
Test(proxy_fasthead, values_as_llhttp_gives_them, .timeout = 10)
{
    const char *s = "HTTP/1.1 503 \r\nX-Long:  \t a\tlonger value, with\ttabs \t\r\nX-Empty:\r\n"
                    "connection: CLOSE\r\nContent-Length: 0\r\n\r\n";
    cr_assert_eq(scan(s), 1);
    cr_assert_eq(head.status, 503);
    cr_assert_eq(head.keep_alive, 0);
    cr_assert_eq(head.head_len, strlen(s));
    field_is(s, 0, "X-Long", "a\tlonger value, with\ttabs \t", 0);
    field_is(s, 1, "X-Empty", "", 0);
    field_is(s, 2, "connection", "CLOSE", KEEL_HDR_CONNECTION);
}

/* Everything llhttp treats otherwise, or that this reader does not read
 * itself, is left to llhttp. */
Test(proxy_fasthead, other_shapes_left_to_llhttp, .timeout = 10)
{
    static const char *const left[] = {
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 304 Not Modified\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 600 Odd\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\n\r\n",                        /* to the close */
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab", /* more to come */
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab", /* bytes after */
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na",
        "HTTP/1.1 200 OK\r\nContent-Length: 1 \r\n\r\na",
        "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\na",
        "HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nConnection: upgrade\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nProxy-Connection: close\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nUpgrade: h2c\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9\r\nContent-Length: 0\r\n\r\n", /* obs-text */
        "HTTP/1.1 200 OK\r\nX-A: a\x01z\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A: 01234567\x7f\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\nContent-Length: 0\n\n",
        "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n", /* folded */
        "HTTP/1.1 200 OK\r\nX-A : a\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX(A): a\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 \xc3\xa9\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++)
        cr_assert_eq(scan(left[i]), 0, "taken: %s", left[i]);
}

/* More fields than the caller has room for: llhttp's. */
Test(proxy_fasthead, more_fields_than_room, .timeout = 10)
{
    const char *s = NGINX_HEAD "Hello, World!";
    px_fast_head h;
    cr_assert_eq(px_fast_head_scan(s, strlen(s), fields, 4, &h), 0);
    cr_assert_eq(px_fast_head_scan(s, strlen(s), fields, 5, &h), 1);
}
