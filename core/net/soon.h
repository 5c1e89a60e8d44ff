/* core/net/soon.h — work a worker runs from its loop soon, never inside
 * the caller (kl_worker_soon in net/worker.h). A node the caller embeds in
 * its own object, so that queueing it cannot fail; apart from worker.h so
 * that layers above the network (the HTTP layer's requests) can embed one
 * without including the worker. */
#ifndef KEEL_CORE_SOON_H
#define KEEL_CORE_SOON_H

typedef struct kl_soon kl_soon;
struct kl_soon {
    kl_soon *next;
    void (*fn)(kl_soon *soon);
};

#endif
