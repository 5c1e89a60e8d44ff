/* ws_load.c — closed-loop WebSocket echo load for tests/bench/ws.sh.
 *
 *   ws_load PORT PATH SIZE CONNS WARMUP_S DURATION_S DEFLATE SERVER_PID
 *
 * CONNS connections each send a SIZE-byte text message and send the next
 * one as soon as the echo is back. With DEFLATE=1 it offers
 * permessage-deflate with no context takeover both ways and sends every
 * message compressed (compressed once: the bytes are the same each time);
 * echoes come back compressed or not, as the server decides, and the
 * first one is inflated and compared. After WARMUP_S it measures for
 * DURATION_S: messages, latencies, and the server's CPU time (utime +
 * stime of SERVER_PID from /proc). Prints one line:
 *   msgs=N rate=R per_cpu_s=C p50_us=A p99_us=B cpu_s=S
 * Linux only (epoll). Build: cc -O2 ws_load.c -o ws_load -lz
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "ws_bench.h"

typedef struct conn {
    int fd;
    uint8_t *in;
    size_t len, cap;
    uint64_t sent_at;
} conn;

static uint8_t *frame;
static size_t frame_len;
static size_t want_payload; /* uncompressed size expected back */
static int deflate_on;

static double cpu_s(int pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    /* fields after the command: state(3) ... utime(14) stime(15) */
    if (p)
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void build_frame(size_t size)
{
    uint8_t *payload = malloc(size + 64);
    for (size_t i = 0; i < size; i++)
        payload[i] = (uint8_t)('a' + (i * 7) % 26);
    size_t plen = size;
    int rsv1 = 0;
    uint8_t *body = payload;
    if (deflate_on && size >= 16) {
        z_stream z;
        memset(&z, 0, sizeof z);
        deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
        body = malloc(size + 64);
        z.next_in = payload;
        z.avail_in = (uInt)size;
        z.next_out = body;
        z.avail_out = (uInt)(size + 64);
        deflate(&z, Z_SYNC_FLUSH);
        plen = (size + 64) - z.avail_out - 4; /* strip 00 00 ff ff */
        deflateEnd(&z);
        rsv1 = 1;
    }
    frame = malloc(plen + 14);
    size_t n = 0;
    frame[n++] = (uint8_t)(0x81 | (rsv1 ? 0x40 : 0));
    if (plen < 126) {
        frame[n++] = (uint8_t)(0x80 | plen);
    } else if (plen < 65536) {
        frame[n++] = 0x80 | 126;
        frame[n++] = (uint8_t)(plen >> 8);
        frame[n++] = (uint8_t)plen;
    } else {
        frame[n++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            frame[n++] = (uint8_t)((uint64_t)plen >> (8 * i));
    }
    static const uint8_t key[4] = {0x12, 0x34, 0x56, 0x78};
    memcpy(frame + n, key, 4);
    n += 4;
    for (size_t i = 0; i < plen; i++)
        frame[n + i] = body[i] ^ key[i & 3];
    frame_len = n + plen;
    want_payload = size;
}

static int open_conn(unsigned port, const char *path)
{
    char head[2048];
    int fd = ws_open(port, path,
                     deflate_on ? "Sec-WebSocket-Extensions: permessage-deflate; "
                                  "client_no_context_takeover; server_no_context_takeover\r\n"
                                : "",
                     head, sizeof head);
    if (deflate_on && !strcasestr(head, "permessage-deflate")) {
        fprintf(stderr, "permessage-deflate not negotiated:\n%s", head);
        exit(2);
    }
    return fd;
}

/* A whole frame at c->in? Its total size (0: not yet); *rsv1 and payload
 * bounds set. */
static size_t whole(conn *c, int *rsv1, size_t *off, size_t *plen)
{
    size_t total = ws_frame_whole(c->in, c->len, off, plen);
    if (total)
        *rsv1 = (c->in[0] & 0x40) != 0;
    return total;
}

static int verified;

static void verify(const uint8_t *p, size_t len, int rsv1)
{
    uint8_t *out = malloc(want_payload + 64);
    size_t olen = len;
    if (rsv1) {
        z_stream z;
        memset(&z, 0, sizeof z);
        inflateInit2(&z, -15);
        uint8_t *in = malloc(len + 4);
        memcpy(in, p, len);
        memcpy(in + len, "\x00\x00\xff\xff", 4);
        z.next_in = in;
        z.avail_in = (uInt)(len + 4);
        z.next_out = out;
        z.avail_out = (uInt)(want_payload + 64);
        inflate(&z, Z_SYNC_FLUSH);
        olen = want_payload + 64 - z.avail_out;
        inflateEnd(&z);
        free(in);
    } else {
        memcpy(out, p, len < want_payload + 64 ? len : want_payload + 64);
    }
    int ok = olen == want_payload;
    for (size_t i = 0; ok && i < olen; i++)
        ok = out[i] == (uint8_t)('a' + (i * 7) % 26);
    if (!ok) {
        fprintf(stderr, "echo differs (%zu bytes, rsv1 %d)\n", olen, rsv1);
        exit(2);
    }
    free(out);
    verified = 1;
}

int main(int argc, char **argv)
{
    if (argc != 9) {
        fprintf(stderr, "usage: ws_load PORT PATH SIZE CONNS WARMUP_S DURATION_S DEFLATE PID\n");
        return 2;
    }
    unsigned port = (unsigned)atoi(argv[1]);
    const char *path = argv[2];
    size_t size = (size_t)atol(argv[3]);
    int nconn = atoi(argv[4]);
    double warmup = atof(argv[5]), duration = atof(argv[6]);
    deflate_on = atoi(argv[7]);
    int pid = atoi(argv[8]);
    build_frame(size);

    int ep = epoll_create1(0);
    conn *cs = calloc((size_t)nconn, sizeof *cs);
    for (int i = 0; i < nconn; i++) {
        cs[i].fd = open_conn(port, path);
        cs[i].cap = 2 * (size + 64) + 65536;
        cs[i].in = malloc(cs[i].cap);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
    }
    size_t cap = 1 << 22, nlat = 0;
    uint32_t *lat = malloc(cap * sizeof *lat);
    uint64_t start = now_us(), measure_at = start + (uint64_t)(warmup * 1e6),
             end = measure_at + (uint64_t)(duration * 1e6);
    int measuring = 0;
    double cpu0 = 0;
    uint64_t msgs = 0;
    for (int i = 0; i < nconn; i++) {
        cs[i].sent_at = now_us();
        if (write(cs[i].fd, frame, frame_len) != (ssize_t)frame_len)
            die("write");
    }
    struct epoll_event evs[256];
    for (;;) {
        uint64_t t = now_us();
        if (!measuring && t >= measure_at) {
            measuring = 1;
            cpu0 = cpu_s(pid);
        }
        if (t >= end)
            break;
        int n = epoll_wait(ep, evs, 256, 100);
        for (int k = 0; k < n; k++) {
            conn *c = evs[k].data.ptr;
            for (;;) {
                if (c->cap - c->len < 65536) {
                    c->cap *= 2;
                    c->in = realloc(c->in, c->cap);
                }
                ssize_t r = read(c->fd, c->in + c->len, c->cap - c->len);
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                    break;
                if (r <= 0) {
                    fprintf(stderr, "connection closed by the server\n");
                    return 2;
                }
                c->len += (size_t)r;
            }
            int rsv1;
            size_t off, plen, fl;
            while ((fl = whole(c, &rsv1, &off, &plen)) > 0) {
                if (!verified)
                    verify(c->in + off, plen, rsv1);
                uint64_t now = now_us();
                if (measuring) {
                    msgs++;
                    if (nlat == cap) {
                        cap *= 2;
                        lat = realloc(lat, cap * sizeof *lat);
                    }
                    lat[nlat++] = (uint32_t)(now - c->sent_at);
                }
                memmove(c->in, c->in + fl, c->len - fl);
                c->len -= fl;
                c->sent_at = now;
                size_t w = 0;
                while (w < frame_len) { /* small frames: one write; big ones may block briefly */
                    ssize_t r = write(c->fd, frame + w, frame_len - w);
                    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        continue;
                    if (r < 0)
                        die("write");
                    w += (size_t)r;
                }
            }
        }
    }
    double cpu = cpu_s(pid) - cpu0;
    qsort(lat, nlat, sizeof *lat, cmp_u32);
    printf("msgs=%llu rate=%.0f per_cpu_s=%.0f p50_us=%u p99_us=%u cpu_s=%.2f\n",
           (unsigned long long)msgs, msgs / duration, cpu > 0 ? msgs / cpu : 0,
           nlat ? lat[nlat / 2] : 0, nlat ? lat[nlat * 99 / 100] : 0, cpu);
    return 0;
}
