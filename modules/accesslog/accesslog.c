/* accesslog — one line per HTTP exchange, written by a background thread
 * (keel_appender) so that a slow disk never stalls a worker:
 *
 *     [accesslog]
 *     path = /var/log/keel/access.log     ; or off
 *     format = combined                   ; common, json, or a template:
 *     ; format = "$remote_addr $request_time $status $http_user_agent"
 *     buffer = 64k                        ; per worker; 0: every line at once
 *     flush = 1s                          ; a buffered line waits at most this
 *
 * 127.0.0.1 - - [29/Nov/2026:22:00:00 +0000] "GET / HTTP/1.1" 200 13 "-" "curl/7.88.1"
 *
 * combined and common are templates too (the variables' names are
 * nginx's where nginx has one); json writes one object a line. The
 * template is compiled once, at load, into pieces; a line is built piece
 * by piece into a stack buffer. README.md lists the variables.
 * $remote_user is the auth_basic user when auth_basic is listed before
 * accesslog in [keel] modules.
 */
#include <keel/keel.h>
#include <keel/tls.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

KEEL_TLS_DEFINE

/* What a piece of a template writes. */
enum var {
    V_LITERAL,
    V_REMOTE_ADDR,
    V_REMOTE_USER, /* auth_basic's user, "-" without one */
    V_TIME_LOCAL,
    V_TIME_ISO8601,
    V_REQUEST,
    V_REQUEST_METHOD,
    V_REQUEST_URI,
    V_URI,
    V_ARGS,
    V_SERVER_PROTOCOL,
    V_STATUS,
    V_BODY_BYTES_SENT,
    V_BODY_BYTES_CLF, /* "-" for none, as the Common Log Format */
    V_REQUEST_LENGTH,
    V_REQUEST_TIME,
    V_REQUEST_TIME_US,
    V_SCHEME,
    V_CONNECTION,
    V_SSL_PROTOCOL,
    V_SSL_CIPHER,
    V_COMPLETED,
    V_STREAM_ID, /* the HTTP/2 stream's id, "-" (JSON null) elsewhere */
    V_PEER_UID,  /* a Unix socket client's credentials, "-" (JSON null) elsewhere */
    V_PEER_GID,
    V_PEER_PID,
    V_HTTP,      /* $http_NAME: a request header */
    V_SENT_HTTP, /* $sent_http_NAME: a response header */
    V_FIELD,     /* $field_NAME and $upstream_*: a module's log field */
};

static const struct {
    const char *name;
    enum var var;
} variables[] = {
    {"remote_addr", V_REMOTE_ADDR},
    {"remote_user", V_REMOTE_USER},
    {"time_local", V_TIME_LOCAL},
    {"time_iso8601", V_TIME_ISO8601},
    {"request", V_REQUEST},
    {"request_method", V_REQUEST_METHOD},
    {"request_uri", V_REQUEST_URI},
    {"uri", V_URI},
    {"args", V_ARGS},
    {"server_protocol", V_SERVER_PROTOCOL},
    {"status", V_STATUS},
    {"body_bytes_sent", V_BODY_BYTES_SENT},
    {"body_bytes_clf", V_BODY_BYTES_CLF},
    {"request_length", V_REQUEST_LENGTH},
    {"request_time", V_REQUEST_TIME},
    {"request_time_us", V_REQUEST_TIME_US},
    {"scheme", V_SCHEME},
    {"connection", V_CONNECTION},
    {"ssl_protocol", V_SSL_PROTOCOL},
    {"tls_version", V_SSL_PROTOCOL},
    {"ssl_cipher", V_SSL_CIPHER},
    {"tls_cipher", V_SSL_CIPHER},
    {"completed", V_COMPLETED},
    {"stream_id", V_STREAM_ID},
    {"peer_uid", V_PEER_UID},
    {"peer_gid", V_PEER_GID},
    {"peer_pid", V_PEER_PID},
};

typedef struct piece {
    enum var var;
    char *text; /* the literal, or the header's name */
    size_t len;
} piece;

static const char combined_template[] = "$remote_addr - $remote_user [$time_local] \"$request\" "
                                        "$status $body_bytes_clf \"$http_referer\" "
                                        "\"$http_user_agent\"";
static const char common_template[] =
    "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_clf";

#include "../auth_basic/auth_basic.h"

/* Allocated in load, freed in unload: the filter is part of it, so its
 * userdata leads back here without any global. */
struct accesslog {
    keel_http_filter filter;
    keel_module *module;
    keel_appender *out;
    int json;
    piece *pieces;
    size_t npieces;
    size_t buffer;                  /* per worker; 0: each line handed over at once */
    uint64_t flush_ms;              /* a buffered line waits at most this long */
    const auth_basic_service *auth; /* $remote_user, if auth_basic loaded before */
};

/* Per worker: the formatted times (they change once a second) and the
 * buffered lines. */
struct accesslog_worker {
    struct accesslog *log;
    int64_t second;
    char clf[40], iso[32];
    char *buf;
    size_t len;
    keel_timer *timer;
};

/* ---- building a line ------------------------------------------------------ */

typedef struct line {
    char buf[8192];
    size_t len; /* bytes in buf */
    int json;   /* escape as JSON strings, not as Apache does */
} line;

static void put(line *l, const char *s, size_t n)
{
    size_t room = sizeof l->buf - 1 - l->len; /* one byte for the newline */
    if (n > room)
        n = room;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void puts_(line *l, const char *s)
{
    put(l, s, strlen(s));
}

/* A value that may hold anything the client sent: escaped so that it never
 * breaks the line or its quoting. Apache's escapes (\" \\ \xHH for
 * control bytes and bytes past ASCII), or JSON's (RFC 8259 7; bytes past
 * ASCII as \u00HH, so the line stays valid JSON whatever the bytes). */
static void put_escaped(line *l, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        size_t n = 0;
        if (c == '"' || c == '\\') {
            esc[n++] = '\\';
            esc[n++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            esc[n++] = '\\';
            if (l->json) {
                esc[n++] = 'u';
                esc[n++] = '0';
                esc[n++] = '0';
            } else {
                esc[n++] = 'x';
            }
            esc[n++] = hex[c >> 4];
            esc[n++] = hex[c & 15];
        } else {
            esc[n++] = (char)c;
        }
        if (l->len + n + 1 > sizeof l->buf)
            return;
        put(l, esc, n);
    }
}

static void put_u64(line *l, uint64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    put(l, num, (size_t)n);
}

/* A string value: escaped; "-" (or JSON's null) when there is none. */
static void put_str(line *l, const char *s, size_t len)
{
    if (s == NULL) {
        puts_(l, l->json ? "null" : "-");
        return;
    }
    if (l->json)
        put(l, "\"", 1);
    put_escaped(l, s, len);
    if (l->json)
        put(l, "\"", 1);
}

static void put_cstr(line *l, const char *s)
{
    put_str(l, s, s ? strlen(s) : 0);
}

/* The header named `name`, request's or response's. */
static void put_header(line *l, keel_str v)
{
    put_str(l, v.ptr, v.len);
}

static void refresh_times(struct accesslog_worker *w)
{
    int64_t now = keel_time_now();
    if (now != w->second) {
        keel_time_format(now, KEEL_TIME_CLF, w->clf, sizeof w->clf);
        keel_time_format(now, KEEL_TIME_ISO, w->iso, sizeof w->iso);
        w->second = now;
    }
}

static keel_conn *tls_conn(keel_request *req)
{
    return keel_tls_available() ? keel_request_conn(req) : NULL;
}

/* $peer_uid, $peer_gid, $peer_pid: numbers for a client on a Unix
 * socket, "-" (JSON null) for one on TCP or a pid the system does not
 * give (the BSDs). */
static void put_peer_cred(line *l, enum var var, keel_request *req)
{
    uint32_t uid, gid;
    int64_t pid;
    if (keel_request_peer_cred(req, &uid, &gid, &pid) == KEEL_OK &&
        (var != V_PEER_PID || pid >= 0)) {
        put_u64(l, var == V_PEER_UID ? uid : var == V_PEER_GID ? gid : (uint64_t)pid);
        return;
    }
    puts_(l, l->json ? "null" : "-");
}

/* One variable's value. Strings come quoted in JSON (numbers do not);
 * in a template, the template's own quotes are around them. */
static void put_var(line *l, enum var var, const char *name, keel_request *req, keel_response *res,
                    const keel_http_log_info *info, struct accesslog_worker *w)
{
    char text[64];
    keel_str s;
    switch (var) {
    case V_LITERAL:
        puts_(l, name);
        break;
    case V_REMOTE_ADDR:
        put_cstr(l, keel_request_peer_ip(req, text, sizeof text) == KEEL_OK ? text : NULL);
        break;
    case V_REMOTE_USER:
        s = w->log->auth != NULL ? w->log->auth->user(req) : (keel_str){NULL, 0};
        put_str(l, s.len > 0 ? s.ptr : NULL, s.len);
        break;
    case V_TIME_LOCAL:
        put_cstr(l, w->clf);
        break;
    case V_TIME_ISO8601:
        put_cstr(l, w->iso);
        break;
    case V_REQUEST: {
        int version = keel_request_version(req);
        keel_str method = keel_request_method(req), target = keel_request_target(req);
        if (l->json)
            put(l, "\"", 1);
        if (target.len == 0) {
            /* A head the protocol refused (keel_http_request_refuse:
             * its target is empty, a request's never is; an error page
             * made its method GET): nothing of it is trusted, "-". */
            put(l, "-", 1);
        } else {
            put_escaped(l, method.ptr, method.len);
            put(l, " ", 1);
            put_escaped(l, target.ptr, target.len);
            snprintf(text, sizeof text, " HTTP/%d.%d", version / 10, version % 10);
            puts_(l, text);
        }
        if (l->json)
            put(l, "\"", 1);
        break;
    }
    case V_REQUEST_METHOD:
    case V_REQUEST_URI:
    case V_URI:
    case V_ARGS:
        s = var == V_REQUEST_METHOD ? keel_request_method(req)
            : var == V_REQUEST_URI  ? keel_request_target(req)
            : var == V_URI          ? keel_request_path(req)
                                    : keel_request_query(req);
        put_str(l, s.ptr, s.len);
        break;
    case V_SERVER_PROTOCOL: {
        int version = keel_request_version(req);
        snprintf(text, sizeof text, "HTTP/%d.%d", version / 10, version % 10);
        put_cstr(l, text);
        break;
    }
    case V_STATUS:
        put_u64(l, (uint64_t)(info->status > 0 ? info->status : 0));
        break;
    case V_BODY_BYTES_SENT:
        put_u64(l, info->body_bytes);
        break;
    case V_BODY_BYTES_CLF:
        if (info->body_bytes > 0)
            put_u64(l, info->body_bytes);
        else
            put(l, "-", 1);
        break;
    case V_REQUEST_LENGTH:
        put_u64(l, info->request_bytes);
        break;
    case V_REQUEST_TIME: /* seconds with millisecond resolution, as nginx's */
        snprintf(text, sizeof text, "%llu.%03llu",
                 (unsigned long long)(info->duration_us / 1000000),
                 (unsigned long long)(info->duration_us / 1000 % 1000));
        puts_(l, text);
        break;
    case V_REQUEST_TIME_US:
        put_u64(l, info->duration_us);
        break;
    case V_SCHEME:
        put_cstr(l, keel_request_scheme(req));
        break;
    case V_CONNECTION:
        put_u64(l, keel_request_conn_id(req));
        break;
    case V_SSL_PROTOCOL: {
        keel_conn *conn = tls_conn(req);
        put_cstr(l, conn ? keel_tls_version(conn) : NULL);
        break;
    }
    case V_SSL_CIPHER: {
        keel_conn *conn = tls_conn(req);
        put_cstr(l, conn ? keel_tls_cipher(conn) : NULL);
        break;
    }
    case V_COMPLETED:
        puts_(l, info->completed ? (l->json ? "true" : "1") : (l->json ? "false" : "0"));
        break;
    case V_HTTP:
        put_header(l, keel_request_header(req, name));
        break;
    case V_SENT_HTTP:
        put_header(l, keel_response_header(res, name));
        break;
    case V_FIELD:
        put_header(l, keel_request_log_field(req, name));
        break;
    case V_STREAM_ID:
        if (info->size > offsetof(keel_http_log_info, stream_id) && info->stream_id != 0)
            put_u64(l, info->stream_id);
        else
            puts_(l, l->json ? "null" : "-");
        break;
    case V_PEER_UID:
    case V_PEER_GID:
    case V_PEER_PID:
        put_peer_cred(l, var, req);
        break;
    }
}

/* The fields of `format = json`, in this order; a key per variable. */
static const struct {
    const char *key;
    enum var var;
    const char *header;
} json_fields[] = {
    {"time", V_TIME_ISO8601, NULL},
    {"remote_addr", V_REMOTE_ADDR, NULL},
    {"remote_user", V_REMOTE_USER, NULL},
    {"method", V_REQUEST_METHOD, NULL},
    {"uri", V_REQUEST_URI, NULL},
    {"protocol", V_SERVER_PROTOCOL, NULL},
    {"status", V_STATUS, NULL},
    {"body_bytes_sent", V_BODY_BYTES_SENT, NULL},
    {"request_length", V_REQUEST_LENGTH, NULL},
    {"request_time", V_REQUEST_TIME, NULL},
    {"scheme", V_SCHEME, NULL},
    {"connection", V_CONNECTION, NULL},
    {"completed", V_COMPLETED, NULL},
    {"tls_version", V_SSL_PROTOCOL, NULL},
    {"tls_cipher", V_SSL_CIPHER, NULL},
    {"host", V_HTTP, "Host"},
    {"referer", V_HTTP, "Referer"},
    {"user_agent", V_HTTP, "User-Agent"},
};

static int json_key_taken(keel_str name)
{
    for (size_t i = 0; i < sizeof json_fields / sizeof *json_fields; i++)
        if (strlen(json_fields[i].key) == name.len &&
            memcmp(json_fields[i].key, name.ptr, name.len) == 0)
            return 1;
    return name.len == 9 && memcmp(name.ptr, "stream_id", 9) == 0;
}

static void build_json(line *l, keel_request *req, keel_response *res,
                       const keel_http_log_info *info, struct accesslog_worker *w)
{
    put(l, "{", 1);
    for (size_t i = 0; i < sizeof json_fields / sizeof *json_fields; i++) {
        if (i > 0)
            put(l, ",", 1);
        put(l, "\"", 1);
        puts_(l, json_fields[i].key);
        put(l, "\":", 2);
        put_var(l, json_fields[i].var, json_fields[i].header, req, res, info, w);
    }
    if (info->size > offsetof(keel_http_log_info, stream_id) && info->stream_id != 0) {
        put(l, ",\"stream_id\":", 13);
        put_u64(l, info->stream_id);
    }
    /* Then the fields modules set (the proxy's upstream_*), each a string
     * under its own name; one that a fixed key above already uses is
     * written as field_NAME, so that no key appears twice. */
    keel_header f;
    for (size_t i = 0; keel_request_log_field_at(req, i, &f) == KEEL_OK; i++) {
        put(l, ",\"", 2);
        if (json_key_taken(f.name))
            puts_(l, "field_");
        put(l, f.name.ptr, f.name.len);
        put(l, "\":", 2);
        put_str(l, f.value.ptr, f.value.len);
    }
    put(l, "}", 1);
}

/* ---- writing ---------------------------------------------------------------- */

static void flush_worker(struct accesslog_worker *w)
{
    if (w->len > 0)
        keel_appender_write(w->log->out, w->buf, w->len);
    w->len = 0;
}

static void on_flush_timer(keel_timer *timer, void *userdata)
{
    (void)timer;
    flush_worker(userdata);
}

static void accesslog_on_log(keel_request *req, keel_response *res, const keel_http_log_info *info,
                             void *userdata)
{
    struct accesslog *log = userdata;
    struct accesslog_worker *w = keel_worker_state(keel_request_worker(req), log->module);
    refresh_times(w);
    line l;
    l.len = 0;
    l.json = log->json;
    if (log->json)
        build_json(&l, req, res, info, w);
    else
        for (size_t i = 0; i < log->npieces; i++) {
            const piece *p = &log->pieces[i];
            if (p->var == V_LITERAL)
                put(&l, p->text, p->len);
            else
                put_var(&l, p->var, p->text, req, res, info, w);
        }
    l.buf[l.len++] = '\n';
    if (w->buf == NULL) {
        keel_appender_write(log->out, l.buf, l.len);
        return;
    }
    if (w->len + l.len > log->buffer)
        flush_worker(w);
    if (l.len > log->buffer) {
        keel_appender_write(log->out, l.buf, l.len);
        return;
    }
    memcpy(w->buf + w->len, l.buf, l.len);
    w->len += l.len;
}

/* ---- the template ----------------------------------------------------------- */

static int add_piece(struct accesslog *log, enum var var, const char *text, size_t len)
{
    piece *grown = realloc(log->pieces, (log->npieces + 1) * sizeof *grown);
    if (grown == NULL)
        return KEEL_ERR_NOMEM;
    log->pieces = grown;
    char *copy = NULL;
    if (text != NULL && (copy = malloc(len + 1)) == NULL)
        return KEEL_ERR_NOMEM;
    if (copy != NULL) {
        memcpy(copy, text, len);
        copy[len] = '\0';
    }
    log->pieces[log->npieces++] = (piece){var, copy, len};
    return KEEL_OK;
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* keel_request_set_log_field's rule for names. */
static int field_name_ok(const char *name, size_t len)
{
    if (len == 0 || len > 32)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (name[i] >= 'A' && name[i] <= 'Z')
            return 0;
    return 1;
}

/* "$name" or "${name}" (to write a letter right after it); "$$" is a
 * dollar. $http_x_forwarded_for names the request header
 * X-Forwarded-For (underscores become dashes, as in nginx). */
static int compile(keel_module *m, struct accesslog *log, const char *t)
{
    const char *lit = t;
    int rc = KEEL_OK;
    while (rc == KEEL_OK && *t) {
        if (*t != '$') {
            t++;
            continue;
        }
        if (t > lit && (rc = add_piece(log, V_LITERAL, lit, (size_t)(t - lit))) != KEEL_OK)
            return rc;
        if (t[1] == '$') {
            rc = add_piece(log, V_LITERAL, "$", 1);
            t += 2;
            lit = t;
            continue;
        }
        int braced = t[1] == '{';
        const char *name = t + 1 + braced, *end = name;
        while (is_name_char(*end))
            end++;
        size_t len = (size_t)(end - name);
        if (len == 0 || (braced && *end != '}'))
            return keel_config_error(m, "format", "a '$' not followed by a variable name: '%s'", t);
        t = end + braced;
        lit = t;
        size_t i;
        for (i = 0; i < sizeof variables / sizeof *variables; i++)
            if (strlen(variables[i].name) == len && memcmp(variables[i].name, name, len) == 0)
                break;
        if (i < sizeof variables / sizeof *variables) {
            enum var v = variables[i].var;
            if ((v == V_SSL_PROTOCOL || v == V_SSL_CIPHER) && !keel_tls_available())
                return keel_config_error(m, "format",
                                         "$%.*s needs the tls module: list tls before "
                                         "accesslog in [keel] modules",
                                         (int)len, name);
            rc = add_piece(log, v, NULL, 0);
            continue;
        }
        enum var v = V_LITERAL;
        size_t skip = 0;
        if (len > 6 && memcmp(name, "field_", 6) == 0) {
            v = V_FIELD;
            skip = 6;
        } else if (len > 9 && memcmp(name, "upstream_", 9) == 0) {
            v = V_FIELD; /* the proxy's fields keep their nginx names */
        } else if (len > 5 && memcmp(name, "http_", 5) == 0) {
            v = V_HTTP;
            skip = 5;
        } else if (len > 10 && memcmp(name, "sent_http_", 10) == 0) {
            v = V_SENT_HTTP;
            skip = 10;
        }
        if (v == V_LITERAL)
            return keel_config_error(m, "format", "unknown variable $%.*s (README.md lists them)",
                                     (int)len, name);
        if (v == V_FIELD && !field_name_ok(name + skip, len - skip))
            return keel_config_error(m, "format",
                                     "$%.*s: a log field's name is 1..32 of a-z, 0-9 and '_'",
                                     (int)len, name);
        if ((rc = add_piece(log, v, name + skip, len - skip)) != KEEL_OK)
            return rc;
        if (v == V_FIELD)
            continue; /* a field's name is written with '_' */
        for (char *c = log->pieces[log->npieces - 1].text; *c; c++)
            if (*c == '_')
                *c = '-';
    }
    if (rc == KEEL_OK && t > lit)
        rc = add_piece(log, V_LITERAL, lit, (size_t)(t - lit));
    return rc;
}

/* ---- the module --------------------------------------------------------------- */

/* The [accesslog] section (keel/config.h). */
typedef struct accesslog_conf {
    const char *path;
    const char *format;
    uint64_t buffer;
    uint64_t flush_ms;
} accesslog_conf;

static const keel_config_key accesslog_keys[] = {
    KEEL_KEY(accesslog_conf, path, "path", KEEL_CONFIG_PATH, .def = "access.log",
             .doc = "the log file, appended to off the loop; relative to the config file's "
                    "folder; `off`: no access log"),
    KEEL_KEY(accesslog_conf, format, "format", KEEL_CONFIG_STRING, .def = "combined",
             .doc = "combined (NCSA, with Referer and User-Agent), common, json (one object a "
                    "line), or a template of $variables (README.md)"),
    KEEL_KEY(accesslog_conf, buffer, "buffer", KEEL_CONFIG_SIZE, .def = "0", .max = 16777216,
             .doc = "lines each worker gathers before handing them to the writer thread; 0: "
                    "each line at once"),
    KEEL_KEY(accesslog_conf, flush_ms, "flush", KEEL_CONFIG_DURATION, .def = "1s", .min = 10,
             .max = 3600000, .doc = "with a buffer: the longest a line waits in it"),
};
KEEL_CONFIG_SCHEMA(accesslog_schema, accesslog_conf, accesslog_keys);

static void accesslog_free(struct accesslog *log)
{
    if (log == NULL)
        return;
    for (size_t i = 0; i < log->npieces; i++)
        free(log->pieces[i].text);
    free(log->pieces);
    free(log);
}

/* `path = off`: the module loads and logs nothing. */
static int is_off(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strcmp(base, "off") == 0;
}

static int accesslog_load(keel_module *module)
{
    const accesslog_conf *c = keel_module_config(module);
    if (is_off(c->path))
        return KEEL_OK;
    struct accesslog *log = calloc(1, sizeof *log);
    if (log == NULL)
        return KEEL_ERR_NOMEM;
    log->module = module;
    log->buffer = (size_t)c->buffer;
    log->flush_ms = c->flush_ms;
    /* TLS facts, when a tls module was loaded before this one. */
    keel_tls_bind(module);
    int rc = KEEL_OK;
    if (strcmp(c->format, "json") == 0)
        log->json = 1;
    else
        rc = compile(module, log,
                     strcmp(c->format, "combined") == 0 ? combined_template
                     : strcmp(c->format, "common") == 0 ? common_template
                                                        : c->format);
    if (rc == KEEL_OK && !log->json && strchr(c->format, '$') == NULL &&
        strcmp(c->format, "combined") != 0 && strcmp(c->format, "common") != 0)
        rc = keel_config_error(module, "format",
                               "'%s' is not combined, common, json or a template with "
                               "$variables",
                               c->format);
    if (rc == KEEL_OK && (log->out = keel_appender_open(module, c->path)) == NULL)
        rc = KEEL_ERR_IO;
    if (rc != KEEL_OK) {
        accesslog_free(log); /* unload runs only after a successful load */
        return rc;
    }
    log->filter = (keel_http_filter){
        .size = sizeof(keel_http_filter),
        .name = "accesslog",
        .order = KEEL_ORDER_LAST,
        .userdata = log,
        .on_log = accesslog_on_log,
    };
    /* auth_basic's user, when auth_basic is listed before accesslog. */
    const void *auth = NULL;
    if (keel_service_lookup(module, AUTH_BASIC_SERVICE, 1, &auth, NULL) == KEEL_OK)
        log->auth = auth;
    keel_module_set_data(module, log);
    return keel_http_filter_add(module, &log->filter);
}

static int accesslog_start(keel_module *module, keel_worker *worker, void *state)
{
    struct accesslog_worker *w = state;
    struct accesslog *log = keel_module_data(module);
    w->log = log;
    if (log == NULL || log->buffer == 0)
        return KEEL_OK;
    if ((w->buf = malloc(log->buffer)) == NULL)
        return KEEL_ERR_NOMEM;
    w->timer = keel_timer_start(worker, log->flush_ms, log->flush_ms, on_flush_timer, w);
    if (w->timer == NULL) {
        free(w->buf);
        w->buf = NULL;
        return KEEL_ERR_NOMEM;
    }
    return KEEL_OK;
}

/* After the worker's last connection: what is buffered goes to the
 * appender, which the core flushes and closes after unload. */
static void accesslog_stop(keel_module *module, keel_worker *worker, void *state)
{
    struct accesslog_worker *w = state;
    (void)module;
    (void)worker;
    if (w->buf == NULL)
        return;
    flush_worker(w);
    keel_timer_stop(w->timer);
    free(w->buf);
    w->buf = NULL;
}

static void accesslog_unload(keel_module *module)
{
    accesslog_free(keel_module_data(module));
}

KEEL_MODULE(accesslog, .version = "1.1.0", .worker_state_size = sizeof(struct accesslog_worker),
            .load = accesslog_load, .start = accesslog_start, .stop = accesslog_stop,
            .unload = accesslog_unload, .config = &accesslog_schema);
