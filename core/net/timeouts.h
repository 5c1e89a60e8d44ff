/* core/net/timeouts.h — per-worker connection timeouts without a timer each.
 *
 * Every connection has one deadline that moves on nearly every read and
 * write. A min-heap of deadlines (one per worker) with lazy keys makes that
 * move O(1): touching a node only records its new, later deadline; when
 * the node reaches the top of the heap and its recorded deadline turns out
 * to be later than its key, it is re-keyed then (at most once per period
 * of its timeout). Only a deadline brought forward pays O(log n). nginx
 * gets the same effect from its red-black tree with a lazy delay; keel's
 * heap takes any duration (a protocol may set one per connection) without
 * per-duration structures that would need freeing. One uv_timer per
 * worker fires at the heap's earliest key.
 */
#ifndef KEEL_CORE_TIMEOUTS_H
#define KEEL_CORE_TIMEOUTS_H

#include <stdint.h>

#include <uv.h>

#define KL_TNODE_IDLE UINT32_MAX /* index of a node not in the heap */

/* Times are milliseconds of the loop's clock kept in 32 bits, so that a
 * node fits keel_conn's budget (net/conn.h), and compared modulo 2^32
 * (serial number arithmetic, RFC 1982; Linux's time_after on jiffies):
 * right while the times the heap holds lie within 2^31 ms of each other.
 * They lie between now (less what a stalled loop has not expired yet) and
 * now + the longest duration, so durations are clamped to 2^30 ms (12
 * days) and a stall of as long again keeps the order. */
#define KL_TIMEOUT_MAX_MS (UINT32_C(1) << 30)

typedef struct kl_tnode {
    uint32_t key;      /* its place in the heap: never later than deadline */
    uint32_t deadline; /* when it really expires (kl_timeouts_now's clock) */
    uint32_t index;    /* in the heap's array, or KL_TNODE_IDLE */
    uint32_t duration; /* ms, what a touch adds to now */
} kl_tnode;

typedef struct kl_timeouts kl_timeouts;
typedef void (*kl_timeout_fn)(kl_timeouts *t, kl_tnode *node);

struct kl_timeouts {
    uv_timer_t timer;
    kl_tnode **heap;
    uint32_t count, cap;
    uint32_t origin;    /* subtracted from the loop's clock: 0, but tests move it to the wrap */
    uint32_t armed_for; /* the key the timer is set for, while armed */
    int armed;
    kl_timeout_fn expire;
};

/* Whether time a comes before time b (modulo 2^32, see above). */
static inline int kl_time_before(uint32_t a, uint32_t b)
{
    return (uint32_t)(a - b) > INT32_MAX;
}

/* Now on the clock of the heap's times. */
static inline uint32_t kl_timeouts_now(const kl_timeouts *t)
{
    return (uint32_t)uv_now(t->timer.loop) - t->origin;
}

int kl_timeouts_init(kl_timeouts *t, uv_loop_t *loop, kl_timeout_fn expire);

/* A node that is in no heap yet (a new connection's). */
static inline void kl_tnode_init(kl_tnode *node)
{
    node->index = KL_TNODE_IDLE;
}

static inline int kl_tnode_scheduled(const kl_tnode *node)
{
    return node->index != KL_TNODE_IDLE;
}

/* Schedules node to expire `duration` ms from now (0 unschedules it);
 * durations beyond KL_TIMEOUT_MAX_MS (12 days) are clamped. Returns
 * KEEL_ERR_NOMEM if the heap could not grow (the node is then idle). */
int kl_timeouts_set(kl_timeouts *t, kl_tnode *node, uint64_t duration);

/* Pushes a scheduled node's deadline to now + its duration: O(1). */
static inline void kl_timeouts_touch(kl_timeouts *t, kl_tnode *node)
{
    if (node->index != KL_TNODE_IDLE)
        node->deadline = kl_timeouts_now(t) + node->duration;
}

void kl_timeouts_remove(kl_timeouts *t, kl_tnode *node);

/* Frees the heap and closes the timer (the caller runs the loop after). */
void kl_timeouts_close(kl_timeouts *t);

#endif
