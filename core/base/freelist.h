/* core/base/freelist.h — a bounded cache of spare blocks of one size.
 *
 * The per-worker pools (output states, completion records, HTTP request
 * objects) keep what they free for the next user, so that the steady state
 * allocates nothing. A spare's first bytes hold the link, so a block must
 * be at least a pointer wide. One thread only (each worker has its own).
 */
#ifndef KEEL_CORE_FREELIST_H
#define KEEL_CORE_FREELIST_H

#include <stdlib.h>

typedef struct kl_freelist {
    void *head;
    unsigned count;
    unsigned max; /* spares kept; beyond that, blocks are freed */
} kl_freelist;

/* A spare, or a new block of `size` bytes; NULL if out of memory. The
 * contents are not cleared. */
static inline void *kl_freelist_get(kl_freelist *list, size_t size)
{
    void *p = list->head;
    if (p == NULL)
        return malloc(size);
    list->head = *(void **)p;
    list->count--;
    return p;
}

/* Keeps p as a spare, or frees it if the list is full. */
static inline void kl_freelist_put(kl_freelist *list, void *p)
{
    if (list->count >= list->max) {
        free(p);
        return;
    }
    *(void **)p = list->head;
    list->head = p;
    list->count++;
}

/* Frees every spare. */
static inline void kl_freelist_clear(kl_freelist *list)
{
    while (list->head != NULL) {
        void *p = list->head;
        list->head = *(void **)p;
        free(p);
    }
    list->count = 0;
}

#endif
