/* A proxied exchange whose client leaves before the upstream answers
 * (issue 23, section 1): the exchange must hear of it (the abort callback)
 * and give the upstream attempt up, never build the upstream's request
 * from a request that is gone. Before the fix the request head went out
 * late, read from freed memory: under ASan a heap-use-after-free in
 * px_build_request_head; in a release build the upstream received the
 * *next* client's request line and Host, whose bytes had taken the freed
 * ones' place.
 *
 * The upstream here is the test itself, on 127.0.0.1, so that it can hold
 * keel's connect attempts: a listening socket with a backlog of 0 whose
 * only queue slot a filler connection takes, so that the kernel drops
 * keel's SYNs until the test accepts the filler (the SYN's retransmission,
 * about a second later, then connects). Everything it receives is kept
 * and checked: the one request that must arrive, and nothing else. */
#define _GNU_SOURCE
#include "test_proxy.h"
#include "h2_raw.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>

/* ---- the upstream ------------------------------------------------------------ */

typedef struct upstream {
    int lfd;
    unsigned port;
    int filler; /* the connection that fills the accept queue, or -1 */
    int conns[16];
    size_t nconns;
    char got[8192]; /* every byte any connection sent, in arrival order */
    size_t len;
} upstream;

static void upstream_open(upstream *u, int backlog_full)
{
    memset(u, 0, sizeof *u);
    u->filler = -1;
    u->lfd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(u->lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    cr_assert(bind(u->lfd, (struct sockaddr *)&a, sizeof a) == 0);
    cr_assert(listen(u->lfd, backlog_full ? 0 : 16) == 0);
    cr_assert(getsockname(u->lfd, (struct sockaddr *)&a, &alen) == 0);
    u->port = ntohs(a.sin_port);
    if (backlog_full) {
        /* Linux drops a SYN while the accept queue holds more than the
         * backlog: one connection not accepted is enough. */
        u->filler = kh_connect("127.0.0.1", u->port);
        cr_assert(u->filler >= 0, "filler connect");
    }
}

/* Accepts (the filler first, which frees the queue) and reads whatever
 * arrives for ms milliseconds; answers each complete request head with a
 * small 200. */
static void upstream_serve(upstream *u, int ms)
{
    long long end = kh_now_ms() + ms;
    if (u->filler >= 0) {
        int f = accept(u->lfd, NULL, NULL);
        if (f >= 0)
            close(f);
        close(u->filler);
        u->filler = -1;
    }
    fcntl(u->lfd, F_SETFL, O_NONBLOCK);
    for (long long now = kh_now_ms(); now < end; now = kh_now_ms()) {
        struct pollfd pf[17];
        size_t n = 0;
        pf[n++] = (struct pollfd){.fd = u->lfd, .events = POLLIN};
        for (size_t i = 0; i < u->nconns; i++)
            pf[n++] = (struct pollfd){.fd = u->conns[i], .events = POLLIN};
        if (poll(pf, n, (int)(end - now)) <= 0)
            continue;
        if ((pf[0].revents & POLLIN) && u->nconns < 16) {
            int c = accept(u->lfd, NULL, NULL);
            if (c >= 0)
                u->conns[u->nconns++] = c;
        }
        for (size_t i = 1; i < n; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)) || pf[i].fd < 0)
                continue;
            char buf[2048];
            ssize_t r = read(pf[i].fd, buf, sizeof buf);
            if (r <= 0) {
                close(pf[i].fd);
                u->conns[i - 1] = -1;
                continue;
            }
            size_t room = sizeof u->got - 1 - u->len;
            size_t take = (size_t)r < room ? (size_t)r : room;
            memcpy(u->got + u->len, buf, take);
            u->len += take;
            u->got[u->len] = '\0';
            if (memmem(buf, (size_t)r, "\r\n\r\n", 4) != NULL) {
                static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                if (write(pf[i].fd, ok, sizeof ok - 1) < 0)
                    continue;
            }
        }
        /* closed connections leave the poll set */
        size_t k = 0;
        for (size_t i = 0; i < u->nconns; i++)
            if (u->conns[i] >= 0)
                u->conns[k++] = u->conns[i];
        u->nconns = k;
    }
}

static void upstream_close(upstream *u)
{
    for (size_t i = 0; i < u->nconns; i++)
        close(u->conns[i]);
    if (u->filler >= 0)
        close(u->filler);
    close(u->lfd);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Closes with a reset (SO_LINGER 0), as a client that gives up does. */
static void reset_close(int fd)
{
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/* ---- HTTP/1.1: the client resets while keel connects ------------------------- */

Test(proxy_abort, h1_client_resets_while_connecting, .timeout = 60, .fini = kh_cleanup_all)
{
    upstream u;
    upstream_open(&u, 1);
    char section[256];
    snprintf(section, sizeof section,
             "upstream = app 127.0.0.1:%u\npass = / app connect_timeout=10s\n", u.port);
    kh_proc *p = px_keel(section, 0);
    unsigned port = kh_port(p, 0);

    /* A: asks, and leaves with a reset while keel's SYN waits. */
    int fds = kh_count_fds(p);
    int a = kh_connect("127.0.0.1", port);
    cr_assert(a >= 0);
    kh_send_str(a, "GET /first HTTP/1.1\r\nHost: first.test\r\n\r\n");
    kh_assert(p, kh_wait_peer_read(a, 5000), "keel did not read A's request");
    reset_close(a);
    /* keel has dropped A (its socket and the upstream attempt closed) */
    kh_assert(p, kh_wait_fds_at_most(p, fds, 5000), "keel holds A's descriptors: %d, %d before",
              kh_count_fds(p), fds);
    /* B: the next client, whose bytes may land where A's were. */
    int b = kh_connect("127.0.0.1", port);
    cr_assert(b >= 0);
    kh_send_str(b, "GET /second HTTP/1.1\r\nHost: second.test\r\n\r\n");

    upstream_serve(&u, 3500);
    char resp[1024];
    size_t n = kh_recv_n(b, resp, sizeof resp, 40, 5000);
    kh_assert(p, n > 0 && strstr(resp, " 200 ") != NULL, "B's response: %s", resp);
    kh_assert(p, count(u.got, "GET /second HTTP/1.1\r\n") == 1 && count(u.got, "HTTP/1.1\r\n") == 1,
              "the upstream must receive B's request once and nothing else:\n%s", u.got);
    kh_assert(p, count(u.got, "\nHost: second.test\r\n") == 1, "B's Host:\n%s", u.got);
    close(b);
    upstream_close(&u);
    px_stop(p);
}

/* A pooled connection: the request went out at once; the client leaves
 * before the answer. The upstream connection, mid-exchange, is closed
 * (never reused for the next request, which would read A's answer). */
Test(proxy_abort, h1_client_resets_while_waiting, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[256];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\n", kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    unsigned port = kh_port(p, 0);
    for (int i = 0; i < 3; i++) {
        int a = kh_connect("127.0.0.1", port);
        cr_assert(a >= 0);
        kh_send_str(a, "GET /slow?ms=400 HTTP/1.1\r\nHost: x\r\n\r\n");
        kh_assert(p, kh_wait_log_count(up, "GET /slow?ms=400", i + 1, 5000),
                  "request %d did not reach the upstream", i);
        reset_close(a);
    }
    char url[160];
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/id"));
    kh_assert(p, px_status(&rr) == 200, "after the aborts" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
    kh_signal(up, SIGTERM);
}

/* ---- HTTP/2: HEADERS and RST_STREAM in one write ------------------------------ */

static void h2_rst_case(int pooled)
{
    upstream u;
    upstream_open(&u, 0);
    char conf[1024];
    snprintf(
        conf, sizeof conf,
        "[keel]\nlisten = 127.0.0.1:0 h2\nworkers = 1\nmodules = http1 h2 proxy\n" KH_MODULE_PATH
        "[proxy]\nupstream = app 127.0.0.1:%u\npass = / app\n",
        u.port);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    cr_assert(fd >= 0);
    char out[1024];
    size_t n = 0;
    memcpy(out, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    n = 24;
    n += frame(out + n, 0x4, 0, 0, NULL, 0); /* SETTINGS */
    if (pooled) {
        /* A first request fills the pool with an idle connection. */
        n += get_headers(out + n, 1, "/warm", "warm.test");
        cr_assert(kh_send(fd, out, n) == 0);
        upstream_serve(&u, 500);
        kh_assert(p, await_headers(fd, 1, 3000) == 0x88, "warm-up response");
        n = 0;
    }
    unsigned first = pooled ? 3 : 1;
    const char cancel[4] = {0, 0, 0, 0x8};
    n += get_headers(out + n, first, "/first", "first.test");
    n += frame(out + n, 0x3, 0, first, cancel, 4); /* RST_STREAM CANCEL, same write */
    n += frame(out + n, 0x4, 0x1, 0, NULL, 0);     /* SETTINGS ACK */
    cr_assert(kh_send(fd, out, n) == 0);
    size_t before = u.len;
    upstream_serve(&u, 300);
    n = get_headers(out, first + 2, "/second", "second.test");
    cr_assert(kh_send(fd, out, n) == 0);
    upstream_serve(&u, 700);
    kh_assert(p, await_headers(fd, first + 2, 3000) == 0x88, "the second stream's 200");
    const char *got = u.got + before;
    /* The first request may have left (a pooled connection sends at once):
     * then as itself, never as the second. */
    int seconds = count(got, "GET /second HTTP/1.1\r\n"),
        firsts = count(got, "GET /first HTTP/1.1\r\n");
    kh_assert(p, seconds == 1 && count(got, "HTTP/1.1\r\n") == seconds + firsts,
              "the upstream must receive the second request once:\n%s", got);
    kh_assert(p,
              count(got, "\nHost: second.test\r\n") == 1 &&
                  count(got, "\nHost: first.test\r\n") == firsts,
              "Hosts as sent:\n%s", got);
    if (!pooled)
        kh_assert(p, firsts == 0, "a cancelled stream's request left:\n%s", got);
    close(fd);
    upstream_close(&u);
    px_stop(p);
}

Test(proxy_abort, h2_headers_and_rst_in_one_write, .timeout = 60, .fini = kh_cleanup_all)
{
    h2_rst_case(0);
}

Test(proxy_abort, h2_headers_and_rst_pooled, .timeout = 60, .fini = kh_cleanup_all)
{
    h2_rst_case(1);
}

/* ---- HTTP/1.1: a head held across the connect, with pipelined bytes behind it -- */

/* keel_conn_pause promises that the bytes buffered and the pointers on_data
 * received stay valid, and http1's heads without a body are views into
 * the connection's read buffer while their exchange is in flight. The read
 * that the core's lazy pause lets through compacted (memmove) or grew
 * (realloc) a full buffer under those views: the proxy, building the
 * upstream's request after its connect, read the bytes len(first request)
 * further on, which the client chose (keel routed /public/x, the upstream
 * got /admin/xx with another Host), or freed memory (ASan:
 * heap-use-after-free in target_parts). */
Test(proxy_abort, h1_pipelined_bytes_keep_the_held_head, .timeout = 60, .fini = kh_cleanup_all)
{
    upstream u;
    upstream_open(&u, 1); /* the connect waits: the head is read after the next read */
    char section[256];
    snprintf(section, sizeof section,
             "upstream = app 127.0.0.1:%u\npass = /public app connect_timeout=10s\n", u.port);
    kh_proc *p = px_keel(section, 0);
    /* The first request is answered at once (no route: 404), 64 bytes; the
     * second is proxied; the bytes that followed it in the buffer by 64 are
     * the same head with another target and Host; the first read fills the
     * 16 KiB buffer. */
    static const char second[] = "GET /public/x HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char other[] = "GET /admin/xx HTTP/1.1\r\nHost: y\r\n\r\n";
    char stream[16384];
    memset(stream, 'z', sizeof stream);
    static const char first_start[] = "GET /nope HTTP/1.1\r\nHost: x\r\nX-P: ";
    memcpy(stream, first_start, sizeof first_start - 1);
    memcpy(stream + 60, "\r\n\r\n", 4);
    memcpy(stream + 64, second, sizeof second - 1);
    memcpy(stream + 128, other, sizeof other - 1);
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    cr_assert(fd >= 0);
    cr_assert(kh_send(fd, stream, sizeof stream) == 0);
    kh_assert(p, kh_wait_peer_read(fd, 5000), "keel did not read the first 16 KiB");
    kh_send_str(fd, "more bytes, for the read the pause lets through");
    upstream_serve(&u, 2500);
    kh_assert(p,
              count(u.got, "GET /public/x HTTP/1.1\r\n") == 1 && count(u.got, "\nHost: x\r\n") == 1,
              "the upstream must receive the request keel routed:\n%s", u.got);
    kh_assert(p, strstr(u.got, "/admin") == NULL && strstr(u.got, "Host: y") == NULL,
              "bytes the client sent after the request went upstream as it:\n%s", u.got);
    close(fd);
    upstream_close(&u);
    px_stop(p);
}
