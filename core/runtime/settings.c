#include "runtime/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/types.h>

#include "base/log.h"
#include "runtime/config.h"
#include "runtime/config_values.h"
#include "platform/platform.h"
#include "base/util.h"

/* Where an installed keel finds its modules, relative to the executable's
 * folder (the build defines it; this is the usual layout). */
#ifndef KEEL_INSTALL_MODULE_DIR_FROM_BINDIR
#define KEEL_INSTALL_MODULE_DIR_FROM_BINDIR "../lib/keel/modules"
#endif

char **kl_split_words(const char *text, size_t *count)
{
    size_t n = 0, cap = 4;
    char **words = malloc(cap * sizeof *words);
    if (words == NULL)
        return NULL;
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '\0')
            break;
        /* A comma separates words ("modules = a, b"), except inside the
         * value of a key=value word, which may be a list itself
         * ("alpn=h2,http/1.1"); one that ends such a word ("x=a, b")
         * still separates. */
        const char *start = p;
        int in_value = 0;
        while (*p && *p != ' ' && *p != '\t' &&
               (*p != ',' ||
                (in_value && p[1] != ' ' && p[1] != '\t' && p[1] != ',' && p[1] != '\0'))) {
            if (*p == '=')
                in_value = 1;
            p++;
        }
        if (n + 1 >= cap) {
            char **grown = realloc(words, (cap *= 2) * sizeof *words);
            if (grown == NULL)
                goto fail;
            words = grown;
        }
        if ((words[n] = kl_strndup(start, (size_t)(p - start))) == NULL)
            goto fail;
        n++;
    }
    words[n] = NULL;
    *count = n;
    return words;
fail:
    kl_free_words(words, n);
    return NULL;
}

void kl_free_words(char **words, size_t count)
{
    if (words == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        free(words[i]);
    free(words);
}

/* "unix:/run/keel.sock", "unix:@name" (platform.h kl_unix_addr). */
static int parse_unix_address(const char *text, struct sockaddr_storage *out, char *err,
                              size_t errlen)
{
    int rc = kl_unix_addr(text + 5, out);
    if (rc == 0)
        return KEEL_OK;
    if (rc == UV_ENOTSUP)
#ifdef _WIN32
        snprintf(err, errlen,
                 "'%s': Unix domain sockets are not supported on Windows (keel's connections "
                 "are sockets; libuv's named pipes are not): listen on TCP",
                 text);
#else
        snprintf(err, errlen, "'%s': abstract socket names (unix:@NAME) are Linux's only", text);
#endif
    else if (rc == UV_ENAMETOOLONG)
        snprintf(err, errlen, "'%s': the path is too long for a Unix socket (sun_path)", text);
    else
        snprintf(err, errlen, "expected unix:PATH or unix:@NAME, got '%s'", text);
    return KEEL_ERR_CONFIG;
}

/* "127.0.0.1:80", "[::1]:0", "*:80", "localhost:80", "unix:PATH". */
static int parse_address(const char *text, struct sockaddr_storage *out, char *err, size_t errlen)
{
    if (strncmp(text, "unix:", 5) == 0)
        return parse_unix_address(text, out, err, errlen);
    char host[64];
    const char *colon;
    const char *host_start = text;
    size_t host_len;
    int v6 = text[0] == '[';
    if (v6) {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':') {
            snprintf(err, errlen, "expected [IPV6]:PORT, got '%s'", text);
            return KEEL_ERR_CONFIG;
        }
        host_start = text + 1;
        host_len = (size_t)(close - host_start);
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (colon == NULL) {
            snprintf(err, errlen, "expected ADDRESS:PORT, got '%s'", text);
            return KEEL_ERR_CONFIG;
        }
        host_len = (size_t)(colon - text);
    }
    if (host_len == 0 || host_len >= sizeof host) {
        snprintf(err, errlen, "bad address in '%s'", text);
        return KEEL_ERR_CONFIG;
    }
    memcpy(host, host_start, host_len);
    host[host_len] = '\0';

    int64_t port;
    char perr[128];
    if (kl_parse_int(colon + 1, 0, 65535, &port, perr, sizeof perr) != KEEL_OK) {
        snprintf(err, errlen, "bad port in '%s': %s", text, perr);
        return KEEL_ERR_CONFIG;
    }
    if (!v6 && strcmp(host, "*") == 0)
        strcpy(host, "0.0.0.0");
    else if (!v6 && strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");

    memset(out, 0, sizeof *out);
    int rc = v6 ? uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)out)
                : uv_ip4_addr(host, (int)port, (struct sockaddr_in *)out);
    if (rc != 0) {
        snprintf(err, errlen, "'%s' is not an IP%s address", host, v6 ? "v6" : "v4");
        return KEEL_ERR_CONFIG;
    }
    return KEEL_OK;
}

int kl_preamble_net_parse(const char *text, kl_preamble_net *out, char *err, size_t errlen)
{
    size_t len = strlen(text);
    const char *slash = memchr(text, '/', len);
    size_t hlen = slash ? (size_t)(slash - text) : len;
    keel_ip ip;
    if (!keel_ip_parse(text, hlen, &ip)) {
        snprintf(err, errlen, "'%.*s' is not an IPv4 or IPv6 address", (int)hlen, text);
        return KEEL_ERR_CONFIG;
    }
    if (keel_cidr_parse(text, len, out))
        return KEEL_OK;
    /* The address is good: the prefix length is not. */
    const char *d = slash + 1;
    size_t dlen = strlen(d);
    if (dlen == 0 || dlen > 3 || strspn(d, "0123456789") != dlen)
        snprintf(err, errlen, "bad prefix length in '%s'", text);
    else
        snprintf(err, errlen, "prefix length in '%s' exceeds %u", text,
                 memchr(text, ':', hlen) != NULL ? 128u : 32u);
    return KEEL_ERR_CONFIG;
}

static void listen_spec_free(kl_listen_spec *l)
{
    if (l->preamble != NULL)
        free(l->preamble->from);
    free(l->preamble);
    free(l->text);
    free(l->protocol);
    free(l->transport);
    for (size_t i = 0; i < l->noptions; i++) {
        free(l->options[i].key);
        free(l->options[i].value);
    }
    free(l->options);
}

/* mode=, owner= and group= of a unix: listener: its socket file's
 * permissions (who may connect is who may write the file). */
static int read_unix_options(kl_listen_spec *l, char *why, size_t size)
{
    const char *mode = kl_listen_spec_option(l, "mode");
    l->perms =
        (kl_unix_perms){-1, kl_listen_spec_option(l, "owner"), kl_listen_spec_option(l, "group")};
    if (mode == NULL && l->perms.owner == NULL && l->perms.group == NULL)
        return KEEL_OK;
    const char *key = mode ? "mode" : l->perms.owner ? "owner" : "group";
    int is_unix = l->addr.ss_family == AF_UNIX;
    if (!is_unix || l->text[5] == '@') {
        snprintf(why, size, "%s= applies to a unix:PATH listener's socket file only", key);
        return KEEL_ERR_CONFIG;
    }
    if ((l->perms.owner && l->perms.owner[0] == '\0') ||
        (l->perms.group && l->perms.group[0] == '\0')) {
        snprintf(why, size, "owner= and group= need a name or a number");
        return KEEL_ERR_CONFIG;
    }
    if (mode != NULL) {
        char *end;
        unsigned long m = strtoul(mode, &end, 8);
        if (mode[0] == '\0' || *end != '\0' || m > 07777 || strspn(mode, "01234567") == 0) {
            snprintf(why, size, "mode=%s: expected octal permissions such as 0660", mode);
            return KEEL_ERR_CONFIG;
        }
        l->perms.mode = (int)m;
    }
    return KEEL_OK;
}

static int parse_listen(kl_listen_spec *l, const kl_config_value *v, char *err, size_t errlen)
{
    size_t n;
    char **words = kl_split_words(v->text, &n);
    if (words == NULL)
        return KEEL_ERR_NOMEM;
    int rc = KEEL_OK;
    char why[256];
    memset(l, 0, sizeof *l);
    l->where = v;
    if (n < 2) {
        snprintf(why, sizeof why, "expected ADDRESS:PORT PROTOCOL [options], got '%s'", v->text);
        rc = KEEL_ERR_CONFIG;
    } else {
        rc = parse_address(words[0], &l->addr, why, sizeof why);
    }
    if (rc == KEEL_OK) {
        l->text = words[0];
        l->protocol = words[1];
        words[0] = words[1] = NULL;
        l->options = calloc(n, sizeof *l->options);
        if (l->options == NULL)
            rc = KEEL_ERR_NOMEM;
    }
    for (size_t i = 2; rc == KEEL_OK && i < n; i++) {
        kl_listen_option *o = &l->options[l->noptions];
        char *eq = strchr(words[i], '=');
        o->key = eq ? kl_strndup(words[i], (size_t)(eq - words[i])) : kl_strdup(words[i]);
        o->value = kl_strdup(eq ? eq + 1 : "");
        l->noptions++;
        if (o->key == NULL || o->value == NULL)
            rc = KEEL_ERR_NOMEM;
    }
    kl_free_words(words, n);
    if (rc == KEEL_OK)
        rc = read_unix_options(l, why, sizeof why);
    char where[300];
    if (rc == KEEL_ERR_CONFIG)
        snprintf(err, errlen, "%s: [keel] listen: %s", kl_config_where(v, where, sizeof where),
                 why);
    if (rc != KEEL_OK)
        listen_spec_free(l);
    return rc;
}

/* Fetches a single-valued key and runs one of the value parsers on it,
 * turning its reason into a message that names file, line and key. */
typedef struct key_reader {
    kl_config_section *sec;
    char *err;
    size_t errlen;
    int rc;
} key_reader;

static const kl_config_value *read_key(key_reader *r, const char *key)
{
    const kl_config_value *v = NULL;
    if (r->rc == KEEL_OK)
        r->rc = kl_config_get_single(r->sec, key, &v, r->err, r->errlen);
    return r->rc == KEEL_OK ? v : NULL;
}

static void bad_value(key_reader *r, const kl_config_value *v, const char *key, const char *why)
{
    char where[300];
    snprintf(r->err, r->errlen, "%s: [keel] %s: %s", kl_config_where(v, where, sizeof where), key,
             why);
    r->rc = KEEL_ERR_CONFIG;
}

static void read_duration(key_reader *r, const char *key, uint64_t *out)
{
    const kl_config_value *v = read_key(r, key);
    char why[128];
    if (v && kl_parse_duration_ms(v->text, out, why, sizeof why) != KEEL_OK)
        bad_value(r, v, key, why);
}

static void read_size(key_reader *r, const char *key, size_t min, size_t *out)
{
    const kl_config_value *v = read_key(r, key);
    char why[160];
    uint64_t value;
    if (v == NULL)
        return;
    if (kl_parse_size(v->text, &value, why, sizeof why) != KEEL_OK)
        bad_value(r, v, key, why);
    else if (value < min || value > ((uint64_t)1 << 30)) {
        /* Read buffers are indexed with 32 bits; 1 GiB is far beyond any
         * sane setting anyway. */
        snprintf(why, sizeof why, "must be between %zu bytes and 1g", min);
        bad_value(r, v, key, why);
    } else
        *out = (size_t)value;
}

static void read_int(key_reader *r, const char *key, int64_t min, int64_t max, int64_t *out)
{
    const kl_config_value *v = read_key(r, key);
    char why[128];
    if (v && kl_parse_int(v->text, min, max, out, why, sizeof why) != KEEL_OK)
        bad_value(r, v, key, why);
}

const char *kl_listen_spec_option(const kl_listen_spec *l, const char *key)
{
    for (size_t i = 0; i < l->noptions; i++)
        if (strcmp(l->options[i].key, key) == 0)
            return l->options[i].value;
    return NULL;
}

/* A listen line's PROXY protocol options: `proxy_protocol=on` and the
 * sources allowed to send the header, `proxy_from=a,b` on the line or
 * else [keel] proxy_from. A listener that trusts the header must say from
 * whom (the spec's section 1: a receiver accepting it from anyone lets any
 * client claim any address), so `on` without a source list is an error. */
static void read_listen_preamble(key_reader *r, kl_listen_spec *l, char **from, size_t nfrom,
                                 uint64_t timeout_ms)
{
    const char *on = kl_listen_spec_option(l, "proxy_protocol");
    const char *line_from = kl_listen_spec_option(l, "proxy_from");
    char why[256], where[300];
    int enabled = 0;
    if (r->rc != KEEL_OK)
        return;
    if (on != NULL && kl_parse_bool(on, &enabled, why, sizeof why) != KEEL_OK)
        goto bad;
    if (!enabled) {
        if (line_from == NULL)
            return;
        snprintf(why, sizeof why, "proxy_from without proxy_protocol=on");
        goto bad;
    }
    char **words = from;
    size_t n = nfrom;
    int failed = 0;
    /* On a unix: listener the socket file's permissions say who may
     * connect, and so who may send the header (nginx's set_real_ip_from
     * unix:): no address list applies, the global one included. */
    int is_unix = l->addr.ss_family == AF_UNIX;
    if (is_unix && line_from != NULL) {
        snprintf(why, sizeof why,
                 "proxy_from does not apply to a unix: listener: its file's mode= and group= say "
                 "who may connect and send the header");
        goto bad;
    }
    if (is_unix)
        n = 0;
    else if (line_from != NULL && (words = kl_split_words(line_from, &n)) == NULL) {
        r->rc = KEEL_ERR_NOMEM;
        return;
    }
    if (n == 0 && !is_unix) {
        snprintf(why, sizeof why,
                 "proxy_protocol=on needs the balancers' addresses: proxy_from=ADDR[/BITS],... "
                 "on the line or proxy_from in [keel]");
        failed = 1;
    } else if ((l->preamble = calloc(1, sizeof *l->preamble)) == NULL ||
               (l->preamble->from = calloc(n ? n : 1, sizeof *l->preamble->from)) == NULL) {
        r->rc = KEEL_ERR_NOMEM;
    } else {
        l->preamble->timeout_ms = timeout_ms;
        for (size_t i = 0; i < n && !failed; i++) {
            char perr[200];
            if (kl_preamble_net_parse(words[i], &l->preamble->from[i], perr, sizeof perr) !=
                KEEL_OK) {
                snprintf(why, sizeof why, "proxy_from: %s", perr);
                failed = 1;
            } else {
                l->preamble->nfrom++;
            }
        }
    }
    if (words != from)
        kl_free_words(words, n);
    if (!failed)
        return;
bad:
    snprintf(r->err, r->errlen, "%s: [keel] listen: %s",
             kl_config_where(l->where, where, sizeof where), why);
    r->rc = KEEL_ERR_CONFIG;
}

/* Appends a copy of dir to the NULL-terminated list *paths (of *n). */
static int path_append(char ***paths, size_t *n, char *dir)
{
    if (dir == NULL)
        return KEEL_ERR_NOMEM;
    char **grown = realloc(*paths, (*n + 2) * sizeof **paths);
    if (grown == NULL) {
        free(dir);
        return KEEL_ERR_NOMEM;
    }
    grown[(*n)++] = dir;
    grown[*n] = NULL;
    *paths = grown;
    return KEEL_OK;
}

/* A path as written in v (module_path, pid_file): relative to the folder of the
 * config file that holds v (as nginx's include), or, for a value from
 * --set or a config string, relative to the working directory. */
/* module_path: repeatable, each value a list of directories; all of them
 * are searched first, in order, then the defaults (beside the executable,
 * then the install location). */
static void read_module_path(key_reader *r, kl_config *cfg, const char *exe_dir, kl_settings *s)
{
    size_t nvalues = kl_config_count(r->sec, "module_path");
    for (size_t i = 0; r->rc == KEEL_OK && i < nvalues; i++) {
        const kl_config_value *v = kl_config_get(r->sec, "module_path", i);
        size_t nwords;
        char **words = kl_split_words(v->text, &nwords);
        if (words == NULL) {
            r->rc = KEEL_ERR_NOMEM;
            return;
        }
        for (size_t k = 0; r->rc == KEEL_OK && k < nwords; k++)
            r->rc =
                path_append(&s->module_path, &s->nmodule_path, kl_config_resolve(cfg, v, words[k]));
        kl_free_words(words, nwords);
    }
    if (r->rc == KEEL_OK)
        r->rc = path_append(&s->module_path, &s->nmodule_path, kl_path_join(exe_dir, "modules"));
    if (r->rc == KEEL_OK)
        r->rc = path_append(&s->module_path, &s->nmodule_path,
                            kl_path_join(exe_dir, KEEL_INSTALL_MODULE_DIR_FROM_BINDIR));
}

static void read_words(key_reader *r, const char *key, char ***out, size_t *count)
{
    const kl_config_value *v = read_key(r, key);
    if (v == NULL)
        return;
    size_t n;
    char **words = kl_split_words(v->text, &n);
    if (words == NULL) {
        r->rc = KEEL_ERR_NOMEM;
        return;
    }
    kl_free_words(*out, *count);
    *out = words;
    *count = n;
}

int kl_settings_load(kl_settings *s, kl_config *cfg, const char *exe_dir, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->workers = 0; /* auto */
    s->max_connections = 10000;
    s->idle_timeout_ms = 60000;
    s->write_timeout_ms = 60000;
    s->shutdown_timeout_ms = 10000;
    s->connect_timeout_ms = 10000;
    s->reload_timeout_ms = 30000;
    s->backlog = 511;
    s->reuseport = kl_reuseport_balances();
    s->read_buffer_size = 16 * 1024;
    s->read_buffer_max = 1024 * 1024;
    s->write_high_water = 256 * 1024;
    s->log_level = KEEL_LOG_INFO;
    s->crash_report = 1;

    key_reader r = {kl_config_section_find(cfg, "keel"), err, errlen, KEEL_OK};

    size_t nlisten = kl_config_count(r.sec, "listen");
    if (nlisten > 0 && (s->listen = calloc(nlisten, sizeof *s->listen)) == NULL)
        r.rc = KEEL_ERR_NOMEM;
    for (size_t i = 0; r.rc == KEEL_OK && i < nlisten; i++) {
        r.rc = parse_listen(&s->listen[i], kl_config_get(r.sec, "listen", i), err, errlen);
        if (r.rc == KEEL_OK)
            s->nlisten++;
    }

    const kl_config_value *v = read_key(&r, "workers");
    if (v && strcmp(v->text, "auto") != 0) {
        int64_t n;
        char why[128];
        if (kl_parse_int(v->text, 1, 1024, &n, why, sizeof why) != KEEL_OK)
            bad_value(&r, v, "workers", "expected 'auto' or a number between 1 and 1024");
        else
            s->workers = (unsigned)n;
    }
    read_words(&r, "modules", &s->modules, &s->nmodules);
    s->modules_where = kl_config_get(r.sec, "modules", 0);
    read_module_path(&r, cfg, exe_dir, s);

    int64_t n = (int64_t)s->max_connections;
    read_int(&r, "max_connections", 1, 100000000, &n);
    s->max_connections = (uint64_t)n;
    n = s->backlog;
    read_int(&r, "backlog", 1, 65535, &n);
    s->backlog = (int)n;

    read_duration(&r, "idle_timeout", &s->idle_timeout_ms);
    read_duration(&r, "write_timeout", &s->write_timeout_ms);
    read_duration(&r, "shutdown_timeout", &s->shutdown_timeout_ms);
    read_duration(&r, "shutdown_delay", &s->shutdown_delay_ms);
    read_duration(&r, "connect_timeout", &s->connect_timeout_ms);
    read_duration(&r, "reload_timeout", &s->reload_timeout_ms);
    if (r.rc == KEEL_OK && s->reload_timeout_ms == 0)
        bad_value(&r, kl_config_get(r.sec, "reload_timeout", 0), "reload_timeout",
                  "must be more than 0");
    read_size(&r, "read_buffer_size", 1024, &s->read_buffer_size);
    read_size(&r, "read_buffer_max", 1024, &s->read_buffer_max);
    read_size(&r, "write_high_water", 1024, &s->write_high_water);
    if (r.rc == KEEL_OK && s->read_buffer_max < s->read_buffer_size)
        s->read_buffer_max = s->read_buffer_size;

    if ((v = read_key(&r, "reuseport")) != NULL) {
        char why[128];
        if (kl_parse_bool(v->text, &s->reuseport, why, sizeof why) != KEEL_OK)
            bad_value(&r, v, "reuseport", why);
        else if (s->reuseport && !kl_reuseport_balances())
            bad_value(&r, v, "reuseport", "not supported on this platform");
    }
    /* A file's path as every other (kl_config_resolve); "stderr" is none. */
    if ((v = read_key(&r, "log")) != NULL &&
        (s->log_target = strcmp(v->text, "stderr") == 0
                             ? kl_strdup(v->text)
                             : kl_config_resolve(cfg, v, v->text)) == NULL)
        r.rc = KEEL_ERR_NOMEM;
    if ((v = read_key(&r, "pid_file")) != NULL && v->text[0] != '\0' &&
        (s->pid_file = kl_config_resolve(cfg, v, v->text)) == NULL)
        r.rc = KEEL_ERR_NOMEM;
    if ((v = read_key(&r, "log_level")) != NULL) {
        s->log_level = kl_log_level_parse(v->text);
        if (s->log_level < 0)
            bad_value(&r, v, "log_level", "expected error, warn, info or debug");
    }
    if ((v = read_key(&r, "log_format")) != NULL) {
        s->log_format = kl_log_format_parse(v->text);
        if (s->log_format < 0)
            bad_value(&r, v, "log_format", "expected text or json");
    }

    /* A Host no [site] names (docs/configuration.md): the implicit site,
     * 421 Misdirected Request (RFC 9110 15.5.20) or 404. */
    if ((v = read_key(&r, "unknown_host")) != NULL) {
        if (strcmp(v->text, "default") == 0)
            s->unknown_host = 0;
        else if (strcmp(v->text, "421") == 0 || strcmp(v->text, "404") == 0)
            s->unknown_host = atoi(v->text);
        else
            bad_value(&r, v, "unknown_host", "expected default, 421 or 404");
    }

    /* user and group: POSIX only (Windows runs a service under the account
     * the service manager gives it; there is nothing to drop to). */
    for (int i = 0; i < 2 && r.rc == KEEL_OK; i++) {
        const char *key = i == 0 ? "user" : "group";
        char **field = i == 0 ? &s->user : &s->group;
        if ((v = read_key(&r, key)) == NULL)
            continue;
#ifdef _WIN32
        (void)field;
        bad_value(&r, v, key,
                  "not supported on Windows (run the service under the account it should "
                  "have: docs/windows.md)");
#else
        if (v->text[0] == '\0')
            bad_value(&r, v, key, "empty");
        else if ((*field = kl_strdup(v->text)) == NULL)
            r.rc = KEEL_ERR_NOMEM;
        if (i == 0)
            s->user_where = v;
#endif
    }
    if (r.rc == KEEL_OK && s->group != NULL && s->user == NULL)
        bad_value(&r, kl_config_get(r.sec, "group", 0), "group", "needs [keel] user");

    if ((v = read_key(&r, "crash_report")) != NULL) {
        char why[128];
        if (kl_parse_bool(v->text, &s->crash_report, why, sizeof why) != KEEL_OK)
            bad_value(&r, v, "crash_report", why);
    }

    /* The PROXY protocol preamble (net/preamble.c): who may send it, by
     * default, and how long its header may take, in total. */
    char **proxy_from = NULL;
    size_t nproxy_from = 0;
    uint64_t proxy_timeout_ms = 5000;
    read_words(&r, "proxy_from", &proxy_from, &nproxy_from);
    read_duration(&r, "proxy_timeout", &proxy_timeout_ms);
    if (r.rc == KEEL_OK && proxy_timeout_ms == 0)
        bad_value(&r, kl_config_get(r.sec, "proxy_timeout", 0), "proxy_timeout",
                  "must be more than 0");
    for (size_t i = 0; i < s->nlisten; i++)
        read_listen_preamble(&r, &s->listen[i], proxy_from, nproxy_from, proxy_timeout_ms);
    kl_free_words(proxy_from, nproxy_from);

    if (r.rc == KEEL_OK && r.sec != NULL)
        r.rc = kl_config_check_unused(r.sec, err, errlen);
    if (r.rc == KEEL_ERR_NOMEM)
        snprintf(err, errlen, "out of memory reading [keel]");
    if (r.rc != KEEL_OK)
        kl_settings_free(s);
    return r.rc;
}

void kl_settings_free(kl_settings *s)
{
    for (size_t i = 0; i < s->nlisten; i++)
        listen_spec_free(&s->listen[i]);
    free(s->listen);
    kl_free_words(s->modules, s->nmodules);
    kl_free_words(s->module_path, s->nmodule_path);
    free(s->log_target);
    free(s->pid_file);
    free(s->user);
    free(s->group);
    memset(s, 0, sizeof *s);
}
