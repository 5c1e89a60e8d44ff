/* POSIX side of core/platform.h (Linux, macOS, the BSDs). */
#if defined(__linux__)
#define _GNU_SOURCE /* glibc: accept4 */
#endif
#include "platform/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/sendfile.h>
#include <sys/uio.h> /* preadv2, RWF_NOWAIT */
#elif defined(__APPLE__) || defined(__FreeBSD__) || defined(__DragonFly__)
#include <sys/types.h>
#include <sys/uio.h>
#define KL_BSD_SENDFILE 1
#endif

#ifdef __APPLE__
#include <limits.h> /* OPEN_MAX */
#include <sys/sysctl.h>
#endif

#ifdef __APPLE__
const char kl_module_suffix[] = ".dylib";
#else
const char kl_module_suffix[] = ".so";
#endif

void kl_platform_init(void)
{
    /* libuv writes to sockets with write(2); a peer that went away must
     * give EPIPE, not kill the process. */
    signal(SIGPIPE, SIG_IGN);
}

int64_t kl_pread_cached(int fd, void *buf, size_t len, uint64_t offset)
{
#if defined(__linux__) && defined(RWF_NOWAIT)
    struct iovec iov = {buf, len};
    ssize_t n;
    do
        n = preadv2(fd, &iov, 1, (off_t)offset, RWF_NOWAIT);
    while (n < 0 && errno == EINTR);
    return n;
#else
    (void)fd, (void)buf, (void)len, (void)offset;
    return -1;
#endif
}

int kl_reuseport_balances(void)
{
#if defined(__linux__) || defined(SO_REUSEPORT_LB)
    return 1;
#else
    /* macOS and older BSDs accept SO_REUSEPORT but hand every connection
     * to one socket, so the single-acceptor path serves them better. */
    return 0;
#endif
}

static int set_nonblocking_cloexec(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return -errno;
    flags = fcntl(fd, F_GETFD);
    if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)
        return -errno;
    return 0;
}

/* A non-blocking socket of `type` bound to addr (SO_REUSEPORT with
 * `shared`), for a TCP listener or a UDP one. */
static int bound_socket(const struct sockaddr *addr, int type, int shared, int *out)
{
    int family = addr->sa_family;
    socklen_t len = family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int fd = socket(family, type, 0);
    if (fd < 0)
        return -errno;
    int rc = set_nonblocking_cloexec(fd);
    int one = 1;
    if (rc == 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        rc = -errno;
    /* An IPv6 listener serves IPv6 only; "0.0.0.0" and "::" are separate
     * listen lines, as in nginx. */
    if (rc == 0 && family == AF_INET6 &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
        rc = -errno;
#if defined(SO_REUSEPORT_LB)
    if (rc == 0 && shared && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT_LB, &one, sizeof one) < 0)
        rc = -errno;
#elif defined(SO_REUSEPORT)
    if (rc == 0 && shared && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
        rc = -errno;
#else
    if (rc == 0 && shared)
        rc = UV_ENOTSUP;
#endif
    if (rc == 0 && bind(fd, addr, len) < 0)
        rc = -errno;
    if (rc != 0) {
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

/* What a socket call that failed with errno (other than EINTR, which the
 * callers retry) returns: UV_EAGAIN when it would block, as libuv says
 * it, else -errno. */
static int failed_io(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK ? UV_EAGAIN : -errno;
}

int kl_listen_socket(const struct sockaddr *addr, int shared, int backlog, kl_socket *out)
{
    int fd = -1; /* (set by bound_socket; -O3 cannot tell) */
    int rc = bound_socket(addr, SOCK_STREAM, shared, &fd);
    if (rc != 0)
        return rc;
    if (listen(fd, backlog) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

int kl_udp_socket(const struct sockaddr *addr, int shared, kl_socket *out)
{
    return bound_socket(addr, SOCK_DGRAM, shared, out);
}

int kl_accept(kl_socket listener, kl_socket *out)
{
    for (;;) {
#if defined(__linux__) || defined(__FreeBSD__)
        /* One system call where four fcntl would follow a plain accept:
         * workers accept on this path (libuv's uv_accept does the same). */
        int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
        int fd = accept(listener, NULL, NULL);
        if (fd >= 0) {
            int rc = set_nonblocking_cloexec(fd);
            if (rc != 0) {
                close(fd);
                return rc;
            }
        }
#endif
        if (fd >= 0) {
            *out = fd;
            return 0;
        }
        if (errno == EINTR)
            continue;
        return failed_io();
    }
}

void kl_socket_close(kl_socket sock)
{
    close(sock);
}

int kl_listen_nodelay(kl_socket sock)
{
#if defined(__linux__)
    int one = 1;
    return setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
#else
    /* The BSDs and macOS copy it too, but that is not tested here. */
    (void)sock;
    return 0;
#endif
}

int kl_socket_relisten(kl_socket sock, int backlog)
{
    return listen(sock, backlog) == 0 ? 0 : -errno;
}

int kl_socket_dup(kl_socket sock, kl_socket *out)
{
    int fd = fcntl(sock, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    *out = fd;
    return 0;
}

int kl_send_more(kl_socket sock, const void *data, size_t len, int more, size_t *sent)
{
    *sent = 0;
    int flags = 0;
#ifdef MSG_MORE
    if (more)
        flags |= MSG_MORE;
#else
    (void)more; /* BSD and macOS: the bytes leave at once, as a write would */
#endif
#ifdef MSG_NOSIGNAL
    flags |= MSG_NOSIGNAL;
#endif
    for (;;) {
        ssize_t n = send(sock, data, len, flags);
        if (n >= 0) {
            *sent = (size_t)n;
            return 0;
        }
        if (errno == EINTR)
            continue;
        return failed_io();
    }
}

int kl_sendfile(kl_socket sock, int fd, uint64_t offset, size_t len, size_t *sent)
{
    *sent = 0;
    /* An offset off_t cannot hold (a 32-bit off_t) is left to the read
     * path, which takes 64-bit offsets everywhere. */
    off_t off = (off_t)offset;
    if (off < 0 || (uint64_t)off != offset)
        return UV_ENOSYS;
#if defined(__linux__)
    for (;;) {
        ssize_t n = sendfile(sock, fd, &off, len);
        if (n >= 0) {
            *sent = (size_t)n;
            return 0;
        }
        if (errno == EINTR)
            continue;
        /* EINVAL: a file that cannot be mapped (some file systems, pipes). */
        if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)
            return UV_ENOSYS;
        return failed_io();
    }
#elif defined(KL_BSD_SENDFILE)
    for (;;) {
        /* A length of 0 would mean "to the end of the file" here; callers
         * never pass one. Both report what left before EAGAIN or EINTR. */
#if defined(__APPLE__)
        off_t n = (off_t)len;
        int rc = sendfile(fd, sock, off, &n, NULL, 0);
#else
        off_t n = 0;
        int rc = sendfile(fd, sock, off, len, NULL, &n, 0);
#endif
        *sent = (size_t)n;
        if (rc == 0)
            return 0;
        if (errno == EINTR) {
            if (n > 0)
                return 0;
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return UV_EAGAIN;
        if (errno == ENOTSOCK || errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)
            return n > 0 ? 0 : UV_ENOSYS;
        return n > 0 ? 0 : -errno;
    }
#else
    (void)sock;
    (void)fd;
    (void)len;
    return UV_ENOSYS;
#endif
}

static uint64_t nofile_value(rlim_t v)
{
    return v == RLIM_INFINITY ? UINT64_MAX : (uint64_t)v;
}

int kl_nofile_raise(uint64_t *before, uint64_t *after)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return -errno;
    *before = *after = nofile_value(lim.rlim_cur);
    rlim_t want = lim.rlim_max;
#ifdef __APPLE__
    /* The hard limit reads as unlimited, but setrlimit refuses more than
     * kern.maxfilesperproc (Go's syscall.adjustFileLimit). */
    int per_process = 0;
    size_t len = sizeof per_process;
    rlim_t cap = OPEN_MAX;
    if (sysctlbyname("kern.maxfilesperproc", &per_process, &len, NULL, 0) == 0 && per_process > 0)
        cap = (rlim_t)per_process;
    if (want > cap)
        want = cap;
#endif
    if (lim.rlim_cur >= want)
        return 0;
    lim.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
        return -errno;
    *after = nofile_value(want);
    return 0;
}

void kl_gmtime(int64_t seconds, struct tm *out)
{
    time_t t = (time_t)seconds;
    gmtime_r(&t, out);
}

int kl_lib_open(const char *path, uv_lib_t *lib)
{
    return uv_dlopen(path, lib);
}

int kl_file_reopen(FILE *file, const char *path)
{
    if (fflush(file) != 0)
        return -errno;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = dup2(fd, fileno(file)) < 0 ? -errno : 0;
    close(fd);
    if (rc == 0) {
        /* dup2 clears close-on-exec on the copy. */
        int flags = fcntl(fileno(file), F_GETFD);
        if (flags >= 0)
            fcntl(fileno(file), F_SETFD, flags | FD_CLOEXEC);
    }
    return rc;
}

int kl_thread_cpu_ns(uv_thread_t thread, uint64_t *ns)
{
#ifdef __APPLE__
    (void)thread;
    (void)ns;
    return UV_ENOTSUP;
#else
    clockid_t clock;
    struct timespec ts;
    int rc = pthread_getcpuclockid(thread, &clock);
    if (rc != 0)
        return uv_translate_sys_error(rc);
    if (clock_gettime(clock, &ts) != 0)
        return uv_translate_sys_error(errno);
    *ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return 0;
#endif
}
