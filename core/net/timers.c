/* Module timers (keel_timer_*): one uv_timer_t each, on the worker's loop,
 * listed on the worker so that those still running when it stops are
 * freed. Connection timeouts do not use these (net/timeouts.c). */
#include <stdlib.h>

#include "net/worker.h"
#include "runtime/crash.h"

struct keel_timer {
    uv_timer_t handle;
    keel_worker *worker;
    keel_timer_cb cb;
    void *userdata;
    keel_timer *prev, *next;
};

static void on_timer(uv_timer_t *handle)
{
    keel_timer *t = handle->data;
    KL_IN_CALLBACK(t->cb, t->cb(t, t->userdata));
}

static void on_timer_closed(uv_handle_t *handle)
{
    free(handle->data);
}

static void close_timer(keel_timer *t)
{
    keel_worker *w = t->worker;
    if (t->prev)
        t->prev->next = t->next;
    else
        w->timers = t->next;
    if (t->next)
        t->next->prev = t->prev;
    uv_close((uv_handle_t *)&t->handle, on_timer_closed);
}

keel_timer *keel_timer_start(keel_worker *w, uint64_t timeout_ms, uint64_t repeat_ms,
                             keel_timer_cb cb, void *userdata)
{
    if (cb == NULL || w->finishing)
        return NULL;
    keel_timer *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    uv_timer_init(&w->loop, &t->handle);
    t->handle.data = t;
    t->worker = w;
    t->cb = cb;
    t->userdata = userdata;
    t->next = w->timers;
    if (w->timers)
        w->timers->prev = t;
    w->timers = t;
    uv_timer_start(&t->handle, on_timer, timeout_ms, repeat_ms);
    return t;
}

void keel_timer_stop(keel_timer *t)
{
    if (t != NULL)
        close_timer(t);
}

int keel_timer_restart(keel_timer *t, uint64_t timeout_ms, uint64_t repeat_ms)
{
    if (t == NULL)
        return KEEL_ERR_INVAL;
    if (t->worker->finishing)
        return KEEL_ERR_SHUTDOWN;
    /* uv_timer_start on an active timer re-arms it in place. */
    uv_timer_start(&t->handle, on_timer, timeout_ms, repeat_ms);
    return KEEL_OK;
}

void kl_timers_close_all(keel_worker *w)
{
    while (w->timers != NULL)
        close_timer(w->timers);
}
