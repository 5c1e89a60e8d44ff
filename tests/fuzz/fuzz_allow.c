/* fuzz_allow — the stats module's allow-list (modules/stats/allow.c) and
 * the IPv4/IPv6 and CIDR parsers of keel/util.h it is built on. allow.c
 * calls no keel function and is compiled in.
 *
 * The input's first line is an allow list (stats_allow_add, as the `allow`
 * key is read); every further line is a client address as
 * keel_request_peer_ip writes them ("1.2.3.4", "::1"), checked with
 * stats_allow_peer and parsed with keel_ip_parse.
 *
 * Checked besides ASan/UBSan, with the C library's inet_pton as the
 * oracle: an address keel_ip_parse accepts, inet_pton accepts too (as IPv4,
 * or else as IPv6) and to the same 16 bytes (IPv4 mapped to ::ffff:a.b.c.d);
 * an address inet_pton accepts, keel_ip_parse accepts (its refusal of IPv4
 * parts with leading zeros is glibc's too). A refused list leaves the word
 * it refused, NUL-terminated, in the buffer. A peer on an empty list is
 * allowed; a peer whose address is on the list is allowed. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

#include "stats.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_allow: " __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check_ip(const char *s, size_t len)
{
    keel_ip ours;
    int ok = keel_ip_parse(s, len, &ours);
    char z[128];
    if (len >= sizeof z || memchr(s, '\0', len) != NULL)
        return;
    memcpy(z, s, len);
    z[len] = '\0';
    uint8_t theirs[16];
    int ok4 = inet_pton(AF_INET, z, theirs + 12) == 1;
    int ok6 = !ok4 && inet_pton(AF_INET6, z, theirs) == 1;
    if (ok4) {
        memset(theirs, 0, 10);
        theirs[10] = theirs[11] = 0xff;
    }
    CHECK(ok == (ok4 || ok6), "'%s': keel_ip_parse says %d, inet_pton %d/%d", z, ok, ok4, ok6);
    if (ok) {
        CHECK(!ok4 || keel_ip_is_v4(&ours), "'%s': an IPv4 address not held v4-mapped", z);
        CHECK(memcmp(ours.bytes, theirs, 16) == 0, "'%s': parsed to other bytes than inet_pton's",
              z);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    const char *nl = memchr(in, '\n', size);
    size_t llen = nl ? (size_t)(nl - in) : size;
    char *list = malloc(llen + 1);
    CHECK(list != NULL, "malloc");
    memcpy(list, in, llen);
    list[llen] = '\0';

    stats_allow a = {0};
    char bad[16];
    memset(bad, 'x', sizeof bad);
    int rc = stats_allow_add(&a, list, bad, sizeof bad);
    CHECK(rc == 0 || rc == -1, "stats_allow_add returned %d", rc);
    if (rc == -1)
        CHECK(memchr(bad, '\0', sizeof bad) != NULL, "the refused word is not terminated");
    for (size_t i = 0; i < a.n; i++)
        CHECK(a.nets[i].bits <= 128, "a prefix of %u bits", a.nets[i].bits);

    size_t at = nl ? llen + 1 : size;
    while (at < size) {
        const char *e = memchr(in + at, '\n', size - at);
        size_t len = e ? (size_t)(e - (in + at)) : size - at;
        char *peer = malloc(len + 1);
        CHECK(peer != NULL, "malloc");
        memcpy(peer, in + at, len);
        peer[len] = '\0';
        check_ip(peer, len);
        int allowed = stats_allow_peer(&a, peer);
        CHECK(allowed == 0 || allowed == 1, "stats_allow_peer returned %d", allowed);
        if (a.any)
            CHECK(allowed == 1, "'%s' refused by a list with `any`", peer);
        else if (a.n == 0)
            CHECK(allowed == 0, "'%s' let in by an empty list", peer);
        /* The peer's own address, added as a host, must let it in. */
        keel_ip addr;
        if (rc == 0 && strchr(peer, '%') == NULL && strchr(peer, ',') == NULL &&
            strchr(peer, ' ') == NULL && keel_ip_parse(peer, len, &addr)) {
            stats_allow one = {0};
            CHECK(stats_allow_add(&one, peer, bad, sizeof bad) == 0, "'%s' refused as a list",
                  peer);
            CHECK(stats_allow_peer(&one, peer) == 1, "'%s' not allowed by itself", peer);
            stats_allow_free(&one);
        }
        free(peer);
        at += len + 1;
    }
    stats_allow_free(&a);
    free(list);
    return 0;
}
