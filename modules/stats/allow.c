/* allow.c — which clients may see the stats pages: addresses and CIDR
 * blocks, IPv4 and IPv6. The parser is our own rather than inet_pton so
 * that the module needs no socket library (ws2_32 on Windows) and the
 * unit test runs it anywhere. IPv4 is kept as IPv4-mapped IPv6, so that
 * 127.0.0.1 also matches a dual-stack listener's ::ffff:127.0.0.1. */
#include "stats.h"

#include <stdlib.h>
#include <string.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Dotted quad, exactly four decimal parts of 0..255, no leading zeros
 * (which some parsers read as octal: refusing them avoids the ambiguity). */
static int parse_v4(const char *s, size_t len, uint8_t out[4])
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= len || s[i] != '.')
                return 0;
            i++;
        }
        size_t start = i;
        unsigned v = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 3)
            v = v * 10 + (unsigned)(s[i++] - '0');
        if (i == start || v > 255 || (s[start] == '0' && i - start > 1))
            return 0;
        out[part] = (uint8_t)v;
    }
    return i == len;
}

/* RFC 4291 2.2: eight groups of up to four hex digits, one "::" for a run
 * of zero groups, optionally a dotted quad in the last 32 bits. */
static int parse_v6(const char *s, size_t len, uint8_t out[16])
{
    uint8_t a[16] = {0};
    int n = 0, gap = -1; /* bytes written; where "::" stands */
    size_t i = 0;
    if (len >= 2 && s[0] == ':' && s[1] == ':') {
        gap = 0;
        i = 2;
    } else if (len >= 1 && s[0] == ':') {
        return 0;
    }
    while (i < len) {
        if (n == 16)
            return 0;
        /* A dotted quad may end an address with room for it. */
        const char *dot = memchr(s + i, '.', len - i);
        if (dot != NULL && memchr(s + i, ':', len - i) == NULL) {
            if (n > 12 || !parse_v4(s + i, len - i, a + n))
                return 0;
            n += 4;
            i = len;
            break;
        }
        unsigned v = 0;
        size_t start = i;
        int h;
        while (i < len && (h = hexval(s[i])) >= 0 && i - start < 4) {
            v = v * 16 + (unsigned)h;
            i++;
        }
        if (i == start)
            return 0;
        a[n++] = (uint8_t)(v >> 8);
        a[n++] = (uint8_t)v;
        if (i == len)
            break;
        if (s[i] != ':')
            return 0;
        i++;
        if (i < len && s[i] == ':') {
            if (gap >= 0)
                return 0;
            gap = n;
            i++;
        } else if (i == len) {
            return 0; /* a trailing single ':' */
        }
    }
    if (gap < 0) {
        if (n != 16)
            return 0;
    } else {
        if (n > 14)
            return 0;
        memmove(a + 16 - (n - gap), a + gap, (size_t)(n - gap));
        memset(a + gap, 0, (size_t)(16 - n));
    }
    memcpy(out, a, 16);
    return 1;
}

int st_parse_ip(const char *s, size_t len, uint8_t out[16], int *is_v4)
{
    uint8_t v4[4];
    if (parse_v4(s, len, v4)) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, v4, 4);
        if (is_v4)
            *is_v4 = 1;
        return 1;
    }
    if (is_v4)
        *is_v4 = 0;
    return parse_v6(s, len, out);
}

static int add_word(st_allow *a, const char *w, size_t len)
{
    const char *slash = memchr(w, '/', len);
    size_t alen = slash ? (size_t)(slash - w) : len;
    st_net net;
    int v4;
    if (!st_parse_ip(w, alen, net.addr, &v4))
        return 0;
    unsigned max = v4 ? 32 : 128, bits = max;
    if (slash != NULL) {
        const char *p = slash + 1, *end = w + len;
        if (p == end || end - p > 3)
            return 0;
        bits = 0;
        for (; p < end; p++) {
            if (*p < '0' || *p > '9')
                return 0;
            bits = bits * 10 + (unsigned)(*p - '0');
        }
        if (bits > max)
            return 0;
    }
    net.bits = v4 ? bits + 96 : bits;
    st_net *grown = realloc(a->nets, (a->n + 1) * sizeof *grown);
    if (grown == NULL)
        return 0;
    a->nets = grown;
    a->nets[a->n++] = net;
    return 1;
}

int st_allow_add(st_allow *a, const char *list, char *bad, size_t badsize)
{
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *w = p;
        while (*p && *p != ' ' && *p != '\t' && *p != ',')
            p++;
        if (p == w)
            continue;
        if (!add_word(a, w, (size_t)(p - w))) {
            size_t n = (size_t)(p - w) < badsize - 1 ? (size_t)(p - w) : badsize - 1;
            memcpy(bad, w, n);
            bad[n] = '\0';
            return -1;
        }
    }
    return 0;
}

static int in_net(const st_net *net, const uint8_t addr[16])
{
    unsigned full = net->bits / 8, rest = net->bits % 8;
    if (memcmp(net->addr, addr, full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (net->addr[full] & mask) == (addr[full] & mask);
}

int st_allow_peer(const st_allow *a, const char *peer)
{
    if (a->n == 0)
        return 1;
    /* "1.2.3.4:5678" or "[::1]:5678": the address without the port. */
    const char *start = peer, *end;
    if (peer[0] == '[') {
        start = peer + 1;
        end = strchr(start, ']');
    } else {
        end = strrchr(peer, ':');
    }
    if (end == NULL)
        end = peer + strlen(peer);
    /* A scope ("fe80::1%eth0") is not part of the address. */
    const char *pct = memchr(start, '%', (size_t)(end - start));
    if (pct != NULL)
        end = pct;
    uint8_t addr[16];
    if (!st_parse_ip(start, (size_t)(end - start), addr, NULL))
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (in_net(&a->nets[i], addr))
            return 1;
    return 0;
}

void st_allow_free(st_allow *a)
{
    free(a->nets);
    a->nets = NULL;
    a->n = 0;
}
