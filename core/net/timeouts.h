/* core/net/timeouts.h — per-worker connection timeouts without a timer each.
 *
 * Connections use a handful of distinct durations (idle, write, linger and
 * whatever protocols set), so each duration gets a FIFO queue: appending
 * with deadline = now + duration keeps every queue sorted, and touching a
 * connection is an O(1) move to the tail. One uv_timer per worker fires at
 * the earliest head. This is the structure nginx and h2o use in spirit,
 * cheaper than one uv_timer (a heap node) per connection.
 */
#ifndef KEEL_CORE_TIMEOUTS_H
#define KEEL_CORE_TIMEOUTS_H

#include <stdint.h>

#include <uv.h>

typedef struct kl_tqueue kl_tqueue;

typedef struct kl_tnode {
    struct kl_tnode *prev, *next;
    uint64_t deadline;
    kl_tqueue *queue; /* NULL when not scheduled */
} kl_tnode;

typedef struct kl_timeouts kl_timeouts;
typedef void (*kl_timeout_fn)(kl_timeouts *t, kl_tnode *node);

struct kl_timeouts {
    uv_timer_t timer;
    kl_tqueue *queues;
    uint64_t armed_for; /* deadline the timer is set for; 0 if idle */
    kl_timeout_fn expire;
};

int kl_timeouts_init(kl_timeouts *t, uv_loop_t *loop, kl_timeout_fn expire);

/* Schedules node to expire `duration` ms from now (0 unschedules it).
 * Returns KEEL_ERR_NOMEM if a new queue could not be made. */
int kl_timeouts_set(kl_timeouts *t, kl_tnode *node, uint64_t duration);

/* Pushes an already scheduled node's deadline to now + its duration. */
void kl_timeouts_touch(kl_timeouts *t, kl_tnode *node);

void kl_timeouts_remove(kl_tnode *node);

/* Frees the queues and closes the timer (the caller runs the loop after). */
void kl_timeouts_close(kl_timeouts *t);

#endif
