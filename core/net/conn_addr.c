/* A connection's addresses, the peer's and its own (behind the PROXY
 * protocol and in a tunnel, the client's), and their text for modules
 * and the access log (net/peer_addr.h). Worker thread of the connection,
 * but kl_peer_addr_name, which any thread may call. */
#include "net/conn.h"
#include "net/peer_addr.h"
#include "platform/platform.h"

#include <string.h>

/* A Unix socket's peer: its credentials, read once per connection (the
 * request layer keeps them with the address, http/request.c). */
static int unix_peer(keel_conn *c, kl_peer_addr *out)
{
    memset(out, 0, sizeof *out);
    out->sa.sa_family = AF_UNIX;
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0 ||
        kl_socket_peer_cred((kl_socket)fd, &out->un.uid, &out->un.gid, &out->un.pid) != 0) {
        out->un.uid = out->un.gid = KL_PEER_NO_CRED;
        out->un.pid = -1;
    }
    return KEEL_OK;
}

int kl_conn_peer_addr(keel_conn *c, kl_peer_addr *out)
{
    if (kl_conn_is_tunnel(c))
        return kl_conn_handle_closed(c) ? KEEL_ERR_CLOSED : kl_tunnel_peer_addr(c, out);
    /* Behind a balancer speaking the PROXY protocol: the client's. */
    const struct sockaddr *sa = kl_conn_proxied_peer(c);
    if (sa != NULL) {
        memcpy(out, sa,
               sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                         : sizeof(struct sockaddr_in));
        return KEEL_OK;
    }
    struct sockaddr_storage addr;
    int len = sizeof addr;
    if (kl_conn_handle_closed(c) ||
        uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&addr, &len) != 0)
        return KEEL_ERR_CLOSED;
    if (addr.ss_family == AF_UNIX)
        return unix_peer(c, out);
    if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6)
        return KEEL_ERR_CLOSED;
    memcpy(out, &addr,
           addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
    return KEEL_OK;
}

int kl_conn_local_addr(keel_conn *c, kl_peer_addr *out)
{
    struct sockaddr_storage addr;
    int len = sizeof addr;
    if (kl_conn_handle_closed(c) ||
        uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&addr, &len) != 0)
        return KEEL_ERR_CLOSED;
    if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6)
        return KEEL_ERR_UNSUPPORTED;
    memcpy(out, &addr,
           addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
    return KEEL_OK;
}

/* Decimal digits of v (< 100000) at out; their count. */
static size_t put_decimal(char *out, unsigned v)
{
    char tmp[5];
    size_t n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

/* An IPv4 address as a.b.c.d, written here rather than by inet_ntop,
 * whose sprintf was most of what a handler paid to ask for its client's
 * address (the proxy asks on every request). */
static size_t put_ip4(char *out, const struct in_addr *addr)
{
    const unsigned char *b = (const unsigned char *)&addr->s_addr;
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        if (i > 0)
            out[n++] = '.';
        n += put_decimal(out + n, b[i]);
    }
    return n;
}

int kl_peer_addr_name(const kl_peer_addr *a, int with_port, char *buf, size_t size)
{
    char text[80];
    size_t n;
    if (size == 0)
        return KEEL_ERR_INVAL;
    if (a->sa.sa_family == AF_UNIX) {
        memcpy(text, "unix:", n = 5);
    } else if (a->sa.sa_family == AF_INET6) {
        n = 0;
        if (with_port)
            text[n++] = '[';
        text[n] = '\0';
        uv_ip6_name(&a->in6, text + n, sizeof text - n - 8);
        n += strlen(text + n);
        if (with_port) {
            memcpy(text + n, "]:", 2);
            n += 2 + put_decimal(text + n + 2, ntohs(a->in6.sin6_port));
        }
    } else {
        n = put_ip4(text, &a->in4.sin_addr);
        if (with_port) {
            text[n++] = ':';
            n += put_decimal(text + n, ntohs(a->in4.sin_port));
        }
    }
    if (n < size) {
        memcpy(buf, text, n);
        buf[n] = '\0';
        return KEEL_OK;
    }
    buf[0] = '\0';
    return KEEL_ERR_INVAL;
}

int keel_conn_peer_name(keel_conn *c, char *buf, size_t size)
{
    kl_peer_addr addr;
    if (size == 0)
        return KEEL_ERR_INVAL;
    buf[0] = '\0';
    int rc = kl_conn_peer_addr(c, &addr);
    return rc == KEEL_OK ? kl_peer_addr_name(&addr, 1, buf, size) : rc;
}
