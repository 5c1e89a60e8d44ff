/* access — who may send requests, by client address, per scope: nginx's
 * allow/deny (ngx_http_access_module) and stats' `allow`, generalized:
 *
 *     [site admin.example.com]
 *     access.rule = deny 10.9.0.0/16
 *     access.rule = allow 10.0.0.0/8 2001:db8::/32 127.0.0.1
 *     access.rule = deny all
 *
 * A request whose client is refused gets 403 before any other request
 * filter or handler runs. The client is the PROXY protocol's source when
 * the listener speaks it (keel_request_peer_ip_bytes), so a balancer in front
 * does not make every client look alike.
 *
 * The rules are one list, so that they keep nginx's two properties: the
 * first rule that holds the address decides (file order), and a scope
 * that writes rules replaces the outer ones as a whole (a `[/admin/]`
 * with `deny all` refuses everyone, whatever the site admits). Two keys,
 * allow and deny, would be merged key by key and lose both. When no rule
 * holds the address, the client is refused if any rule allows (stats'
 * `allow`: "only these"), admitted otherwise; nginx admits it, which
 * makes a lone `allow` line do nothing. */
#include <keel/keel.h>
#include <keel/util.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct access_conf {
    keel_config_list rules;
} access_conf;

/* One word of a list: "all", an address or ADDRESS/BITS. */
static int parse_block(const char *w, size_t len, keel_cidr *out)
{
    if (keel_ascii_iequal_z(w, len, "all")) {
        memset(out, 0, sizeof *out); /* ::/0: every IPv4 and IPv6 address */
        return 1;
    }
    return keel_cidr_parse(w, len, out);
}

/* "allow" or "deny" at the start of a rule: 1 or 0, the rest in *rest;
 * -1 for neither. */
static int rule_action(const char *text, const char **rest)
{
    if (strncmp(text, "allow", 5) == 0 && (text[5] == ' ' || text[5] == '\t')) {
        *rest = text + 6;
        return 1;
    }
    if (strncmp(text, "deny", 4) == 0 && (text[4] == ' ' || text[4] == '\t')) {
        *rest = text + 5;
        return 0;
    }
    return -1;
}

static int check_rule(const char *text, char *why, size_t whylen)
{
    const char *at, *end = text + strlen(text), *w;
    size_t len;
    int n = 0;
    if (rule_action(text, &at) < 0) {
        snprintf(why, whylen, "expected allow or deny, then addresses, CIDR blocks or all");
        return -1;
    }
    while (keel_word_next(&at, end, 1, &w, &len)) {
        keel_cidr block;
        if (!parse_block(w, len, &block)) {
            snprintf(why, whylen, "'%.*s' is not an IP address, CIDR block or all", (int)len, w);
            return -1;
        }
        n++;
    }
    if (n == 0) {
        snprintf(why, whylen, "lists no address");
        return -1;
    }
    return 0;
}

static const keel_config_key access_keys[] = {
    KEEL_KEY(access_conf, rules, "rule", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY,
             .doc = "allow|deny ADDRESS|CIDR|all...: the first rule holding the client decides; "
                    "none: refused if any rule allows",
             .check = check_rule),
};
KEEL_CONFIG_SCHEMA(access_schema, access_conf, access_keys);

static keel_module *access_module;

/* A scope's rules as blocks, each with its action: the text is parsed
 * once per worker and scope, not on every request. The core merges the
 * scopes after the modules load, so load cannot see them; a worker
 * compiles a scope's list the first time a request of it comes. A scope
 * that does not write rules shares its parent's list (the same items
 * array), and so its compiled form. */
typedef struct access_block {
    keel_cidr net;
    int allow;
} access_block;

typedef struct access_compiled {
    const char *const *items; /* the key's list, by identity */
    access_block *blocks;
    size_t nblocks;
    int any_allow;
} access_compiled;

typedef struct access_worker {
    access_compiled *lists;
    size_t nlists;
} access_worker;

static const access_compiled *compile(access_worker *w, const keel_config_list *rules)
{
    for (size_t i = 0; i < w->nlists; i++)
        if (w->lists[i].items == rules->items)
            return &w->lists[i];
    size_t n = 0;
    for (size_t i = 0; i < rules->count; i++) {
        const char *at = rules->items[i], *end = at + strlen(at), *word;
        size_t len;
        while (keel_word_next(&at, end, 1, &word, &len))
            n++; /* the action word too: a little room to spare */
    }
    access_compiled c = {rules->items, calloc(n ? n : 1, sizeof(access_block)), 0, 0};
    access_compiled *grown = realloc(w->lists, (w->nlists + 1) * sizeof *grown);
    if (c.blocks == NULL || grown == NULL) {
        free(c.blocks);
        if (grown != NULL)
            w->lists = grown;
        return NULL;
    }
    w->lists = grown;
    for (size_t i = 0; i < rules->count; i++) {
        const char *rest = "";
        int allow = rule_action(rules->items[i], &rest);
        if (allow < 0)
            continue; /* (the check refused it at load) */
        const char *at = rest, *end = rest + strlen(rest), *word;
        size_t len;
        while (keel_word_next(&at, end, 1, &word, &len))
            if (parse_block(word, len, &c.blocks[c.nblocks].net))
                c.blocks[c.nblocks++].allow = allow;
        c.any_allow |= allow;
    }
    w->lists[w->nlists] = c;
    return &w->lists[w->nlists++];
}

/* keel_cidr_match by whole bytes first: a /32 (128 bits held) is one
 * memcmp rather than sixteen masked compares, on every request. */
static int block_holds(const keel_cidr *block, const keel_ip *ip)
{
    unsigned full = block->bits / 8, rest = block->bits % 8;
    if (memcmp(block->addr.bytes, ip->bytes, full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    unsigned mask = (0xffu << (8 - rest)) & 0xffu;
    return (block->addr.bytes[full] & mask) == (ip->bytes[full] & mask);
}

/* 1 if the client may go on, 0 if not, -1 without the memory to tell. */
static int admitted(keel_request *req, const access_conf *c)
{
    access_worker *w = keel_worker_state(keel_request_worker(req), access_module);
    const access_compiled *list = compile(w, &c->rules);
    if (list == NULL)
        return -1;
    keel_ip ip;
    /* An address keel cannot read (a Unix socket's peer, a connection gone
     * before it was read) is held by no block but `all` (::/0). */
    int have = keel_request_peer_ip_bytes(req, ip.bytes) == KEEL_OK;
    for (size_t i = 0; i < list->nblocks; i++)
        if (have ? block_holds(&list->blocks[i].net, &ip) : list->blocks[i].net.bits == 0)
            return list->blocks[i].allow;
    return !list->any_allow;
}

/* The filter's part in a scope (keel_http_filter.scope): none without
 * rules; else the scope's struct, so that a request does not ask for it. */
static int access_scope(const void *conf, void *ud, void **scope_ud)
{
    (void)ud;
    const access_conf *c = conf;
    if (c->rules.count == 0)
        return 0;
    *scope_ud = (void *)c;
    return 1;
}

static int access_on_request(keel_request *req, keel_response *res, void *ud)
{
    int ok = admitted(req, ud);
    if (ok < 0)
        return KEEL_ERR_NOMEM; /* the core answers 500 */
    if (ok)
        return KEEL_HTTP_NEXT;
    int rc = keel_response_send_status(res, 403);
    return rc < 0 && rc != KEEL_ERR_CLOSED ? rc : KEEL_HTTP_DONE;
}

static const keel_http_filter access_filter = {
    .size = sizeof(keel_http_filter),
    .name = "access",
    /* First: a refused client gets nothing else to run (no CORS answer,
     * no authentication exchange, no rate-limit slot). But after rewrite,
     * whatever the module list's order: a rewrite may choose another
     * scope (`last`), whose rules are the ones that hold (nginx's rewrite
     * phases come before its access phase). */
    .order = KEEL_ORDER_FIRST,
    .after = "rewrite",
    .on_request = access_on_request,
    .scope = access_scope,
};

static int access_load(keel_module *m)
{
    access_module = m;
    return keel_http_filter_add(m, &access_filter);
}

static void access_stop(keel_module *m, keel_worker *worker, void *state)
{
    (void)m, (void)worker;
    access_worker *w = state;
    for (size_t i = 0; i < w->nlists; i++)
        free(w->lists[i].blocks);
    free(w->lists);
}

KEEL_MODULE(access, .version = "1.0.0", .worker_state_size = sizeof(access_worker),
            .load = access_load, .stop = access_stop, .config = &access_schema);
