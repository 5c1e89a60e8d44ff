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
 * the listener speaks it (keel_request_peer_ip), so a balancer in front
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

/* 1 if the words hold `all`. */
static int word_is_all(const char *words)
{
    const char *at = words, *end = words + strlen(words), *w;
    size_t len;
    while (keel_word_next(&at, end, 1, &w, &len))
        if (keel_ascii_iequal_z(w, len, "all"))
            return 1;
    return 0;
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

/* 1 if some block of the words holds ip. */
static int holds(const char *words, const keel_ip *ip)
{
    const char *at = words, *end = words + strlen(words), *w;
    size_t len;
    while (keel_word_next(&at, end, 1, &w, &len)) {
        keel_cidr block;
        if (parse_block(w, len, &block) && keel_cidr_match(&block, ip))
            return 1;
    }
    return 0;
}

/* 1 if the client may go on. */
static int admitted(keel_request *req, const access_conf *c)
{
    char text[64];
    keel_ip ip;
    int any_allow = 0;
    /* An address keel cannot read (a Unix socket's peer, a connection gone
     * before it was read) is held by no block: only `all` decides it. */
    int have = keel_request_peer_ip(req, text, sizeof text) == KEEL_OK;
    if (have) {
        const char *pct = strchr(text, '%'); /* a zone ("fe80::1%eth0") is not the address */
        have = keel_ip_parse(text, pct != NULL ? (size_t)(pct - text) : strlen(text), &ip);
    }
    for (size_t i = 0; i < c->rules.count; i++) {
        const char *rest;
        int allow = rule_action(c->rules.items[i], &rest);
        if (have ? holds(rest, &ip) : word_is_all(rest))
            return allow;
        any_allow |= allow;
    }
    return !any_allow;
}

static int access_on_request(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    const access_conf *c = keel_request_config(req, access_module);
    if (c->rules.count == 0 || admitted(req, c))
        return KEEL_HTTP_NEXT;
    int rc = keel_response_send_status(res, 403);
    return rc < 0 && rc != KEEL_ERR_CLOSED ? rc : KEEL_HTTP_DONE;
}

static const keel_http_filter access_filter = {
    .size = sizeof(keel_http_filter),
    .name = "access",
    /* First: a refused client gets nothing else to run (no CORS answer,
     * no authentication exchange, no rate-limit slot). */
    .order = KEEL_ORDER_FIRST,
    .on_request = access_on_request,
};

static int access_load(keel_module *m)
{
    access_module = m;
    return keel_http_filter_add(m, &access_filter);
}

KEEL_MODULE(access, .version = "1.0.0", .load = access_load, .config = &access_schema);
