/* The in-process server and its socket-pair clients (fuzz_client.h). */
#include "fuzz_client.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "base/atomic.h"
#include "net/worker.h"
#include "server/server.h"

static const char *server_name = "fuzz";

static void *run_server(void *arg)
{
    int rc = keel_server_run(arg);
    fprintf(stderr, "%s: the server stopped: %s\n", server_name, keel_strerror(rc));
    abort();
    return NULL;
}

keel_server *fuzz_server_start(const keel_module_desc *const *modules, const char *config,
                               const char *name)
{
    server_name = name;
    keel_server *server = keel_server_new();
    if (server == NULL)
        abort();
    for (size_t i = 0; modules[i] != NULL; i++)
        if (keel_server_add_module(server, modules[i]) != KEEL_OK)
            abort();
    if (keel_server_load_config_string(server, config, name) != KEEL_OK)
        abort();
    pthread_t t;
    if (pthread_create(&t, NULL, run_server, server) != 0)
        abort();
    pthread_detach(t);
    /* Listening means the workers are accepting (start-up logs the lines
     * last); the handoffs need nothing more. */
    for (int i = 0; i < 5000 && keel_server_listener_port(server, 0) == 0; i++)
        usleep(1000);
    if (keel_server_listener_port(server, 0) == 0)
        abort();
    usleep(20000);
    return server;
}

long long fuzz_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void fuzz_client_open(fuzz_client *c, keel_server *server, unsigned char *in, size_t capin,
                      int timeout_ms)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    kl_atomic_add(&server->host.connections, 1);
    if (kl_worker_handoff(server->host.workers[0], (kl_socket)sv[0], &server->host.listeners[0],
                          0) != KEEL_OK)
        abort();
    *c = (fuzz_client){.fd = sv[1], .in = in, .capin = capin};
    c->deadline = fuzz_now_ms() + timeout_ms;
}

void fuzz_client_drain(fuzz_client *c, int ms)
{
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    if (c->eof || poll(&pfd, 1, ms) <= 0)
        return;
    for (;;) {
        char buf[65536];
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            size_t take = (size_t)n < c->capin - c->nin ? (size_t)n : c->capin - c->nin;
            memcpy(c->in + c->nin, buf, take);
            c->nin += take;
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

void fuzz_client_send(fuzz_client *c, const void *data, size_t len)
{
    const unsigned char *p = data;
    size_t off = 0;
    while (off < len && !c->eof && fuzz_now_ms() < c->deadline) {
        ssize_t n = send(c->fd, p + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EINTR)
            c->eof = 1; /* the server closed */
        else
            fuzz_client_drain(c, 1); /* full: the server may be writing to us */
    }
    /* Wait for the server to read it (it may be paused, answering):
     * yielding first, as it usually takes microseconds, then in 1 ms
     * polls (which an answer ends early). */
    for (int spins = 0; !consumed(c->fd) && !c->eof && fuzz_now_ms() < c->deadline; spins++) {
        fuzz_client_drain(c, spins < 200 ? 0 : 1);
        if (spins < 200)
            sched_yield();
    }
    fuzz_client_drain(c, 0);
}

void fuzz_client_finish(fuzz_client *c)
{
    shutdown(c->fd, SHUT_WR);
    while (!c->eof && fuzz_now_ms() < c->deadline)
        fuzz_client_drain(c, 50);
    close(c->fd);
}

int fuzz_cuts(uint32_t seed, size_t len, size_t ends[4])
{
    /* Each piece costs a round trip to the worker: three cuts at most,
     * anywhere (inside a token, a CRLF, a frame header...). */
    int n = 0;
    size_t at = 0;
    for (int cuts = (int)(seed % 4); cuts > 0 && at < len; cuts--) {
        seed = seed * 1103515245u + 12345u;
        at += 1 + (seed >> 8) % (len - at);
        ends[n++] = at;
    }
    if (at < len)
        ends[n++] = len;
    return n;
}

void fuzz_client_send_cut(fuzz_client *c, uint32_t seed, const void *data, size_t len)
{
    size_t ends[4];
    int npieces = fuzz_cuts(seed, len, ends);
    size_t off = 0;
    for (int i = 0; i < npieces && !c->eof && fuzz_now_ms() < c->deadline; i++) {
        fuzz_client_send(c, (const char *)data + off, ends[i] - off);
        off = ends[i];
    }
}
