#include "net/bufpool.h"

#include <stdlib.h>

#include <keel/types.h>

int kl_bufpool_init(kl_bufpool *pool, size_t block_size, size_t max_free)
{
    pool->block_size = block_size;
    pool->nfree = 0;
    pool->max_free = max_free;
    pool->free_blocks = malloc(max_free * sizeof *pool->free_blocks);
    return pool->free_blocks ? KEEL_OK : KEEL_ERR_NOMEM;
}

void kl_bufpool_free(kl_bufpool *pool)
{
    while (pool->nfree > 0)
        free(pool->free_blocks[--pool->nfree]);
    free(pool->free_blocks);
    pool->free_blocks = NULL;
}

void *kl_bufpool_get(kl_bufpool *pool)
{
    if (pool->nfree > 0)
        return pool->free_blocks[--pool->nfree];
    return malloc(pool->block_size);
}

void kl_bufpool_put(kl_bufpool *pool, void *block, size_t size)
{
    if (size == pool->block_size && pool->nfree < pool->max_free)
        pool->free_blocks[pool->nfree++] = block;
    else
        free(block);
}
