/* core/net/peer_addr.h — a peer's address as a connection reports it and
 * a request keeps it (net/conn_addr.c formats it). Any thread. */
#ifndef KEEL_CORE_PEER_ADDR_H
#define KEEL_CORE_PEER_ADDR_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* A peer on a Unix socket: no address worth keeping (a client's socket
 * is unnamed), but the credentials the kernel recorded when it connected
 * (platform.h kl_socket_peer_cred): uid KL_PEER_NO_CRED when the system
 * could not tell, pid -1 where it gives none. */
#define KL_PEER_NO_CRED UINT32_MAX
typedef struct kl_unix_peer {
    struct sockaddr sa; /* sa_family AF_UNIX */
    uint32_t uid, gid;
    int32_t pid;
} kl_unix_peer;

/* IPv4, IPv6 or a Unix socket's peer, in the room it needs (28 bytes, not
 * sockaddr_storage's 128). */
typedef union kl_peer_addr {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
    kl_unix_peer un;
} kl_peer_addr;

/* Writes "1.2.3.4:5678" / "[::1]:5678" (with_port), or "1.2.3.4" / "::1",
 * or "unix:" for a Unix socket's peer (nginx's $remote_addr there),
 * NUL-terminated: KEEL_OK, or KEEL_ERR_INVAL ("" written) if it does not
 * fit in size. */
int kl_peer_addr_name(const kl_peer_addr *addr, int with_port, char *buf, size_t size);

#endif
