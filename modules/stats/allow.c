/* allow.c — which clients may see the stats pages: addresses and CIDR
 * blocks, IPv4 and IPv6, parsed and matched by keel/util.h (IPv4 kept
 * as IPv4-mapped IPv6, so that 127.0.0.1 also matches a dual-stack
 * listener's ::ffff:127.0.0.1). */
#include "stats.h"

#include <keel/util.h>
#include <stdlib.h>
#include <string.h>

int stats_allow_add(stats_allow *a, const char *list, char *bad, size_t badsize)
{
    const char *at = list, *end = list + strlen(list), *w;
    size_t len;
    while (keel_word_next(&at, end, 1, &w, &len)) {
        if (len == 3 && memcmp(w, "any", 3) == 0) {
            a->any = 1;
            continue;
        }
        keel_cidr net;
        keel_cidr *grown = NULL;
        if (!keel_cidr_parse(w, len, &net) ||
            (grown = realloc(a->nets, (a->n + 1) * sizeof *grown)) == NULL) {
            size_t n = len < badsize - 1 ? len : badsize - 1;
            memcpy(bad, w, n);
            bad[n] = '\0';
            return -1;
        }
        a->nets = grown;
        a->nets[a->n++] = net;
    }
    return 0;
}

int stats_allow_peer(const stats_allow *a, const char *ip)
{
    if (a->any)
        return 1;
    /* A scope ("fe80::1%eth0") is not part of the address. */
    const char *pct = strchr(ip, '%');
    keel_ip addr;
    if (!keel_ip_parse(ip, pct != NULL ? (size_t)(pct - ip) : strlen(ip), &addr))
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (keel_cidr_match(&a->nets[i], &addr))
            return 1;
    return 0;
}

void stats_allow_free(stats_allow *a)
{
    free(a->nets);
    a->nets = NULL;
    a->n = 0;
    a->any = 0;
}
