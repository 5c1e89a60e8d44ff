/* core/net/preamble.h — the PROXY protocol preamble (HAProxy's
 * proxy-protocol.txt, versions 1 and 2): a balancer in front of keel sends
 * one header with the real client's address before the connection's own
 * bytes. A listener with `proxy_protocol=on` reads it before the transport
 * and the protocol see anything (net/conn.c); this file parses it and
 * checks where it may come from. The parser and the matcher are pure
 * functions (no loop, no connection), so unit tests drive them directly. */
#ifndef KEEL_CORE_PREAMBLE_H
#define KEEL_CORE_PREAMBLE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "runtime/settings.h" /* kl_preamble_net */

/* The longest header accepted, version 2's TLVs included. The spec (2.2)
 * lets version 2 reach 16 + 65535 bytes; what balancers send is the
 * addresses (at most 16 + 216) and a few TLVs (ALPN, authority, a TLS
 * summary, a cloud's endpoint id). A longer one is refused rather than
 * buffered: the preamble is read before anything authenticates the peer. */
#define KL_PREAMBLE_MAX 4096

/* Version 1 fits in 107 bytes, CRLF included (spec 2.1). */
#define KL_PREAMBLE_V1_MAX 107

/* An address a header carries: family AF_UNSPEC means "use the socket's
 * own" (v1 UNKNOWN, v2 LOCAL, v2 AF_UNSPEC or AF_UNIX). */
typedef union kl_preamble_addr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
} kl_preamble_addr;

/* Parses a header at the start of data[0..len). Returns its length (> 0)
 * once complete, with the source address in *src; 0 if more bytes are
 * needed (everything so far is a valid prefix); KEEL_ERR_PROTOCOL if it is
 * malformed; KEEL_ERR_LIMIT if it announces more than KL_PREAMBLE_MAX bytes.
 * Bytes after the header are not looked at. */
int kl_preamble_parse(const char *data, size_t len, kl_preamble_addr *src);

/* 1 if addr (an IPv4-mapped IPv6 address counts as IPv4) lies in one of
 * the nets. */
int kl_preamble_allowed(const struct sockaddr *addr, const kl_preamble_net *nets, size_t n);

#endif
