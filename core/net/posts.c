/* Cross-thread posts (keel_worker_post): any thread queues a function
 * under the worker's lock and wakes its loop; the worker runs the queue
 * in order (net/worker.c's wake-up, and once more before modules stop). */
#include <stdlib.h>

#include "net/worker.h"
#include "runtime/crash.h"

struct kl_post {
    keel_post_fn fn;
    void *userdata;
    kl_post *next;
};

int keel_worker_post(keel_worker *w, keel_post_fn fn, void *userdata)
{
    if (fn == NULL)
        return KEEL_ERR_INVAL;
    kl_post *p = malloc(sizeof *p);
    if (p == NULL)
        return KEEL_ERR_NOMEM;
    p->fn = fn;
    p->userdata = userdata;
    p->next = NULL;
    uv_mutex_lock(&w->lock);
    int closed = w->closed;
    if (!closed) {
        if (w->posts_tail)
            w->posts_tail->next = p;
        else
            w->posts = p;
        w->posts_tail = p;
        uv_async_send(&w->wakeup);
    }
    uv_mutex_unlock(&w->lock);
    if (closed) {
        free(p);
        return KEEL_ERR_SHUTDOWN;
    }
    return KEEL_OK;
}

void kl_posts_run(keel_worker *w, kl_post *list)
{
    while (list != NULL) {
        kl_post *next = list->next;
        KL_IN_CALLBACK(list->fn, list->fn(w, list->userdata));
        free(list);
        list = next;
    }
}
