/* Appenders: a memory buffer per file, filled by any thread under a short
 * lock and written out by one background thread per file, so that an
 * access log on a slow disk never blocks a worker's loop. */
#include "server/appender.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "base/log.h"
#include "platform/platform.h"
#include "server/server.h"
#include "base/util.h"

#define APPENDER_MAX_PENDING (4u * 1024 * 1024)

struct keel_appender {
    char *path;
    FILE *file;
    uv_thread_t thread;
    uv_mutex_t lock;
    uv_cond_t wake;
    char *pending; /* bytes waiting to be written */
    size_t len, cap;
    int closing;
    int reopen; /* SIGUSR1: open the file again under its name */
    uint64_t dropped;
    keel_appender *next;
};

static void writer_main(void *arg)
{
    keel_appender *a = arg;
    char *batch = NULL;
    size_t batch_cap = 0;
    uv_mutex_lock(&a->lock);
    for (;;) {
        while (a->len == 0 && !a->closing && !a->reopen)
            uv_cond_wait(&a->wake, &a->lock);
        if (a->reopen) {
            /* Before the lines waiting: whatever was appended after the
             * request goes to the new file. */
            a->reopen = 0;
            uv_mutex_unlock(&a->lock);
            int rc = kl_file_reopen(a->file, a->path);
            if (rc != 0)
                kl_log(KEEL_LOG_ERROR,
                       "cannot reopen %s: %s; still writing to the file opened before", a->path,
                       uv_strerror(rc));
            uv_mutex_lock(&a->lock);
            continue;
        }
        if (a->len == 0 && a->closing)
            break;
        /* Swap buffers so writers only wait for the swap, not the disk. */
        char *full = a->pending;
        size_t full_cap = a->cap, len = a->len;
        a->pending = batch;
        a->cap = batch_cap;
        a->len = 0;
        batch = full;
        batch_cap = full_cap;
        uv_mutex_unlock(&a->lock);
        fwrite(batch, 1, len, a->file); /* one write(2): the stream is unbuffered */
        uv_mutex_lock(&a->lock);
    }
    uv_mutex_unlock(&a->lock);
    free(batch);
}

keel_appender *keel_appender_open(keel_module *m, const char *path)
{
    keel_server *s = m->server;
    keel_appender *a = calloc(1, sizeof *a);
    if (a == NULL || (a->path = kl_strdup(path)) == NULL) {
        free(a);
        return NULL;
    }
    a->file = fopen(path, "a");
    if (a->file == NULL) {
        kl_log(KEEL_LOG_ERROR, "module '%s': cannot open %s: %s", m->name, path, strerror(errno));
        free(a->path);
        free(a);
        return NULL;
    }
    /* A batch is whole lines and must reach the file in one write(2): with
     * O_APPEND that lands in one piece even while another process appends
     * to the same file (the old and the new keel during a reload), where
     * stdio's buffer would cut it at 4 KiB and let the other's lines in. */
    setvbuf(a->file, NULL, _IONBF, 0);
    uv_mutex_init(&a->lock);
    uv_cond_init(&a->wake);
    if (uv_thread_create(&a->thread, writer_main, a) != 0) {
        fclose(a->file);
        uv_cond_destroy(&a->wake);
        uv_mutex_destroy(&a->lock);
        free(a->path);
        free(a);
        return NULL;
    }
    uv_mutex_lock(&s->lock);
    a->next = s->appenders;
    s->appenders = a;
    uv_mutex_unlock(&s->lock);
    return a;
}

int keel_appender_write(keel_appender *a, const void *data, size_t len)
{
    int rc = KEEL_OK;
    uv_mutex_lock(&a->lock);
    if (a->len + len > APPENDER_MAX_PENDING) {
        a->dropped += len;
        rc = KEEL_ERR_LIMIT;
    } else {
        if (a->len + len > a->cap) {
            size_t cap = a->cap ? a->cap : 16384;
            while (cap < a->len + len)
                cap *= 2;
            char *grown = realloc(a->pending, cap);
            if (grown == NULL)
                rc = KEEL_ERR_NOMEM;
            else {
                a->pending = grown;
                a->cap = cap;
            }
        }
        if (rc == KEEL_OK) {
            memcpy(a->pending + a->len, data, len);
            a->len += len;
        }
    }
    uv_mutex_unlock(&a->lock);
    if (rc == KEEL_OK)
        uv_cond_signal(&a->wake);
    return rc;
}

void kl_appenders_reopen(keel_server *s)
{
    uv_mutex_lock(&s->lock);
    for (keel_appender *a = s->appenders; a != NULL; a = a->next) {
        uv_mutex_lock(&a->lock);
        a->reopen = 1;
        uv_mutex_unlock(&a->lock);
        uv_cond_signal(&a->wake);
    }
    uv_mutex_unlock(&s->lock);
}

void kl_appenders_close(keel_server *s)
{
    while (s->appenders != NULL) {
        keel_appender *a = s->appenders;
        s->appenders = a->next;
        uv_mutex_lock(&a->lock);
        a->closing = 1;
        uv_mutex_unlock(&a->lock);
        uv_cond_signal(&a->wake);
        uv_thread_join(&a->thread);
        if (a->dropped > 0)
            kl_log(KEEL_LOG_WARN, "%s: %llu bytes dropped (the disk did not keep up)", a->path,
                   (unsigned long long)a->dropped);
        fclose(a->file);
        uv_cond_destroy(&a->wake);
        uv_mutex_destroy(&a->lock);
        free(a->pending);
        free(a->path);
        free(a);
    }
}
