/* test_pressure.c — 10,000 concurrent connections on loopback (issue 13,
 * "Load and soak"): opened in batches, each answered a request, all held
 * open, then each answered a second request, and a newcomer still served;
 * keel's memory per connection (its RSS growth over the 10,000, divided) is
 * printed and bounded. The file-descriptor limit is raised for the test
 * (keel inherits it); the test is skipped, saying why, when the hard limit
 * is too low.
 *
 * The slowloris crowd is test_pressure_latency.c's. ctest runs this alone
 * (RUN_SERIAL): it needs two cores' worth of attention for a few seconds.
 */
#include "pressure.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/resource.h>

#if defined(__SANITIZE_ADDRESS__)
#define KH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KH_ASAN 1
#endif
#endif
#ifndef KH_ASAN
#define KH_ASAN 0
#endif

static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

Test(pressure, ten_thousand_connections, .timeout = 110)
{
    enum { N = 10000, BATCH = 500 };
    rlim_t hard = 0;
    if (!raise_nofile(N + 200, &hard))
        cr_skip_test("the descriptor limit cannot be raised to %d (hard limit %llu): "
                     "raise it (ulimit -Hn) to run this test",
                     N + 200, (unsigned long long)hard);
    kh_proc *p = kh_start("[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
                          "workers = 2\n"
                          "modules = http1 hello\n"
                          "max_connections = 12000\n"
                          "backlog = 4096\n"
                          "[http1]\n"
                          "keepalive_timeout = 120s\n",
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    /* Warm up (the pools, the workers' arenas) before the baseline. */
    int fds0 = kh_count_fds(p);
    int warm[64];
    for (int i = 0; i < 64; i++)
        warm[i] = kh_connect("127.0.0.1", port);
    serve_batch(warm, 64, 5000);
    for (int i = 0; i < 64; i++)
        close(warm[i]);
    kh_assert(p, kh_wait_fds_at_most(p, fds0, 10000), "keel holds %d descriptors, %d before",
              kh_count_fds(p), fds0);
    long rss0 = rss_kib(p->pid);

    int *fds = malloc(N * sizeof *fds);
    cr_assert(fds != NULL);
    long long t0 = kh_now_ms();
    int open = 0, served = 0;
    for (int b = 0; b < N; b += BATCH) {
        for (int i = b; i < b + BATCH; i++) {
            fds[i] = kh_connect("127.0.0.1", port);
            kh_assert(p, fds[i] >= 0, "connection %d: %s", i, strerror(errno));
            open++;
        }
        served += serve_batch(fds + b, BATCH, 20000);
    }
    long long t1 = kh_now_ms();
    kh_assert(p, served == N, "%d of %d connections answered", served, N);
    long rss1 = rss_kib(p->pid);
    /* All held: every one answered again. */
    int again = 0;
    for (int b = 0; b < N; b += BATCH)
        again += serve_batch(fds + b, BATCH, 20000);
    long long t2 = kh_now_ms();
    kh_assert(p, again == N, "second round: %d of %d answered", again, N);
    /* A newcomer is still served. */
    int fresh = kh_connect("127.0.0.1", port);
    kh_assert(p, fresh >= 0 && serve_batch(&fresh, 1, 5000) == 1, "a new client not served");
    close(fresh);

    double per_conn = (double)(rss1 - rss0) * 1024.0 / N;
    fprintf(stderr,
            "pressure: %d connections open and answered in %lld ms, answered again in %lld ms; "
            "keel RSS %ld KiB -> %ld KiB: %.0f bytes per connection%s\n",
            N, t1 - t0, t2 - t1, rss0, rss1, per_conn, KH_ASAN ? " (ASan build)" : "");
    /* Generous: the connection, http1's state and the kernel-side socket
     * are a few KiB; read buffers go back to the pool between requests. */
    double bound = KH_ASAN ? 256 * 1024.0 : 32 * 1024.0;
    kh_assert(p, per_conn < bound, "%.0f bytes per connection (bound %.0f)", per_conn, bound);

    for (int i = 0; i < N; i++)
        close(fds[i]);
    free(fds);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 30000) == 0, "keel did not exit cleanly");
    kh_stop(p);
}
