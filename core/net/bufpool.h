/* core/net/bufpool.h — a worker's cache of read buffers.
 *
 * A connection holds a read buffer only while bytes wait in it, so an idle
 * connection costs no buffer; the pool makes taking and returning one cheap.
 * Single-threaded (one pool per worker).
 */
#ifndef KEEL_CORE_BUFPOOL_H
#define KEEL_CORE_BUFPOOL_H

#include <stddef.h>

typedef struct kl_bufpool {
    size_t block_size;
    void **free_blocks;
    size_t nfree;
    size_t max_free; /* beyond this, returned blocks go back to malloc */
} kl_bufpool;

int kl_bufpool_init(kl_bufpool *pool, size_t block_size, size_t max_free);
void kl_bufpool_free(kl_bufpool *pool);

/* A block of pool->block_size bytes, or NULL if out of memory. */
void *kl_bufpool_get(kl_bufpool *pool);

/* Returns a block of `size` bytes; blocks of another size (grown buffers)
 * are simply freed. */
void kl_bufpool_put(kl_bufpool *pool, void *block, size_t size);

#endif
