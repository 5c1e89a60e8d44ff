/* core/net/peer_addr.h — a peer's address as a connection reports it and
 * a request keeps it (net/conn.c formats it). Any thread. */
#ifndef KEEL_CORE_PEER_ADDR_H
#define KEEL_CORE_PEER_ADDR_H

#include <stddef.h>
#include <uv.h>

/* IPv4 or IPv6, in the room it needs (28 bytes, not sockaddr_storage's
 * 128). */
typedef union kl_peer_addr {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
} kl_peer_addr;

/* Writes "1.2.3.4:5678" / "[::1]:5678" (with_port), or "1.2.3.4" / "::1",
 * NUL-terminated: KEEL_OK, or KEEL_ERR_INVAL ("" written) if it does not
 * fit in size. */
int kl_peer_addr_name(const kl_peer_addr *addr, int with_port, char *buf, size_t size);

#endif
