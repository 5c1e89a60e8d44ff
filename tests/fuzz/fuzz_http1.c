/* fuzz_http1 — the http1 request path from raw bytes, through the core's
 * HTTP layer and a handler, and back.
 *
 * One in-process server runs for the whole fuzzing session (embedding API,
 * KEEL_LINKED): http1 and the hello plugin compiled in, one worker, small
 * timeouts. Each input becomes one connection: a UNIX socket pair whose
 * server end is handed to the worker the way the single acceptor hands
 * over accepted sockets (kl_worker_handoff), so no TCP handshake is paid
 * per input. The input is written in pieces split at points the input
 * itself chooses (its first byte seeds up to three cuts), and each piece is written only
 * once the server has read the one before (SIOCOUTQ is 0), so every split
 * is a separate read and a separate on_data call, and a crash reproduces.
 * The client then half-closes and reads until the server closes.
 *
 * Checked besides ASan/UBSan: whatever the server sends starts with an
 * HTTP/1.1 status line (no byte of a request is ever echoed raw). An input
 * the server has not finished with after 2 s (hello's /slow?ms=9999) is
 * abandoned: the client closes, as a real one would. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#include <keel/embed.h>

#include "base/atomic.h"
#include "net/worker.h"
#include "runtime/server.h"

KEEL_MODULE_DECLARE(http1);
KEEL_MODULE_DECLARE(hello);

static keel_server *server;

static void *run_server(void *arg)
{
    (void)arg;
    int rc = keel_server_run(server);
    fprintf(stderr, "fuzz_http1: the server stopped: %s\n", keel_strerror(rc));
    abort();
    return NULL;
}

static const char config[] = "[keel]\n"
                             "listen = 127.0.0.1:0 http1\n"
                             "workers = 1\n"
                             "modules = http1 hello\n"
                             "log_level = error\n"
                             "crash_report = off\n"
                             "max_connections = 100000\n"
                             "[http1]\n"
                             "header_timeout = 1s\n"
                             "body_timeout = 1s\n"
                             "keepalive_timeout = 1s\n"
                             "max_body = 64k\n"
                             "max_header_bytes = 8k\n"
                             "max_headers = 32\n"
                             "[hello]\n"
                             "slow_delay = 1ms\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    server = keel_server_new();
    if (server == NULL || keel_server_add_module(server, &keel_module_http1) != KEEL_OK ||
        keel_server_add_module(server, &keel_module_hello) != KEEL_OK ||
        keel_server_load_config_string(server, config, "fuzz_http1.conf") != KEEL_OK)
        abort();
    pthread_t t;
    if (pthread_create(&t, NULL, run_server, NULL) != 0)
        abort();
    pthread_detach(t);
    /* Listening means the workers are accepting (start-up logs the lines
     * last); the handoffs below need nothing more. */
    for (int i = 0; i < 5000 && keel_server_listener_port(server, 0) == 0; i++)
        usleep(1000);
    if (keel_server_listener_port(server, 0) == 0)
        abort();
    usleep(20000);
    return 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct client {
    int fd;
    char head[16]; /* the first bytes the server sent */
    size_t nhead;
    int eof;
} client;

/* Reads what the server sent, without blocking longer than ms. */
static void drain(client *c, int ms)
{
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    if (c->eof || poll(&pfd, 1, ms) <= 0)
        return;
    char buf[65536];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            size_t take =
                (size_t)n < sizeof c->head - c->nhead ? (size_t)n : sizeof c->head - c->nhead;
            memcpy(c->head + c->nhead, buf, take);
            c->nhead += take;
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            c->eof = 1;
        return;
    }
}

/* The server has read everything written so far. */
static int consumed(int fd)
{
    int queued = 0;
    return ioctl(fd, SIOCOUTQ, &queued) == 0 && queued == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t seed = data[0];
    data++;
    size--;

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    keel_worker *w = server->workers[0];
    kl_atomic_add(&server->connections, 1);
    if (kl_worker_handoff(w, (kl_socket)sv[0], &server->listeners[0], 0) != KEEL_OK)
        abort();

    client c = {.fd = sv[1]};
    long long deadline = now_ms() + 2000;
    /* Up to three cuts (each piece costs a round trip to the worker),
     * anywhere: inside a request line, a field, a CRLF or a chunk-size line
     * as often as between requests. */
    size_t ends[4];
    int npieces = 0;
    size_t at = 0;
    for (int cuts = (int)(seed % 4); cuts > 0 && at < size; cuts--) {
        seed = seed * 1103515245u + 12345u;
        at += 1 + (seed >> 8) % (size - at);
        ends[npieces++] = at;
    }
    if (at < size)
        ends[npieces++] = size;
    size_t off = 0;
    for (int i = 0; i < npieces && !c.eof && now_ms() < deadline; i++) {
        while (off < ends[i] && !c.eof && now_ms() < deadline) {
            ssize_t n = send(c.fd, data + off, ends[i] - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0)
                off += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                c.eof = 1; /* the server closed */
            else
                drain(&c, 1); /* full: the server may be writing to us */
        }
        /* Wait for the server to read it (it may be paused, answering):
         * yielding first, as it usually takes microseconds, then in 1 ms
         * polls (which an answer ends early). */
        for (int spins = 0; !consumed(c.fd) && !c.eof && now_ms() < deadline; spins++) {
            drain(&c, spins < 200 ? 0 : 1);
            if (spins < 200)
                sched_yield();
        }
        drain(&c, 0);
    }
    shutdown(c.fd, SHUT_WR);
    while (!c.eof && now_ms() < deadline)
        drain(&c, 50);
    close(c.fd);

    if (c.nhead > 0 && (c.nhead < 9 ? memcmp(c.head, "HTTP/1.1 ", c.nhead)
                                    : memcmp(c.head, "HTTP/1.1 ", 9)) != 0) {
        fprintf(stderr, "fuzz_http1: the response does not start with a status line: '%.*s'\n",
                (int)c.nhead, c.head);
        abort();
    }
    return 0;
}
