/* proxy.c — the proxy module's glue: the [proxy] section (upstream groups,
 * routes, timeouts, the keep-alive pool, header policy, CONNECT), the
 * routes and protocols it registers, metrics, and the module's life cycle.
 *
 *     [proxy]
 *     upstream = app 127.0.0.1:9000 weight=3 127.0.0.1:9001 10.0.0.9:9000 backup
 *     upstream = api balance=least_conn 127.0.0.1:9100 127.0.0.1:9101
 *     pass = /api api
 *     pass = / app host=upstream
 *
 * The syntax of `upstream` follows nginx's upstream block on one line:
 * a server's options (weight, backup, max_fails, fail_timeout) follow its
 * address; the group's (balance, transport, check, check_interval) may
 * stand anywhere. docs/proxy.md has every key.
 */
#include "px.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small parsers ------------------------------------------------------------ */

/* "250ms", "10s", "5m", "1h", or a bare number of seconds (keel's own
 * durations). */
static int parse_duration(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return -1;
    uint64_t mult = 1000;
    if (strcmp(end, "ms") == 0)
        mult = 1;
    else if (strcmp(end, "s") == 0 || *end == '\0')
        mult = 1000;
    else if (strcmp(end, "m") == 0)
        mult = 60000;
    else if (strcmp(end, "h") == 0)
        mult = 3600000;
    else
        return -1;
    *out = (uint64_t)v * mult;
    return 0;
}

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* Splits a value into words in place; returns how many (at most max). */
static size_t split_words(char *s, char **words, size_t max)
{
    size_t n = 0;
    while (*s != '\0') {
        while (*s == ' ' || *s == '\t' || *s == ',')
            *s++ = '\0';
        if (*s == '\0')
            break;
        if (n == max)
            return max + 1;
        words[n++] = s;
        while (*s != '\0' && *s != ' ' && *s != '\t' && *s != ',')
            s++;
    }
    return n;
}

/* "host:port", "[v6]:port": fills host (no brackets) and port;
 * "unix:PATH", "unix:@NAME": a Unix socket (keel_conn_connect, ABI 1.9). */
static int parse_address(const char *w, px_server *srv)
{
    if (strncmp(w, "unix:", 5) == 0) {
        if (w[5] == '\0' || (w[5] == '@' && w[6] == '\0'))
            return -1;
        srv->port = 0;
        srv->host = keel_strndup(w, strlen(w));
        srv->authority = keel_strndup(w, strlen(w));
        srv->host_field = "localhost";
        return srv->host && srv->authority ? 0 : -1;
    }
    const char *colon;
    const char *host = w;
    size_t host_len;
    if (w[0] == '[') {
        const char *close = strchr(w, ']');
        if (close == NULL || close[1] != ':')
            return -1;
        host = w + 1;
        host_len = (size_t)(close - host);
        colon = close + 1;
    } else {
        colon = strrchr(w, ':');
        if (colon == NULL || memchr(w, ':', (size_t)(colon - w)) != NULL)
            return -1;
        host_len = (size_t)(colon - w);
    }
    if (host_len == 0 || parse_uint(colon + 1, 1, 65535, &srv->port) != 0)
        return -1;
    srv->host = keel_strndup(host, host_len);
    srv->authority = keel_strndup(w, strlen(w));
    srv->host_field = srv->authority;
    return srv->host && srv->authority ? 0 : -1;
}

/* ---- upgrade = PROTOCOL ... ---------------------------------------------------------- */

static void names_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int names_has(char **v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], name) == 0)
            return 1;
    return 0;
}

static void names_remove(char **v, size_t *n, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(v[i], name) == 0) {
            free(v[i]);
            v[i] = v[--*n];
            return;
        }
}

/* Adds a protocol to an upgrade list, lower case: "name" or "name/version",
 * both tokens (RFC 9110 7.8). h2 and h2c are left out with a warning, not
 * refused: no list passes them (headers.c says why). */
static int names_add(keel_module *m, const char *key, char ***v, size_t *n, const char *name)
{
    size_t len = strlen(name);
    int slash = 0, ok = len > 0 && len < 64 && name[0] != '/' && name[len - 1] != '/';
    for (size_t i = 0; ok && i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        slash += c == '/';
        ok = slash <= 1 && (c == '/' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                            (c >= 'A' && c <= 'Z') || strchr("!#$%&'*+-.^_`|~", c) != NULL);
    }
    if (!ok)
        return keel_config_error(m, key, "'%s' is not a protocol (name or name/version)", name);
    char *lower = keel_strndup_lower(name, len);
    if (lower == NULL)
        return KEEL_ERR_NOMEM;
    if (!px_upgrade_name_ok(lower)) {
        keel_log(m, KEEL_LOG_WARN, "%s: '%s' is never passed (RFC 9113 3.1): ignored", key, name);
        free(lower);
        return KEEL_OK;
    }
    if (names_has(*v, *n, lower)) {
        free(lower);
        return KEEL_OK;
    }
    char **grown = realloc(*v, (*n + 1) * sizeof *grown);
    if (grown == NULL) {
        free(lower);
        return KEEL_ERR_NOMEM;
    }
    *v = grown;
    (*v)[(*n)++] = lower;
    return KEEL_OK;
}

static int names_copy(char **from, size_t n, char ***v, size_t *out)
{
    *v = NULL;
    *out = 0;
    for (size_t i = 0; i < n; i++) {
        char **grown = realloc(*v, (*out + 1) * sizeof *grown);
        char *d = grown ? keel_strndup(from[i], strlen(from[i])) : NULL;
        if (grown != NULL)
            *v = grown;
        if (d == NULL)
            return KEEL_ERR_NOMEM;
        (*v)[(*out)++] = d;
    }
    return KEEL_OK;
}

/* [proxy] upgrade: the protocols routes pass by default; "off" for none. */
static int parse_upgrades(px_config *c, keel_module *m, const char *value)
{
    int rc = KEEL_OK;
    char *copy = keel_strndup(value, strlen(value));
    char *w[32];
    if (copy == NULL)
        return KEEL_ERR_NOMEM;
    size_t n = split_words(copy, w, 32);
    if (n > 32)
        rc = keel_config_error(m, "upgrade", "more than 32 protocols");
    for (size_t i = 0; rc == KEEL_OK && i < n; i++)
        if (strcmp(w[i], "off") != 0 || n != 1)
            rc = names_add(m, "upgrade", &c->upgrades, &c->nupgrades, w[i]);
    free(copy);
    return rc;
}

/* ---- upstream = NAME ... ---------------------------------------------------------- */

static int parse_upstream(px_config *cfg, keel_module *m, const char *value, px_group *g)
{
    char *copy = keel_strndup(value, strlen(value));
    char *w[PX_MAX_SERVERS * 6 + 8];
    size_t n = copy ? split_words(copy, w, sizeof w / sizeof w[0]) : 0;
    int rc = KEEL_OK;
    if (copy == NULL)
        return KEEL_ERR_NOMEM;
    if (n < 2 || n > sizeof w / sizeof w[0]) {
        rc = keel_config_error(m, "upstream", "expected NAME ADDRESS:PORT [options] ...");
        goto out;
    }
    g->name = keel_strndup(w[0], strlen(w[0]));
    g->servers = calloc(PX_MAX_SERVERS, sizeof *g->servers);
    g->check_interval_ms = 5000;
    if (g->name == NULL || g->servers == NULL) {
        rc = KEEL_ERR_NOMEM;
        goto out;
    }
    px_server *last = NULL;
    for (size_t i = 1; i < n; i++) {
        char *eq = strchr(w[i], '=');
        const char *v = eq ? eq + 1 : NULL;
        size_t klen = eq ? (size_t)(eq - w[i]) : strlen(w[i]);
#define KEY(lit) (klen == sizeof(lit) - 1 && memcmp(w[i], lit, klen) == 0)
        if (KEY("fastcgi") && v == NULL) {
            g->fastcgi = 1;
        } else if (KEY("protocol") && v != NULL) {
            if (strcmp(v, "fastcgi") != 0 && strcmp(v, "http") != 0)
                goto bad;
            g->fastcgi = strcmp(v, "fastcgi") == 0;
        } else if (eq == NULL && strchr(w[i], ':') != NULL) {
            if (g->nservers == PX_MAX_SERVERS) {
                rc = keel_config_error(m, "upstream", "group %s: more than %d servers", g->name,
                                       PX_MAX_SERVERS);
                goto out;
            }
            last = &g->servers[g->nservers];
            last->weight = 1;
            last->max_fails = 1;
            last->fail_timeout_ms = 10000;
            if (parse_address(w[i], last) != 0) {
                rc = keel_config_error(m, "upstream", "group %s: bad address '%s'", g->name, w[i]);
                goto out;
            }
            g->nservers++;
        } else if (KEY("backup") && v == NULL && last != NULL) {
            last->backup = 1;
        } else if (KEY("weight") && v != NULL && last != NULL) {
            if (parse_uint(v, 1, 1000, &last->weight) != 0)
                goto bad;
        } else if (KEY("max_fails") && v != NULL && last != NULL) {
            if (parse_uint(v, 0, 1000, &last->max_fails) != 0)
                goto bad;
        } else if (KEY("fail_timeout") && v != NULL && last != NULL) {
            if (parse_duration(v, &last->fail_timeout_ms) != 0)
                goto bad;
        } else if (KEY("balance") && v != NULL) {
            if (strcmp(v, "round_robin") == 0)
                g->balance = PX_BALANCE_RR;
            else if (strcmp(v, "least_conn") == 0)
                g->balance = PX_BALANCE_LEAST;
            else if (strcmp(v, "hash") == 0 || strcmp(v, "ip_hash") == 0)
                g->balance = PX_BALANCE_HASH;
            else
                goto bad;
        } else if ((KEY("transport") && v != NULL) || (KEY("tls") && v == NULL)) {
            const char *t = v ? v : "tls";
            if (strcmp(t, "tcp") != 0)
                g->transport = strcmp(t, "tls") == 0 ? "tls" : NULL;
            if (strcmp(t, "tcp") != 0 && g->transport == NULL)
                goto bad;
        } else if (KEY("check") && v != NULL && v[0] == '/') {
            g->check_path = keel_strndup(v, strlen(v));
        } else if (KEY("check_interval") && v != NULL) {
            if (parse_duration(v, &g->check_interval_ms) != 0 || g->check_interval_ms < 100)
                goto bad;
        } else {
            goto bad;
        }
        continue;
    bad:
        rc = keel_config_error(m, "upstream", "group %s: bad option '%s'", g->name, w[i]);
        goto out;
#undef KEY
    }
    if (g->nservers == 0)
        rc = keel_config_error(m, "upstream", "group %s has no server", g->name);
    else if (g->fastcgi && g->transport != NULL)
        rc = keel_config_error(m, "upstream", "group %s: tls is for HTTP upstreams, not fastcgi",
                               g->name);
    (void)cfg;
out:
    free(copy);
    return rc;
}

/* ---- pass = PREFIX GROUP [options] --------------------------------------------------- */

static int parse_pass(px_config *cfg, keel_module *m, const char *value, px_route *r)
{
    char *copy = keel_strndup(value, strlen(value));
    char *w[16];
    int rc = KEEL_OK;
    if (copy == NULL)
        return KEEL_ERR_NOMEM;
    size_t n = split_words(copy, w, 16);
    if (n < 2 || n > 16 || w[0][0] != '/') {
        rc = keel_config_error(m, "pass", "expected /PREFIX GROUP [options]");
        goto out;
    }
    r->cfg = cfg;
    r->prefix = keel_strndup(w[0], strlen(w[0]));
    for (size_t i = 0; i < cfg->ngroups; i++)
        if (strcmp(cfg->groups[i].name, w[1]) == 0)
            r->group = &cfg->groups[i];
    if (r->group == NULL) {
        rc = keel_config_error(m, "pass", "no upstream group called '%s'", w[1]);
        goto out;
    }
    r->connect_timeout_ms = cfg->connect_timeout_ms;
    r->read_timeout_ms = cfg->read_timeout_ms;
    r->send_timeout_ms = cfg->send_timeout_ms;
    r->tries = cfg->tries;
    r->rewrite_location = 1;
    if (r->group->fastcgi) {
        /* nginx's usual PHP location: fastcgi_split_path_info
         * ^(.+\.php)(/.*)$ and fastcgi_index index.php */
        r->fcgi_split = keel_strndup(".php", 4);
        r->fcgi_index = keel_strndup("index.php", 9);
        if (r->fcgi_split == NULL || r->fcgi_index == NULL) {
            rc = KEEL_ERR_NOMEM;
            goto out;
        }
    }
    if (names_copy(cfg->upgrades, cfg->nupgrades, &r->upgrades, &r->nupgrades) != KEEL_OK) {
        rc = KEEL_ERR_NOMEM;
        goto out;
    }
    int own_upgrades = 0; /* the first upgrade= replaces [proxy]'s list */
    for (size_t i = 2; i < n; i++) {
        char *eq = strchr(w[i], '=');
        if (eq == NULL)
            goto bad;
        *eq = '\0';
        const char *k = w[i], *v = eq + 1;
        if (strcmp(k, "host") == 0) {
            if (strcmp(v, "client") == 0) {
                r->host_mode = PX_HOST_CLIENT;
            } else if (strcmp(v, "upstream") == 0) {
                r->host_mode = PX_HOST_UPSTREAM;
            } else {
                r->host_mode = PX_HOST_FIXED;
                r->host_value = keel_strndup(v, strlen(v));
            }
        } else if (strcmp(k, "connect_timeout") == 0) {
            if (parse_duration(v, &r->connect_timeout_ms) != 0)
                goto bad;
        } else if (strcmp(k, "read_timeout") == 0) {
            if (parse_duration(v, &r->read_timeout_ms) != 0)
                goto bad;
        } else if (strcmp(k, "send_timeout") == 0) {
            if (parse_duration(v, &r->send_timeout_ms) != 0)
                goto bad;
        } else if (strcmp(k, "tries") == 0) {
            if (parse_uint(v, 1, PX_MAX_SERVERS, &r->tries) != 0)
                goto bad;
        } else if (strcmp(k, "upgrade") == 0) {
            if (!own_upgrades) {
                names_free(r->upgrades, r->nupgrades);
                r->upgrades = NULL;
                r->nupgrades = 0;
                own_upgrades = 1;
            }
            if (strcmp(v, "off") != 0 &&
                (rc = names_add(m, "pass", &r->upgrades, &r->nupgrades, v)) != KEEL_OK)
                goto out;
        } else if (strcmp(k, "websocket") == 0) {
            /* before upgrade= existed: on adds websocket, off removes it */
            int on;
            if (keel_onoff_parse_z(v, &on) != 0)
                goto bad;
            if (!on)
                names_remove(r->upgrades, &r->nupgrades, "websocket");
            else if ((rc = names_add(m, "pass", &r->upgrades, &r->nupgrades, "websocket")) !=
                     KEEL_OK)
                goto out;
        } else if (r->group->fastcgi && (strcmp(k, "root") == 0 || strcmp(k, "script") == 0 ||
                                         strcmp(k, "index") == 0 || strcmp(k, "split") == 0)) {
            char **slot = k[0] == 'r'   ? &r->fcgi_root
                          : k[1] == 'c' ? &r->fcgi_script
                          : k[0] == 'i' ? &r->fcgi_index
                                        : &r->fcgi_split;
            /* root is a directory (no trailing '/': the script name brings
             * its own); script a path under it */
            if ((k[0] == 'r' && v[0] != '/') || (k[1] == 'c' && v[0] != '/') || v[0] == '\0')
                goto bad;
            free(*slot);
            *slot = strcmp(v, "off") == 0 && k[0] != 'r' ? NULL : keel_strndup(v, strlen(v));
            if (k[0] == 'r')
                while (strlen(*slot) > 1 && (*slot)[strlen(*slot) - 1] == '/')
                    (*slot)[strlen(*slot) - 1] = '\0';
        } else if (strcmp(k, "location") == 0) {
            if (strcmp(v, "rewrite") == 0)
                r->rewrite_location = 1;
            else if (strcmp(v, "off") == 0)
                r->rewrite_location = 0;
            else
                goto bad;
        } else {
            goto bad;
        }
        continue;
    bad:
        rc = keel_config_error(m, "pass", "bad option '%s'", w[i]);
        goto out;
    }
    if (r->group->fastcgi && r->fcgi_root == NULL)
        rc = keel_config_error(m, "pass", "%s: a fastcgi group needs root=DIR", r->prefix);
out:
    free(copy);
    return rc;
}

/* ---- fastcgi_param = NAME VALUE ---------------------------------------------------- */

static int parse_fcgi_params(px_config *c, keel_module *m, const keel_config_list *list)
{
    if (list->count == 0)
        return KEEL_OK;
    c->fcgi_params = calloc(list->count, sizeof *c->fcgi_params);
    if (c->fcgi_params == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < list->count; i++) {
        const char *v = list->items[i];
        size_t n = strcspn(v, " \t");
        const char *value = v + n;
        while (*value == ' ' || *value == '\t')
            value++;
        int ok = n > 0;
        for (size_t j = 0; j < n && ok; j++)
            ok = (v[j] >= 'A' && v[j] <= 'Z') || (v[j] >= 'a' && v[j] <= 'z') ||
                 (v[j] >= '0' && v[j] <= '9') || v[j] == '_';
        if (!ok)
            return keel_config_error(m, "fastcgi_param", "expected NAME VALUE, got '%s'", v);
        /* name and value in one allocation: "NAME\0VALUE\0" */
        size_t vlen = strlen(value);
        char *both = malloc(n + 1 + vlen + 1);
        if (both == NULL)
            return KEEL_ERR_NOMEM;
        memcpy(both, v, n);
        both[n] = '\0';
        memcpy(both + n + 1, value, vlen + 1);
        c->fcgi_params[c->nfcgi_params++] = (px_fcgi_param){both, both + n + 1};
    }
    return KEEL_OK;
}

/* ---- routes ------------------------------------------------------------------------- */

static int add_routes(keel_module *m, px_route *r)
{
    /* "/api" and everything below it: "/api" itself and "/api/ *" (the
     * router's wildcard takes the rest of the path). A prefix ending in
     * '/' ("/" included) needs the wildcard form only, plus itself. */
    char pattern[512];
    size_t len = strlen(r->prefix);
    if (len + 3 > sizeof pattern)
        return keel_config_error(m, "pass", "prefix too long");
    int rc = keel_route_add(m, "*", r->prefix, px_handler, r);
    if (rc != KEEL_OK && rc != KEEL_ERR_EXISTS)
        return rc;
    snprintf(pattern, sizeof pattern, "%s%s*", r->prefix, r->prefix[len - 1] == '/' ? "" : "/");
    rc = keel_route_add(m, "*", pattern, px_handler, r);
    return rc == KEEL_ERR_EXISTS ? KEEL_OK : rc;
}

/* ---- metrics ------------------------------------------------------------------------- */

static int register_metrics(px_config *c, keel_module *m)
{
    const struct {
        const char *name, *help;
        int type;
        keel_metric **out;
    } metrics[] = {
        {"proxy_requests_total", "Requests passed to an upstream", KEEL_METRIC_COUNTER,
         &c->m_requests},
        {"proxy_upstream_failures_total",
         "Upstream attempts that failed (connect, timeout, reset, invalid)", KEEL_METRIC_COUNTER,
         &c->m_failures},
        {"proxy_retries_total", "Requests retried on another server", KEEL_METRIC_COUNTER,
         &c->m_retries},
        {"proxy_upstream_connects_total", "Upstream connections opened", KEEL_METRIC_COUNTER,
         &c->m_connects},
        {"proxy_upstream_reused_total", "Requests sent on a kept-alive upstream connection",
         KEEL_METRIC_COUNTER, &c->m_reused},
        {"proxy_tunnels_total", "Tunnels opened (upgrades and CONNECT)", KEEL_METRIC_COUNTER,
         &c->m_tunnels},
        {"proxy_buffered_bytes",
         "Body bytes held by the proxy in flight to a client or an upstream", KEEL_METRIC_GAUGE,
         &c->m_buffered},
    };
    for (size_t i = 0; i < sizeof metrics / sizeof *metrics; i++) {
        int rc = keel_metric_new(m, metrics[i].name, metrics[i].help, metrics[i].type, NULL,
                                 metrics[i].out);
        if (rc < 0)
            return rc;
    }
    return KEEL_OK;
}

/* ---- load / unload -------------------------------------------------------------------- */

static void config_free(px_config *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->ngroups; i++) {
        px_group *g = &c->groups[i];
        for (size_t j = 0; j < g->nservers; j++) {
            free(g->servers[j].host);
            free(g->servers[j].authority);
        }
        free(g->servers);
        free(g->name);
        free(g->check_path);
    }
    for (size_t i = 0; i < c->nroutes; i++) {
        free(c->routes[i].prefix);
        free(c->routes[i].host_value);
        free(c->routes[i].fcgi_root);
        free(c->routes[i].fcgi_script);
        free(c->routes[i].fcgi_index);
        free(c->routes[i].fcgi_split);
        names_free(c->routes[i].upgrades, c->routes[i].nupgrades);
    }
    names_free(c->upgrades, c->nupgrades);
    for (size_t i = 0; i < c->nfcgi_params; i++)
        free(c->fcgi_params[i].name); /* the value shares its allocation */
    free(c->fcgi_params);
    free(c->fcgi_temp_dir);
    for (size_t i = 0; i < c->nconnect_hosts; i++)
        free(c->connect_hosts[i]);
    free(c->connect_hosts);
    free(c->connect_ports);
    free(c->connect_clients);
    free(c->groups);
    free(c->routes);
    free(c);
}

/* The [proxy] section (keel/config.h). upstream, pass, upgrade and the
 * connect_* lists are read word by word below and in connect.c; the table
 * declares them so that the core checks where they may be written and
 * documents them. Upstream reads larger than the server's 16 KiB: a 1 MiB
 * body then costs a quarter of the reads and wake-ups (docs/proxy.md). */
typedef struct px_settings {
    keel_config_list upstream, pass, fastcgi_param;
    const char *upgrade;
    int64_t keepalive, tries;
    uint64_t keepalive_timeout_ms, connect_timeout_ms, read_timeout_ms, send_timeout_ms;
    uint64_t buffer, client_buffer, max_header, read_buffer;
    int via, forwarded, x_forwarded, server, date;
    uint64_t tunnel_idle_ms;
    const char *log;
    uint64_t fcgi_body_buffer;
    const char *fcgi_temp_dir;
    px_connect_settings connect;
} px_settings;

static const char *const keep_replace[] = {"replace", "keep", NULL};

static const keel_config_key px_keys[] = {
    KEEL_KEY(px_settings, upstream, "upstream", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .doc = "a group: NAME ADDRESS:PORT|unix:PATH [weight=N max_fails=N fail_timeout=T "
                    "backup] ... [balance=round_robin|least_conn|hash] [tls] [check=/path "
                    "check_interval=T] [fastcgi] (docs/proxy.md)"),
    KEEL_KEY(px_settings, pass, "pass", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .doc = "a route: /PREFIX GROUP [host=client|upstream] [connect_timeout=T] "
                    "[read_timeout=T] [send_timeout=T] [tries=N] [upgrade=NAME] [websocket=on|off] "
                    "[location=rewrite|off] [root=DIR script=/PATH index=FILE split=EXT|off for "
                    "fastcgi] (docs/proxy.md)"),
    KEEL_KEY(px_settings, fastcgi_param, "fastcgi_param", KEEL_CONFIG_STRING,
             .flags = KEEL_CONFIG_LIST,
             .doc = "NAME VALUE: a parameter every FastCGI request carries, after (and over) "
                    "keel's own (docs/proxy.md)"),
    KEEL_KEY(px_settings, fcgi_body_buffer, "fastcgi_body_buffer", KEEL_CONFIG_SIZE, .def = "64k",
             .min = 4096, .max = 1 << 30,
             .doc = "a FastCGI request body of unknown length (chunked, HTTP/2 without "
                    "content-length) is held in memory up to this, then in a temporary file"),
    KEEL_KEY(px_settings, fcgi_temp_dir, "fastcgi_temp_path", KEEL_CONFIG_PATH,
             .doc = "directory for those files (created and unlinked at once); default: "
                    "$TMPDIR or /tmp (Windows: GetTempPath)"),
    KEEL_KEY(px_settings, upgrade, "upgrade", KEEL_CONFIG_STRING, .def = "websocket",
             .doc = "protocols an Upgrade may ask for (never h2c); off: none"),
    KEEL_KEY(px_settings, keepalive, "keepalive", KEEL_CONFIG_INT, .def = "32", .min = 0,
             .max = 100000, .doc = "idle upstream connections kept per worker and group"),
    KEEL_KEY(px_settings, tries, "tries", KEEL_CONFIG_INT, .def = "0", .min = 0,
             .max = PX_MAX_SERVERS,
             .doc = "attempts in all for an idempotent request; 0: each "
                    "server of the group once"),
    KEEL_KEY(px_settings, keepalive_timeout_ms, "keepalive_timeout", KEEL_CONFIG_DURATION,
             .def = "60s", .doc = "how long an idle upstream connection is kept"),
    KEEL_KEY(px_settings, connect_timeout_ms, "connect_timeout", KEEL_CONFIG_DURATION, .def = "10s",
             .doc = "connecting to an upstream; 504 (or the next server) after"),
    KEEL_KEY(px_settings, read_timeout_ms, "read_timeout", KEEL_CONFIG_DURATION, .def = "60s",
             .doc = "longest silence of an upstream while its answer is due; 504"),
    KEEL_KEY(px_settings, send_timeout_ms, "send_timeout", KEEL_CONFIG_DURATION, .def = "60s",
             .doc = "longest wait to write to an upstream"),
    KEEL_KEY(px_settings, buffer, "buffer", KEEL_CONFIG_SIZE, .def = "64k", .min = 4096,
             .max = 1 << 30, .doc = "bytes buffered each way before the other side is paused"),
    KEEL_KEY(px_settings, client_buffer, "client_buffer", KEEL_CONFIG_SIZE, .def = "64k",
             .min = 16 * 1024, .max = 1 << 30,
             .doc = "response bytes the streams of one HTTP/2 client connection hold together"),
    KEEL_KEY(px_settings, max_header, "max_header", KEEL_CONFIG_SIZE, .def = "32k", .min = 1024,
             .max = 1 << 24, .doc = "largest upstream response head; 502 above it"),
    KEEL_KEY(px_settings, read_buffer, "read_buffer", KEEL_CONFIG_SIZE, .def = "64k", .min = 4096,
             .max = 1 << 20, .doc = "bytes one read from an upstream may take"),
    KEEL_KEY(px_settings, via, "via", KEEL_CONFIG_BOOL, .def = "on",
             .doc = "add Via (RFC 9110 7.6.3) both ways"),
    KEEL_KEY(px_settings, forwarded, "forwarded", KEEL_CONFIG_BOOL, .def = "on",
             .doc = "add Forwarded (RFC 7239) towards the upstream"),
    KEEL_KEY(px_settings, x_forwarded, "x_forwarded", KEEL_CONFIG_BOOL, .def = "on",
             .doc = "add X-Forwarded-For, -Proto and -Host towards the upstream"),
    KEEL_KEY(px_settings, server, "server", KEEL_CONFIG_ENUM, .def = "replace",
             .choices = keep_replace, .doc = "the upstream's Server field: keel's, or kept"),
    KEEL_KEY(px_settings, date, "date", KEEL_CONFIG_ENUM, .def = "replace", .choices = keep_replace,
             .doc = "the upstream's Date field: keel's, or kept"),
    KEEL_KEY(px_settings, tunnel_idle_ms, "tunnel_idle_timeout", KEEL_CONFIG_DURATION, .def = "5m",
             .doc = "a WebSocket or CONNECT tunnel idle both ways this long closes"),
    KEEL_KEY(px_settings, log, "log", KEEL_CONFIG_PATH,
             .doc = "a file for one line per proxied exchange; none by default"),
    KEEL_KEY(px_settings, connect.on, "connect", KEEL_CONFIG_BOOL, .def = "off",
             .doc = "answer CONNECT on listeners of protocol `proxy` (a forward proxy)"),
    KEEL_KEY(px_settings, connect.clients, "connect_clients", KEEL_CONFIG_STRING,
             .def = "127.0.0.0/8 ::1/128", .doc = "addresses or CIDR blocks that may CONNECT"),
    KEEL_KEY(px_settings, connect.ports, "connect_ports", KEEL_CONFIG_STRING, .def = "443",
             .doc = "destination ports CONNECT may reach; * for any"),
    KEEL_KEY(px_settings, connect.hosts, "connect_hosts", KEEL_CONFIG_STRING, .def = "*",
             .doc = "destination host names (or *.suffix) CONNECT may reach"),
    KEEL_KEY(px_settings, connect.private_ok, "connect_private", KEEL_CONFIG_BOOL, .def = "off",
             .doc = "let CONNECT reach loopback, private and link-local addresses"),
    KEEL_KEY(px_settings, connect.header_timeout_ms, "connect_header_timeout", KEEL_CONFIG_DURATION,
             .def = "10s", .min = 1, .max = 3600000,
             .doc = "time for a CONNECT head to arrive whole (no byte renews it)"),
};
KEEL_CONFIG_SCHEMA(px_schema, px_settings, px_keys);

static int read_scalars(px_config *c, keel_module *m)
{
    const px_settings *s = keel_module_config(m);
    c->keepalive = (unsigned)s->keepalive;
    c->tries = (unsigned)s->tries; /* 0: every server of the group once */
    c->keepalive_timeout_ms = s->keepalive_timeout_ms;
    c->connect_timeout_ms = s->connect_timeout_ms;
    c->read_timeout_ms = s->read_timeout_ms;
    c->send_timeout_ms = s->send_timeout_ms;
    c->buffer = (size_t)s->buffer;
    c->client_buffer = (size_t)s->client_buffer;
    c->read_buffer = (size_t)s->read_buffer;
    c->max_header = (size_t)s->max_header;
    c->via = s->via;
    /* The Via of a response no earlier hop named, checked and laid out
     * once (a response whose upstream sent one gets the list joined). */
    if (c->via && keel_field_prepare(m, "Via", 3, "1.1 keel", 8, &c->via_field) != KEEL_OK)
        c->via_field = NULL;
    c->forwarded = s->forwarded;
    c->x_forwarded = s->x_forwarded;
    c->keep_server = s->server == 1;
    c->keep_date = s->date == 1;
    c->tunnel_idle_ms = s->tunnel_idle_ms;
    c->fcgi_body_buffer = (size_t)s->fcgi_body_buffer;
    const char *dir = s->fcgi_temp_dir != NULL && s->fcgi_temp_dir[0] != '\0'
                          ? s->fcgi_temp_dir
                          : px_spool_default_dir();
    if ((c->fcgi_temp_dir = strdup(dir)) == NULL)
        return KEEL_ERR_NOMEM;
    if (!px_spool_dir_ok(dir))
        return keel_config_error(m, "fastcgi_temp_path", "'%s' is not a directory", dir);
    if (s->log != NULL && s->log[0] != '\0' && (c->log = keel_appender_open(m, s->log)) == NULL)
        return KEEL_ERR_CONFIG;
    return KEEL_OK;
}

/* The log fields' names, checked and copied once (forward.c sets them on
 * every exchange). */
static int prepare_log_names(px_config *c, keel_module *m)
{
    int rc = keel_log_name_prepare(m, "upstream_addr", &c->log_addr);
    if (rc == KEEL_OK)
        rc = keel_log_name_prepare(m, "upstream_status", &c->log_status);
    if (rc == KEEL_OK)
        rc = keel_log_name_prepare(m, "upstream_response_time", &c->log_time);
    return rc;
}

static int proxy_load(keel_module *m)
{
    px_config *c = calloc(1, sizeof *c);
    if (c == NULL)
        return KEEL_ERR_NOMEM;
    c->module = m;
    keel_module_set_data(m, c);
    const px_settings *s = keel_module_config(m);
    int rc = read_scalars(c, m);
    if (rc == KEEL_OK)
        rc = prepare_log_names(c, m);
    if (rc == KEEL_OK)
        rc = parse_upgrades(c, m, s->upgrade);
    size_t ng = s->upstream.count, nr = s->pass.count;
    if (rc == KEEL_OK && ng > 0 && (c->groups = calloc(ng, sizeof *c->groups)) == NULL)
        rc = KEEL_ERR_NOMEM;
    if (rc == KEEL_OK && nr > 0 && (c->routes = calloc(nr, sizeof *c->routes)) == NULL)
        rc = KEEL_ERR_NOMEM;
    for (size_t i = 0; rc == KEEL_OK && i < ng; i++) {
        c->groups[i].index = i;
        rc = parse_upstream(c, m, s->upstream.items[i], &c->groups[i]);
        c->ngroups++;
        for (size_t j = 0; rc == KEEL_OK && j + 1 < c->ngroups; j++)
            if (strcmp(c->groups[j].name, c->groups[i].name) == 0)
                rc = keel_config_error(m, "upstream", "group %s defined twice", c->groups[i].name);
    }
    for (size_t i = 0; rc == KEEL_OK && i < nr; i++) {
        rc = parse_pass(c, m, s->pass.items[i], &c->routes[i]);
        c->nroutes++;
    }
    if (rc == KEEL_OK)
        rc = parse_fcgi_params(c, m, &s->fastcgi_param);
    if (rc == KEEL_OK)
        rc = px_connect_config(c, m, &s->connect);
    if (rc == KEEL_OK)
        rc = register_metrics(c, m);
    for (size_t i = 0; rc == KEEL_OK && i < c->nroutes; i++)
        rc = add_routes(m, &c->routes[i]);
    if (rc == KEEL_OK)
        rc = keel_protocol_register(m, &px_upstream_protocol);
    if (rc == KEEL_OK)
        rc = keel_protocol_register(m, &px_tunnel_protocol);
    if (rc == KEEL_OK)
        rc = keel_protocol_register(m, &px_connect_protocol);
    if (rc == KEEL_OK)
        rc = keel_protocol_register(m, &px_check_protocol);
    if (rc != KEEL_OK) {
        /* keel/module.h: a load that fails is not unloaded; it frees what
         * it made. */
        config_free(c);
        keel_module_set_data(m, NULL);
    }
    return rc;
}

static void proxy_unload(keel_module *m)
{
    config_free(keel_module_data(m));
    keel_module_set_data(m, NULL);
}

/* ---- workers ---------------------------------------------------------------------------- */

px_worker *px_worker_of(keel_worker *w, keel_module *m)
{
    return keel_worker_state(w, m);
}

static int proxy_start(keel_module *m, keel_worker *w, void *state)
{
    px_worker *pw = state;
    pw->worker = w;
    pw->cfg = keel_module_data(m);
    int rc = px_peers_init(pw);
    if (rc == KEEL_OK)
        px_checks_start(pw);
    return rc;
}

static void proxy_stop(keel_module *m, keel_worker *w, void *state)
{
    (void)m, (void)w;
    px_worker *pw = state;
    px_checks_stop(pw);
    px_pool_close_all(pw);
    px_peers_free(pw);
    px_clients_free(pw);
    px_fcgi_worker_free(pw);
    px_body_blocks_free(pw);
    px_ex_free_kept(pw);
    px_heads_free(pw);
}

KEEL_MODULE(proxy, .version = "1.0.0", .worker_state_size = sizeof(px_worker), .load = proxy_load,
            .start = proxy_start, .stop = proxy_stop, .unload = proxy_unload, .config = &px_schema);
