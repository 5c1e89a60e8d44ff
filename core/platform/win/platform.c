/* Windows side of core/platform.h. */
#include "platform/platform.h"
#include <keel/types.h>

#include <winsock2.h>
#include <ws2tcpip.h>

const char kl_module_suffix[] = ".dll";

void kl_platform_init(void)
{
    /* libuv starts Winsock itself; calling it again is harmless and makes
     * the raw socket calls below safe even before the first loop exists. */
    WSADATA data;
    WSAStartup(MAKEWORD(2, 2), &data);
}

int64_t kl_pread_cached(int fd, void *buf, size_t len, uint64_t offset)
{
    (void)fd, (void)buf, (void)len, (void)offset;
    return -1;
}

int kl_reuseport_balances(void)
{
    return 0;
}

static int wsa_error(void)
{
    return uv_translate_sys_error(WSAGetLastError());
}

/* A non-blocking socket bound to addr and listening; with `exclusive`,
 * bound with SO_EXCLUSIVEADDRUSE. */
/* backlog < 0: a UDP socket (bound, no listen). */
static int listen_socket(const struct sockaddr *addr, int exclusive, int backlog, SOCKET *out)
{
    int family = addr->sa_family;
    int len =
        family == AF_INET6 ? (int)sizeof(struct sockaddr_in6) : (int)sizeof(struct sockaddr_in);
    int udp = backlog < 0;
    SOCKET s = WSASocketW(family, udp ? SOCK_DGRAM : SOCK_STREAM, udp ? IPPROTO_UDP : IPPROTO_TCP,
                          NULL, 0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
    if (s == INVALID_SOCKET)
        return wsa_error();
    int rc = 0;
    BOOL on = TRUE;
    u_long nonblocking = 1;
    if (exclusive &&
        setsockopt(s, SOL_SOCKET, SO_EXCLUSIVEADDRUSE, (const char *)&on, sizeof on) != 0)
        rc = wsa_error();
    if (rc == 0 && family == AF_INET6 &&
        setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, (const char *)&on, sizeof on) != 0)
        rc = wsa_error();
    if (rc == 0 && ioctlsocket(s, FIONBIO, &nonblocking) != 0)
        rc = wsa_error();
    if (rc == 0 && bind(s, addr, len) != 0)
        rc = wsa_error();
    if (rc == 0 && !udp && listen(s, backlog) != 0)
        rc = wsa_error();
    if (rc != 0) {
        closesocket(s);
        return rc;
    }
    *out = s;
    return 0;
}

int kl_listen_socket(const struct sockaddr *addr, int shared, int backlog, kl_socket *out)
{
    if (shared)
        return UV_ENOTSUP;
    /* Not SO_REUSEADDR: on Windows it lets any other socket that sets it
     * bind the same port and take connections from us. SO_EXCLUSIVEADDRUSE
     * is the opposite, no other socket can bind the port while we hold it
     * (with a wildcard address, not even to one specific address). */
    int rc = listen_socket(addr, 1, backlog, out);
    if (rc != UV_EADDRINUSE)
        return rc;
    /* But an exclusive bind can be refused while connections accepted by an
     * earlier listener on the port are still there, TIME_WAIT included
     * (Microsoft's "Using SO_REUSEADDR and SO_EXCLUSIVEADDRUSE"; libuv does
     * not use the option for that reason): just what a restart right after
     * a stop leaves. A plain bind is refused only by a socket actually
     * bound to the address, so it tells the two apart: if it succeeds, the
     * port was held by leftovers of an earlier instance and keel listens
     * without the exclusive flag, as libuv always does; else the port is
     * taken. (Programs of other accounts still cannot bind that listener's
     * port, SO_REUSEADDR or not: Windows' default socket security.) */
    SOCKET s;
    if (listen_socket(addr, 0, backlog, &s) != 0)
        return rc;
    *out = s;
    return 0;
}

int kl_udp_socket(const struct sockaddr *addr, int shared, kl_socket *out)
{
    if (shared)
        return UV_ENOTSUP;
    /* Exclusive, as for TCP: no other program's socket may bind the port
     * and take datagrams meant for keel. UDP leaves no TIME_WAIT, so no
     * fallback is needed. */
    return listen_socket(addr, 1, -1, out);
}

int kl_accept(kl_socket listener, kl_socket *out)
{
    SOCKET s = accept(listener, NULL, NULL);
    if (s == INVALID_SOCKET) {
        int e = WSAGetLastError();
        if (e == WSAEWOULDBLOCK)
            return UV_EAGAIN;
        /* A connection reset by its peer before we took it: that one
         * connection failed, as ECONNABORTED says on POSIX (the caller
         * goes on accepting), not the listener. */
        if (e == WSAECONNRESET)
            return UV_ECONNABORTED;
        return uv_translate_sys_error(e);
    }
    /* Sockets accepted from a non-blocking listener inherit its mode;
     * libuv wants them non-blocking anyway. */
    u_long nonblocking = 1;
    ioctlsocket(s, FIONBIO, &nonblocking);
    *out = s;
    return 0;
}

void kl_socket_close(kl_socket sock)
{
    closesocket(sock);
}

int kl_listen_nodelay(kl_socket sock)
{
    /* Whether Winsock's accepted sockets inherit it is not documented:
     * each sets its own. */
    (void)sock;
    return 0;
}

int kl_socket_relisten(kl_socket sock, int backlog)
{
    /* Windows keeps the first backlog (listen again succeeds and changes
     * nothing); workers never listen themselves here anyway. */
    return listen(sock, backlog) == 0 ? 0 : wsa_error();
}

int kl_socket_dup(kl_socket sock, kl_socket *out)
{
    (void)sock;
    (void)out;
    return UV_ENOSYS;
}

/* TransmitFile would be the equivalent, but it wants an overlapped socket
 * driven by its own completion, which libuv's handle owns; the caller's
 * read-and-write path serves Windows instead. */
int kl_sendfile(kl_socket sock, int fd, uint64_t offset, size_t len, size_t *sent)
{
    (void)sock;
    (void)fd;
    (void)offset;
    (void)len;
    *sent = 0;
    return UV_ENOSYS;
}

/* The file path on Windows reads and writes through libuv (no sendfile),
 * which sends any bytes before the file itself. */
int kl_send_more(kl_socket sock, const void *data, size_t len, int more, size_t *sent)
{
    (void)sock;
    (void)data;
    (void)len;
    (void)more;
    *sent = 0;
    return UV_ENOSYS;
}

void kl_gmtime(int64_t seconds, struct tm *out)
{
    __time64_t t = (__time64_t)seconds;
    _gmtime64_s(out, &t);
}

int kl_lib_open(const char *path, uv_lib_t *lib)
{
    DWORD old = 0;
    BOOL changed = SetThreadErrorMode(SEM_FAILCRITICALERRORS | SEM_NOOPENFILEERRORBOX, &old);
    int rc = uv_dlopen(path, lib);
    if (changed)
        SetThreadErrorMode(old, NULL);
    return rc;
}

/* Windows has neither socket activation nor sd_notify, and a reload (which
 * hands sockets down) is POSIX only. */
int kl_socket_listening_addr(kl_socket sock, struct sockaddr_storage *addr, int *dgram)
{
    (void)sock;
    (void)addr;
    (void)dgram;
    return UV_ENOSYS;
}

void kl_service_notify(const char *state)
{
    (void)state;
}

int kl_socket_set_inheritable(kl_socket sock, int inheritable)
{
    (void)sock;
    (void)inheritable;
    return UV_ENOSYS;
}

int kl_nofile_raise(uint64_t *before, uint64_t *after)
{
    /* Windows has no RLIMIT_NOFILE: sockets and files are handles. */
    *before = *after = UINT64_MAX;
    return UV_ENOSYS;
}

int kl_file_reopen(FILE *file, const char *path)
{
    (void)file;
    (void)path;
    return UV_ENOSYS;
}

int kl_privileged(void)
{
    return 0;
}

int kl_privileges_check(const char *user, const char *group, char *err, size_t errlen)
{
    (void)user;
    (void)group;
    snprintf(err, errlen, "[keel] user: not supported on Windows");
    return KEEL_ERR_UNSUPPORTED;
}

int kl_privileges_drop(const char *user, const char *group, char *err, size_t errlen)
{
    return kl_privileges_check(user, group, err, errlen);
}

/* ---- Unix domain sockets: none on Windows (platform.h) ------------------ */

int kl_unix_addr(const char *name, struct sockaddr_storage *out)
{
    (void)name;
    (void)out;
    return UV_ENOTSUP;
}

socklen_t kl_sockaddr_len(const struct sockaddr_storage *addr)
{
    return addr->ss_family == AF_INET6 ? (socklen_t)sizeof(struct sockaddr_in6)
                                       : (socklen_t)sizeof(struct sockaddr_in);
}

void kl_unix_name(const struct sockaddr_storage *addr, char *buf, size_t size)
{
    (void)addr;
    snprintf(buf, size, "unix:");
}

int kl_unix_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    (void)a;
    (void)b;
    return 0;
}

int kl_unix_listen(const struct sockaddr_storage *addr, int backlog, const kl_unix_perms *perms,
                   kl_socket *out, kl_unix_file *file, char *err, size_t errlen)
{
    (void)addr;
    (void)backlog;
    (void)perms;
    (void)out;
    (void)file;
    snprintf(err, errlen, "Unix domain sockets are not supported on Windows");
    return UV_ENOTSUP;
}

int kl_unix_file_of(kl_socket sock, const struct sockaddr_storage *addr, kl_unix_file *file)
{
    (void)sock;
    (void)addr;
    (void)file;
    return UV_ENOTSUP;
}

int kl_unix_remove(const struct sockaddr_storage *addr, const kl_unix_file *file)
{
    (void)addr;
    (void)file;
    return 0;
}

int kl_unix_connect(const struct sockaddr_storage *addr, kl_socket *out)
{
    (void)addr;
    (void)out;
    return UV_ENOTSUP;
}

int kl_socket_peer_cred(kl_socket sock, uint32_t *uid, uint32_t *gid, int32_t *pid)
{
    (void)sock;
    (void)uid;
    (void)gid;
    (void)pid;
    return UV_ENOTSUP;
}

int kl_thread_cpu_ns(uv_thread_t thread, uint64_t *ns)
{
    FILETIME created, exited, kernel, user;
    if (!GetThreadTimes(thread, &created, &exited, &kernel, &user))
        return uv_translate_sys_error((int)GetLastError());
    uint64_t k = ((uint64_t)kernel.dwHighDateTime << 32) | kernel.dwLowDateTime;
    uint64_t u = ((uint64_t)user.dwHighDateTime << 32) | user.dwLowDateTime;
    *ns = (k + u) * 100; /* FILETIME counts 100 ns intervals */
    return 0;
}
