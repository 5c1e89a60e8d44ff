/* ws_client.c — see ws_client.h. */
#define _GNU_SOURCE
#include "ws_client.h"
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/time.h>

static const uint8_t mask_key[4] = {0x37, 0xfa, 0x21, 0x3d};

wsc *wsc_connect(unsigned port)
{
    wsc *c = calloc(1, sizeof *c);
    cr_assert(c, "out of memory");
    c->fd = kh_connect("127.0.0.1", port);
    cr_assert(c->fd >= 0, "connect to port %u: %s", port, strerror(errno));
    c->cap = 1 << 16;
    c->buf = malloc(c->cap);
    cr_assert(c->buf, "out of memory");
    return c;
}

void wsc_close(wsc *c)
{
    if (!c)
        return;
    close(c->fd);
    free(c->buf);
    free(c);
}

/* Reads what arrives within timeout_ms: bytes read, 0 on EOF, -1 on timeout. */
static long fill(wsc *c, int timeout_ms)
{
    if (c->eof)
        return 0;
    if (c->pos == c->len)
        c->pos = c->len = 0;
    if (c->cap - c->len < 4096) {
        memmove(c->buf, c->buf + c->pos, c->len - c->pos);
        c->len -= c->pos;
        c->pos = 0;
        if (c->cap - c->len < 4096) {
            c->cap *= 2;
            c->buf = realloc(c->buf, c->cap);
            cr_assert(c->buf, "out of memory");
        }
    }
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int r;
    do
        r = poll(&pfd, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return -1;
    ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
    if (n <= 0) {
        c->eof = 1;
        return 0;
    }
    c->len += (size_t)n;
    c->buf[c->len] = 0;
    return n;
}

/* Waits until n bytes are buffered: 0, -1 timeout, -2 EOF. */
static int need(wsc *c, size_t n, long long deadline)
{
    while (c->len - c->pos < n) {
        long long left = deadline - kh_now_ms();
        if (left <= 0)
            return -1;
        long r = fill(c, (int)left);
        if (r == 0)
            return -2;
    }
    return 0;
}

int wsc_handshake(wsc *c, const char *path, const char *extra, int raw, int timeout_ms)
{
    char req[8192];
    int n;
    if (raw)
        n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", path,
                     extra ? extra : "");
    else
        n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n%s\r\n",
                     path, extra ? extra : "");
    cr_assert(n > 0 && (size_t)n < sizeof req, "request too long");
    cr_assert(kh_send(c->fd, req, (size_t)n) == 0, "send failed");
    long long deadline = kh_now_ms() + timeout_ms;
    for (;;) {
        c->buf[c->len] = 0;
        char *end = memmem(c->buf + c->pos, c->len - c->pos, "\r\n\r\n", 4);
        if (end) {
            size_t hl = (size_t)(end - (char *)c->buf - c->pos);
            cr_assert(hl < sizeof c->head, "head too long");
            memcpy(c->head, c->buf + c->pos, hl);
            c->head[hl] = 0;
            c->pos += hl + 4;
            int status = 0;
            if (sscanf(c->head, "HTTP/1.1 %d", &status) != 1)
                return -1;
            c->allow_rsv1 =
                strcasestr(wsc_header(c, "Sec-WebSocket-Extensions"), "permessage-deflate") != NULL;
            return status;
        }
        long long left = deadline - kh_now_ms();
        if (left <= 0 || fill(c, (int)left) <= 0)
            return -1;
    }
}

const char *wsc_header(const wsc *c, const char *name)
{
    static char value[1024];
    size_t nl = strlen(name);
    const char *line = strstr(c->head, "\r\n");
    while (line) {
        line += 2;
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1, *e = strstr(v, "\r\n");
            while (*v == ' ')
                v++;
            size_t len = e ? (size_t)(e - v) : strlen(v);
            if (len >= sizeof value)
                len = sizeof value - 1;
            memcpy(value, v, len);
            value[len] = 0;
            return value;
        }
        line = strstr(line, "\r\n");
    }
    return "";
}

wsc *wsc_open_small_window(unsigned port, const char *path, int rcvbuf)
{
    wsc *c = calloc(1, sizeof *c);
    cr_assert(c, "out of memory");
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(c->fd >= 0, "socket: %s", strerror(errno));
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(connect(c->fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s", strerror(errno));
    struct timeval tv = {10, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    c->cap = 1 << 16;
    c->buf = malloc(c->cap);
    cr_assert(c->buf, "out of memory");
    int status = wsc_handshake(c, path, NULL, 0, 5000);
    cr_assert(status == 101, "handshake for %s: status %d\n%s", path, status, c->head);
    return c;
}

wsc *wsc_open(unsigned port, const char *path, const char *extra)
{
    wsc *c = wsc_connect(port);
    int status = wsc_handshake(c, path, extra, 0, 5000);
    cr_assert(status == 101, "handshake for %s: status %d\n%s", path, status, c->head);
    /* RFC 6455 1.3's example: this key's accept value. */
    cr_assert(strcmp(wsc_header(c, "Sec-WebSocket-Accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == 0,
              "Sec-WebSocket-Accept '%s'", wsc_header(c, "Sec-WebSocket-Accept"));
    return c;
}

size_t wsc_build(uint8_t *out, int fin, int rsv, int op, const void *payload, size_t len, int mask,
                 int lenform)
{
    size_t n = 0;
    out[n++] = (uint8_t)((fin ? 0x80 : 0) | ((rsv & 7) << 4) | (op & 15));
    uint8_t m = mask ? 0x80 : 0;
    if (lenform == 0 && len < 126) {
        out[n++] = (uint8_t)(m | len);
    } else if ((lenform == 0 && len < 65536) || lenform == 126) {
        out[n++] = m | 126;
        out[n++] = (uint8_t)(len >> 8);
        out[n++] = (uint8_t)len;
    } else {
        out[n++] = m | 127;
        for (int i = 7; i >= 0; i--)
            out[n++] = (uint8_t)((uint64_t)len >> (8 * i));
    }
    if (mask) {
        memcpy(out + n, mask_key, 4);
        n += 4;
    }
    const uint8_t *p = payload;
    for (size_t i = 0; i < len; i++)
        out[n + i] = mask ? p[i] ^ mask_key[i & 3] : p[i];
    return n + len;
}

int wsc_send_raw(wsc *c, const void *data, size_t len)
{
    return kh_send(c->fd, data, len);
}

int wsc_send_bytewise(wsc *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        if (kh_send(c->fd, p + i, 1) != 0 || !kh_wait_peer_read(c->fd, 5000))
            return -1;
    }
    return 0;
}

int wsc_send(wsc *c, int fin, int op, const void *payload, size_t len)
{
    uint8_t *frame = malloc(len + 14);
    cr_assert(frame, "out of memory");
    size_t n = wsc_build(frame, fin, 0, op, payload, len, 1, 0);
    int rc = kh_send(c->fd, frame, n);
    free(frame);
    return rc;
}

int wsc_send_text(wsc *c, const char *text)
{
    return wsc_send(c, 1, 1, text, strlen(text));
}

int wsc_read(wsc *c, wsc_frame *f, int timeout_ms)
{
    memset(f, 0, sizeof *f);
    long long deadline = kh_now_ms() + timeout_ms;
    int rc = need(c, 2, deadline);
    if (rc)
        return rc;
    const uint8_t *p = c->buf + c->pos;
    f->fin = p[0] >> 7;
    f->rsv = (p[0] >> 4) & 7;
    f->op = p[0] & 15;
    if (p[1] & 0x80)
        return -3; /* 5.1: a server never masks */
    if ((f->rsv & 3) || ((f->rsv & 4) && !c->allow_rsv1))
        return -3;
    size_t hl = 2, l7 = p[1] & 127;
    if (l7 == 126)
        hl = 4;
    else if (l7 == 127)
        hl = 10;
    if ((rc = need(c, hl, deadline)))
        return rc;
    p = c->buf + c->pos;
    uint64_t len = l7;
    if (l7 == 126) {
        len = (uint64_t)p[2] << 8 | p[3];
        if (len < 126)
            return -3;
    } else if (l7 == 127) {
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | p[2 + i];
        if (len < 65536 || len > (1u << 30))
            return -3;
    }
    if ((rc = need(c, hl + len, deadline)))
        return rc;
    p = c->buf + c->pos;
    f->data = malloc(len + 1);
    cr_assert(f->data, "out of memory");
    memcpy(f->data, p + hl, len);
    f->data[len] = 0;
    f->len = len;
    c->pos += hl + len;
    return 0;
}

void wsc_frame_free(wsc_frame *f)
{
    free(f->data);
    f->data = NULL;
}

int wsc_expect_close(wsc *c, char *reason, size_t cap, int timeout_ms)
{
    long long deadline = kh_now_ms() + timeout_ms;
    for (;;) {
        long long left = deadline - kh_now_ms();
        if (left <= 0)
            return -1;
        wsc_frame f;
        int rc = wsc_read(c, &f, (int)left);
        if (rc)
            return rc == -3 ? -3 : rc;
        if (f.op != 8) {
            wsc_frame_free(&f);
            continue;
        }
        int code = f.len >= 2 ? (f.data[0] << 8 | f.data[1]) : 1005;
        if (reason && cap) {
            size_t n = f.len > 2 ? f.len - 2 : 0;
            if (n >= cap)
                n = cap - 1;
            memcpy(reason, f.data + 2, n);
            reason[n] = 0;
        }
        wsc_frame_free(&f);
        return code;
    }
}

int wsc_wait_eof(wsc *c, int timeout_ms)
{
    long long deadline = kh_now_ms() + timeout_ms;
    for (;;) {
        c->pos = c->len = 0;
        long long left = deadline - kh_now_ms();
        if (left <= 0)
            return 0;
        if (fill(c, (int)left) == 0)
            return 1;
    }
}
