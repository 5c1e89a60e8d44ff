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
} log_state = {.once = UV_ONCE_INIT, .level = KEEL_LOG_INFO};

static void log_init_once(void)
{
    uv_mutex_init(&log_state.lock);
}

void kl_log_init(void)
{
    uv_once(&log_state.once, log_init_once);
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

void kl_log_prefixed(const char *prefix, int level, const char *fmt, va_list ap)
{
    if (!kl_log_enabled(level))
        return;
    if (level < KEEL_LOG_ERROR)
        level = KEEL_LOG_ERROR;
    if (level > KEEL_LOG_DEBUG)
        level = KEEL_LOG_DEBUG;

    /* The whole line is formatted first and written with one call, so lines
     * from different threads never interleave. */
    char line[2048];
    uv_timeval64_t now;
    uv_gettimeofday(&now);
    struct tm tm;
    kl_gmtime((int64_t)now.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ [%s] %s%s",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(now.tv_usec / 1000), level_names[level], prefix ? prefix : "",
                     prefix ? ": " : "");
    if (n < 0)
        return;
    size_t used = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    int m = vsnprintf(line + used, sizeof line - used, fmt, ap);
    if (m > 0)
        used += (size_t)m < sizeof line - used ? (size_t)m : sizeof line - used - 1;
    if (used > sizeof line - 2)
        used = sizeof line - 2;
    line[used++] = '\n';

    kl_log_init();
    uv_mutex_lock(&log_state.lock);
    FILE *out = log_state.file ? log_state.file : stderr;
    fwrite(line, 1, used, out);
    fflush(out);
    uv_mutex_unlock(&log_state.lock);
}

void kl_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kl_log_prefixed(NULL, level, fmt, ap);
    va_end(ap);
}
