/* ws_pubsub_load.c — pub/sub load for tests/bench/cluster.sh, through the
 * chat example's module (examples/chat: GET /chat/ws?name=NAME joins the
 * topic "room"; a text message is published to it as
 * {"type":"msg","name":...,"text":...}).
 *
 *   ws_pubsub_load latency PUB_PORT SUB_PORT SUBS SIZE RATE WARMUP_S DURATION_S
 *   ws_pubsub_load flood   PUB_PORT SUB_PORT SUBS SIZE PUBS WARMUP_S DURATION_S
 *
 * SUBS subscribers join on SUB_PORT, publishers on PUB_PORT (the same port:
 * one instance; two ports: two instances bridged by pubsub_redis). Each
 * message's text is "P:SEQ:SENT_US:" padded with 'x' to SIZE bytes, the
 * send time from this process's monotonic clock, so a subscriber knows
 * the message's latency.
 *
 * latency: one publisher sends RATE messages a second, paced; after
 *   WARMUP_S, those sent during DURATION_S are measured at every
 *   subscriber (1 s of grace for the last ones). Prints
 *     sent=N expected=E received=R lost=L p50_us=A p99_us=B max_us=C
 * flood: PUBS publishers send as fast as subscriber 0 keeps up: each keeps
 *   at most 64 messages that subscriber 0 has not yet received in flight
 *   (end-to-end flow control, so what is measured is what the path
 *   sustains, not how deep its queues are). Messages reaching subscriber
 *   0 during DURATION_S after WARMUP_S:
 *     msgs=N rate=R deliveries_per_s=D
 *   (D counts the deliveries at all subscribers).
 * Linux only (epoll). Build: cc -O2 ws_pubsub_load.c -o ws_pubsub_load
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

#include "ws_bench.h"

#define WINDOW   64
#define MAX_PUBS 64

typedef struct conn {
    int fd;
    int sub; /* index among subscribers, or -1 for a publisher */
    uint8_t *in;
    size_t len, cap;
} conn;

static int open_conn(unsigned port, const char *name)
{
    char path[256], head[2048];
    snprintf(path, sizeof path, "/chat/ws?name=%s", name);
    return ws_open(port, path, "", head, sizeof head);
}

/* Sends text as one masked frame (RFC 6455 5.2, 5.3), all of it. */
static void send_text(int fd, const char *text, size_t len)
{
    uint8_t frame[70000];
    size_t n = 0;
    frame[n++] = 0x81;
    if (len < 126) {
        frame[n++] = (uint8_t)(0x80 | len);
    } else {
        frame[n++] = 0x80 | 126;
        frame[n++] = (uint8_t)(len >> 8);
        frame[n++] = (uint8_t)len;
    }
    static const uint8_t key[4] = {0x12, 0x34, 0x56, 0x78};
    memcpy(frame + n, key, 4);
    n += 4;
    for (size_t i = 0; i < len; i++)
        frame[n + i] = (uint8_t)text[i] ^ key[i & 3];
    n += len;
    size_t w = 0;
    while (w < n) {
        ssize_t r = write(fd, frame + w, n - w);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (r < 0)
            die("write");
        w += (size_t)r;
    }
}

/* A whole frame at c->in? Its total size (0: not yet); opcode and payload
 * bounds set. */
static size_t whole(conn *c, int *op, size_t *off, size_t *plen)
{
    size_t total = ws_frame_whole(c->in, c->len, off, plen);
    if (total)
        *op = c->in[0] & 0x0f;
    return total;
}

/* In a chat line {"type":"msg","name":...,"text":"P:SEQ:SENT_US:xxx"}:
 * the three numbers. 0 if the line is something else (a join, a roster). */
static int parse_msg(const uint8_t *p, size_t len, unsigned *pub, uint64_t *seq, uint64_t *sent)
{
    char buf[160];
    size_t n = len < sizeof buf - 1 ? len : sizeof buf - 1;
    memcpy(buf, p, n);
    buf[n] = 0;
    if (strncmp(buf, "{\"type\":\"msg\"", 13) != 0)
        return 0;
    char *t = strstr(buf, "\"text\":\"");
    if (t == NULL)
        return 0;
    char *end;
    *pub = (unsigned)strtoul(t + 8, &end, 10);
    if (*end != ':')
        return 0;
    *seq = strtoull(end + 1, &end, 10);
    if (*end != ':')
        return 0;
    *sent = strtoull(end + 1, &end, 10);
    return *end == ':';
}

/* The state both modes share. */
static int flood_mode;
static size_t size;
static int npubs, nsubs;
static conn *pubs, *subs;
static uint64_t seq_sent[MAX_PUBS], seq_seen0[MAX_PUBS];
static uint64_t measure_at, end_at;
static uint32_t *lat;
static size_t nlat, latcap;
static uint64_t measured_sent, received, received0, deliveries;

/* Returns the send time written into the message. */
static uint64_t publish(int p)
{
    char text[65536];
    uint64_t t = now_us();
    int n = snprintf(text, sizeof text, "%d:%llu:%llu:", p, (unsigned long long)++seq_sent[p],
                     (unsigned long long)t);
    size_t len = (size_t)n < size ? size : (size_t)n;
    memset(text + n, 'x', len - (size_t)n);
    send_text(pubs[p].fd, text, len);
    return t;
}

/* Reads what came on c; a subscriber's messages are measured. */
static void on_readable(conn *c)
{
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
            exit(2);
        }
        c->len += (size_t)r;
    }
    int op;
    size_t off, plen, fl;
    while ((fl = whole(c, &op, &off, &plen)) > 0) {
        unsigned p;
        uint64_t seq, sent;
        if (c->sub >= 0 && op == 1 && parse_msg(c->in + off, plen, &p, &seq, &sent) &&
            p < (unsigned)npubs) {
            uint64_t now = now_us();
            if (c->sub == 0 && seq > seq_seen0[p])
                seq_seen0[p] = seq;
            if (!flood_mode && sent >= measure_at && sent < end_at) {
                received++;
                if (nlat == latcap) {
                    latcap *= 2;
                    lat = realloc(lat, latcap * sizeof *lat);
                }
                lat[nlat++] = (uint32_t)(now - sent);
            } else if (flood_mode && now >= measure_at && now < end_at) {
                deliveries++;
                if (c->sub == 0)
                    received0++;
            }
        }
        memmove(c->in, c->in + fl, c->len - fl);
        c->len -= fl;
    }
}

int main(int argc, char **argv)
{
    if (argc != 9 || (strcmp(argv[1], "latency") != 0 && strcmp(argv[1], "flood") != 0)) {
        fprintf(stderr, "usage: ws_pubsub_load latency|flood PUB_PORT SUB_PORT SUBS SIZE "
                        "RATE|PUBS WARMUP_S DURATION_S\n");
        return 2;
    }
    flood_mode = strcmp(argv[1], "flood") == 0;
    unsigned pub_port = (unsigned)atoi(argv[2]), sub_port = (unsigned)atoi(argv[3]);
    nsubs = atoi(argv[4]);
    size = (size_t)atol(argv[5]);
    double rate = flood_mode ? 0 : atof(argv[6]);
    npubs = flood_mode ? atoi(argv[6]) : 1;
    double warmup = atof(argv[7]), duration = atof(argv[8]);
    if (nsubs < 1 || npubs < 1 || npubs > MAX_PUBS || size < 40 || size > 60000 ||
        (!flood_mode && rate <= 0)) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }

    int ep = epoll_create1(0);
    pubs = calloc((size_t)npubs, sizeof *pubs);
    subs = calloc((size_t)nsubs, sizeof *subs);
    char name[32];
    for (int i = 0; i < nsubs + npubs; i++) {
        conn *c = i < nsubs ? &subs[i] : &pubs[i - nsubs];
        snprintf(name, sizeof name, i < nsubs ? "s%d" : "p%d", i < nsubs ? i : i - nsubs);
        c->fd = open_conn(i < nsubs ? sub_port : pub_port, name);
        c->sub = i < nsubs ? i : -1;
        c->cap = 1 << 18;
        c->in = malloc(c->cap);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    latcap = 1 << 20;
    lat = malloc(latcap * sizeof *lat);
    uint64_t start = now_us();
    measure_at = start + (uint64_t)(warmup * 1e6);
    end_at = measure_at + (uint64_t)(duration * 1e6);
    /* latency: a second of grace for the last messages sent */
    uint64_t stop_at = end_at + (flood_mode ? 0 : 1000000);
    double interval_us = flood_mode ? 0 : 1e6 / rate;
    uint64_t next_send = start;
    struct epoll_event evs[256];
    for (;;) {
        uint64_t t = now_us();
        if (t >= stop_at)
            break;
        int timeout_ms = 100;
        if (!flood_mode) {
            while (t < end_at && next_send <= t) {
                uint64_t sent = publish(0);
                if (sent >= measure_at && sent < end_at)
                    measured_sent++;
                next_send = start + (uint64_t)((double)seq_sent[0] * interval_us);
            }
            if (t < end_at)
                timeout_ms = (int)((next_send - t) / 1000);
        } else if (t < end_at) {
            for (int p = 0; p < npubs; p++)
                while (seq_sent[p] - seq_seen0[p] < WINDOW)
                    publish(p);
            timeout_ms = 10;
        }
        int n = epoll_wait(ep, evs, 256, timeout_ms);
        for (int k = 0; k < n; k++)
            on_readable(evs[k].data.ptr);
    }
    if (flood_mode) {
        printf("msgs=%llu rate=%.0f deliveries_per_s=%.0f\n", (unsigned long long)received0,
               (double)received0 / duration, (double)deliveries / duration);
    } else {
        qsort(lat, nlat, sizeof *lat, cmp_u32);
        uint64_t expected = measured_sent * (uint64_t)nsubs;
        printf("sent=%llu expected=%llu received=%llu lost=%llu p50_us=%u p99_us=%u max_us=%u\n",
               (unsigned long long)measured_sent, (unsigned long long)expected,
               (unsigned long long)received,
               (unsigned long long)(expected > received ? expected - received : 0),
               nlat ? lat[nlat / 2] : 0, nlat ? lat[nlat * 99 / 100] : 0, nlat ? lat[nlat - 1] : 0);
    }
    return 0;
}
