/* tests/udpfault — an LD_PRELOAD'd interposer for integration.udp's send
 * queue test (Linux, glibc): sendmsg(2) on a datagram socket fails with
 * EAGAIN, as a full socket buffer makes it, for the first
 * KEEL_UDPFAULT_EAGAIN datagrams whose first byte is 'x'. Loopback never
 * fills a UDP socket's send buffer (the receiver's drops are silent), so
 * without it the send queue (keel_dgram_send past uv_udp_try_send) and its
 * bound could not be reached in a test. sendmmsg(2), which libuv uses for
 * queued datagrams, is left alone: they leave at once. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

static long failures_left = -1;

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    static ssize_t (*next)(int, const struct msghdr *, int);
    if (next == NULL)
        next = (ssize_t(*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
    if (failures_left < 0) {
        const char *n = getenv("KEEL_UDPFAULT_EAGAIN");
        failures_left = n ? atol(n) : 0;
    }
    int type = 0;
    socklen_t len = sizeof type;
    if (failures_left > 0 && msg->msg_iovlen > 0 && msg->msg_iov[0].iov_len > 0 &&
        ((const char *)msg->msg_iov[0].iov_base)[0] == 'x' &&
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_DGRAM) {
        __atomic_sub_fetch(&failures_left, 1, __ATOMIC_RELAXED);
        errno = EAGAIN;
        return -1;
    }
    return next(fd, msg, flags);
}
