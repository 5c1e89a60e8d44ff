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
    t->armed_for = 0;
    t->expire = expire;
    if (uv_timer_init(loop, &t->timer) != 0)
        return KEEL_ERR_IO;
    t->timer.data = t;
    /* The timer alone must not keep a worker's loop alive. */
    uv_unref((uv_handle_t *)&t->timer);
    return KEEL_OK;
}

static uint64_t now_of(kl_timeouts *t)
{
    return uv_now(t->timer.loop);
}

/* ---- the heap ------------------------------------------------------------ */

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
        if (t->heap[parent]->key <= node->key)
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
        if (child + 1 < t->count && t->heap[child + 1]->key < t->heap[child]->key)
            child++;
        if (node->key <= t->heap[child]->key)
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
        if (t->armed_for != 0)
            uv_timer_stop(&t->timer);
        t->armed_for = 0;
        return;
    }
    uint64_t key = t->heap[0]->key;
    if (t->armed_for == key)
        return;
    uint64_t now = now_of(t);
    t->armed_for = key;
    uv_timer_start(&t->timer, on_timer, key > now ? key - now : 0, 0);
}

static void on_timer(uv_timer_t *timer)
{
    kl_timeouts *t = timer->data;
    uint64_t now = now_of(t);
    t->armed_for = 0;
    while (t->count > 0 && t->heap[0]->key <= now) {
        kl_tnode *node = t->heap[0];
        if (node->deadline > now) {
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
        if (i > 0 && t->heap[(i - 1) / 2]->key > last->key)
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
    if (duration > UINT32_MAX - 1)
        duration = UINT32_MAX - 1;
    uint64_t deadline = now_of(t) + duration;
    node->duration = (uint32_t)duration;
    node->deadline = deadline;
    if (node->index != KL_TNODE_IDLE) {
        if (deadline >= node->key)
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
