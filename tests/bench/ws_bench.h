/* ws_bench.h — what the WebSocket load clients share (ws_load.c for the
 * echo scenario, ws_pubsub_load.c for pub/sub across instances): the
 * clock, failing, sorting latencies, and finding a whole server frame in
 * what was read. Header-only: each client is one `cc` command in its
 * scenario script. */
#ifndef KEEL_WS_BENCH_H
#define KEEL_WS_BENCH_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void die(const char *what)
{
    perror(what);
    exit(2);
}

/* qsort's order for 32-bit latencies. */
static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Connects to 127.0.0.1:port and upgrades `path` to a WebSocket with the
 * extra header lines `extra` ("" or lines ending in CRLF). The 101's head
 * is read byte by byte, so no frame byte after it is eaten, and left in
 * head (NUL-terminated) for the caller to look at. The socket is
 * non-blocking on return. Any failure ends the program. */
static int ws_open(unsigned port, const char *path, const char *extra, char *head, size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n%s\r\n",
                     path, extra);
    if (write(fd, req, (size_t)n) != n)
        die("write");
    size_t got = 0;
    while (got < size - 1) {
        ssize_t r = read(fd, head + got, 1);
        if (r <= 0)
            die("handshake");
        got += (size_t)r;
        head[got] = 0;
        if (got >= 4 && memcmp(head + got - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    if (strncmp(head, "HTTP/1.1 101", 12) != 0) {
        fprintf(stderr, "handshake refused:\n%s", head);
        exit(2);
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* A whole (unmasked, server) frame at the start of in[0..len)? Its total
 * size, with the payload at in + *off for *plen bytes (RFC 6455 5.2); 0
 * while it is not all there. in[0] holds FIN, RSV and the opcode. */
static size_t ws_frame_whole(const uint8_t *in, size_t len, size_t *off, size_t *plen)
{
    if (len < 2)
        return 0;
    size_t hl = 2, l = in[1] & 127;
    if (l == 126)
        hl = 4;
    else if (l == 127)
        hl = 10;
    if (len < hl)
        return 0;
    uint64_t n = l;
    if (l == 126)
        n = (uint64_t)in[2] << 8 | in[3];
    else if (l == 127) {
        n = 0;
        for (int i = 0; i < 8; i++)
            n = n << 8 | in[2 + i];
    }
    if (len < hl + n)
        return 0;
    *off = hl;
    *plen = (size_t)n;
    return hl + (size_t)n;
}

#endif
