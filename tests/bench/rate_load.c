/* rate_load — HTTP/1.1 requests at a fixed rate, latency corrected for
 * coordinated omission, for tests/bench/http.sh's "latency" test.
 *
 *   rate_load HOST PORT PATH CONNS RATE WARMUP_S SECONDS
 *
 * CONNS keep-alive connections share RATE requests per second: each sends
 * its next request at a planned time (one interval of CONNS / RATE seconds
 * after its last plan), or at once when the answer came after it. A
 * request's latency runs from its planned time, not from when it could
 * be sent: a server that stalls is charged for every request it delayed,
 * as wrk2 and HdrHistogram's corrected recording do, instead of hiding the
 * stall behind a closed loop that stopped asking. Answers must carry a
 * Content-Length. Prints one line of key=value pairs (microseconds).
 *
 * Linux only (epoll, timerfd): a benchmark client, never part of ctest.
 * Bounded: stops after WARMUP_S + SECONDS, whatever the server does. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* Log-linear buckets: 64 sub-buckets per power of two (precision about
 * 1.6%), nanoseconds up to 2^40 (18 minutes). */
#define SUB_BITS 6
#define SUB      (1u << SUB_BITS)
#define POWERS   41
static uint64_t hist[POWERS * SUB];
static uint64_t recorded, max_ns;

static unsigned bucket_of(uint64_t ns)
{
    if (ns < SUB)
        return (unsigned)ns;
    unsigned msb = 63u - (unsigned)__builtin_clzll(ns);
    if (msb >= POWERS + SUB_BITS - 1)
        return POWERS * SUB - 1;
    unsigned power = msb - SUB_BITS + 1;
    return power * SUB + (unsigned)((ns >> (msb - SUB_BITS)) & (SUB - 1));
}

/* The largest value a bucket holds (percentiles are reported high). */
static uint64_t bucket_top(unsigned b)
{
    unsigned power = b / SUB, sub = b % SUB;
    if (power == 0)
        return sub;
    unsigned msb = power + SUB_BITS - 1;
    return ((uint64_t)(SUB + sub) << (msb - SUB_BITS)) + ((uint64_t)1 << (msb - SUB_BITS)) - 1;
}

static void record(uint64_t ns)
{
    hist[bucket_of(ns)]++;
    recorded++;
    if (ns > max_ns)
        max_ns = ns;
}

static double percentile_us(double q)
{
    uint64_t want = (uint64_t)(q * (double)recorded + 0.5), seen = 0;
    if (want == 0)
        want = 1;
    for (unsigned b = 0; b < POWERS * SUB; b++) {
        seen += hist[b];
        if (seen >= want)
            return (double)bucket_top(b) / 1000.0;
    }
    return (double)max_ns / 1000.0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct conn {
    int fd;
    int waiting;      /* a request is out, its answer not complete */
    uint64_t planned; /* when the request out (or the next) was due */
    char buf[65536];
    size_t have;
} conn;

static char request[512];
static size_t request_len;
static uint64_t errors, sent;

static int dial(const char *host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (fd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("connect");
        exit(2);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* The length of a complete answer at the start of c->buf, 0 if more must
 * come, -1 if it cannot be read (no Content-Length). */
static long answer_length(const conn *c)
{
    const char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
    if (end == NULL)
        return c->have == sizeof c->buf ? -1 : 0;
    size_t head = (size_t)(end - c->buf) + 4;
    long body = -1;
    for (const char *p = c->buf; p < end; p++) {
        if (*p == '\n' && strncasecmp(p + 1, "content-length:", 15) == 0) {
            body = strtol(p + 16, NULL, 10);
            break;
        }
    }
    if (body < 0)
        return -1;
    return head + (size_t)body <= c->have ? (long)(head + (size_t)body) : 0;
}

static void send_request(conn *c)
{
    ssize_t n = send(c->fd, request, request_len, MSG_NOSIGNAL);
    if (n != (ssize_t)request_len) {
        fprintf(stderr, "send: %s\n", n < 0 ? strerror(errno) : "short");
        exit(2);
    }
    c->waiting = 1;
    sent++;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: rate_load HOST PORT PATH CONNS RATE WARMUP_S SECONDS\n");
        return 2;
    }
    const char *host = argv[1], *path = argv[3];
    int port = atoi(argv[2]), nconns = atoi(argv[4]);
    double rate = atof(argv[5]), warmup = atof(argv[6]), seconds = atof(argv[7]);
    if (port <= 0 || nconns <= 0 || nconns > 10000 || rate <= 0 || seconds <= 0 || warmup < 0) {
        fprintf(stderr, "rate_load: bad arguments\n");
        return 2;
    }
    request_len = (size_t)snprintf(request, sizeof request,
                                   "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", path, host, port);
    /* The default 50 us of timer slack would be charged to the server. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

    conn *conns = calloc((size_t)nconns, sizeof *conns);
    int ep = epoll_create1(EPOLL_CLOEXEC), tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (conns == NULL || ep < 0 || tfd < 0) {
        perror("setup");
        return 2;
    }
    uint64_t interval = (uint64_t)((double)nconns * 1e9 / rate);
    uint64_t start = now_ns() + 10000000; /* 10 ms to connect */
    for (int i = 0; i < nconns; i++) {
        conns[i].fd = dial(host, port);
        conns[i].planned = start + (uint64_t)i * interval / (uint64_t)nconns;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
    }
    struct epoll_event tev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &tev);
    uint64_t measure_from = start + (uint64_t)(warmup * 1e9);
    uint64_t stop = measure_from + (uint64_t)(seconds * 1e9);
    uint64_t answered = 0; /* answers that came in the measured window */

    for (;;) {
        uint64_t now = now_ns();
        if (now >= stop)
            break;
        /* Send what is due; arm the timer for the next plan. */
        uint64_t next = stop;
        for (int i = 0; i < nconns; i++) {
            conn *c = &conns[i];
            if (c->waiting)
                continue;
            if (c->planned <= now)
                send_request(c);
            else if (c->planned < next)
                next = c->planned;
        }
        struct itimerspec its = {.it_value = {.tv_sec = (time_t)(next / 1000000000u),
                                              .tv_nsec = (long)(next % 1000000000u)}};
        timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
        struct epoll_event evs[256];
        int n = epoll_wait(ep, evs, 256, 1000);
        for (int k = 0; k < n; k++) {
            if (evs[k].data.u32 == UINT32_MAX) {
                uint64_t ticks;
                if (read(tfd, &ticks, sizeof ticks) < 0 && errno != EAGAIN)
                    perror("timerfd");
                continue;
            }
            conn *c = &conns[evs[k].data.u32];
            ssize_t got = recv(c->fd, c->buf + c->have, sizeof c->buf - c->have, 0);
            if (got <= 0) {
                fprintf(stderr, "rate_load: the server closed a connection\n");
                return 1;
            }
            c->have += (size_t)got;
            long len;
            while ((len = answer_length(c)) > 0) {
                uint64_t done = now_ns();
                if (memcmp(c->buf, "HTTP/1.1 200", 12) != 0)
                    errors++;
                if (c->planned >= measure_from && done < stop)
                    record(done - c->planned);
                if (done >= measure_from && done < stop)
                    answered++;
                memmove(c->buf, c->buf + len, c->have - (size_t)len);
                c->have -= (size_t)len;
                c->waiting = 0;
                c->planned += interval;
                if (c->planned <= done)
                    send_request(c); /* late: the next one is already due */
            }
            if (len < 0) {
                fprintf(stderr, "rate_load: an answer without Content-Length\n");
                return 1;
            }
        }
    }
    /* The plans still unanswered at the end count too, at the least they
     * waited: leaving them out would flatter a server that fell behind. */
    uint64_t unanswered = 0;
    for (int i = 0; i < nconns; i++)
        for (uint64_t p = conns[i].planned; p < stop; p += interval)
            if (p >= measure_from) {
                record(stop - p);
                unanswered++;
            }
    printf("rate=%.0f achieved=%.0f count=%llu unanswered=%llu errors=%llu p50_us=%.1f "
           "p99_us=%.1f p999_us=%.1f max_us=%.1f\n",
           rate, (double)answered / seconds, (unsigned long long)answered,
           (unsigned long long)unanswered, (unsigned long long)errors, percentile_us(0.50),
           percentile_us(0.99), percentile_us(0.999), (double)max_ns / 1000.0);
    (void)sent;
    for (int i = 0; i < nconns; i++)
        close(conns[i].fd);
    free(conns);
    return 0;
}
