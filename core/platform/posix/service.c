/* What a service manager hands keel and what keel tells it: listening
 * sockets passed down (systemd's socket activation, or the keel a reload
 * replaces) and sd_notify's state messages, without libsystemd: both are
 * small, documented protocols (sd_listen_fds(3), sd_notify(3)). */
#include "platform/platform.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int kl_socket_listening_addr(kl_socket sock, struct sockaddr_storage *addr, int *dgram)
{
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        (type != SOCK_STREAM && type != SOCK_DGRAM))
        return UV_EINVAL;
    *dgram = type == SOCK_DGRAM;
#ifdef SO_ACCEPTCONN
    int listening = 0;
    len = sizeof listening;
    if (type == SOCK_STREAM &&
        (getsockopt(sock, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening))
        return UV_EINVAL;
#endif
    memset(addr, 0, sizeof *addr);
    len = sizeof *addr;
    if (getsockname(sock, (struct sockaddr *)addr, &len) != 0)
        return -errno;
    if (addr->ss_family != AF_INET && addr->ss_family != AF_INET6 && addr->ss_family != AF_UNIX)
        return UV_EINVAL;
    /* A datagram socket is a udp listener's only when bound to a port (a
     * connected or unbound one is something else's). */
    if (*dgram &&
        (addr->ss_family == AF_UNIX ||
         (addr->ss_family == AF_INET ? ((const struct sockaddr_in *)addr)->sin_port == 0
                                     : ((const struct sockaddr_in6 *)addr)->sin6_port == 0)))
        return UV_EINVAL;
    int flags = fcntl(sock, F_GETFL);
    if (flags < 0 || fcntl(sock, F_SETFL, flags | O_NONBLOCK) < 0)
        return -errno;
    return kl_socket_set_inheritable(sock, 0);
}

int kl_socket_set_inheritable(kl_socket sock, int inheritable)
{
    int flags = fcntl(sock, F_GETFD);
    if (flags < 0)
        return -errno;
    flags = inheritable ? flags & ~FD_CLOEXEC : flags | FD_CLOEXEC;
    return fcntl(sock, F_SETFD, flags) < 0 ? -errno : 0;
}

void kl_service_notify(const char *state)
{
    char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
    size_t len = sizeof path;
    if (uv_os_getenv("NOTIFY_SOCKET", path, &len) != 0 || len < 2)
        return;
    /* An absolute path, or '@' for a name in Linux's abstract namespace. */
    if (path[0] != '/' && path[0] != '@')
        return;
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (len > sizeof addr.sun_path)
        return;
    memcpy(addr.sun_path, path, len);
    if (path[0] == '@')
        addr.sun_path[0] = '\0';
    socklen_t addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (fd < 0)
        return;
    /* A lost notification is what systemd's own sd_notify tolerates too:
     * the unit's timeouts decide what happens then. */
    (void)!sendto(fd, state, strlen(state), 0, (struct sockaddr *)&addr, addrlen);
    close(fd);
}
