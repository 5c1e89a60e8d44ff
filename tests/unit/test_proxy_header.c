/* The PROXY protocol header parser and the proxy_from matcher
 * (core/net/preamble.c), against HAProxy's proxy-protocol.txt. */
#include <criterion/criterion.h>

#include <string.h>

#include <keel/types.h>

#include "net/preamble.h"
#include "runtime/settings.h"

static const char sig[12] = "\r\n\r\n\0\r\nQUIT\n";

/* A v2 header: ver_cmd, fam, the body. */
static size_t v2(char *out, uint8_t ver_cmd, uint8_t fam, const void *body, size_t len)
{
    memcpy(out, sig, 12);
    out[12] = (char)ver_cmd;
    out[13] = (char)fam;
    out[14] = (char)(len >> 8);
    out[15] = (char)(len & 0xff);
    if (len)
        memcpy(out + 16, body, len);
    return 16 + len;
}

static int parse(const char *s, size_t n, kl_preamble_addr *a)
{
    return kl_preamble_parse(s, n, a);
}

Test(proxy_header, v1_tcp4_and_every_prefix_wants_more, .timeout = 10)
{
    const char h[] = "PROXY TCP4 192.0.2.7 10.0.0.1 56324 443\r\nGET";
    size_t hlen = strlen(h) - 3;
    kl_preamble_addr a;
    for (size_t i = 0; i < hlen; i++)
        cr_assert_eq(parse(h, i, &a), 0, "prefix of %zu", i);
    cr_assert_eq(parse(h, strlen(h), &a), (int)hlen);
    cr_assert_eq(a.sa.sa_family, AF_INET);
    char ip[64];
    uv_ip4_name(&a.in, ip, sizeof ip);
    cr_assert_str_eq(ip, "192.0.2.7");
    cr_assert_eq(ntohs(a.in.sin_port), 56324);
}

Test(proxy_header, v1_tcp6_and_unknown, .timeout = 10)
{
    kl_preamble_addr a;
    const char h6[] = "PROXY TCP6 2001:db8::1 ::1 1 65535\r\n";
    cr_assert_eq(parse(h6, strlen(h6), &a), (int)strlen(h6));
    cr_assert_eq(a.sa.sa_family, AF_INET6);
    char ip[64];
    uv_ip6_name(&a.in6, ip, sizeof ip);
    cr_assert_str_eq(ip, "2001:db8::1");
    cr_assert_eq(ntohs(a.in6.sin6_port), 1);
    /* 2.1: after UNKNOWN anything up to the CRLF is ignored. */
    const char u[] = "PROXY UNKNOWN ffff::1 whatever\r\n";
    cr_assert_eq(parse(u, strlen(u), &a), (int)strlen(u));
    cr_assert_eq(a.sa.sa_family, AF_UNSPEC);
    cr_assert_eq(parse("PROXY UNKNOWN\r\n", 15, &a), 15);
    cr_assert_eq(a.sa.sa_family, AF_UNSPEC);
}

Test(proxy_header, v1_malformed, .timeout = 10)
{
    static const char *const bad[] = {
        "GET / HTTP/1.1\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",       /* LF without CR */
        "PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",    /* two spaces */
        "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",       /* a field missing */
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",   /* one too many */
        "PROXY TCP4 1.2.3.400 5.6.7.8 1 2\r\n",   /* not an address */
        "PROXY TCP4 ::1 ::1 1 2\r\n",             /* the wrong family */
        "PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n",     /* the wrong family */
        "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", /* port out of range */
        "PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",
        "PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY \r\n",
        "proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\t\r\n",
    };
    kl_preamble_addr a;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(parse(bad[i], strlen(bad[i]), &a), KEEL_ERR_PROTOCOL, "%s", bad[i]);
    /* 2.1: no CRLF within 107 bytes. */
    char longer[200];
    memset(longer, 'x', sizeof longer);
    memcpy(longer, "PROXY UNKNOWN ", 14);
    cr_assert_eq(parse(longer, 106, &a), 0);
    cr_assert_eq(parse(longer, 107, &a), KEEL_ERR_PROTOCOL);
}

Test(proxy_header, v2_inet_with_tlvs_and_split, .timeout = 10)
{
    uint8_t body[12 + 7] = {203, 0, 113, 9, 10, 0, 0, 1, 0x1f, 0x90, 0x01, 0xbb,
                            /* a TLV: PP2_TYPE_AUTHORITY "a.b" , then NOOP */
                            0x02, 0x00, 0x03, 'a', '.', 'b', 0x04};
    char h[64];
    size_t n = v2(h, 0x21, 0x11, body, sizeof body);
    memcpy(h + n, "XYZ", 3);
    kl_preamble_addr a;
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(parse(h, i, &a), 0, "prefix of %zu", i);
    cr_assert_eq(parse(h, n + 3, &a), (int)n);
    cr_assert_eq(a.sa.sa_family, AF_INET);
    char ip[64];
    uv_ip4_name(&a.in, ip, sizeof ip);
    cr_assert_str_eq(ip, "203.0.113.9");
    cr_assert_eq(ntohs(a.in.sin_port), 8080);
}

Test(proxy_header, v2_inet6_local_unspec_unix, .timeout = 10)
{
    uint8_t body[216] = {0};
    body[0] = 0x20;
    body[1] = 0x01;
    body[15] = 0x05;
    body[32] = 0x12;
    body[33] = 0x34;
    char h[300];
    kl_preamble_addr a;
    size_t n = v2(h, 0x21, 0x21, body, 36);
    cr_assert_eq(parse(h, n, &a), (int)n);
    cr_assert_eq(a.sa.sa_family, AF_INET6);
    char ip[64];
    uv_ip6_name(&a.in6, ip, sizeof ip);
    cr_assert_str_eq(ip, "2001::5");
    cr_assert_eq(ntohs(a.in6.sin6_port), 0x1234);
    /* LOCAL: the socket's own address, whatever follows (2.2). */
    n = v2(h, 0x20, 0x11, body, 12);
    cr_assert_eq(parse(h, n, &a), (int)n);
    cr_assert_eq(a.sa.sa_family, AF_UNSPEC);
    n = v2(h, 0x20, 0x00, NULL, 0);
    cr_assert_eq(parse(h, n, &a), 16);
    cr_assert_eq(a.sa.sa_family, AF_UNSPEC);
    /* PROXY with AF_UNSPEC, and AF_UNIX: no IP address to report. */
    n = v2(h, 0x21, 0x00, NULL, 0);
    cr_assert_eq(parse(h, n, &a), 16);
    cr_assert_eq(a.sa.sa_family, AF_UNSPEC);
    n = v2(h, 0x21, 0x31, body, 216);
    cr_assert_eq(parse(h, n, &a), (int)n);
    cr_assert_eq(a.sa.sa_family, AF_UNSPEC);
}

Test(proxy_header, v2_malformed_and_oversized, .timeout = 10)
{
    uint8_t body[64] = {0};
    char h[128];
    kl_preamble_addr a;
    size_t n = v2(h, 0x11, 0x11, body, 12); /* version 1 in a v2 header */
    cr_assert_eq(parse(h, n, &a), KEEL_ERR_PROTOCOL);
    n = v2(h, 0x22, 0x11, body, 12); /* command 2 */
    cr_assert_eq(parse(h, n, &a), KEEL_ERR_PROTOCOL);
    n = v2(h, 0x21, 0x41, body, 12); /* family 4 */
    cr_assert_eq(parse(h, n, &a), KEEL_ERR_PROTOCOL);
    n = v2(h, 0x21, 0x13, body, 12); /* transport 3 */
    cr_assert_eq(parse(h, n, &a), KEEL_ERR_PROTOCOL);
    n = v2(h, 0x21, 0x11, body, 11); /* too short for two IPv4 addresses */
    cr_assert_eq(parse(h, n, &a), KEEL_ERR_PROTOCOL);
    n = v2(h, 0x21, 0x21, body, 35);
    cr_assert_eq(parse(h, n, &a), KEEL_ERR_PROTOCOL);
    /* A length beyond the bound is refused as soon as it is read. */
    v2(h, 0x21, 0x11, body, 0);
    h[14] = (char)0xff;
    h[15] = (char)0xff;
    cr_assert_eq(parse(h, 16, &a), KEEL_ERR_LIMIT);
    h[12] = 0x21;
    h[14] = (char)((KL_PREAMBLE_MAX - 16) >> 8);
    h[15] = (char)((KL_PREAMBLE_MAX - 16) & 0xff);
    cr_assert_eq(parse(h, 16, &a), 0, "exactly the bound is accepted (and needs more)");
    /* A broken signature. */
    memcpy(h, sig, 12);
    h[7] = 'q';
    cr_assert_eq(parse(h, 16, &a), KEEL_ERR_PROTOCOL);
}

Test(proxy_header, proxy_from_nets, .timeout = 10)
{
    kl_preamble_net nets[3];
    char err[200];
    cr_assert_eq(kl_preamble_net_parse("10.0.0.0/8", &nets[0], err, sizeof err), KEEL_OK);
    cr_assert_eq(kl_preamble_net_parse("127.0.0.1", &nets[1], err, sizeof err), KEEL_OK);
    cr_assert_eq(kl_preamble_net_parse("fd00::/9", &nets[2], err, sizeof err), KEEL_OK);
    cr_assert_eq(kl_preamble_net_parse("10.0.0.0/33", &nets[0] + 0, err, sizeof err) == KEEL_OK, 0);
    cr_assert_eq(kl_preamble_net_parse("nowhere", &(kl_preamble_net){0}, err, sizeof err),
                 KEEL_ERR_CONFIG);
    cr_assert_eq(kl_preamble_net_parse("1.2.3.4/", &(kl_preamble_net){0}, err, sizeof err),
                 KEEL_ERR_CONFIG);
    cr_assert_eq(kl_preamble_net_parse("10.0.0.0/8", &nets[0], err, sizeof err), KEEL_OK);

    struct sockaddr_in in;
    struct sockaddr_in6 in6;
    uv_ip4_addr("10.200.3.4", 1, &in);
    cr_assert(kl_preamble_allowed((struct sockaddr *)&in, nets, 3));
    uv_ip4_addr("11.0.0.1", 1, &in);
    cr_assert_not(kl_preamble_allowed((struct sockaddr *)&in, nets, 3));
    uv_ip4_addr("127.0.0.2", 1, &in);
    cr_assert_not(kl_preamble_allowed((struct sockaddr *)&in, nets, 3));
    uv_ip6_addr("::ffff:127.0.0.1", 1, &in6); /* a dual-stack listener's IPv4 peer */
    cr_assert(kl_preamble_allowed((struct sockaddr *)&in6, nets, 3));
    uv_ip6_addr("fd7f::1", 1, &in6);
    cr_assert(kl_preamble_allowed((struct sockaddr *)&in6, nets, 3));
    uv_ip6_addr("fd80::1", 1, &in6);
    cr_assert_not(kl_preamble_allowed((struct sockaddr *)&in6, nets, 3));
    uv_ip6_addr("::1", 1, &in6);
    cr_assert_not(kl_preamble_allowed((struct sockaddr *)&in6, nets, 3));
}
