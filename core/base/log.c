#include "base/log.h"

#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <time.h>

#include <uv.h>

#include "platform/platform.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static struct {
    uv_once_t once;
    uv_mutex_t lock; /* guards `file` against a reconfigure while writing */
    FILE *file;      /* NULL means stderr */
    char path[4096]; /* the file's name, for a reopen */
    int level;
    int format; /* enum kl_log_format */
} log_state = {.once = UV_ONCE_INIT, .level = KEEL_LOG_INFO};

static void log_init_once(void)
{
    uv_mutex_init(&log_state.lock);
}

void kl_log_init(void)
{
    uv_once(&log_state.once, log_init_once);
}

#if defined(_MSC_VER) && !defined(__clang__)
static __declspec(thread) int thread_worker = -1;
#else
static _Thread_local int thread_worker = -1;
#endif

void kl_log_thread_worker(int id)
{
    thread_worker = id;
}

void kl_log_set_format(int format)
{
    log_state.format = format;
}

int kl_log_format_parse(const char *name)
{
    if (strcmp(name, "text") == 0)
        return KL_LOG_TEXT;
    if (strcmp(name, "json") == 0)
        return KL_LOG_JSON;
    return -1;
}

int kl_log_level_parse(const char *name)
{
    for (int i = 0; i < (int)(sizeof level_names / sizeof level_names[0]); i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

int kl_log_configure(const char *target, int level, char *err, size_t errlen)
{
    FILE *file = NULL;
    if (target != NULL && strcmp(target, "stderr") != 0) {
        file = fopen(target, "a");
        if (file == NULL) {
            snprintf(err, errlen, "cannot open log file %s: %s", target, strerror(errno));
            return KEEL_ERR_IO;
        }
    }
    kl_log_init();
    uv_mutex_lock(&log_state.lock);
    if (log_state.file != NULL)
        fclose(log_state.file);
    log_state.file = file;
    snprintf(log_state.path, sizeof log_state.path, "%s", file != NULL ? target : "");
    log_state.level = level;
    uv_mutex_unlock(&log_state.lock);
    return KEEL_OK;
}

int kl_log_reopen(char *err, size_t errlen)
{
    kl_log_init();
    uv_mutex_lock(&log_state.lock);
    int rc = log_state.file != NULL ? kl_file_reopen(log_state.file, log_state.path) : 0;
    if (rc != 0)
        snprintf(err, errlen, "cannot reopen the log file %s: %s", log_state.path, uv_strerror(rc));
    uv_mutex_unlock(&log_state.lock);
    return rc == 0 ? KEEL_OK : KEEL_ERR_IO;
}

FILE *kl_log_file(void)
{
    kl_log_init();
    uv_mutex_lock(&log_state.lock);
    FILE *file = log_state.file;
    uv_mutex_unlock(&log_state.lock);
    return file;
}

int kl_log_enabled(int level)
{
    return level <= log_state.level;
}

int kl_log_limit_pass(kl_log_limit *limit, uint64_t now_ms, uint64_t *held)
{
    if (limit->any && now_ms - limit->last_ms < 1000) {
        limit->held++;
        return 0;
    }
    *held = limit->held;
    limit->held = 0;
    limit->last_ms = now_ms;
    limit->any = 1;
    return 1;
}

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0
 * (RFC 3629 4: no overlongs, no surrogates, nothing above U+10FFFF). */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len = c < 0xc2 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf5 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

/* Appends s as a JSON string (quotes included) to out[*used..cap), leaving
 * room for the closing "}\n"; what does not fit is cut at a character. */
static void json_string(char *out, size_t cap, size_t *used, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t u = *used, end = cap - 4; /* the closing quote, '}', '\n' and one spare */
    if (u >= end)
        return;
    out[u++] = '"';
    const unsigned char *p = (const unsigned char *)s, *stop = p + strlen(s);
    while (p < stop) {
        char esc[8];
        size_t n = 0, take = 1;
        const char *from = esc;
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p, n = 2;
        } else if (*p == '\n') {
            esc[0] = '\\', esc[1] = 'n', n = 2;
        } else if (*p < 0x20 || *p == 0x7f) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[*p >> 4], esc[5] = hex[*p & 15], n = 6;
        } else if (*p < 0x80) {
            from = (const char *)p, n = 1;
        } else if ((take = utf8_length(p, (size_t)(stop - p))) > 0) {
            from = (const char *)p, n = take;
        } else {
            memcpy(esc, "\\ufffd", 6), n = 6, take = 1;
        }
        if (u + n > end)
            break;
        memcpy(out + u, from, n);
        u += n;
        p += take;
    }
    out[u++] = '"';
    *used = u;
}

static void log_write(const char *module, const char *prefix, int level, const char *fmt,
                      va_list ap)
{
    if (!kl_log_enabled(level))
        return;
    if (level < KEEL_LOG_ERROR)
        level = KEEL_LOG_ERROR;
    if (level > KEEL_LOG_DEBUG)
        level = KEEL_LOG_DEBUG;

    /* The whole line is formatted first and written with one call, so lines
     * from different threads never interleave. */
    char line[2048], time[64], text[1536];
    uv_timeval64_t now;
    uv_gettimeofday(&now);
    struct tm tm;
    kl_gmtime((int64_t)now.tv_sec, &tm);
    snprintf(time, sizeof time, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(now.tv_usec / 1000));
    const char *label = module != NULL ? module : prefix;
    size_t used;
    if (log_state.format == KL_LOG_JSON) {
        int n = snprintf(text, sizeof text, "%s%s", module == NULL && prefix ? prefix : "",
                         module == NULL && prefix ? ": " : "");
        if (n >= 0 && (size_t)n < sizeof text)
            vsnprintf(text + n, sizeof text - (size_t)n, fmt, ap);
        int h = snprintf(line, sizeof line, "{\"time\":\"%s\",\"level\":\"%s\",\"worker\":", time,
                         level_names[level]);
        if (h < 0)
            return;
        used = (size_t)h;
        if (thread_worker >= 0)
            used += (size_t)snprintf(line + used, sizeof line - used, "%d", thread_worker);
        else
            used += (size_t)snprintf(line + used, sizeof line - used, "null");
        used += (size_t)snprintf(line + used, sizeof line - used, ",\"module\":");
        if (module != NULL)
            json_string(line, sizeof line, &used, module);
        else
            used += (size_t)snprintf(line + used, sizeof line - used, "null");
        used += (size_t)snprintf(line + used, sizeof line - used, ",\"message\":");
        json_string(line, sizeof line, &used, text);
        line[used++] = '}';
    } else {
        int n = snprintf(line, sizeof line, "%s [%s] %s%s", time, level_names[level],
                         label ? label : "", label ? ": " : "");
        if (n < 0)
            return;
        used = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
        int m = vsnprintf(line + used, sizeof line - used, fmt, ap);
        if (m > 0)
            used += (size_t)m < sizeof line - used ? (size_t)m : sizeof line - used - 1;
        if (used > sizeof line - 2)
            used = sizeof line - 2;
    }
    line[used++] = '\n';

    kl_log_init();
    uv_mutex_lock(&log_state.lock);
    FILE *out = log_state.file ? log_state.file : stderr;
    fwrite(line, 1, used, out);
    fflush(out);
    uv_mutex_unlock(&log_state.lock);
}

void kl_log_prefixed(const char *prefix, int level, const char *fmt, va_list ap)
{
    log_write(NULL, prefix, level, fmt, ap);
}

void kl_log_module(const char *module, int level, const char *fmt, va_list ap)
{
    log_write(module, NULL, level, fmt, ap);
}

void kl_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kl_log_prefixed(NULL, level, fmt, ap);
    va_end(ap);
}
