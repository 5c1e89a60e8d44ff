/* upstream.c — choosing a server of a group: smooth weighted round robin,
 * least connections, a hash of the client address; backups; passive
 * health (a server that fails max_fails times is left out for
 * fail_timeout) and the result of active checks.
 *
 * The state is per worker, as every counter in keel: each worker balances
 * its own share of the requests and learns of a failing server from its
 * own attempts (nginx shares these through a shared-memory zone; without
 * one, its workers behave exactly like this).
 */
#include "px.h"

#include <stdlib.h>
#include <string.h>

int px_peers_init(px_worker *pw)
{
    px_config *c = pw->cfg;
    if (c->ngroups == 0)
        return KEEL_OK;
    pw->peers = calloc(c->ngroups, sizeof *pw->peers);
    if (pw->peers == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < c->ngroups; i++) {
        px_group *g = &c->groups[i];
        pw->peers[i] = calloc(g->nservers, sizeof **pw->peers);
        if (pw->peers[i] == NULL)
            return KEEL_ERR_NOMEM;
        for (size_t j = 0; j < g->nservers; j++) {
            pw->peers[i][j].srv = &g->servers[j];
            pw->peers[i][j].group = g;
        }
    }
    return KEEL_OK;
}

void px_peers_free(px_worker *pw)
{
    if (pw->peers == NULL)
        return;
    for (size_t i = 0; i < pw->cfg->ngroups; i++)
        free(pw->peers[i]);
    free(pw->peers);
    pw->peers = NULL;
}

/* Usable now? nginx's rule: a group of one server never takes it out
 * ("If there is only a single server in a group, max_fails, fail_timeout
 * and slow_start parameters are ignored"), since refusing at once helps
 * nobody when there is nowhere else to go. */
static int peer_up(const px_group *g, const px_peer *p, uint64_t now)
{
    if (g->nservers == 1)
        return 1;
    if (px_flag_load(&p->srv->check_down))
        return 0;
    return p->down_until_ms == 0 || now >= p->down_until_ms;
}

/* FNV-1a over the client's address: the same client lands on the same
 * server while the group does not change (nginx's ip_hash hashes the
 * first three octets; the whole address spreads a /24 of clients too). */
static uint32_t hash_ip(const char *ip)
{
    uint32_t h = 2166136261u;
    for (; *ip != '\0'; ip++) {
        h ^= (unsigned char)*ip;
        h *= 16777619u;
    }
    return h;
}

/* Smooth weighted round robin (nginx's ngx_http_upstream_get_peer):
 * every candidate gains its weight, the largest wins and pays the total
 * back, which interleaves 5:1:1 as a a b a c a a, not a a a a a b c.
 * With tie non-NULL, only the servers as loaded per unit of weight as it
 * is are candidates (least_conn's ties). */
static px_peer *pick_round_robin(px_group *g, px_peer *peers, uint64_t tried, int backup,
                                 uint64_t now, const px_peer *tie)
{
    px_peer *best = NULL;
    int64_t total = 0;
    for (size_t i = 0; i < g->nservers; i++) {
        px_peer *p = &peers[i];
        if (p->srv->backup != backup || (tried & (1ull << i)) || !peer_up(g, p, now))
            continue;
        if (tie != NULL &&
            (uint64_t)p->active * tie->srv->weight != (uint64_t)tie->active * p->srv->weight)
            continue;
        p->current_weight += p->srv->weight;
        total += p->srv->weight;
        if (best == NULL || p->current_weight > best->current_weight)
            best = p;
    }
    if (best != NULL)
        best->current_weight -= total;
    return best;
}

static px_peer *pick_in(px_worker *pw, px_group *g, uint64_t tried, const char *client_ip,
                        int backup, uint64_t now)
{
    px_peer *peers = pw->peers[g->index];
    px_peer *best = NULL;
    if (g->balance == PX_BALANCE_HASH && client_ip != NULL) {
        /* Weighted points on a ring of total weight: the hash picks one,
         * and a server that is down or tried passes to the next. */
        unsigned total = 0;
        for (size_t i = 0; i < g->nservers; i++)
            if (peers[i].srv->backup == backup)
                total += peers[i].srv->weight;
        if (total == 0)
            return NULL;
        unsigned point = hash_ip(client_ip) % total;
        size_t start = 0;
        for (size_t i = 0; i < g->nservers; i++) {
            if (peers[i].srv->backup != backup)
                continue;
            if (point < peers[i].srv->weight) {
                start = i;
                break;
            }
            point -= peers[i].srv->weight;
        }
        for (size_t k = 0; k < g->nservers; k++) {
            size_t i = (start + k) % g->nservers;
            if (peers[i].srv->backup == backup && !(tried & (1ull << i)) &&
                peer_up(g, &peers[i], now))
                return &peers[i];
        }
        return NULL;
    }
    if (g->balance == PX_BALANCE_LEAST) {
        /* Fewest active exchanges per unit of weight (nginx compares
         * conns/weight by cross-multiplying); ties by round robin below. */
        for (size_t i = 0; i < g->nservers; i++) {
            px_peer *p = &peers[i];
            if (p->srv->backup != backup || (tried & (1ull << i)) || !peer_up(g, p, now))
                continue;
            if (best == NULL ||
                (uint64_t)p->active * best->srv->weight < (uint64_t)best->active * p->srv->weight)
                best = p;
        }
        if (best == NULL)
            return NULL;
        unsigned least = best->active;
        unsigned w = best->srv->weight;
        int ties = 0;
        for (size_t i = 0; i < g->nservers; i++) {
            px_peer *p = &peers[i];
            if (p->srv->backup == backup && !(tried & (1ull << i)) && peer_up(g, p, now) &&
                (uint64_t)p->active * w == (uint64_t)least * p->srv->weight)
                ties++;
        }
        if (ties == 1)
            return best;
        return pick_round_robin(g, peers, tried, backup, now, best);
    }
    return pick_round_robin(g, peers, tried, backup, now, NULL);
}

px_peer *px_pick(px_worker *pw, px_group *g, uint64_t tried, const char *client_ip)
{
    uint64_t now = keel_worker_now_ms(pw->worker);
    px_peer *p = pick_in(pw, g, tried, client_ip, 0, now);
    if (p == NULL)
        p = pick_in(pw, g, tried, client_ip, 1, now);
    return p;
}

/* nginx's max_fails / fail_timeout: failures are counted, and the count
 * is reset by a success; at max_fails the server is out for
 * fail_timeout, then tried again (one failure more puts it out again).
 * A group's only server is never out (peer_up, as nginx): taking it out
 * would only turn its failures into 502s without trying, so the log says
 * what happens instead. */
void px_peer_failed(px_worker *pw, px_peer *p)
{
    if (p->srv->max_fails == 0)
        return;
    uint64_t now = keel_worker_now_ms(pw->worker);
    if (++p->fails >= p->srv->max_fails) {
        p->fails = 0;
        if (p->group->nservers == 1) {
            keel_log(pw->cfg->module, KEEL_LOG_WARN,
                     "upstream %s (%s) failed %u times in a row; it is the group's only server, "
                     "so it stays in use",
                     p->srv->authority, p->group->name, p->srv->max_fails);
            return;
        }
        p->down_until_ms = now + p->srv->fail_timeout_ms;
        keel_log(pw->cfg->module, KEEL_LOG_WARN, "upstream %s (%s) is out for %llu ms",
                 p->srv->authority, p->group->name, (unsigned long long)p->srv->fail_timeout_ms);
    }
}

void px_peer_ok(px_peer *p)
{
    p->fails = 0;
    p->down_until_ms = 0;
}
