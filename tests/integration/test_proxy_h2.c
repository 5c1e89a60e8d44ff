/* The reverse proxy behind HTTP/2 clients (issue 23, section 4): the
 * streams of one connection share one budget of buffered response bytes
 * ([proxy] client_buffer), so a client that opens 100 streams to large
 * responses and shuts its flow-control windows holds under 1 MiB of
 * keel's memory (it held ~200 KiB a stream, 19.5 MiB, before), and
 * reading goes on as it opens them. The upstream is proxy_upstream.py,
 * the client raw frames (h2_raw.h). */
#define _GNU_SOURCE
#include "test_proxy.h"
#include "h2_raw.h"

#include <arpa/inet.h>

/* SETTINGS with one INITIAL_WINDOW_SIZE (RFC 9113 6.5.2, id 0x4). */
static size_t settings_window(char *out, uint32_t window)
{
    char p[6] = {0,           0x4, (char)(window >> 24), (char)(window >> 16), (char)(window >> 8),
                 (char)window};
    return frame(out, 0x4, 0, 0, p, sizeof p);
}

static size_t window_update(char *out, unsigned sid, uint32_t increment)
{
    char p[4] = {(char)(increment >> 24), (char)(increment >> 16), (char)(increment >> 8),
                 (char)increment};
    return frame(out, 0x8, 0, sid, p, sizeof p);
}

/* Reads frames for ms milliseconds; returns the DATA payload bytes seen
 * on stream sid (0: any). */
static size_t data_bytes(int fd, unsigned sid, int ms)
{
    static char buf[1 << 18];
    size_t have = 0, total = 0;
    long long end = kh_now_ms() + ms;
    while (kh_now_ms() < end) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        ssize_t r = read(fd, buf + have, sizeof buf - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        while (have >= 9) {
            size_t len = ((size_t)(unsigned char)buf[0] << 16) |
                         ((size_t)(unsigned char)buf[1] << 8) | (unsigned char)buf[2];
            if (have < 9 + len)
                break;
            unsigned s = ((unsigned)(buf[5] & 0x7f) << 24) |
                         ((unsigned)(unsigned char)buf[6] << 16) |
                         ((unsigned)(unsigned char)buf[7] << 8) | (unsigned char)buf[8];
            if (buf[3] == 0x0 && (sid == 0 || s == sid))
                total += len;
            memmove(buf, buf + 9 + len, have - 9 - len);
            have -= 9 + len;
        }
    }
    return total;
}

Test(proxy_h2, shut_windows_hold_little, .timeout = 90, .fini = kh_cleanup_all)
{
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's quarantine would count freed blocks as held (see
     * test_proxy_stream.c). */
    setenv("ASAN_OPTIONS", "quarantine_size_mb=0:thread_local_quarantine_size_kb=0", 1);
#endif
    kh_proc *up = px_upstream();
    char conf[1024];
    snprintf(
        conf, sizeof conf,
        "[keel]\nlisten = 127.0.0.1:0 h2\nworkers = 1\nmodules = http1 h2 proxy\n" KH_MODULE_PATH
        "[proxy]\nupstream = py 127.0.0.1:%u\npass = / py\n",
        kh_port(up, 0));
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    unsigned port = kh_port(p, 0);

    /* A first connection warms what a worker keeps (request pools, batch
     * buffers): only the second one's holding is measured. */
    int fds = kh_count_fds(p);
    int warm = kh_connect("127.0.0.1", port);
    static char out[65536];
    size_t n = 0;
    memcpy(out, H2_PREFACE, 24);
    n = 24;
    n += frame(out + n, 0x4, 0, 0, NULL, 0);
    n += get_headers(out + n, 1, "/id", "x");
    cr_assert(kh_send(warm, out, n) == 0);
    kh_assert(p, await_headers(warm, 1, 5000) == 0x88, "warm-up");
    close(warm);
    kh_assert(p, kh_wait_fds_at_most(p, fds + 1, 5000), /* + the pooled upstream connection */
              "keel did not let the warm-up connection go: %d descriptors, %d before",
              kh_count_fds(p), fds);
    long before = px_rss_kib(p->pid);

    /* 100 streams (max_concurrent_streams' default), each asking for
     * 20 MB, with every window shut (RFC 9113 6.9.2: an initial window of
     * 0); the connection's own window stays at 65535. */
    int fd = kh_connect("127.0.0.1", port);
    cr_assert(fd >= 0);
    memcpy(out, H2_PREFACE, 24);
    n = 24;
    n += settings_window(out + n, 0);
    for (unsigned i = 0; i < 100; i++)
        n += get_headers(out + n, 1 + 2 * i, "/big?n=20000000", "x");
    cr_assert(kh_send(fd, out, n) == 0);
    long max = 0;
    for (int i = 0; i < 40; i++) { /* 4 s: time for every upstream to send what it can */
        kh_sleep_ms(100);
        long rss = px_rss_kib(p->pid);
        max = rss > max ? rss : max;
    }
#if defined(__SANITIZE_ADDRESS__)
    long limit = 2048; /* shadow memory and redzones: about twice the heap */
#else
    long limit = 1024;
#endif
    kh_assert(p, before > 0 && max - before < limit,
              "keel's RSS grew by %ld KiB for 100 streams with shut windows (limit %ld)",
              max - before, limit);

    /* The client opens one stream's window and the connection's: its
     * response goes on, the rest still wait. */
    n = settings_window(out, 0);
    n = frame(out, 0x4, 0x1, 0, NULL, 0); /* SETTINGS ACK */
    n += window_update(out + n, 0, 4 << 20);
    n += window_update(out + n, 1, 4 << 20);
    cr_assert(kh_send(fd, out, n) == 0);
    size_t got = data_bytes(fd, 1, 3000);
    kh_assert(p, got >= 1 << 20, "stream 1 received %zu bytes once its window opened", got);
    close(fd);
    px_stop(p);
    kh_signal(up, SIGTERM);
}
