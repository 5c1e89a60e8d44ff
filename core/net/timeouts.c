/* The worker's heap of connection deadlines (see timeouts.h). */
#include "net/timeouts.h"

#include <stdlib.h>

#include <keel/types.h>

/* A heap this much larger than its contents gives memory back. */
#define SHRINK_BELOW 4
#define MIN_CAP      64

static void on_timer(uv_timer_t *timer);

int kl_timeouts_init(kl_timeouts *t, uv_loop_t *loop, kl_timeout_fn expire)
{
    t->heap = NULL;
    t->count = t->cap = 0;
    t->origin = 0;
    t->armed_for = 0;
    t->armed = 0;
    t->expire = expire;
    if (uv_timer_init(loop, &t->timer) != 0)
        return KEEL_ERR_IO;
    t->timer.data = t;
    /* The timer alone must not keep a worker's loop alive. */
    uv_unref((uv_handle_t *)&t->timer);
    return KEEL_OK;
}

/* ---- the heap ------------------------------------------------------------ */

static int earlier(const kl_tnode *a, const kl_tnode *b)
{
    return kl_time_before(a->key, b->key);
}

static void place(kl_timeouts *t, kl_tnode *node, uint32_t i)
{
    t->heap[i] = node;
    node->index = i;
}

static void sift_up(kl_timeouts *t, uint32_t i)
{
    kl_tnode *node = t->heap[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!earlier(node, t->heap[parent]))
            break;
        place(t, t->heap[parent], i);
        i = parent;
    }
    place(t, node, i);
}

static void sift_down(kl_timeouts *t, uint32_t i)
{
    kl_tnode *node = t->heap[i];
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= t->count)
            break;
        if (child + 1 < t->count && earlier(t->heap[child + 1], t->heap[child]))
            child++;
        if (!earlier(t->heap[child], node))
            break;
        place(t, t->heap[child], i);
        i = child;
    }
    place(t, node, i);
}

static int grow(kl_timeouts *t)
{
    uint32_t cap = t->cap ? t->cap * 2 : MIN_CAP;
    kl_tnode **heap = realloc(t->heap, cap * sizeof *heap);
    if (heap == NULL)
        return KEEL_ERR_NOMEM;
    t->heap = heap;
    t->cap = cap;
    return KEEL_OK;
}

static void shrink(kl_timeouts *t)
{
    if (t->cap <= MIN_CAP || t->count * SHRINK_BELOW > t->cap)
        return;
    kl_tnode **heap = realloc(t->heap, (t->cap / 2) * sizeof *heap);
    if (heap != NULL) { /* keeping the larger array is harmless */
        t->heap = heap;
        t->cap /= 2;
    }
}

/* ---- the timer ------------------------------------------------------------ */

/* Keeps the timer set for the earliest key. Keys only move later lazily
 * (touch does not re-arm): a wake-up for a key that moved finds it later
 * and re-arms then. */
static void arm(kl_timeouts *t)
{
    if (t->count == 0) {
        if (t->armed)
            uv_timer_stop(&t->timer);
        t->armed = 0;
        return;
    }
    uint32_t key = t->heap[0]->key;
    if (t->armed && t->armed_for == key)
        return;
    uint32_t now = kl_timeouts_now(t);
    t->armed = 1;
    t->armed_for = key;
    uv_timer_start(&t->timer, on_timer, kl_time_before(now, key) ? key - now : 0, 0);
}

static void on_timer(uv_timer_t *timer)
{
    kl_timeouts *t = timer->data;
    uint32_t now = kl_timeouts_now(t);
    t->armed = 0;
    while (t->count > 0 && !kl_time_before(now, t->heap[0]->key)) {
        kl_tnode *node = t->heap[0];
        if (kl_time_before(now, node->deadline)) {
            /* Touched since it was keyed: its place is later. */
            node->key = node->deadline;
            sift_down(t, 0);
            continue;
        }
        kl_timeouts_remove(t, node);
        t->expire(t, node); /* may schedule it again, later than now */
    }
    arm(t);
}

/* ---- the API ---------------------------------------------------------------- */

void kl_timeouts_remove(kl_timeouts *t, kl_tnode *node)
{
    uint32_t i = node->index;
    if (i == KL_TNODE_IDLE)
        return;
    node->index = KL_TNODE_IDLE;
    kl_tnode *last = t->heap[--t->count];
    if (last != node) {
        place(t, last, i);
        /* The moved node may belong above or below its new place. */
        if (i > 0 && earlier(last, t->heap[(i - 1) / 2]))
            sift_up(t, i);
        else
            sift_down(t, i);
    }
    shrink(t);
}

int kl_timeouts_set(kl_timeouts *t, kl_tnode *node, uint64_t duration)
{
    if (duration == 0) {
        kl_timeouts_remove(t, node);
        arm(t);
        return KEEL_OK;
    }
    if (duration > KL_TIMEOUT_MAX_MS)
        duration = KL_TIMEOUT_MAX_MS;
    uint32_t deadline = kl_timeouts_now(t) + (uint32_t)duration;
    node->duration = (uint32_t)duration;
    node->deadline = deadline;
    if (node->index != KL_TNODE_IDLE) {
        if (!kl_time_before(deadline, node->key))
            return KEEL_OK; /* later: found and re-keyed when its key comes */
        node->key = deadline;
        sift_up(t, node->index);
    } else {
        if (t->count == t->cap && grow(t) != KEEL_OK)
            return KEEL_ERR_NOMEM;
        node->key = deadline;
        place(t, node, t->count++);
        sift_up(t, node->index);
    }
    arm(t);
    return KEEL_OK;
}

void kl_timeouts_close(kl_timeouts *t)
{
    /* Leave every node idle so that later removes are no-ops. */
    for (uint32_t i = 0; i < t->count; i++)
        t->heap[i]->index = KL_TNODE_IDLE;
    free(t->heap);
    t->heap = NULL;
    t->count = t->cap = 0;
    uv_close((uv_handle_t *)&t->timer, NULL);
}
