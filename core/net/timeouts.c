#include "net/timeouts.h"

#include <stdlib.h>

#include <keel/types.h>

struct kl_tqueue {
    uint64_t duration;
    kl_tnode head; /* sentinel of a circular list, oldest first */
    kl_tqueue *next;
};

static void on_timer(uv_timer_t *timer);

int kl_timeouts_init(kl_timeouts *t, uv_loop_t *loop, kl_timeout_fn expire)
{
    t->queues = NULL;
    t->armed_for = 0;
    t->expire = expire;
    int rc = uv_timer_init(loop, &t->timer);
    if (rc != 0)
        return KEEL_ERR_IO;
    t->timer.data = t;
    /* The timer alone must not keep a worker's loop alive. */
    uv_unref((uv_handle_t *)&t->timer);
    return KEEL_OK;
}

static void arm(kl_timeouts *t, uint64_t deadline)
{
    if (t->armed_for != 0 && t->armed_for <= deadline)
        return;
    uint64_t now = uv_now(t->timer.loop);
    t->armed_for = deadline;
    uv_timer_start(&t->timer, on_timer, deadline > now ? deadline - now : 0, 0);
}

static kl_tqueue *queue_for(kl_timeouts *t, uint64_t duration)
{
    for (kl_tqueue *q = t->queues; q; q = q->next)
        if (q->duration == duration)
            return q;
    kl_tqueue *q = malloc(sizeof *q);
    if (q == NULL)
        return NULL;
    q->duration = duration;
    q->head.prev = q->head.next = &q->head;
    q->head.queue = q;
    q->next = t->queues;
    t->queues = q;
    return q;
}

void kl_timeouts_remove(kl_tnode *node)
{
    if (node->queue == NULL)
        return;
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->queue = NULL;
}

static void append(kl_timeouts *t, kl_tqueue *q, kl_tnode *node)
{
    node->deadline = uv_now(t->timer.loop) + q->duration;
    node->queue = q;
    node->prev = q->head.prev;
    node->next = &q->head;
    q->head.prev->next = node;
    q->head.prev = node;
    /* Only the first node of a queue can move the earliest deadline
     * forward; later ones expire after it anyway. */
    if (node->prev == &q->head)
        arm(t, node->deadline);
}

int kl_timeouts_set(kl_timeouts *t, kl_tnode *node, uint64_t duration)
{
    kl_timeouts_remove(node);
    if (duration == 0)
        return KEEL_OK;
    kl_tqueue *q = queue_for(t, duration);
    if (q == NULL)
        return KEEL_ERR_NOMEM;
    append(t, q, node);
    return KEEL_OK;
}

void kl_timeouts_touch(kl_timeouts *t, kl_tnode *node)
{
    kl_tqueue *q = node->queue;
    if (q == NULL)
        return;
    /* Already the newest: just move the deadline (the common case for a
     * busy connection that is the only one in its queue). */
    if (node->next == &q->head) {
        node->deadline = uv_now(t->timer.loop) + q->duration;
        return;
    }
    kl_timeouts_remove(node);
    append(t, q, node);
}

static void on_timer(uv_timer_t *timer)
{
    kl_timeouts *t = timer->data;
    uint64_t now = uv_now(timer->loop);
    t->armed_for = 0;
    for (kl_tqueue *q = t->queues; q; q = q->next) {
        /* Expiring may re-add the node to this queue, at the tail with a
         * later deadline, so the loop ends. */
        while (q->head.next != &q->head && q->head.next->deadline <= now) {
            kl_tnode *node = q->head.next;
            kl_timeouts_remove(node);
            t->expire(t, node);
        }
    }
    uint64_t next = 0;
    for (kl_tqueue *q = t->queues; q; q = q->next)
        if (q->head.next != &q->head && (next == 0 || q->head.next->deadline < next))
            next = q->head.next->deadline;
    if (next != 0)
        arm(t, next);
}

void kl_timeouts_close(kl_timeouts *t)
{
    while (t->queues) {
        kl_tqueue *q = t->queues;
        t->queues = q->next;
        /* Unlink whatever is still queued so later removes are no-ops. */
        while (q->head.next != &q->head)
            kl_timeouts_remove(q->head.next);
        free(q);
    }
    uv_close((uv_handle_t *)&t->timer, NULL);
}
