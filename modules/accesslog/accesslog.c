/* accesslog — one line per HTTP exchange in the Common or Combined Log
 * Format, written by a background thread (keel_appender) so that a slow
 * disk never stalls a worker:
 *
 *     [accesslog]
 *     path = /var/log/keel/access.log
 *     format = combined            ; or common
 *
 * 127.0.0.1 - - [29/Nov/2026:22:00:00 +0000] "GET / HTTP/1.1" 200 13 "-" "curl/7.88.1"
 *
 * The third field (CLF's authuser) is the auth_basic user when auth_basic
 * is listed before accesslog in [keel] modules.
 */
#include <keel/keel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../auth_basic/auth_basic.h"

/* Allocated in load, freed in unload: the filter is part of it, so its
 * userdata leads back here without any global. */
struct accesslog {
    keel_http_filter filter;
    keel_module *module;
    keel_appender *out;
    int combined;
    const auth_basic_service *auth; /* the user field (CLF's authuser), if loaded before */
};

/* The formatted time changes once a second: each worker keeps its own. */
struct accesslog_worker {
    int64_t second;
    char clf[40];
};

/* Copies s into out, escaping what would break the line or its quoting
 * (the escapes Apache uses: \" \\ and \xHH for control bytes). */
static size_t put_escaped(char *out, size_t room, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < room; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    return o;
}

static size_t put_quoted_header(char *out, size_t room, keel_request *req, const char *name)
{
    keel_str v = keel_request_header(req, name);
    if (room < 4)
        return 0;
    size_t o = 0;
    out[o++] = '"';
    if (v.ptr == NULL)
        out[o++] = '-';
    else
        o += put_escaped(out + o, room - o - 2, v.ptr, v.len);
    out[o++] = '"';
    return o;
}

static void accesslog_on_log(keel_request *req, keel_response *res, const keel_http_log_info *info,
                             void *userdata)
{
    struct accesslog *cfg = userdata;
    struct accesslog_worker *w = keel_worker_state(keel_request_worker(req), cfg->module);
    (void)res;

    int64_t now = keel_time_now();
    if (now != w->second) {
        keel_time_format(now, KEEL_TIME_CLF, w->clf, sizeof w->clf);
        w->second = now;
    }

    /* The client's address without its port (CLF's remote host). */
    char peer[64];
    if (keel_request_peer_ip(req, peer, sizeof peer) != KEEL_OK)
        strcpy(peer, "-");

    char line[4096];
    size_t room = sizeof line - 1; /* keep one byte for the newline */
    keel_str user = cfg->auth != NULL ? cfg->auth->user(req) : (keel_str){NULL, 0};
    int n = snprintf(line, room, "%s - ", peer);
    size_t o = n > 0 ? (size_t)n : 0;
    if (user.ptr != NULL && user.len > 0)
        o += put_escaped(line + o, 256, user.ptr, user.len);
    else
        line[o++] = '-';
    n = snprintf(line + o, room - o, " [%s] \"", w->clf);
    o += n > 0 ? (size_t)n : 0;
    keel_str method = keel_request_method(req), target = keel_request_target(req);
    o += put_escaped(line + o, room - o, method.ptr, method.len);
    if (o + 1 < room)
        line[o++] = ' ';
    o += put_escaped(line + o, room - o, target.ptr, target.len);
    int version = keel_request_version(req);
    n = snprintf(line + o, room - o, " HTTP/%d.%d\" %d ", version / 10, version % 10,
                 info->status ? info->status : 0);
    o += n > 0 && (size_t)n < room - o ? (size_t)n : 0;
    if (info->body_bytes > 0)
        n = snprintf(line + o, room - o, "%llu", (unsigned long long)info->body_bytes);
    else
        n = snprintf(line + o, room - o, "-");
    o += n > 0 && (size_t)n < room - o ? (size_t)n : 0;
    if (cfg->combined && o + 2 < room) {
        line[o++] = ' ';
        o += put_quoted_header(line + o, room - o, req, "Referer");
        if (o + 1 < room)
            line[o++] = ' ';
        o += put_quoted_header(line + o, room - o, req, "User-Agent");
    }
    line[o++] = '\n';
    keel_appender_write(cfg->out, line, o);
}

/* The [accesslog] section (keel/config.h). */
typedef struct accesslog_conf {
    const char *path;
    int format; /* an index into formats */
} accesslog_conf;

static const char *const formats[] = {"combined", "common", NULL};

static const keel_config_key accesslog_keys[] = {
    KEEL_KEY(accesslog_conf, path, "path", KEEL_CONFIG_STRING, .def = "access.log",
             .doc = "the log file, appended to off the loop"),
    KEEL_KEY(accesslog_conf, format, "format", KEEL_CONFIG_ENUM, .def = "combined",
             .choices = formats, .doc = "NCSA combined (with Referer and User-Agent) or common"),
};
KEEL_CONFIG_SCHEMA(accesslog_schema, accesslog_conf, accesslog_keys);

static int accesslog_load(keel_module *module)
{
    const accesslog_conf *c = keel_module_config(module);
    const char *path = c->path;
    int combined = c->format == 0;
    struct accesslog *cfg = calloc(1, sizeof *cfg);
    if (cfg == NULL)
        return KEEL_ERR_NOMEM;
    cfg->module = module;
    cfg->combined = combined;
    cfg->filter = (keel_http_filter){
        .size = sizeof(keel_http_filter),
        .name = "accesslog",
        .order = KEEL_ORDER_LAST,
        .userdata = cfg,
        .on_log = accesslog_on_log,
    };
    /* auth_basic's user, when auth_basic is listed before accesslog. */
    const void *auth = NULL;
    if (keel_service_lookup(module, AUTH_BASIC_SERVICE, 1, &auth, NULL) == KEEL_OK)
        cfg->auth = auth;
    keel_module_set_data(module, cfg);
    if ((cfg->out = keel_appender_open(module, path)) == NULL) {
        keel_module_set_data(module, NULL);
        free(cfg); /* unload runs only after a successful load */
        return KEEL_ERR_IO;
    }
    return keel_http_filter_add(module, &cfg->filter);
}

static void accesslog_unload(keel_module *module)
{
    /* The appender is flushed and closed by the core after unload. */
    free(keel_module_data(module));
}

KEEL_MODULE(accesslog, .version = "1.0.0", .worker_state_size = sizeof(struct accesslog_worker),
            .load = accesslog_load, .unload = accesslog_unload, .config = &accesslog_schema);
