/* Accepting through the real keel and http1 (core/net/worker.c,
 * listener.c): a worker takes one connection per readiness of its
 * listening socket, so a burst of connections queued at once must all be
 * served, on one worker and on several; and the accepted sockets have
 * TCP_NODELAY, which on Linux they inherit from the listening socket
 * instead of a setsockopt each. */
#define _GNU_SOURCE
#include "test_http.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/syscall.h>

#define BURST 64

/* Opens BURST connections before any request, so that they wait in the
 * listener's queue together, then asks each for / and reads its answer. */
static void serve_a_burst(kh_proc *p)
{
    ht_conn *conns[BURST];
    for (int i = 0; i < BURST; i++)
        conns[i] = ht_connect(kh_port(p, 0));
    for (int i = 0; i < BURST; i++)
        ht_send_str(conns[i], "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    for (int i = 0; i < BURST; i++) {
        ht_resp r;
        int rc = ht_read_response(conns[i], &r, 0, 10000);
        kh_assert(p, rc == 0, "connection %d of a burst of %d: %s", i, BURST, r.err);
        kh_assert(p, r.status == 200, "connection %d: status %d", i, r.status);
        ht_resp_free(&r);
        ht_close(conns[i]);
    }
}

Test(accept, a_burst_of_queued_connections_is_served_by_one_worker, .timeout = 60,
     .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start_n(1, NULL, NULL);
    serve_a_burst(p);
    serve_a_burst(p);
    kh_stop(p);
}

Test(accept, a_burst_of_queued_connections_is_served_by_two_workers, .timeout = 60,
     .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start_n(2, NULL, NULL);
    serve_a_burst(p);
    kh_stop(p);
}

#if defined(__linux__) && defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
/* keel's own socket for the connection whose client end is `client`: each
 * of its descriptors copied with pidfd_getfd, the one whose peer is the
 * client's address. -1 if none (or the kernel refuses the copy). */
static int server_socket_of(pid_t pid, int client)
{
    struct sockaddr_storage mine, peer;
    socklen_t len = sizeof mine;
    if (getsockname(client, (struct sockaddr *)&mine, &len) != 0)
        return -1;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0)
        return -1;
    int found = -1;
    for (int fd = 0; fd < 1024 && found < 0; fd++) {
        int copy = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        if (copy < 0)
            continue;
        socklen_t plen = sizeof peer;
        if (getpeername(copy, (struct sockaddr *)&peer, &plen) == 0 && plen == len &&
            memcmp(&peer, &mine, len) == 0)
            found = copy;
        else
            close(copy);
    }
    close(pidfd);
    return found;
}

Test(accept, accepted_sockets_have_tcp_nodelay, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start_n(1, NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    ht_resp r;
    kh_assert(p, ht_read_response(c, &r, 0, 5000) == 0, "GET /: %s", r.err);
    ht_resp_free(&r);
    int s = server_socket_of(p->pid, c->fd);
    if (s < 0) {
        ht_close(c);
        kh_stop(p);
        cr_skip_test("pidfd_getfd cannot copy keel's descriptors here");
    }
    int on = 0;
    socklen_t len = sizeof on;
    kh_assert(p, getsockopt(s, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0, "getsockopt: %s",
              strerror(errno));
    kh_assert(p, on != 0, "keel's accepted socket has no TCP_NODELAY");
    close(s);
    ht_close(c);
    kh_stop(p);
}
#endif
