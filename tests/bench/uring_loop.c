/* uring_loop — the raw loops of bench's uring scenario (uring.sh): one
 * thread that answers every complete HTTP/1.1 request head (its end,
 * "\r\n\r\n", is all it looks for; pipelined heads each get an answer)
 * with a canned keep-alive "Hello, World!" response of the size keel's
 * http1 + hello sends. No parsing, no allocation per request: what a
 * server costs at the least on each back-end, so that the two can be
 * compared where nothing else hides the difference.
 *
 *   epoll     level-triggered epoll, as libuv (and so keel) uses it:
 *             accept4 until EAGAIN when the listener is ready, one read
 *             per ready connection, one write of all its answers
 *             (EPOLLOUT only after a short write).
 *   epollet   the same with EPOLLET on the connections (nginx's
 *             edge-triggered way; one read still drains a request this
 *             small), to compare the kernel's share: not in uring.sh.
 *   io_uring  liburing: a multishot accept; per connection a multishot
 *             recv that takes buffers from a ring of provided buffers
 *             (returned to the ring as soon as they are scanned); the
 *             answers as send SQEs, one per connection per loop turn. A
 *             turn is one io_uring_submit_and_wait: every SQE queued
 *             while handling the last batch of completions goes in it,
 *             across connections. The ring is SINGLE_ISSUER | DEFER_TASKRUN
 *             (Linux 6.1: completions run in this thread, when it waits)
 *             where the kernel has it, COOP_TASKRUN otherwise, and its
 *             file descriptor is registered (no fd lookup per enter).
 *
 * Bodies are not read (GET only). The answers leave from one immutable
 * buffer of repeated responses: a connection owes a count of bytes and
 * where in a response they start, nothing else. Stops after SECONDS
 * (alarm: bounded however the load behaves); SIGTERM also ends it.
 *
 *   uring_loop epoll|epollet|io_uring PORT SECONDS
 *
 * Built by uring.sh with `cc -O2 uring_loop.c -luring` when liburing's
 * header is there, else without the io_uring back-end. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__has_include) && !defined(NO_LIBURING)
#if __has_include(<liburing.h>)
#include <liburing.h>
#define HAVE_LIBURING 1
#endif
#endif

/* keel's answer to GET / (http1 + hello), its Date frozen. */
static const char RESPONSE[] = "HTTP/1.1 200 OK\r\n"
                               "Content-Type: text/plain\r\n"
                               "Date: Fri, 04 Dec 2026 10:31:37 GMT\r\n"
                               "Server: keel\r\n"
                               "Content-Length: 13\r\n"
                               "\r\n"
                               "Hello, World!";
#define RESPONSE_LEN (sizeof RESPONSE - 1)
#define REPEATS      64 /* responses one write (send) may carry */

static char answers[REPEATS * RESPONSE_LEN];

#define MAX_FD 65536

/* A connection, indexed by its file descriptor. */
typedef struct {
    uint64_t owed;     /* answer bytes not yet written */
    uint32_t phase;    /* where in a response the owed bytes start */
    uint8_t head_end;  /* how much of "\r\n\r\n" the last read ended with */
    uint8_t open;      /* in use */
    uint8_t want_out;  /* epoll: EPOLLOUT is asked for */
    uint8_t receiving; /* io_uring: a multishot recv is armed */
    uint8_t sending;   /* io_uring: a send is in flight */
    uint8_t queued;    /* io_uring: on this turn's list of sends to make */
    uint8_t dead;      /* io_uring: closing once nothing is in flight */
} conn;

static conn *conns;

static void die(const char *what, int err)
{
    fprintf(stderr, "uring_loop: %s: %s\n", what, strerror(err));
    exit(1);
}

/* Counts the request heads that end in p[0..n), carrying over reads how
 * much of "\r\n\r\n" was seen last (*state, 0..3). */
static uint64_t count_heads(const char *p, size_t n, uint8_t *state)
{
    const char *end = p + n;
    uint64_t heads = 0;
    unsigned s = *state;
    while (p < end) {
        if (s == 0) {
            p = memchr(p, '\r', (size_t)(end - p));
            if (p == NULL)
                break;
        }
        char ch = *p++;
        if (ch == '\r')
            s = (s == 2) ? 3 : 1;
        else if (ch == '\n' && (s == 1 || s == 3)) {
            if (s == 3)
                heads++;
            s = (s == 1) ? 2 : 0;
        } else
            s = 0;
    }
    *state = (uint8_t)s;
    return heads;
}

/* Where the next write of c's answers starts, and how long it may be. */
static const char *owed_bytes(const conn *c, size_t *len)
{
    size_t room = sizeof answers - c->phase;
    *len = c->owed < room ? (size_t)c->owed : room;
    return answers + c->phase;
}

static void wrote(conn *c, size_t n)
{
    c->owed -= n;
    c->phase = (uint32_t)((c->phase + n) % RESPONSE_LEN);
}

/* The epoll loop's listener is non-blocking (it accepts until EAGAIN);
 * io_uring's is left blocking: the ring waits for it by itself. */
static int listen_on(int port, int nonblocking)
{
    int fd = socket(AF_INET, SOCK_STREAM | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    int one = 1;
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&at, sizeof at) != 0 || listen(fd, 4096) != 0)
        die("listen", errno);
    return fd;
}

/* keel (libuv) sets TCP_NODELAY on what it accepts; so do both loops. */
static int accepted(int fd)
{
    int one = 1;
    if (fd >= MAX_FD) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conns[fd] = (conn){.open = 1};
    return fd;
}

/* ---- epoll ------------------------------------------------------------------------ */

static int epfd;
static uint32_t epoll_edge; /* EPOLLET with the "epollet" back-end */

static void epoll_close(int fd)
{
    conns[fd].open = 0;
    close(fd); /* leaves the epoll set with its last reference */
}

static void epoll_want_out(int fd, int want)
{
    struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0) | epoll_edge, .data.fd = fd};
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) != 0)
        die("epoll_ctl", errno);
    conns[fd].want_out = (uint8_t)want;
}

/* Writes what fd owes until done or the socket is full; 0, or -1 when
 * the connection is closed. */
static int epoll_flush(int fd)
{
    conn *c = &conns[fd];
    while (c->owed > 0) {
        size_t len;
        const char *p = owed_bytes(c, &len);
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EAGAIN) {
                if (!c->want_out)
                    epoll_want_out(fd, 1);
                return 0;
            }
            epoll_close(fd);
            return -1;
        }
        wrote(c, (size_t)n);
    }
    if (c->want_out)
        epoll_want_out(fd, 0);
    return 0;
}

static void run_epoll(int lfd)
{
    static char buf[64 * 1024];
    struct epoll_event evs[512];
    epfd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev) != 0)
        die("epoll", errno);
    for (;;) {
        int n = epoll_wait(epfd, evs, (int)(sizeof evs / sizeof evs[0]), -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait", errno);
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == lfd) {
                int cfd;
                while ((cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (accepted(cfd) < 0)
                        continue;
                    struct epoll_event cev = {.events = EPOLLIN | epoll_edge, .data.fd = cfd};
                    if (epoll_ctl(epfd, EPOLL_CTL_ADD, cfd, &cev) != 0)
                        die("epoll_ctl", errno);
                }
                continue;
            }
            conn *c = &conns[fd];
            if ((evs[i].events & EPOLLOUT) && epoll_flush(fd) < 0)
                continue;
            if (!(evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                continue;
            ssize_t got = read(fd, buf, sizeof buf);
            if (got <= 0) {
                if (got < 0 && errno == EAGAIN)
                    continue;
                epoll_close(fd);
                continue;
            }
            c->owed += count_heads(buf, (size_t)got, &c->head_end) * RESPONSE_LEN;
            /* Behind a short write, the answers wait for EPOLLOUT. */
            if (!c->want_out)
                epoll_flush(fd);
        }
    }
}

/* ---- io_uring ---------------------------------------------------------------------- */

#ifdef HAVE_LIBURING

enum { OP_ACCEPT = 1, OP_RECV, OP_SEND };

#define RING_ENTRIES 4096
#define CQ_ENTRIES   16384
#define BUF_GROUP    0
#define NBUFS        1024 /* a power of two */
#define BUF_SIZE     4096

static struct io_uring ring;
static struct io_uring_buf_ring *buf_ring;
static char *buf_base;
static unsigned bufs_returned; /* added to the ring this turn, not yet published */
static int send_list[MAX_FD];  /* connections with answers to send this turn */
static int nsend;

static uint64_t tag(int op, int fd)
{
    return (uint64_t)op << 32 | (uint32_t)fd;
}

/* An SQE, submitting what is queued first if the queue is full. */
static struct io_uring_sqe *sqe_get(void)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    if (sqe == NULL) {
        io_uring_submit(&ring);
        sqe = io_uring_get_sqe(&ring);
        if (sqe == NULL)
            die("io_uring_get_sqe", EBUSY);
    }
    return sqe;
}

static void arm_accept(int lfd)
{
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, 0);
    io_uring_sqe_set_data64(sqe, tag(OP_ACCEPT, lfd));
}

static void arm_recv(int fd)
{
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BUF_GROUP;
    io_uring_sqe_set_data64(sqe, tag(OP_RECV, fd));
    conns[fd].receiving = 1;
}

static void send_owed(int fd)
{
    size_t len;
    const char *p = owed_bytes(&conns[fd], &len);
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_send(sqe, fd, p, len, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, tag(OP_SEND, fd));
    conns[fd].sending = 1;
}

/* Closes fd once no operation on it is left to complete (so that no
 * completion can name a reused descriptor); a connection that failed
 * while its recv is armed is shut down, which ends the recv. */
static void uring_close(int fd)
{
    conn *c = &conns[fd];
    if (!c->dead) {
        c->dead = 1;
        c->owed = 0;
        if (c->receiving)
            shutdown(fd, SHUT_RDWR);
    }
    if (!c->receiving && !c->sending && !c->queued) {
        c->open = 0;
        close(fd);
    }
}

static void buf_return(unsigned bid)
{
    io_uring_buf_ring_add(buf_ring, buf_base + (size_t)bid * BUF_SIZE, BUF_SIZE,
                          (unsigned short)bid, io_uring_buf_ring_mask(NBUFS), (int)bufs_returned++);
}

static void on_recv(int fd, const struct io_uring_cqe *cqe)
{
    conn *c = &conns[fd];
    if (!(cqe->flags & IORING_CQE_F_MORE))
        c->receiving = 0;
    if (cqe->res > 0) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        if (!c->dead) {
            c->owed +=
                count_heads(buf_base + (size_t)bid * BUF_SIZE, (size_t)cqe->res, &c->head_end) *
                RESPONSE_LEN;
            if (c->owed > 0 && !c->sending && !c->queued) {
                c->queued = 1;
                send_list[nsend++] = fd;
            }
        }
        buf_return(bid);
    }
    if (c->receiving)
        return;
    /* The multishot recv ended: out of buffers (they are back by the end of
     * this turn), or the end of the stream, or an error. */
    if (!c->dead && (cqe->res > 0 || cqe->res == -ENOBUFS))
        arm_recv(fd);
    else
        uring_close(fd);
}

static void on_send(int fd, const struct io_uring_cqe *cqe)
{
    conn *c = &conns[fd];
    c->sending = 0;
    if (c->dead || cqe->res < 0) {
        uring_close(fd);
        return;
    }
    wrote(c, (size_t)cqe->res);
    if (c->owed > 0)
        send_owed(fd);
}

static void setup_buffers(void)
{
    size_t ring_size = NBUFS * sizeof(struct io_uring_buf);
    buf_ring = mmap(NULL, ring_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    buf_base = malloc((size_t)NBUFS * BUF_SIZE);
    if (buf_ring == MAP_FAILED || buf_base == NULL)
        die("buffers", ENOMEM);
    struct io_uring_buf_reg reg = {
        .ring_addr = (unsigned long)buf_ring, .ring_entries = NBUFS, .bgid = BUF_GROUP};
    int rc = io_uring_register_buf_ring(&ring, &reg, 0);
    if (rc != 0)
        die("io_uring_register_buf_ring", -rc);
    io_uring_buf_ring_init(buf_ring);
    for (unsigned i = 0; i < NBUFS; i++)
        buf_return(i);
    io_uring_buf_ring_advance(buf_ring, (int)bufs_returned);
    bufs_returned = 0;
}

static void setup_ring(void)
{
    struct io_uring_params p = {.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL |
                                         IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
                                .cq_entries = CQ_ENTRIES};
    int rc = io_uring_queue_init_params(RING_ENTRIES, &ring, &p);
    if (rc == -EINVAL) { /* before Linux 6.1 */
        p = (struct io_uring_params){.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL |
                                              IORING_SETUP_COOP_TASKRUN,
                                     .cq_entries = CQ_ENTRIES};
        rc = io_uring_queue_init_params(RING_ENTRIES, &ring, &p);
    }
    if (rc != 0)
        die("io_uring_queue_init (is /proc/sys/kernel/io_uring_disabled 0?)", -rc);
    fprintf(stderr, "uring_loop: io_uring flags 0x%x, features 0x%x\n", p.flags, p.features);
    if (io_uring_register_ring_fd(&ring) < 0)
        fprintf(stderr, "uring_loop: the ring's fd could not be registered\n");
}

static void run_uring(int lfd)
{
    setup_ring();
    setup_buffers();
    arm_accept(lfd);
    for (;;) {
        int rc = io_uring_submit_and_wait(&ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
            die("io_uring_submit_and_wait", -rc);
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe)
        {
            uint64_t data = io_uring_cqe_get_data64(cqe);
            int fd = (int)(uint32_t)data;
            seen++;
            switch ((int)(data >> 32)) {
            case OP_ACCEPT:
                if (cqe->res >= 0 && accepted(cqe->res) >= 0)
                    arm_recv(cqe->res);
                if (!(cqe->flags & IORING_CQE_F_MORE))
                    arm_accept(lfd);
                break;
            case OP_RECV:
                on_recv(fd, cqe);
                break;
            case OP_SEND:
                on_send(fd, cqe);
                break;
            }
        }
        io_uring_cq_advance(&ring, seen);
        /* One send per connection for all it read this turn. */
        for (int i = 0; i < nsend; i++) {
            int fd = send_list[i];
            conns[fd].queued = 0;
            if (conns[fd].dead)
                uring_close(fd);
            else if (!conns[fd].sending && conns[fd].owed > 0)
                send_owed(fd);
        }
        nsend = 0;
        if (bufs_returned > 0) {
            io_uring_buf_ring_advance(buf_ring, (int)bufs_returned);
            bufs_returned = 0;
        }
    }
}

#endif /* HAVE_LIBURING */

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: uring_loop epoll|epollet|io_uring PORT SECONDS\n");
        return 2;
    }
    for (size_t i = 0; i < REPEATS; i++)
        memcpy(answers + i * RESPONSE_LEN, RESPONSE, RESPONSE_LEN);
    conns = calloc(MAX_FD, sizeof *conns);
    if (conns == NULL)
        die("calloc", ENOMEM);
    signal(SIGPIPE, SIG_IGN);
    alarm((unsigned)atoi(argv[3]));
    int on_epoll = strcmp(argv[1], "epoll") == 0 || strcmp(argv[1], "epollet") == 0;
    int lfd = listen_on(atoi(argv[2]), on_epoll);
    fprintf(stderr, "uring_loop: %s on 127.0.0.1:%s\n", argv[1], argv[2]);
    if (on_epoll) {
        epoll_edge = strcmp(argv[1], "epollet") == 0 ? EPOLLET : 0;
        run_epoll(lfd);
    }
#ifdef HAVE_LIBURING
    else if (strcmp(argv[1], "io_uring") == 0)
        run_uring(lfd);
#endif
    fprintf(stderr, "uring_loop: no back-end '%s' in this build\n", argv[1]);
    return 2;
}
