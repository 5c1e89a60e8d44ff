/* The opening handshake (RFC 6455 4.2): what is accepted, what is refused
 * and with which status, subprotocols, Origin, the endpoint's own refusal,
 * and hello's /ws echo working (and absent without the websocket module). */
#define _GNU_SOURCE
#include "ws_test.h"

#include <stdlib.h>
#include <strings.h>

#define KEY     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
#define VERSION "Sec-WebSocket-Version: 13\r\n"
#define UPGRADE "Upgrade: websocket\r\nConnection: Upgrade\r\n"

static int status_of(kh_proc *p, const char *path, const char *fields, wsc **out)
{
    wsc *c = wsc_connect(kh_port(p, 0));
    int st = wsc_handshake(c, path, fields, 1, 5000);
    if (out)
        *out = c;
    else
        wsc_close(c);
    return st;
}

Test(ws_handshake, accepts_and_echoes, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    wsc *c = wsc_open(kh_port(p, 0), "/ws", NULL);
    kh_assert(p, strcasecmp(wsc_header(c, "Upgrade"), "websocket") == 0, "Upgrade: %s",
              wsc_header(c, "Upgrade"));
    kh_assert(p, strcasestr(wsc_header(c, "Connection"), "upgrade") != NULL, "%s", c->head);
    kh_assert(p, wsc_header(c, "Sec-WebSocket-Extensions")[0] == 0,
              "an extension without a deflate module: %s", c->head);
    wsc_send_text(c, "hello");
    wt_expect_text(p, c, "hello");
    uint8_t bin[3] = {0, 0xff, 7};
    wsc_send(c, 1, 2, bin, 3);
    wt_expect(p, c, 2, bin, 3);
    wsc_close(c);
    wt_finish(p);
}

Test(ws_handshake, tokens_in_lists_and_any_case, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    int st = status_of(
        p, "/ws", "Upgrade: foo/2, WebSocket\r\nConnection: keep-alive, UPGRADE\r\n" KEY VERSION,
        NULL);
    kh_assert(p, st == 101, "status %d", st);
    wt_finish(p);
}

Test(ws_handshake, refusals, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    wsc *c;
    /* Version other than 13, or none: 426 naming 13 (4.2.2, 4.4). */
    int st = status_of(p, "/ws", UPGRADE KEY "Sec-WebSocket-Version: 12\r\n", &c);
    kh_assert(p, st == 426, "version 12: %d", st);
    kh_assert(p, strcmp(wsc_header(c, "Sec-WebSocket-Version"), "13") == 0, "%s", c->head);
    wsc_close(c);
    st = status_of(p, "/ws", UPGRADE KEY, NULL);
    kh_assert(p, st == 426, "no version: %d", st);
    /* No websocket in Upgrade: 426 with Upgrade: websocket. */
    st = status_of(p, "/ws", KEY VERSION, &c);
    kh_assert(p, st == 426, "no Upgrade: %d", st);
    kh_assert(p, strcasecmp(wsc_header(c, "Upgrade"), "websocket") == 0, "%s", c->head);
    wsc_close(c);
    /* Keys: missing, not base64, not 16 bytes, two of them. */
    st = status_of(p, "/ws", UPGRADE VERSION, NULL);
    kh_assert(p, st == 400, "no key: %d", st);
    st = status_of(p, "/ws", UPGRADE VERSION "Sec-WebSocket-Key: !!!!!!!!!!!!!!!!!!!!!!==\r\n",
                   NULL);
    kh_assert(p, st == 400, "bad key: %d", st);
    st = status_of(p, "/ws", UPGRADE VERSION "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAA\r\n", NULL);
    kh_assert(p, st == 400, "15-byte key: %d", st);
    st = status_of(p, "/ws", UPGRADE VERSION KEY KEY, NULL);
    kh_assert(p, st == 400, "two keys: %d", st);
    /* Connection without upgrade. */
    st = status_of(p, "/ws", "Upgrade: websocket\r\nConnection: keep-alive\r\n" KEY VERSION, NULL);
    kh_assert(p, st == 400, "no Connection: upgrade: %d", st);
    /* A body. */
    st = status_of(p, "/ws", UPGRADE KEY VERSION "Content-Length: 5\r\n", &c);
    kh_assert(p, st == 400, "with a body: %d", st);
    wsc_close(c);
    /* No such route. */
    st = status_of(p, "/nowhere", UPGRADE KEY VERSION, NULL);
    kh_assert(p, st == 404, "unknown path: %d", st);
    /* The endpoint's own refusal. */
    st = status_of(p, "/t/app?refuse=401", UPGRADE KEY VERSION, NULL);
    kh_assert(p, st == 401, "on_handshake's refusal: %d", st);
    wt_finish(p);
}

Test(ws_handshake, http10_is_refused, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    wsc *c = wsc_connect(kh_port(p, 0));
    const char *req = "GET /ws HTTP/1.0\r\nHost: x\r\n" UPGRADE KEY VERSION "\r\n";
    wsc_send_raw(c, req, strlen(req));
    char buf[512];
    size_t n = kh_recv_n(c->fd, buf, sizeof buf, 12, 5000);
    kh_assert(p, n >= 12 && memcmp(buf + 9, "400", 3) == 0, "HTTP/1.0: '%.*s'", (int)n, buf);
    wsc_close(c);
    wt_finish(p);
}

Test(ws_handshake, origin, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    int st =
        status_of(p, "/t/origin", UPGRADE KEY VERSION "Origin: https://evil.example\r\n", NULL);
    kh_assert(p, st == 403, "foreign origin: %d", st);
    st = status_of(p, "/t/origin", UPGRADE KEY VERSION "Origin: HTTPS://GOOD.example\r\n", NULL);
    kh_assert(p, st == 101, "allowed origin: %d", st);
    st = status_of(p, "/t/origin", UPGRADE KEY VERSION, NULL);
    kh_assert(p, st == 101, "no origin (not a browser): %d", st);
    wt_finish(p);
}

Test(ws_handshake, subprotocols, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    wsc *c = wsc_open(kh_port(p, 0), "/t/app", "Sec-WebSocket-Protocol: foo, superchat, chat\r\n");
    kh_assert(p, strcmp(wsc_header(c, "Sec-WebSocket-Protocol"), "superchat") == 0, "%s", c->head);
    wsc_send_text(c, "proto");
    wt_expect_text(p, c, "proto superchat");
    wsc_close(c);
    c = wsc_open(kh_port(p, 0), "/t/app", "Sec-WebSocket-Protocol: foo\r\n");
    kh_assert(p, wsc_header(c, "Sec-WebSocket-Protocol")[0] == 0, "%s", c->head);
    wsc_send_text(c, "proto");
    wt_expect_text(p, c, "proto (none)");
    wsc_close(c);
    wt_finish(p);
}

Test(ws_handshake, hello_without_websocket, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start_modules(1, "http1 hello", NULL);
    int st = status_of(p, "/ws", UPGRADE KEY VERSION, NULL);
    kh_assert(p, st == 404, "/ws without the websocket module: %d", st);
    st = status_of(p, "/", "", NULL);
    kh_assert(p, st == 200, "hello's / : %d", st);
    wt_finish(p);
}

/* Frames sent right behind the request, in the same write, reach the
 * WebSocket side exactly once (the upgrade hands over the buffered bytes). */
Test(ws_handshake, frames_behind_the_request, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    wsc *c = wsc_connect(kh_port(p, 0));
    uint8_t buf[1024];
    int n = snprintf((char *)buf, sizeof buf,
                     "GET /ws HTTP/1.1\r\nHost: x\r\n" UPGRADE KEY VERSION "\r\n");
    size_t len = (size_t)n + wsc_build(buf + n, 1, 0, 1, "early", 5, 1, 0);
    len += wsc_build(buf + len, 1, 0, 2, "bird", 4, 1, 0);
    wsc_send_raw(c, buf, len);
    char head[512];
    size_t got = 0;
    while (got < sizeof head - 1 && !(got >= 4 && memcmp(head + got - 4, "\r\n\r\n", 4) == 0)) {
        size_t r = kh_recv_n(c->fd, head + got, sizeof head - got, 1, 5000);
        kh_assert(p, r == 1, "the 101 head ended early");
        got++;
    }
    kh_assert(p, strncmp(head, "HTTP/1.1 101", 12) == 0, "%.*s", (int)got, head);
    wt_expect_text(p, c, "early");
    wt_expect(p, c, 2, "bird", 4);
    wsc_close(c);
    wt_finish(p);
}

/* The handshake is a request like any other: the access log records it
 * (101) and a refusal (426). */
Test(ws_handshake, access_log, .timeout = 30, .fini = kh_cleanup_all)
{
    char dir[] = "/tmp/keel-wslog-XXXXXX";
    cr_assert(mkdtemp(dir), "mkdtemp");
    char extra[700], path[600];
    snprintf(path, sizeof path, "%s/access.log", dir);
    snprintf(extra, sizeof extra, "[accesslog]\npath = %s\n", path);
    kh_proc *p = wt_start_modules(1, "http1 accesslog websocket hello", extra);
    wsc *c = wsc_open(kh_port(p, 0), "/ws", NULL);
    wsc_close(c);
    int st = status_of(p, "/ws", KEY VERSION, NULL);
    kh_assert(p, st == 426, "status %d", st);
    wt_finish(p);
    FILE *f = fopen(path, "r");
    kh_assert(p, f, "no access log at %s", path);
    char log[4096];
    size_t n = fread(log, 1, sizeof log - 1, f);
    fclose(f);
    log[n] = 0;
    kh_assert(p, strstr(log, "\"GET /ws HTTP/1.1\" 101") && strstr(log, "\"GET /ws HTTP/1.1\" 426"),
              "access log:\n%s", log);
    unlink(path);
    rmdir(dir);
}
