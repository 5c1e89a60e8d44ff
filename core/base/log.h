/* core/base/log.h — the process-wide log: one line per message, any thread. */
#ifndef KEEL_CORE_LOG_H
#define KEEL_CORE_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <keel/export.h>
#include <keel/types.h>

/* Must run once before any other log call (keel_server_new does it). */
void kl_log_init(void);

/* Directs the log to "stderr" or to a file opened for appending, and sets the
 * most verbose level written. On failure the log is unchanged and err says
 * why. Main thread, while no worker runs. */
int kl_log_configure(const char *target, int level, char *err, size_t errlen);

/* Opens the log file again under its name (SIGUSR1, after a rotation
 * renamed it): lines from now on go to the new file. Nothing happens when
 * the log is stderr. On failure the old file is kept and err says why.
 * Any thread. */
int kl_log_reopen(char *err, size_t errlen);

/* [keel] log_format: text lines ("TIME [LEVEL] MODULE: MESSAGE") or JSON
 * lines, one object per line with the keys time, level, worker (null off
 * a worker thread), module (null for the core's own) and message, each
 * string escaped (RFC 8259 7; bytes that are not UTF-8 become U+FFFD), so
 * that a log shipper reads every line whatever a message holds. Main
 * thread, while no worker runs. */
enum kl_log_format { KL_LOG_TEXT = 0, KL_LOG_JSON };
void kl_log_set_format(int format);

/* Parses "text" or "json". Returns the format or -1. */
int kl_log_format_parse(const char *name);

/* Names the calling thread as worker `id` in the log's JSON lines; -1:
 * none. Each worker's thread, as it starts. */
void kl_log_thread_worker(int id);

/* Parses "error", "warn", "info" or "debug". Returns the level or -1. */
int kl_log_level_parse(const char *name);

/* Logs on behalf of the core (no module prefix). */
void kl_log(int level, const char *fmt, ...) KEEL_PRINTF(2, 3);

/* Logs with an optional prefix (where in the config); prefix may be NULL.
 * In JSON lines the prefix is part of the message. */
void kl_log_prefixed(const char *prefix, int level, const char *fmt, va_list ap);

/* Logs for module `module` (NULL: the core): "MODULE: " in text lines, the
 * "module" key in JSON lines. */
void kl_log_module(const char *module, int level, const char *fmt, va_list ap);

int kl_log_enabled(int level);

/* A line that can come in bursts (every accept and every open fails while
 * descriptors run out): at most one a second from one place, the lines held
 * back counted and reported with the next one. The caller keeps the state
 * and calls from one thread (a worker's, the main loop's). */
typedef struct kl_log_limit {
    uint64_t last_ms; /* when the last line was let through */
    uint64_t held;    /* lines held back since */
    int any;          /* a line was let through already */
} kl_log_limit;

/* 1 if a line may be written at now_ms (a monotonic clock in ms: uv_now),
 * with *held how many were held back since the last one (the count then
 * restarts); 0 if this one is held back, counted. */
int kl_log_limit_pass(kl_log_limit *limit, uint64_t now_ms, uint64_t *held);

/* The file the log is written to, or NULL for stderr. For the crash
 * report, which writes to its descriptor directly. */
FILE *kl_log_file(void);

#endif
