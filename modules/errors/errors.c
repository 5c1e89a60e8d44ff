/* errors.c — error pages per scope, as nginx's error_page and Caddy's
 * handle_errors:
 *
 *     [errors]
 *     page = 404 /404.html
 *     page = 500 502 503 504 /50x.html
 *     [/app/]
 *     errors.page = 404 =200 /app/index.html
 *
 * When the core is about to answer an error with its short text (the
 * router's 404, 413, a handler's 500, the proxy's 502 and 504,
 * and every keel_response_send_status of a handler), the first `page`
 * line of the request's scope that names the status answers instead:
 * the response becomes what the route for its path answers (an internal
 * redirect: usually a file the static module serves), with the error's
 * status unless the line says `=CODE`. A page that fails itself (a
 * missing /404.html) gets the short text of the first error: there is no
 * second redirect. Responses a handler made with its own body are left
 * alone, as nginx leaves them without proxy_intercept_errors.
 */
#include <keel/keel.h>
#include <keel/util.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct errors_conf {
    keel_config_list page;
} errors_conf;

/* One `page` line: which statuses, the status to answer with (0: the
 * error's), and where the path starts. */
typedef struct page_line {
    int codes[32];
    size_t ncodes;
    int answer;
    const char *path;
} page_line;

/* "CODE... [=CODE] /PATH": 0, or -1 with the reason in why. */
static int parse_line(const char *v, page_line *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    const char *at = v, *s;
    size_t n;
    while (keel_word_next(&at, v + strlen(v), 0, &s, &n)) {
        if (*s == '/') {
            if (s[n] != '\0') {
                snprintf(why, whylen, "the path must come last: '%s'", v);
                return -1;
            }
            out->path = s;
            break;
        }
        int eq = *s == '=';
        char *stop;
        long code = strtol(s + eq, &stop, 10);
        if (stop != s + n || n - (size_t)eq != 3 || (eq && out->answer != 0)) {
            snprintf(why, whylen, "expected STATUS... [=STATUS] /PATH, not '%s'", v);
            return -1;
        }
        if (eq) {
            if (code < 200 || code > 599) {
                snprintf(why, whylen, "=%ld: the status to answer with is 200..599", code);
                return -1;
            }
            out->answer = (int)code;
        } else {
            /* What the core asks about: 400..599 (RFC 9110 15.5, 15.6). */
            if (code < 400 || code > 599 || out->answer != 0) {
                snprintf(why, whylen,
                         "%ld: an error page is for statuses 400..599, written "
                         "before =STATUS",
                         code);
                return -1;
            }
            if (code == 405) {
                snprintf(why, whylen,
                         "405 keeps keel's answer: it must carry Allow "
                         "(RFC 9110 15.5.6)");
                return -1;
            }
            if (out->ncodes == sizeof out->codes / sizeof out->codes[0]) {
                snprintf(why, whylen, "at most 32 statuses on one line");
                return -1;
            }
            out->codes[out->ncodes++] = (int)code;
        }
    }
    if (out->ncodes == 0 || out->path == NULL) {
        snprintf(why, whylen, "expected STATUS... [=STATUS] /PATH, not '%s'", v);
        return -1;
    }
    for (const char *c = out->path; *c; c++)
        if ((unsigned char)*c < 0x21 || *c == 0x7f || *c == '#') {
            snprintf(why, whylen, "the path '%s' holds a blank or control byte", out->path);
            return -1;
        }
    if (strstr(out->path, "/./") || strstr(out->path, "/../") ||
        (strlen(out->path) >= 2 && strcmp(out->path + strlen(out->path) - 2, "/.") == 0) ||
        (strlen(out->path) >= 3 && strcmp(out->path + strlen(out->path) - 3, "/..") == 0)) {
        snprintf(why, whylen, "the path '%s' has a dot segment", out->path);
        return -1;
    }
    return 0;
}

static int check_page(const char *value, char *why, size_t whylen)
{
    page_line line;
    return parse_line(value, &line, why, whylen);
}

static const keel_config_key errors_keys[] = {
    KEEL_KEY(errors_conf, page, "page", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY,
             .doc = "STATUS... [=STATUS] /PATH: answer these errors with what PATH answers "
                    "(internally), keeping the status unless =STATUS",
             .check = check_page),
};
KEEL_CONFIG_SCHEMA(errors_schema, errors_conf, errors_keys);

static int on_error(keel_request *req, keel_response *res, int status, void *userdata)
{
    keel_module *module = userdata;
    const errors_conf *c = keel_request_config(req, module);
    for (size_t i = 0; i < c->page.count; i++) {
        page_line line;
        char why[160];
        if (parse_line(c->page.items[i], &line, why, sizeof why) != 0)
            continue; /* the core refused such a line at start-up */
        for (size_t k = 0; k < line.ncodes; k++) {
            if (line.codes[k] != status)
                continue;
            int rc =
                keel_response_redirect_internal(res, line.path, line.answer ? line.answer : status);
            if (rc == KEEL_OK)
                return KEEL_HTTP_DONE;
            keel_log(module, KEEL_LOG_WARN, "error page %s for %d: %s", line.path, status,
                     keel_strerror(rc));
            return KEEL_HTTP_NEXT;
        }
    }
    return KEEL_HTTP_NEXT;
}

static int errors_load(keel_module *module)
{
    return keel_http_error_handler_set(module, on_error, module);
}

KEEL_MODULE(errors, .version = "1.0.0", .load = errors_load, .config = &errors_schema);
