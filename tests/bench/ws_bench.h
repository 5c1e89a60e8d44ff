/* ws_bench.h — what the WebSocket load clients share (ws_load.c for the
 * echo scenario, ws_pubsub_load.c for pub/sub across instances): the
 * clock, failing, sorting latencies, and finding a whole server frame in
 * what was read. Header-only: each client is one `cc` command in its
 * scenario script. */
#ifndef KEEL_WS_BENCH_H
#define KEEL_WS_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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
