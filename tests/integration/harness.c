/* harness.c — see harness.h. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h> /* SIOCOUTQNSD */
#include <sys/ioctl.h>
#include <sys/prctl.h>
#endif
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* SO_NOSIGPIPE on the socket instead (kh_connect) */
#endif

#define KH_MAX_PROCS 16

static kh_proc *kh_procs[KH_MAX_PROCS];
static int kh_atexit_done;
static struct rlimit kh_nofile; /* for the next child; rlim_max 0: inherited */

void kh_next_nofile(unsigned long soft, unsigned long hard)
{
    kh_nofile.rlim_cur = (rlim_t)soft;
    kh_nofile.rlim_max = (rlim_t)hard;
}

long long kh_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void kh_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static char *kh_slurp(const char *path, char *old)
{
    free(old);
    FILE *f = fopen(path, "rb");
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    cr_assert(buf, "out of memory");
    if (f) {
        size_t n;
        while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
            len += n;
            if (cap - len < 1024) {
                cap *= 2;
                buf = realloc(buf, cap);
                cr_assert(buf, "out of memory");
            }
        }
        fclose(f);
    }
    buf[len] = '\0';
    return buf;
}

const char *kh_stderr(kh_proc *p)
{
    p->err = kh_slurp(p->errpath, p->err);
    return p->err;
}

const char *kh_stdout(kh_proc *p)
{
    p->out = kh_slurp(p->outpath, p->out);
    return p->out;
}

static void kh_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "cannot create %s: %s", path, strerror(errno));
    fputs(text, f);
    cr_assert(fclose(f) == 0, "cannot write %s", path);
}

/* Reaps the child if it has exited; returns 1 if it is gone. */
static int kh_reap(kh_proc *p, int block)
{
    if (p->pid == 0)
        return 1;
    int st;
    pid_t r;
    do
        r = waitpid(p->pid, &st, block ? 0 : WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == p->pid || (r < 0 && errno == ECHILD)) {
        p->status = r == p->pid ? st : 0;
        p->pid = 0;
        return 1;
    }
    return 0;
}

kh_proc *kh_spawn(const char *config, const char *const *args)
{
    return kh_spawn_program(KEEL_BIN, config, args);
}

/* Whether the config's `modules` line loads tls. */
static int kh_loads_tls(const char *config)
{
    for (const char *line = config; line != NULL && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        line += strspn(line, " \t");
        if (strncmp(line, "modules", 7) == 0 && strchr(" \t=", line[7]) != NULL) {
            for (const char *p = line + 7; p < line + len;) {
                p += strspn(p, " \t=,");
                size_t n = strcspn(p, " \t,\n");
                if (n == 3 && strncmp(p, "tls", 3) == 0)
                    return 1;
                p += n ? n : 1;
            }
        }
        line = end ? end + 1 : NULL;
    }
    return 0;
}

kh_proc *kh_spawn_program(const char *program, const char *config, const char *const *args)
{
    kh_proc *p = calloc(1, sizeof *p);
    cr_assert(p, "out of memory");

    const char *tmp = getenv("TMPDIR");
    snprintf(p->dir, sizeof p->dir, "%s/keel-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert(mkdtemp(p->dir), "mkdtemp %s: %s", p->dir, strerror(errno));
    snprintf(p->errpath, sizeof p->errpath, "%s/stderr", p->dir);
    snprintf(p->outpath, sizeof p->outpath, "%s/stdout", p->dir);
    if (config) {
        snprintf(p->conf, sizeof p->conf, "%s/keel.conf", p->dir);
        kh_write_file(p->conf, config);
    }

    const char *argv[64];
    int argc = 0;
    argv[argc++] = program;
    if (config) {
        argv[argc++] = "-c";
        argv[argc++] = p->conf;
    }
    for (; args && *args; args++) {
        cr_assert(argc < 61, "too many arguments");
        argv[argc++] = *args;
    }
    /* KEEL_TEST_TLS_BACKEND=openssl: the same TLS tests against the other
     * backend (tests/CMakeLists.txt registers them as NAME.openssl). */
    static char backend_set[64];
    const char *backend = getenv("KEEL_TEST_TLS_BACKEND");
    if (backend != NULL && *backend != '\0' && config != NULL && kh_loads_tls(config)) {
        snprintf(backend_set, sizeof backend_set, "tls.backend=%s", backend);
        argv[argc++] = "--set";
        argv[argc++] = backend_set;
    }
    argv[argc] = NULL;

    int errfd = open(p->errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int outfd = open(p->outpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cr_assert(errfd >= 0 && outfd >= 0 && nullfd >= 0, "open: %s", strerror(errno));

    int slot = -1;
    for (int i = 0; i < KH_MAX_PROCS; i++)
        if (!kh_procs[i]) {
            slot = i;
            break;
        }
    cr_assert(slot >= 0, "too many keel processes in one test");
    if (!kh_atexit_done) {
        atexit(kh_cleanup_all);
        kh_atexit_done = 1;
    }

    fflush(NULL);
    pid_t parent = getpid();
    struct rlimit nofile = kh_nofile;
    kh_nofile.rlim_cur = kh_nofile.rlim_max = 0;
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (nofile.rlim_max != 0 && setrlimit(RLIMIT_NOFILE, &nofile) != 0) {
            dprintf(errfd, "harness: setrlimit(RLIMIT_NOFILE): %s\n", strerror(errno));
            _exit(127);
        }
        /* A process group of its own: what it starts (nginx's workers)
         * is stopped with it (kh_stop kills the group). */
        setpgid(0, 0);
#ifdef __linux__
        /* Die with the test process, even if it is killed (timeout). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (getppid() != parent)
            _exit(127);
        /* exec keeps the signal mask and ignored signals: reset them so
         * keel sees SIGTERM/SIGINT/SIGPIPE as a fresh process would. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        dup2(nullfd, 0);
        dup2(outfd, 1);
        dup2(errfd, 2);
        execv(program, (char *const *)argv);
        dprintf(2, "harness: cannot execute %s: %s\n", program, strerror(errno));
        _exit(127);
    }
    close(errfd);
    close(outfd);
    close(nullfd);
    setpgid(pid, pid); /* as the child does: whichever runs first */
    p->pid = pid;
    p->pgid = pid;
    kh_procs[slot] = p;
    return p;
}

static int kh_count_listening(kh_proc *p)
{
    return kh_count_log(p, "listening on ");
}

kh_proc *kh_start(const char *config, const char *const *args, int nlisteners, int timeout_ms)
{
    return kh_start_program(KEEL_BIN, config, args, nlisteners, timeout_ms);
}

kh_proc *kh_start_program(const char *program, const char *config, const char *const *args,
                          int nlisteners, int timeout_ms)
{
    kh_proc *p = kh_spawn_program(program, config, args);
    long long deadline = kh_now_ms() + timeout_ms;
    for (;;) {
        kh_stderr(p);
        if (kh_count_listening(p) >= nlisteners)
            return p;
        if (kh_reap(p, 0)) {
            kh_stderr(p); /* whatever it wrote before exiting */
            if (kh_count_listening(p) >= nlisteners)
                return p;
            cr_assert_fail("keel exited (status 0x%x) before listening on %d socket(s)\n"
                           "---- keel stderr ----\n%s---- end ----",
                           p->status, nlisteners, p->err);
        }
        if (kh_now_ms() > deadline)
            cr_assert_fail("keel did not log %d 'listening on' line(s) within %d ms\n"
                           "---- keel stderr ----\n%s---- end ----",
                           nlisteners, timeout_ms, p->err);
        kh_sleep_ms(10);
    }
}

unsigned kh_port(kh_proc *p, int index)
{
    const char *s = kh_stderr(p);
    for (int i = 0;; i++) {
        s = strstr(s, "listening on ");
        if (!s)
            return 0;
        s += strlen("listening on ");
        if (i < index)
            continue;
        /* "ADDR:PORT (PROTO)" where ADDR may be "[::1]" */
        const char *paren = strstr(s, " (");
        const char *eol = strchr(s, '\n');
        if (!paren || (eol && paren > eol))
            return 0;
        const char *colon = paren;
        while (colon > s && *colon != ':')
            colon--;
        if (*colon != ':')
            return 0;
        return (unsigned)strtoul(colon + 1, NULL, 10);
    }
}

int kh_count_log(kh_proc *p, const char *needle)
{
    int n = 0;
    size_t nl = strlen(needle);
    for (const char *s = kh_stderr(p); (s = strstr(s, needle)) != NULL; s += nl)
        n++;
    return n;
}

int kh_wait_log(kh_proc *p, const char *needle, int timeout_ms)
{
    long long deadline = kh_now_ms() + timeout_ms;
    for (;;) {
        int gone = kh_reap(p, 0);
        if (strstr(kh_stderr(p), needle))
            return 1;
        if (gone || kh_now_ms() > deadline)
            return 0;
        kh_sleep_ms(10);
    }
}

int kh_wait_log_count(kh_proc *p, const char *needle, int n, int timeout_ms)
{
    long long deadline = kh_now_ms() + timeout_ms;
    for (;;) {
        int gone = kh_reap(p, 0);
        if (kh_count_log(p, needle) >= n)
            return 1;
        if (gone || kh_now_ms() > deadline)
            return 0;
        kh_sleep_ms(10);
    }
}

void kh_signal(kh_proc *p, int sig)
{
    if (p->pid)
        kill(p->pid, sig);
}

int kh_wait_exit(kh_proc *p, int timeout_ms)
{
    long long deadline = kh_now_ms() + timeout_ms;
    while (!kh_reap(p, 0)) {
        if (kh_now_ms() > deadline) {
            kill(p->pid, SIGKILL);
            kh_reap(p, 1);
            kh_stderr(p);
            return -2;
        }
        kh_sleep_ms(10);
    }
    kh_stderr(p);
    kh_stdout(p);
    if (WIFEXITED(p->status))
        return WEXITSTATUS(p->status);
    return -1;
}

int kh_exited(kh_proc *p)
{
    return kh_reap(p, 0);
}

void kh_expect_refused(const char *config, int line, const char *says, const char *label)
{
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn(config, args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "%s: keel -t exit status %d", label, status);
    char where[512];
    snprintf(where, sizeof where, "%s:%d:", p->conf, line);
    kh_assert(p, strstr(kh_stderr(p), where) != NULL, "%s: no '%s'", label, where);
    kh_assert(p, strstr(kh_stderr(p), says) != NULL, "%s: no '%s'", label, says);
    kh_stop(p);
}

void kh_stop(kh_proc *p)
{
    if (!p)
        return;
    /* The whole group: a SIGKILL to nginx's master alone left its workers
     * running, listening, after the test (they outlive the master). */
    if (p->pgid > 0)
        kill(-p->pgid, SIGKILL);
    if (p->pid) {
        kill(p->pid, SIGKILL);
        kh_reap(p, 1);
    }
    unlink(p->errpath);
    unlink(p->outpath);
    if (p->conf[0])
        unlink(p->conf);
    rmdir(p->dir);
    for (int i = 0; i < KH_MAX_PROCS; i++)
        if (kh_procs[i] == p)
            kh_procs[i] = NULL;
    free(p->err);
    free(p->out);
    free(p);
}

void kh_cleanup_all(void)
{
    for (int i = 0; i < KH_MAX_PROCS; i++)
        if (kh_procs[i])
            kh_stop(kh_procs[i]);
}

/* ---- Sockets ------------------------------------------------------------ */

#define KH_IO_TIMEOUT_MS 5000

static int kh_poll1(int fd, short events, int timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    int r;
    do
        r = poll(&pfd, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    return r;
}

int kh_connect(const char *host, unsigned port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        len = sizeof *in4;
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        len = sizeof *in6;
    } else {
        return -1;
    }

#if defined(SOCK_CLOEXEC) && defined(SOCK_NONBLOCK)
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
#else
    /* macOS has neither flag for socket(): the same two steps later. */
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
#endif
#ifdef SO_NOSIGPIPE
    /* Where send() may lack MSG_NOSIGNAL (macOS), the socket says it. */
    int nosigpipe = 1;
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &nosigpipe, sizeof nosigpipe);
#endif
    if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
        int err = 0;
        socklen_t elen = sizeof err;
        if (errno != EINPROGRESS || kh_poll1(fd, POLLOUT, KH_IO_TIMEOUT_MS) != 1 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err != 0) {
            close(fd);
            return -1;
        }
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int kh_send(int fd, const void *data, size_t len)
{
    const char *s = data;
    while (len > 0) {
        if (kh_poll1(fd, POLLOUT, KH_IO_TIMEOUT_MS) != 1)
            return -1;
        ssize_t n = send(fd, s, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        s += n;
        len -= (size_t)n;
    }
    return 0;
}

int kh_send_str(int fd, const char *s)
{
    return kh_send(fd, s, strlen(s));
}

/* Reads until `len` bytes, or (if line) a trailing '\n', EOF or timeout. */
static size_t kh_recv(int fd, char *buf, size_t cap, size_t len, int line, int timeout_ms)
{
    size_t got = 0;
    long long deadline = kh_now_ms() + timeout_ms;
    if (len > cap - 1)
        len = cap - 1;
    while (got < len) {
        long long left = deadline - kh_now_ms();
        if (left <= 0 || kh_poll1(fd, POLLIN, (int)left) != 1)
            break;
        ssize_t n = recv(fd, buf + got, line ? 1 : len - got, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (line && buf[got - 1] == '\n')
            break;
    }
    buf[got] = '\0';
    return got;
}

size_t kh_recv_n(int fd, char *buf, size_t cap, size_t len, int timeout_ms)
{
    return kh_recv(fd, buf, cap, len, 0, timeout_ms);
}

size_t kh_recv_line(int fd, char *buf, size_t cap, int timeout_ms)
{
    return kh_recv(fd, buf, cap, cap - 1, 1, timeout_ms);
}

int kh_expect_eof(int fd, char *buf, size_t cap, int timeout_ms)
{
    char tmp[256];
    if (!buf) {
        buf = tmp;
        cap = sizeof tmp;
    }
    buf[0] = '\0';
    long long deadline = kh_now_ms() + timeout_ms;
    for (;;) {
        long long left = deadline - kh_now_ms();
        if (left <= 0 || kh_poll1(fd, POLLIN, (int)left) != 1)
            return 0;
        ssize_t n = recv(fd, buf, cap - 1, MSG_DONTWAIT);
        if (n == 0)
            return 1;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return 1; /* ECONNRESET and friends: closed too */
        }
        buf[n] = '\0';
        return -1;
    }
}

/* ---- Kernel socket queues ------------------------------------------------ */

#ifdef __linux__
/* Sums the queue column (rx 0: tx_queue, 1: rx_queue) of the sockets in
 * /proc/net/tcp and tcp6 whose local port is lport and, if rport is not 0,
 * whose remote port is rport: listening ones if st is 10 (TCP_LISTEN),
 * any other state if st is 0. -1 if no such socket is listed. */
static long kh_tcp_queue(unsigned lport, unsigned rport, unsigned st, int rx)
{
    static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    long sum = -1;
    for (int f = 0; f < 2; f++) {
        FILE *in = fopen(files[f], "r");
        if (!in)
            continue;
        char line[512];
        if (!fgets(line, sizeof line, in)) { /* the header */
            fclose(in);
            continue;
        }
        while (fgets(line, sizeof line, in)) {
            /* "sl: LOCAL:PORT REMOTE:PORT ST TX:RX ..." */
            char local[64], remote[64];
            unsigned state;
            unsigned long tx, rxq;
            if (sscanf(line, "%*s %63s %63s %x %lx:%lx", local, remote, &state, &tx, &rxq) != 5)
                continue;
            const char *lp = strrchr(local, ':'), *rp = strrchr(remote, ':');
            if (!lp || !rp || (st ? state != st : state == 10) ||
                strtoul(lp + 1, NULL, 16) != lport ||
                (rport != 0 && strtoul(rp + 1, NULL, 16) != rport))
                continue;
            sum = (sum < 0 ? 0 : sum) + (long)(rx ? rxq : tx);
        }
        fclose(in);
    }
    return sum;
}

#else
/* The fallback where the kernel does not show socket queues. */
static int kh_wait_blind(int timeout_ms)
{
    kh_sleep_ms(timeout_ms < 200 ? timeout_ms : 200);
    return 1;
}
#endif

#ifdef __linux__
/* What the peer's socket of the TCP connection fd has received and not
 * read (*rq), from the kernel's socket table by exact address (sock_diag,
 * as ss(8) asks it). 1 if found; 0 if the kernel has no such socket
 * (closed); -1 on error. */
static int kh_peer_unread(int fd, unsigned *rq)
{
    struct sockaddr_storage me, peer;
    socklen_t ml = sizeof me, pl = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
        return -1;
    const struct sockaddr_storage *src = &peer, *dst = &me;
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
    } req;
    memset(&req, 0, sizeof req);
    req.nlh.nlmsg_len = sizeof req;
    req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nlh.nlmsg_flags = NLM_F_REQUEST;
    req.r.sdiag_family = (uint8_t)me.ss_family;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (me.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)src, *b = (const void *)dst;
        req.r.id.idiag_sport = a->sin_port;
        req.r.id.idiag_dport = b->sin_port;
        memcpy(req.r.id.idiag_src, &a->sin_addr, 4);
        memcpy(req.r.id.idiag_dst, &b->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *a = (const void *)src, *b = (const void *)dst;
        req.r.id.idiag_sport = a->sin6_port;
        req.r.id.idiag_dport = b->sin6_port;
        memcpy(req.r.id.idiag_src, &a->sin6_addr, 16);
        memcpy(req.r.id.idiag_dst, &b->sin6_addr, 16);
    }
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return -1;
    long answer[1024]; /* aligned for nlmsghdr */
    ssize_t n = -1;
    if (send(nl, &req, sizeof req, 0) == (ssize_t)sizeof req)
        n = recv(nl, answer, sizeof answer, 0);
    close(nl);
    const struct nlmsghdr *h = (const void *)answer;
    if (n < (ssize_t)sizeof *h || !NLMSG_OK(h, (size_t)n))
        return -1;
    if (h->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *e = NLMSG_DATA(h);
        return e->error == -ENOENT ? 0 : -1;
    }
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
        return -1;
    const struct inet_diag_msg *m = NLMSG_DATA(h);
    *rq = m->idiag_rqueue;
    return 1;
}

/* Nothing of fd's still unsent (SIOCOUTQNSD: what is sent but not yet
 * acknowledged is delivered, over loopback, and a delayed ACK takes
 * 40 ms) and nothing unread at the peer (a socket the kernel no longer
 * has holds nothing). */
static int kh_peer_read_all(int fd)
{
    unsigned rq = 0;
    int unsent = 0, theirs = kh_peer_unread(fd, &rq);
    return theirs >= 0 && ioctl(fd, SIOCOUTQNSD, &unsent) == 0 && unsent == 0 &&
           (theirs == 0 || rq == 0);
}
#endif

int kh_wait_peer_read(int fd, int timeout_ms)
{
#ifdef __linux__
    return KH_WAIT_UNTIL(kh_peer_read_all(fd), timeout_ms);
#else
    (void)fd;
    return kh_wait_blind(timeout_ms);
#endif
}

int kh_close_both(int fd, int timeout_ms)
{
    shutdown(fd, SHUT_WR);
    long long deadline = kh_now_ms() + timeout_ms;
    int closed = 0;
    char buf[4096];
    for (;;) {
        long long left = deadline - kh_now_ms();
        int r = kh_expect_eof(fd, buf, sizeof buf, left > 0 ? (int)left : 0);
        if (r != -1) { /* EOF (1) or time out (0); -1: data, read on */
            closed = r == 1;
            break;
        }
    }
    close(fd);
    return closed;
}

int kh_wait_port_read(unsigned port, int timeout_ms)
{
#ifdef __linux__
    return KH_WAIT_UNTIL(kh_tcp_queue(port, 0, 10, 1) <= 0 && kh_tcp_queue(port, 0, 0, 1) <= 0,
                         timeout_ms);
#else
    (void)port;
    return kh_wait_blind(timeout_ms);
#endif
}

int kh_wait_accepted(unsigned port, int timeout_ms)
{
#ifdef __linux__
    /* For a listening socket rx_queue is the accept queue's length. */
    return KH_WAIT_UNTIL(kh_tcp_queue(port, 0, 10, 1) == 0, timeout_ms);
#else
    (void)port;
    return kh_wait_blind(timeout_ms);
#endif
}

int kh_count_fds(kh_proc *p)
{
#ifdef __linux__
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)p->pid);
    DIR *d = p->pid > 0 ? opendir(path) : NULL;
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
#else
    (void)p;
    return -1;
#endif
}

int kh_wait_fds_at_most(kh_proc *p, int n, int timeout_ms)
{
    if (kh_count_fds(p) < 0) {
#ifdef __linux__
        return 0; /* the process is gone */
#else
        return kh_wait_blind(timeout_ms);
#endif
    }
    return KH_WAIT_UNTIL(kh_count_fds(p) <= n, timeout_ms);
}

/* 1 if a connection to 127.0.0.1:port is accepted (it is closed at once). */
static int kh_port_accepts(unsigned port)
{
    int fd = kh_connect("127.0.0.1", port);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

static int kh_wait_connect(unsigned port, int want, int timeout_ms)
{
    return KH_WAIT_UNTIL(kh_port_accepts(port) == want, timeout_ms);
}

int kh_wait_accepts(unsigned port, int timeout_ms)
{
    return kh_wait_connect(port, 1, timeout_ms);
}

int kh_wait_refused(unsigned port, int timeout_ms)
{
    return kh_wait_connect(port, 0, timeout_ms);
}

unsigned kh_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
                  getsockname(fd, (struct sockaddr *)&sa, &len) == 0,
              "no free port: %s", strerror(errno));
    close(fd);
    return ntohs(sa.sin_port);
}

char *kh_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    if (buf != NULL)
        n = fread(buf, 1, cap - 1, f);
    fclose(f);
    if (buf != NULL)
        buf[n] = '\0';
    return buf;
}

int kh_file_has(const char *path, const char *needle)
{
    char *text = kh_read_file(path);
    int found = text != NULL && strstr(text, needle) != NULL;
    free(text);
    return found;
}

pid_t kh_read_pid(const char *path)
{
    char *text = kh_read_file(path);
    long pid = text != NULL ? strtol(text, NULL, 10) : 0;
    free(text);
    return (pid_t)pid;
}

unsigned kh_log_file_port(const char *path)
{
    static const char line[] = "listening on 127.0.0.1:";
    char *text = kh_read_file(path);
    const char *at = text != NULL ? strstr(text, line) : NULL;
    unsigned port = at != NULL ? (unsigned)strtoul(at + sizeof line - 1, NULL, 10) : 0;
    free(text);
    return port;
}

int kh_get_ok(unsigned port, const char *path)
{
    int fd = kh_connect("127.0.0.1", port);
    if (fd < 0)
        return 0;
    char req[512], buf[2048];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", path);
    int ok = kh_send_str(fd, req) == 0;
    size_t n = ok ? kh_recv_n(fd, buf, sizeof buf, sizeof buf - 1, 5000) : 0;
    close(fd);
    return n > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0;
}
