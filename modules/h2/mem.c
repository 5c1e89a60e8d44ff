/* mem.c — nghttp2's allocations, from per-worker free lists.
 *
 * nghttp2 allocates for every stream: the stream itself, its outbound
 * items, a copy of each response's field list, HPACK buffers. With glibc's
 * malloc that was a sixth of the CPU time of a small response (perf, h2load
 * -m 100). Sessions live on one worker and nghttp2 calls back on it, so
 * blocks up to 1 KiB come from size classes kept per worker, without a
 * lock; larger ones go to malloc. Each block is preceded by its class, so
 * free needs no size. A class keeps at most H2_MEM_KEEP blocks; beyond that
 * they go back to malloc, so a burst does not pin its peak for good.
 */
#include "h2.h"

#include <stdlib.h>
#include <string.h>

#define CLASS_SIZE 64 /* classes: 64, 128, ... 1024 bytes */
#define HEADER     16 /* keeps the block 16-byte aligned */
#define BIG        0xff

typedef struct h2_mem_block block;
struct h2_mem_block {
    block *next;
};

static void *mem_malloc(size_t size, void *ud)
{
    h2_worker *w = ud;
    size_t cls = size == 0 ? 0 : (size - 1) / CLASS_SIZE;
    unsigned char *p;
    if (cls >= H2_MEM_CLASSES) {
        p = malloc(HEADER + size);
        if (p == NULL)
            return NULL;
        p[0] = BIG;
        return p + HEADER;
    }
    block *b = w->mem_free[cls];
    if (b != NULL) {
        w->mem_free[cls] = b->next;
        w->mem_nfree[cls]--;
        p = (unsigned char *)b;
    } else {
        p = malloc(HEADER + (cls + 1) * CLASS_SIZE);
        if (p == NULL)
            return NULL;
    }
    p[0] = (unsigned char)cls;
    return p + HEADER;
}

static void mem_free(void *ptr, void *ud)
{
    if (ptr == NULL)
        return;
    h2_worker *w = ud;
    unsigned char *p = (unsigned char *)ptr - HEADER;
    unsigned cls = p[0];
    if (cls == BIG || w->mem_nfree[cls] >= H2_MEM_KEEP) {
        free(p);
        return;
    }
    block *b = (block *)(void *)p;
    b->next = w->mem_free[cls];
    w->mem_free[cls] = b;
    w->mem_nfree[cls]++;
}

static void *mem_calloc(size_t n, size_t size, void *ud)
{
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    void *p = mem_malloc(n * size, ud);
    if (p != NULL)
        memset(p, 0, n * size);
    return p;
}

static void *mem_realloc(void *ptr, size_t size, void *ud)
{
    if (ptr == NULL)
        return mem_malloc(size, ud);
    if (size == 0) {
        mem_free(ptr, ud);
        return NULL;
    }
    unsigned char *p = (unsigned char *)ptr - HEADER;
    if (p[0] != BIG && size <= ((size_t)p[0] + 1) * CLASS_SIZE)
        return ptr; /* fits its class */
    if (p[0] == BIG) {
        unsigned char *q = realloc(p, HEADER + size);
        return q != NULL ? q + HEADER : NULL;
    }
    void *q = mem_malloc(size, ud);
    if (q == NULL)
        return NULL;
    memcpy(q, ptr, ((size_t)p[0] + 1) * CLASS_SIZE);
    mem_free(ptr, ud);
    return q;
}

void h2_mem_init(h2_worker *w)
{
    w->mem = (nghttp2_mem){w, mem_malloc, mem_free, mem_calloc, mem_realloc};
}

void h2_mem_release(h2_worker *w)
{
    for (size_t i = 0; i < H2_MEM_CLASSES; i++) {
        while (w->mem_free[i] != NULL) {
            block *b = w->mem_free[i];
            w->mem_free[i] = b->next;
            free(b);
        }
        w->mem_nfree[i] = 0;
    }
}
