/* Listening sockets handed down (net/inherit.h). */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "net/inherit.h"

/* sd_listen_fds(3): the first passed descriptor is 3. */
enum { KL_FIRST_INHERITED = 3, KL_MAX_INHERITED = 4096 };

static const char *const inherit_vars[] = {"LISTEN_PID",      "LISTEN_FDS",    "LISTEN_FDNAMES",
                                           "KEEL_LISTEN_FDS", "KEEL_READY_FD", "KEEL_LISTEN_OWNED"};

/* An environment variable as a non-negative number, or -1. */
static long env_number(const char *name)
{
    char text[32];
    size_t len = sizeof text;
    if (uv_os_getenv(name, text, &len) != 0 || len == 0)
        return -1;
    char *end;
    long n = strtol(text, &end, 10);
    return *end == '\0' && n >= 0 ? n : -1;
}

static void describe(const struct sockaddr_storage *addr, char *out, size_t size)
{
    char host[64] = "?";
    unsigned port = 0;
    if (addr->ss_family == AF_UNIX) {
        kl_unix_name(addr, out, size);
    } else if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
        uv_ip6_name(a, host, sizeof host);
        port = ntohs(a->sin6_port);
        snprintf(out, size, "[%s]:%u", host, port);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
        uv_ip4_name(a, host, sizeof host);
        port = ntohs(a->sin_port);
        snprintf(out, size, "%s:%u", host, port);
    }
}

int kl_inherit_read(kl_inheritance *inh)
{
    memset(inh, 0, sizeof *inh);
    inh->ready_fd = -1;
    long keel_fds = env_number("KEEL_LISTEN_FDS");
    long ready = env_number("KEEL_READY_FD");
    long pid = env_number("LISTEN_PID");
    long systemd_fds = env_number("LISTEN_FDS");
    /* Which of a reload's sockets are Unix sockets whose file the old
     * process made: '1' per such descriptor (server/reload.c). */
    char owned[KL_MAX_INHERITED + 1] = "";
    size_t owned_len = sizeof owned;
    if (uv_os_getenv("KEEL_LISTEN_OWNED", owned, &owned_len) != 0)
        owned[0] = '\0';
    for (size_t i = 0; i < KL_ARRAY_SIZE(inherit_vars); i++)
        uv_os_unsetenv(inherit_vars[i]);

    long n = 0;
    if (keel_fds >= 0) {
        n = keel_fds;
        inh->from_keel = 1;
        inh->ready_fd = (int)ready;
    } else if (systemd_fds > 0 && pid == (long)uv_os_getpid()) {
        n = systemd_fds; /* LISTEN_PID: meant for this process, not a parent */
    }
    if (n == 0)
        return KEEL_OK;
#ifdef _WIN32
    kl_log(KEEL_LOG_WARN, "%ld inherited sockets ignored: not supported on Windows", n);
    return KEEL_OK;
#else
    if (inh->ready_fd >= 0)
        kl_socket_set_inheritable(inh->ready_fd, 0);
    if (n > KL_MAX_INHERITED) {
        kl_log(KEEL_LOG_WARN, "%ld inherited sockets: only the first %d are used", n,
               KL_MAX_INHERITED);
        n = KL_MAX_INHERITED;
    }
    inh->sockets = calloc((size_t)n, sizeof *inh->sockets);
    if (inh->sockets == NULL)
        return KEEL_ERR_NOMEM;
    for (long i = 0; i < n; i++) {
        kl_socket sock = (kl_socket)(KL_FIRST_INHERITED + i);
        kl_inherited *in = &inh->sockets[inh->count];
        int rc = kl_socket_listening_addr(sock, &in->addr, &in->dgram);
        if (rc != 0) {
            /* Not ours to close: whoever passed it meant something else. */
            kl_log(KEEL_LOG_WARN,
                   "inherited descriptor %ld is neither a listening stream socket nor a bound "
                   "datagram socket (%s)",
                   (long)sock, uv_strerror(rc));
            continue;
        }
        in->sock = sock;
        in->owned = inh->from_keel && (size_t)i < strlen(owned) && owned[i] == '1';
        inh->count++;
    }
    kl_log(KEEL_LOG_DEBUG, "%zu listening sockets inherited from %s", inh->count,
           inh->from_keel ? "the process this one replaces" : "the service manager");
    return KEEL_OK;
#endif
}

static int same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_UNIX)
        return kl_unix_same(a, b);
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)a;
        const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)b;
        return memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0 &&
               x->sin6_scope_id == y->sin6_scope_id;
    }
    const struct sockaddr_in *x = (const struct sockaddr_in *)a;
    const struct sockaddr_in *y = (const struct sockaddr_in *)b;
    return x->sin_addr.s_addr == y->sin_addr.s_addr;
}

unsigned kl_sockaddr_port(const struct sockaddr_storage *addr)
{
    if (addr->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
    if (addr->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)addr)->sin_port);
    return 0;
}

size_t kl_inherit_take(kl_inheritance *inh, const struct sockaddr_storage *addr, int dgram,
                       kl_socket *out, size_t max, int *owned)
{
    unsigned port = kl_sockaddr_port(addr);
    size_t n = 0;
    for (size_t i = 0; i < inh->count && n < max; i++) {
        kl_inherited *in = &inh->sockets[i];
        if (in->taken || in->dgram != dgram || !same_host(&in->addr, addr))
            continue;
        if (port == 0)
            port = kl_sockaddr_port(&in->addr); /* the ephemeral port chosen first time round */
        if (kl_sockaddr_port(&in->addr) != port)
            continue;
        in->taken = 1;
        *owned |= in->owned;
        out[n++] = in->sock;
    }
    return n;
}

void kl_inherit_release(kl_inheritance *inh)
{
    for (size_t i = 0; i < inh->count; i++) {
        kl_inherited *in = &inh->sockets[i];
        if (in->taken)
            continue;
        char where[80];
        describe(&in->addr, where, sizeof where);
        kl_log(KEEL_LOG_WARN, "inherited %s socket %s matches no listen line: closed",
               in->dgram ? "udp" : "stream", where);
        kl_socket_close(in->sock);
    }
    free(inh->sockets);
    inh->sockets = NULL;
    inh->count = 0;
}
