/* The PROXY protocol header (HAProxy's proxy-protocol.txt): parsing both
 * versions and matching the sources allowed to send it. Section numbers
 * below are the spec's. */
#include "net/preamble.h"

#include <stdio.h>
#include <string.h>

#include <keel/types.h>

/* 2.2: the twelve bytes every version 2 header starts with. */
static const char v2_sig[12] = {'\r', '\n', '\r', '\n', '\0', '\r', '\n', 'Q', 'U', 'I', 'T', '\n'};

/* 2.1: "PROXY" and a single space. */
static const char v1_sig[6] = {'P', 'R', 'O', 'X', 'Y', ' '};

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* One decimal port, 0..65535 (2.1: "expressed as a decimal integer"). */
static int parse_port(const char *s, size_t n, uint16_t *out)
{
    if (n == 0 || n > 5)
        return -1;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

/* The line "PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222" without its CRLF. */
static int parse_v1_line(const char *line, size_t n, kl_preamble_addr *src)
{
    const char *p = line + sizeof v1_sig, *end = line + n;
    /* 2.1: with UNKNOWN "the receiver must ignore anything presented
     * before the CRLF is found" and use the connection's own endpoints. */
    if ((size_t)(end - p) >= 7 && memcmp(p, "UNKNOWN", 7) == 0 && (p + 7 == end || p[7] == ' ')) {
        src->sa.sa_family = AF_UNSPEC;
        return KEEL_OK;
    }
    int family;
    if ((size_t)(end - p) > 5 && memcmp(p, "TCP4 ", 5) == 0)
        family = AF_INET;
    else if ((size_t)(end - p) > 5 && memcmp(p, "TCP6 ", 5) == 0)
        family = AF_INET6;
    else
        return KEEL_ERR_PROTOCOL;
    p += 5;
    /* Four fields separated by exactly one space (2.1). */
    const char *field[4];
    size_t len[4];
    for (int i = 0; i < 4; i++) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        const char *stop = sp != NULL && i < 3 ? sp : end;
        if (i == 3 && sp != NULL)
            return KEEL_ERR_PROTOCOL;
        if (i < 3 && sp == NULL)
            return KEEL_ERR_PROTOCOL;
        field[i] = p;
        len[i] = (size_t)(stop - p);
        if (len[i] == 0)
            return KEEL_ERR_PROTOCOL;
        p = stop + (stop < end ? 1 : 0);
    }
    char text[64];
    uint8_t bytes[16];
    for (int i = 0; i < 2; i++) {
        /* Both addresses must parse, though only the source is kept. */
        if (len[i] >= sizeof text)
            return KEEL_ERR_PROTOCOL;
        memcpy(text, field[i], len[i]);
        text[len[i]] = '\0';
        if (uv_inet_pton(family, text, bytes) != 0)
            return KEEL_ERR_PROTOCOL;
        if (i == 0) {
            memset(src, 0, sizeof *src);
            if (family == AF_INET) {
                src->in.sin_family = AF_INET;
                memcpy(&src->in.sin_addr, bytes, 4);
            } else {
                src->in6.sin6_family = AF_INET6;
                memcpy(&src->in6.sin6_addr, bytes, 16);
            }
        }
    }
    uint16_t sport, dport;
    if (parse_port(field[2], len[2], &sport) != 0 || parse_port(field[3], len[3], &dport) != 0)
        return KEEL_ERR_PROTOCOL;
    if (family == AF_INET)
        src->in.sin_port = htons(sport);
    else
        src->in6.sin6_port = htons(sport);
    return KEEL_OK;
}

static int parse_v1(const char *data, size_t len, kl_preamble_addr *src)
{
    /* 2.1: the whole line, CRLF included, is at most 107 bytes; a
     * receiver that has not found the CRLF by then must give up. */
    size_t scan = min_size(len, KL_PREAMBLE_V1_MAX);
    const char *lf = memchr(data, '\n', scan);
    if (lf == NULL)
        return len >= KL_PREAMBLE_V1_MAX ? KEEL_ERR_PROTOCOL : 0;
    size_t line = (size_t)(lf - data);
    if (line < sizeof v1_sig + 1 || data[line - 1] != '\r')
        return KEEL_ERR_PROTOCOL;
    /* No other control byte in the line: it is text (2.1). */
    for (size_t i = 0; i + 1 < line; i++)
        if ((unsigned char)data[i] < 0x20 || (unsigned char)data[i] == 0x7f)
            return KEEL_ERR_PROTOCOL;
    int rc = parse_v1_line(data, line - 1, src);
    return rc < 0 ? rc : (int)line + 1;
}

static int parse_v2(const char *data, size_t len, kl_preamble_addr *src)
{
    if (len < 16)
        return 0;
    const uint8_t *p = (const uint8_t *)data;
    /* 2.2: the high nibble of the 13th byte is the version (2), the low
     * one the command: 0 LOCAL, 1 PROXY; "other values are unassigned and
     * must not be emitted by senders. Receivers must drop connections
     * presenting unexpected values here." */
    if ((p[12] >> 4) != 2 || (p[12] & 0x0f) > 1)
        return KEEL_ERR_PROTOCOL;
    int local = (p[12] & 0x0f) == 0;
    /* The 14th byte: address family (high nibble) and transport (low).
     * 2.2 lists the only combinations; the rest must be refused. */
    unsigned fam = p[13] >> 4, proto = p[13] & 0x0f;
    if (fam > 3 || proto > 2 || (fam == 0) != (proto == 0))
        return KEEL_ERR_PROTOCOL;
    size_t body = ((size_t)p[14] << 8) | p[15];
    if (16 + body > KL_PREAMBLE_MAX)
        return KEEL_ERR_LIMIT;
    if (len < 16 + body)
        return 0;
    memset(src, 0, sizeof *src);
    src->sa.sa_family = AF_UNSPEC;
    /* 2.2, LOCAL: "the receiver must accept this connection as valid and
     * must use the real connection endpoints and discard the protocol
     * block including the family" (a balancer's own health check). */
    if (local)
        return (int)(16 + body);
    /* The addresses come first; what the length covers beyond them is
     * TLVs (2.2.x), skipped: nothing here needs them. */
    const uint8_t *a = p + 16;
    if (fam == 1) { /* AF_INET: src, dst, sport, dport */
        if (body < 12)
            return KEEL_ERR_PROTOCOL;
        src->in.sin_family = AF_INET;
        memcpy(&src->in.sin_addr, a, 4);
        memcpy(&src->in.sin_port, a + 8, 2);
    } else if (fam == 2) { /* AF_INET6 */
        if (body < 36)
            return KEEL_ERR_PROTOCOL;
        src->in6.sin6_family = AF_INET6;
        memcpy(&src->in6.sin6_addr, a, 16);
        memcpy(&src->in6.sin6_port, a + 32, 2);
    } else if (fam == 3 && body < 216) { /* AF_UNIX: two 108-byte paths */
        return KEEL_ERR_PROTOCOL;
    }
    /* AF_UNSPEC (2.2: "the receiver is free to accept the connection
     * anyway and use the real endpoint addresses") and AF_UNIX (no IP
     * address to report) keep the socket's own. */
    return (int)(16 + body);
}

int kl_preamble_parse(const char *data, size_t len, kl_preamble_addr *src)
{
    if (len == 0)
        return 0;
    /* 2: the receiver tells the versions apart by their signatures; it
     * must not guess that no header comes, so anything else is refused. */
    if (memcmp(data, v2_sig, min_size(len, sizeof v2_sig)) == 0)
        return len < sizeof v2_sig ? 0 : parse_v2(data, len, src);
    if (memcmp(data, v1_sig, min_size(len, sizeof v1_sig)) == 0)
        return len < sizeof v1_sig ? 0 : parse_v1(data, len, src);
    return KEEL_ERR_PROTOCOL;
}

int kl_preamble_allowed(const struct sockaddr *addr, const kl_preamble_net *nets, size_t n)
{
    /* IPv4 as v4-mapped (keel/util.h), so a dual-stack listener's
     * ::ffff:a.b.c.d peers match IPv4 networks too. */
    keel_ip ip = {{0}};
    if (addr->sa_family == AF_INET) {
        ip.bytes[10] = ip.bytes[11] = 0xff;
        memcpy(ip.bytes + 12, &((const struct sockaddr_in *)addr)->sin_addr, 4);
    } else if (addr->sa_family == AF_INET6) {
        memcpy(ip.bytes, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
    } else {
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (keel_cidr_match(&nets[i], &ip))
            return 1;
    return 0;
}
