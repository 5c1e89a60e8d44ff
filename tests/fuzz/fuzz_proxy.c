/* fuzz_proxy — HTTP/2 clients through the proxy module to an upstream in
 * the same process (issue 23, section 1: a structured fuzzer found, in
 * under a minute, that a stream reset while its upstream connected left
 * the exchange using a freed request).
 *
 * As fuzz_h2 (fuzz_client.h): one in-process server for the session, h2
 * with prior knowledge on a listener of its own, http1 and proxy compiled
 * in; one socket-pair connection per input, written in up to three
 * pieces, each read before the next. Input: one byte (the cuts' seed; bit
 * 7 leaves the preface to the input, as in fuzz_h2), then the client's
 * bytes, behind the preface and an empty SETTINGS frame.
 *
 * The upstream is a thread of this process serving HTTP/1.1 on loopback,
 * whose answer the request's path chooses by its second character, so that
 * the fuzzer, mutating paths, also plays a hostile upstream:
 *
 *   /a  200 with a small body        /b  chunked with a trailer
 *   /c  204 with a Content-Length    /d  304 with a Content-Length
 *   /e  a body cut short (closed)    /f  reset, nothing sent
 *   /g  200 with 192 KiB (windows)   /h  101 nobody asked for
 *   /i  200 after 30 ms              /j  100 Continue, then 200
 *   /k  two responses at once        /l  a head of 40 KiB
 *   anything else: 200 "ok"
 *
 * Reads request heads, skips what follows up to the next head as it can
 * (bodies are not parsed: a body that looks like a head is answered too,
 * which is as hostile as an upstream gets). Checked: ASan, UBSan, leaks,
 * the server never stopping; an input the server has not finished with
 * after 2 s is abandoned. */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <keel/embed.h>

#include "fuzz_client.h"

KEEL_MODULE_DECLARE(http1);
KEEL_MODULE_DECLARE(h2);
KEEL_MODULE_DECLARE(proxy);

static keel_server *server;

/* RFC 9113 3.4 and an empty SETTINGS frame (6.5). */
static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                 "\x00\x00\x00\x04\x00\x00\x00\x00\x00";
#define PREFACE_LEN (sizeof preface - 1)

/* ---- the upstream ------------------------------------------------------------ */

#define UP_MAX   64
#define UP_INCAP 65536

typedef struct up_conn {
    int fd;
    size_t nin;
    long long due; /* a delayed answer's time (/i), or 0 */
    char in[UP_INCAP];
} up_conn;

static up_conn *ups[UP_MAX];
static int up_listen = -1;

static void up_send(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0)
            return; /* a full socket drops the rest: the proxy sees a cut body */
        p += n;
        len -= (size_t)n;
    }
}

static void up_close(int i, int reset)
{
    if (reset) {
        struct linger lg = {1, 0};
        setsockopt(ups[i]->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(ups[i]->fd);
    free(ups[i]);
    ups[i] = NULL;
}

static void up_ok(int fd, const char *body)
{
    char head[128];
    int n =
        snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", strlen(body));
    up_send(fd, head, (size_t)n);
    up_send(fd, body, strlen(body));
}

/* Answers one request head; returns 0 to keep the connection, 1 to close
 * it, 2 to reset it. */
static int up_answer(int fd, char kind)
{
    static char big[192 * 1024];
    switch (kind) {
    case 'a':
        up_ok(fd, "hello");
        return 0;
    case 'b': {
        static const char r[] =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n"
            "3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n";
        up_send(fd, r, sizeof r - 1);
        return 0;
    }
    case 'c': {
        static const char r[] = "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n";
        up_send(fd, r, sizeof r - 1);
        return 0;
    }
    case 'd': {
        static const char r[] =
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nETag: \"x\"\r\n\r\n";
        up_send(fd, r, sizeof r - 1);
        return 0;
    }
    case 'e': {
        static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..";
        up_send(fd, r, sizeof r - 1);
        return 1;
    }
    case 'f':
        return 2;
    case 'g': {
        char head[96];
        int n = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
                         sizeof big);
        memset(big, 'g', sizeof big);
        up_send(fd, head, (size_t)n);
        up_send(fd, big, sizeof big);
        return 0;
    }
    case 'h': {
        static const char r[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n"
                                "Connection: Upgrade\r\n\r\nPRI * HTTP/2.0";
        up_send(fd, r, sizeof r - 1);
        return 1;
    }
    case 'j': {
        static const char r[] = "HTTP/1.1 100 Continue\r\n\r\n";
        up_send(fd, r, sizeof r - 1);
        up_ok(fd, "continued");
        return 0;
    }
    case 'k':
        up_ok(fd, "one");
        up_ok(fd, "two");
        return 0;
    case 'l': {
        static char head[48 * 1024];
        size_t n = (size_t)snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nX-Big: ");
        memset(head + n, 'l', 40 * 1024);
        n += 40 * 1024;
        n += (size_t)snprintf(head + n, sizeof head - n, "\r\nContent-Length: 0\r\n\r\n");
        up_send(fd, head, n);
        return 0;
    }
    default:
        up_ok(fd, "ok");
        return 0;
    }
}

/* Answers every complete head in the connection's buffer. */
static void up_serve(int i)
{
    up_conn *u = ups[i];
    for (;;) {
        char *end = memmem(u->in, u->nin, "\r\n\r\n", 4);
        if (end == NULL) {
            if (u->nin == UP_INCAP)
                u->nin = 0; /* not a head: dropped */
            return;
        }
        /* "GET /x..." : the character after the target's slash. */
        char kind = 0;
        char *sp = memchr(u->in, ' ', (size_t)(end - u->in));
        if (sp != NULL && sp + 2 < end && sp[1] == '/')
            kind = sp[2];
        if (kind == 'i' && u->due == 0) {
            u->due = fuzz_now_ms() + 30;
            return; /* answered when due */
        }
        if (kind == 'i' && u->due > fuzz_now_ms())
            return;
        u->due = 0;
        size_t used = (size_t)(end + 4 - u->in);
        memmove(u->in, end + 4, u->nin - used);
        u->nin -= used;
        int how = up_answer(u->fd, kind);
        if (how != 0) {
            up_close(i, how == 2);
            return;
        }
    }
}

static void *run_upstream(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd pf[UP_MAX + 1];
        int idx[UP_MAX + 1];
        int n = 0, wait = 100;
        pf[n] = (struct pollfd){.fd = up_listen, .events = POLLIN};
        idx[n++] = -1;
        long long now = fuzz_now_ms();
        for (int i = 0; i < UP_MAX; i++) {
            if (ups[i] == NULL)
                continue;
            if (ups[i]->due != 0) {
                if (ups[i]->due <= now) {
                    up_serve(i); /* the delayed head first, then what followed it */
                    if (ups[i] == NULL)
                        continue;
                } else if (ups[i]->due - now < wait) {
                    wait = (int)(ups[i]->due - now);
                }
            }
            pf[n] = (struct pollfd){.fd = ups[i]->fd, .events = POLLIN};
            idx[n++] = i;
        }
        if (poll(pf, (nfds_t)n, wait) <= 0)
            continue;
        if (pf[0].revents & POLLIN) {
            int fd = accept(up_listen, NULL, NULL);
            int slot = -1;
            for (int i = 0; fd >= 0 && i < UP_MAX && slot < 0; i++)
                if (ups[i] == NULL)
                    slot = i;
            if (fd >= 0 && slot < 0) {
                close(fd); /* full: refused, as a busy upstream does */
            } else if (fd >= 0 && (ups[slot] = calloc(1, sizeof(up_conn))) != NULL) {
                ups[slot]->fd = fd;
            } else if (fd >= 0) {
                close(fd);
            }
        }
        for (int k = 1; k < n; k++) {
            int i = idx[k];
            if (ups[i] == NULL || !(pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t r = recv(ups[i]->fd, ups[i]->in + ups[i]->nin, UP_INCAP - ups[i]->nin, 0);
            if (r <= 0) {
                up_close(i, 0);
                continue;
            }
            ups[i]->nin += (size_t)r;
            if (ups[i]->due == 0)
                up_serve(i);
        }
    }
    return NULL;
}

static unsigned start_upstream(void)
{
    up_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (up_listen < 0 || bind(up_listen, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(up_listen, 128) != 0 || getsockname(up_listen, (struct sockaddr *)&a, &alen) != 0)
        abort();
    pthread_t t;
    if (pthread_create(&t, NULL, run_upstream, NULL) != 0)
        abort();
    pthread_detach(t);
    return ntohs(a.sin_port);
}

/* ---- the harness ------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    unsigned port = start_upstream();
    static char config[1024];
    snprintf(config, sizeof config,
             "[keel]\n"
             "listen = 127.0.0.1:0 h2\n"
             "workers = 1\n"
             "modules = http1 h2 proxy\n"
             "log_level = error\n"
             "crash_report = off\n"
             "max_connections = 100000\n"
             "[h2]\n"
             "idle_timeout = 1s\n"
             "stream_timeout = 1s\n"
             "max_body = 64k\n"
             "max_header_list = 8k\n"
             "max_concurrent_streams = 16\n"
             "[proxy]\n"
             "upstream = up 127.0.0.1:%u\n"
             "pass = / up read_timeout=500ms connect_timeout=500ms\n"
             "max_header = 16k\n"
             "client_buffer = 16k\n"
             "keepalive = 8\n",
             port);
    static const keel_module_desc *const modules[] = {&keel_module_http1, &keel_module_h2,
                                                      &keel_module_proxy, NULL};
    server = fuzz_server_start(modules, config, "fuzz_proxy");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t seed = data[0];
    data++;
    size--;
    static uint8_t in[PREFACE_LEN + 65536];
    if (size > sizeof in - PREFACE_LEN)
        size = sizeof in - PREFACE_LEN;
    size_t len = 0;
    if (!(seed & 0x80)) {
        memcpy(in, preface, PREFACE_LEN);
        len = PREFACE_LEN;
    }
    memcpy(in + len, data, size);
    len += size;

    static unsigned char out[4096];
    fuzz_client c;
    fuzz_client_open(&c, server, out, sizeof out, 2000);
    fuzz_client_send_cut(&c, seed, in, len);
    fuzz_client_finish(&c);
    return 0;
}
