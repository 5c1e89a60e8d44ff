/* test_pressure_latency.c — a slowloris crowd (600 connections trickling a
 * request head a byte at a time) while a real client keeps its usual
 * latency (issue 13, "Load and soak"): p99 of requests on fresh
 * connections, the median over 9 rounds of 200, with and without the
 * crowd; the loaded p99 stays within 2x the unloaded one (with a 2 ms floor
 * under the doubled figure: on a noisy 2-core machine a sub-millisecond p99
 * doubles from scheduling alone). The crowd is checked to be still there at
 * the end, so the load was real. ctest runs it alone (RUN_SERIAL).
 */
#include "pressure.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

/* ---- slowloris ---------------------------------------------------------------- */

typedef struct crowd {
    int *fds;
    int n;
    volatile int stop;
    long long bytes;
} crowd;

/* Trickles a byte to each member in turn, pausing a millisecond every 32
 * (the pace of a slowloris crowd, in time by design):
 * each connection gets a byte every few tens of milliseconds and never
 * completes its head (keel's reads and timer updates are the load). */
static void *trickle(void *arg)
{
    crowd *c = arg;
    int i = 0;
    while (!c->stop) {
        if (c->fds[i] >= 0 && send(c->fds[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
            __atomic_fetch_add(&c->bytes, 1, __ATOMIC_RELAXED);
        if (++i == c->n) {
            i = 0;
            kh_sleep_ms(1);
        }
        if (i % 32 == 0)
            kh_sleep_ms(1);
    }
    return NULL;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* ROUNDS rounds of SAMPLES requests, each on a fresh connection; the
 * median of the rounds' p99, in microseconds. */
static long long p99_us(kh_proc *p, unsigned port)
{
    enum { ROUNDS = 9, SAMPLES = 200 };
    long long p99[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        long long lat[SAMPLES];
        for (int s = 0; s < SAMPLES; s++) {
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            int fd = kh_connect("127.0.0.1", port);
            kh_assert(p, fd >= 0, "connect: %s", strerror(errno));
            kh_assert(p, serve_batch(&fd, 1, 5000) == 1, "a request was not answered");
            clock_gettime(CLOCK_MONOTONIC, &b);
            close(fd);
            lat[s] = (b.tv_sec - a.tv_sec) * 1000000LL + (b.tv_nsec - a.tv_nsec) / 1000;
        }
        qsort(lat, SAMPLES, sizeof lat[0], cmp_ll);
        p99[r] = lat[SAMPLES * 99 / 100];
    }
    qsort(p99, ROUNDS, sizeof p99[0], cmp_ll);
    return p99[ROUNDS / 2];
}

Test(pressure, slowloris_crowd, .timeout = 110)
{
    enum { CROWD = 600 };
    rlim_t hard = 0;
    if (!raise_nofile(CROWD + 200, &hard))
        cr_skip_test("the descriptor limit cannot be raised to %d (hard limit %llu)", CROWD + 200,
                     (unsigned long long)hard);
    kh_proc *p = kh_start("[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
                          "workers = 2\n"
                          "modules = http1 hello\n"
                          "[http1]\n"
                          "header_timeout = 120s\n",
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    p99_us(p, port); /* warm-up */
    long long base = p99_us(p, port);

    crowd c = {.n = CROWD};
    c.fds = malloc(CROWD * sizeof *c.fds);
    cr_assert(c.fds != NULL);
    for (int i = 0; i < CROWD; i++) {
        c.fds[i] = kh_connect("127.0.0.1", port);
        kh_assert(p, c.fds[i] >= 0, "crowd connection %d", i);
        kh_send_str(c.fds[i], "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    }
    /* keel holds the whole crowd (each head's start read); then the
     * trickle runs half a second before the measurement: a steady load is
     * a time, not an event (measured after one round, p99 included keel
     * settling in, and failed). */
    kh_assert(p, kh_wait_port_read(port, 10000), "keel did not read the crowd");
    pthread_t t;
    cr_assert(pthread_create(&t, NULL, trickle, &c) == 0);
    kh_sleep_ms(500);
    long long loaded = p99_us(p, port);
    c.stop = 1;
    pthread_join(t, NULL);

    /* The crowd is still connected: keel did not simply drop it. */
    int alive = 0;
    for (int i = 0; i < CROWD; i++) {
        char buf[64];
        if (kh_expect_eof(c.fds[i], buf, sizeof buf, 0) == 0)
            alive++;
        close(c.fds[i]);
    }
    free(c.fds);
    long long bound = 2 * base > base + 2000 ? 2 * base : base + 2000;
    fprintf(stderr,
            "slowloris: p99 (median of 9 rounds of 200 fresh-connection requests) %lld us "
            "unloaded, %lld us with %d slowloris connections (%d still open, %lld bytes "
            "trickled); bound %lld us\n",
            base, loaded, CROWD, alive, c.bytes, bound);
    kh_assert(p, alive >= CROWD * 9 / 10, "only %d of the crowd still connected", alive);
    kh_assert(p, loaded <= bound, "p99 %lld us under the crowd, %lld us without (bound %lld)",
              loaded, base, bound);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 30000) == 0, "keel did not exit cleanly");
    kh_stop(p);
}
