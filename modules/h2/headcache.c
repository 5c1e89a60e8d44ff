/* headcache.c — a connection's last final response head, kept encoded.
 *
 * Many responses on one connection repeat their head byte for byte: the
 * same file asked for again, an API answering the same shape, the assets
 * of one page sharing a type and a cache policy. Encoding a head is
 * lowercasing every name, finding it in the static table and copying it
 * with its value (~1,200 instructions for a static file's eight fields,
 * callgrind); comparing it with the last one is a few word compares. So the
 * last head's fields (as the handler gave them, with the status, the length
 * and the second its Date shows) are kept beside its encoded block, and an
 * equal head takes the block as it is. The encoder keeps no dynamic table (hpack.h),
 * so a block is valid on any stream, in any order.
 *
 * Kept per connection while it is busy; an idle connection gives it back
 * (h2.c's trim).
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

/* The key, flattened: each of its strings as a 32-bit length and its
 * bytes, every field's name and value. */
static size_t key_size(const keel_header *h, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += 8 + h[i].name.len + h[i].value.len;
    return total;
}

static uint8_t *put_str(uint8_t *p, const char *s, size_t len)
{
    uint32_t n = (uint32_t)len;
    memcpy(p, &n, 4);
    memcpy(p + 4, s, len);
    return p + 4 + len;
}

/* a's n bytes equal b's. Names and short values (up to 16 bytes) are two
 * overlapping loads of w bytes each, no call: a library call's entry costs as much as
 * such a comparison, and every response whose head is like the last one
 * compares all its strings. Longer ones go to memcmp, which takes 32 bytes
 * an instruction. */
static inline int same_ends(const uint8_t *a, const char *b, size_t n, size_t w)
{
    uint64_t a0 = 0, b0 = 0, a1 = 0, b1 = 0; /* w is 4 or 8, a constant once inlined */
    memcpy(&a0, a, w);
    memcpy(&b0, b, w);
    memcpy(&a1, a + n - w, w);
    memcpy(&b1, b + n - w, w);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

static inline int same_bytes(const uint8_t *a, const char *b, size_t n)
{
    if (n > 16)
        return memcmp(a, b, n) == 0;
    if (n >= 8)
        return same_ends(a, b, n, 8);
    if (n >= 4)
        return same_ends(a, b, n, 4);
    unsigned diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned)(a[i] ^ (uint8_t)b[i]);
    return diff == 0;
}

/* p's string equals s; advances p past it. */
static inline int same_str(const uint8_t **p, const char *s, size_t len)
{
    uint32_t n;
    memcpy(&n, *p, 4);
    if (n != len || !same_bytes(*p + 4, s, len))
        return 0;
    *p += 4 + len;
    return 1;
}

const uint8_t *h2_headcache_find(h2_conn *c, int status, const keel_header *h, size_t n,
                                 int64_t content_length, int64_t date_sec, size_t *len)
{
    const h2_headcache *hc = &c->headcache;
    if (hc->mem == NULL || hc->status != status || hc->nfields != n ||
        hc->content_length != content_length || hc->date_sec != date_sec)
        return NULL;
    const uint8_t *p = hc->mem;
    for (size_t i = 0; i < n; i++)
        if (!same_str(&p, h[i].name.ptr, h[i].name.len) ||
            !same_str(&p, h[i].value.ptr, h[i].value.len))
            return NULL;
    *len = hc->block_len;
    return hc->mem + hc->key_len;
}

void h2_headcache_store(h2_conn *c, int status, const keel_header *h, size_t n,
                        int64_t content_length, int64_t date_sec, const uint8_t *block, size_t len)
{
    h2_headcache *hc = &c->headcache;
    size_t key = key_size(h, n);
    if (key + len > H2_HEADCACHE_MAX) {
        hc->nfields = (size_t)-1; /* too large to keep: nothing matches */
        return;
    }
    if (hc->cap < key + len) {
        uint8_t *grown = realloc(hc->mem, key + len);
        if (grown == NULL) {
            hc->nfields = (size_t)-1;
            return;
        }
        hc->mem = grown;
        hc->cap = key + len;
    }
    uint8_t *p = hc->mem;
    for (size_t i = 0; i < n; i++) {
        p = put_str(p, h[i].name.ptr, h[i].name.len);
        p = put_str(p, h[i].value.ptr, h[i].value.len);
    }
    memcpy(p, block, len);
    hc->key_len = key;
    hc->block_len = len;
    hc->status = status;
    hc->nfields = n;
    hc->content_length = content_length;
    hc->date_sec = date_sec;
}

void h2_headcache_free(h2_conn *c)
{
    free(c->headcache.mem);
    memset(&c->headcache, 0, sizeof c->headcache);
}
