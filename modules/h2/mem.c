/* mem.c — nghttp2's allocations: small blocks from per-worker free lists,
 * large ones page-aligned so that an idle connection can give their pages
 * back.
 *
 * nghttp2 allocates for every stream: the stream itself, its outbound
 * items, a copy of each response's field list, HPACK buffers. With glibc's
 * malloc that was a sixth of the CPU time of a small response (perf, h2load
 * -m 100). Sessions live on one worker and nghttp2 calls back on it, so
 * blocks up to 1 KiB come from size classes kept per worker, without a
 * lock. Each block is preceded by its class, so free needs no size. A
 * class keeps at most H2_MEM_KEEP blocks; beyond that they go back to
 * malloc, so a burst does not pin its peak for good.
 *
 * Each session gets the allocator with its connection as user data
 * (nghttp2 copies the nghttp2_mem into the session), so blocks of a page or
 * more are known per connection: they are allocated page-aligned, whole
 * pages, without a header, and listed in the connection (h2_mem_page). Two
 * of them are most of an idle connection's memory (nghttp2 1.52,
 * nghttp2_session_new): the 16 KiB frame buffer every frame is serialised
 * into (aob.framebufs) and the stream map's 4 KiB bucket table. When the
 * connection has been idle for a tick (h2_mem_trim), their pages go back
 * to the kernel (madvise): the frame buffer's because nothing is in it
 * while nghttp2 has nothing to send (each frame starts from a reset
 * buffer), the map's because an empty map is all zero bytes, which is what
 * a dropped page reads back as. Either is checked, not assumed: a block is
 * only dropped if nghttp2 wants to write nothing (the frame buffer) or
 * every byte is zero (anything else).
 */
#include "h2.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if !defined(_WIN32)
#include <sys/mman.h>
#endif

#if defined(__linux__) && defined(MADV_DONTNEED)
#define H2_DROP MADV_DONTNEED /* pages read back as zeros */
#elif defined(MADV_FREE) && !defined(_WIN32)
#define H2_DROP MADV_FREE /* pages read back as they were, or zeros */
#endif

#define CLASS_SIZE 64 /* classes: 64, 128, ... 1024 bytes */
#define HEADER     16 /* keeps the block 16-byte aligned */
#define BIG        0xff
#define PAGE       4096
/* nghttp2's frame buffer: NGHTTP2_FRAMEBUF_CHUNKLEN, a frame header, a pad
 * length byte and the largest payload it sends (16384). */
#define FRAMEBUF_MIN 16384

typedef struct h2_mem_block block;
struct h2_mem_block {
    block *next;
};

static void *class_malloc(h2_worker *w, size_t size)
{
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

static void class_free(h2_worker *w, void *ptr)
{
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

/* The connection's page block at ptr, or NULL. Only page-aligned pointers
 * can be one, so other frees cost one test. */
static h2_mem_page *page_of(h2_conn *c, void *ptr)
{
    if (((uintptr_t)ptr & (PAGE - 1)) != 0)
        return NULL;
    for (unsigned i = 0; i < c->npages; i++)
        if (c->pages[i].p == ptr)
            return &c->pages[i];
    return NULL;
}

static void *page_malloc(h2_conn *c, size_t size)
{
#if defined(H2_DROP)
    if (c->npages == H2_MEM_PAGES)
        return NULL;
    size_t len = (size + PAGE - 1) & ~(size_t)(PAGE - 1);
    void *p = NULL;
    if (posix_memalign(&p, PAGE, len) != 0)
        return NULL;
    /* nghttp2_session_new allocates one block this large: the frame
     * buffer. */
    int framebuf = c->opening && size >= FRAMEBUF_MIN;
    c->pages[c->npages++] = (h2_mem_page){p, len, (unsigned)framebuf};
    return p;
#else
    (void)c;
    (void)size;
    return NULL;
#endif
}

static void *mem_malloc(size_t size, void *ud)
{
    h2_conn *c = ud;
    if (size >= PAGE) {
        void *p = page_malloc(c, size);
        if (p != NULL)
            return p;
    }
    return class_malloc(c->w, size);
}

static void mem_free(void *ptr, void *ud)
{
    if (ptr == NULL)
        return;
    h2_conn *c = ud;
    h2_mem_page *pg = page_of(c, ptr);
    if (pg != NULL) {
        free(ptr);
        *pg = c->pages[--c->npages];
        return;
    }
    class_free(c->w, ptr);
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
    h2_conn *c = ud;
    if (ptr == NULL)
        return mem_malloc(size, ud);
    if (size == 0) {
        mem_free(ptr, ud);
        return NULL;
    }
    size_t have;
    h2_mem_page *pg = page_of(c, ptr);
    if (pg != NULL) {
        have = pg->len;
    } else {
        unsigned char *p = (unsigned char *)ptr - HEADER;
        if (p[0] == BIG) {
            /* Stays a malloc block with its header, grown in place. */
            unsigned char *q = realloc(p, HEADER + size);
            return q != NULL ? q + HEADER : NULL;
        }
        have = ((size_t)p[0] + 1) * CLASS_SIZE;
    }
    if (size <= have)
        return ptr; /* fits where it is */
    void *q = mem_malloc(size, ud);
    if (q == NULL)
        return NULL;
    memcpy(q, ptr, have);
    mem_free(ptr, ud);
    return q;
}

void h2_mem_init(h2_worker *w)
{
    w->mem = (nghttp2_mem){NULL, mem_malloc, mem_free, mem_calloc, mem_realloc};
}

nghttp2_mem h2_mem_for(h2_conn *c)
{
    nghttp2_mem m = c->w->mem;
    m.mem_user_data = c;
    return m;
}

static int all_zero(const void *p, size_t len)
{
    const uint64_t *q = p;
    uint64_t any = 0;
    for (size_t i = 0; i < len / sizeof *q; i++)
        any |= q[i];
    return any == 0;
}

void h2_mem_trim(h2_conn *c)
{
#if defined(H2_DROP)
    if (c->ng == NULL || c->depth > 0 || c->closing)
        return;
    int writing = nghttp2_session_want_write(c->ng) || c->out != NULL;
    for (unsigned i = 0; i < c->npages; i++) {
        h2_mem_page *pg = &c->pages[i];
        if (pg->framebuf ? writing : !all_zero(pg->p, pg->len))
            continue;
        (void)madvise(pg->p, pg->len, H2_DROP); /* advice: a failure changes nothing */
    }
#else
    (void)c;
#endif
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
