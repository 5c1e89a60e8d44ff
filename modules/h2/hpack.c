/* hpack.c — HPACK (RFC 7541): decoding request header blocks against the
 * static and dynamic tables, and the encoding primitives of responses.
 */
#include "hpack.h"

#include <stdlib.h>
#include <string.h>

/* RFC 7541 Appendix A: the static table, index 1 first. */
static const struct h2_hpack_static {
    const char *name, *value;
    uint8_t nlen, vlen;
} static_table[62] = {
    {"", "", 0, 0}, /* index 0 is not used */
    {":authority", "", 10, 0},
    {":method", "GET", 7, 3},
    {":method", "POST", 7, 4},
    {":path", "/", 5, 1},
    {":path", "/index.html", 5, 11},
    {":scheme", "http", 7, 4},
    {":scheme", "https", 7, 5},
    {":status", "200", 7, 3},
    {":status", "204", 7, 3},
    {":status", "206", 7, 3},
    {":status", "304", 7, 3},
    {":status", "400", 7, 3},
    {":status", "404", 7, 3},
    {":status", "500", 7, 3},
    {"accept-charset", "", 14, 0},
    {"accept-encoding", "gzip, deflate", 15, 13},
    {"accept-language", "", 15, 0},
    {"accept-ranges", "", 13, 0},
    {"accept", "", 6, 0},
    {"access-control-allow-origin", "", 27, 0},
    {"age", "", 3, 0},
    {"allow", "", 5, 0},
    {"authorization", "", 13, 0},
    {"cache-control", "", 13, 0},
    {"content-disposition", "", 19, 0},
    {"content-encoding", "", 16, 0},
    {"content-language", "", 16, 0},
    {"content-length", "", 14, 0},
    {"content-location", "", 16, 0},
    {"content-range", "", 13, 0},
    {"content-type", "", 12, 0},
    {"cookie", "", 6, 0},
    {"date", "", 4, 0},
    {"etag", "", 4, 0},
    {"expect", "", 6, 0},
    {"expires", "", 7, 0},
    {"from", "", 4, 0},
    {"host", "", 4, 0},
    {"if-match", "", 8, 0},
    {"if-modified-since", "", 17, 0},
    {"if-none-match", "", 13, 0},
    {"if-range", "", 8, 0},
    {"if-unmodified-since", "", 19, 0},
    {"last-modified", "", 13, 0},
    {"link", "", 4, 0},
    {"location", "", 8, 0},
    {"max-forwards", "", 12, 0},
    {"proxy-authenticate", "", 18, 0},
    {"proxy-authorization", "", 19, 0},
    {"range", "", 5, 0},
    {"referer", "", 7, 0},
    {"refresh", "", 7, 0},
    {"retry-after", "", 11, 0},
    {"server", "", 6, 0},
    {"set-cookie", "", 10, 0},
    {"strict-transport-security", "", 25, 0},
    {"transfer-encoding", "", 17, 0},
    {"user-agent", "", 10, 0},
    {"vary", "", 4, 0},
    {"via", "", 3, 0},
    {"www-authenticate", "", 16, 0},
};

#define STATIC_COUNT 61

struct h2_hpack_entry {
    uint32_t nlen, vlen;
    uint32_t name_index; /* a static entry with the same name, or 0 (h2_hpack_field) */
    uint32_t memo;       /* the caller's (h2_hpack_field) */
    char data[];         /* name, then value */
};

/* RFC 7541 4.1: an entry's size counts 32 bytes of overhead. */
static size_t entry_size(size_t nlen, size_t vlen)
{
    return nlen + vlen + 32;
}

void h2_hpack_init(h2_hpack *d, size_t limit)
{
    memset(d, 0, sizeof *d);
    d->limit = limit;
    /* 4.2 / RFC 9113 6.5.2: the table starts at 4,096 bytes, whatever we
     * advertise, until the encoder says otherwise with a size update. */
    d->max = 4096;
}

static h2_hpack_entry *entry_at(const h2_hpack *d, uint32_t i)
{
    return d->ring[(d->head - i) & (d->cap - 1)];
}

static void evict_to(h2_hpack *d, size_t target)
{
    while (d->count > 0 && d->size > target) {
        h2_hpack_entry *e = entry_at(d, d->count - 1);
        d->size -= entry_size(e->nlen, e->vlen);
        free(e);
        d->count--;
    }
}

void h2_hpack_free(h2_hpack *d)
{
    evict_to(d, 0);
    free(d->ring);
    d->ring = NULL;
    d->cap = 0;
}

void h2_scratch_free(h2_scratch *s)
{
    free(s->p);
    s->p = NULL;
    s->cap = 0;
}

/* Adds an entry no larger than the table (4.4: the caller handles one that
 * is), evicting the oldest to make room. */
static int insert(h2_hpack *d, const char *name, size_t nlen, unsigned name_index,
                  const char *value, size_t vlen)
{
    size_t sz = entry_size(nlen, vlen);
    /* Made before evicting: the name may be an entry about to go. */
    h2_hpack_entry *e = malloc(sizeof *e + nlen + vlen);
    if (e == NULL)
        return H2_HPACK_NOMEM;
    e->nlen = (uint32_t)nlen;
    e->vlen = (uint32_t)vlen;
    /* A literal name is looked up once, here, rather than each time the
     * entry is referred to. */
    e->name_index = name_index != 0 ? name_index : h2_hpack_static_name(name, nlen);
    e->memo = 0;
    memcpy(e->data, name, nlen);
    memcpy(e->data + nlen, value, vlen);
    evict_to(d, d->max - sz);
    if (d->count == d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 8;
        h2_hpack_entry **ring = malloc(cap * sizeof *ring);
        if (ring == NULL) {
            free(e);
            return H2_HPACK_NOMEM;
        }
        /* Oldest first at 0, so the newest is at count - 1. */
        for (uint32_t i = 0; i < d->count; i++)
            ring[i] = entry_at(d, d->count - 1 - i);
        free(d->ring);
        d->ring = ring;
        d->cap = cap;
        d->head = d->count - 1; /* wraps to cap - 1 when empty: fine */
    }
    d->head = (d->head + 1) & (d->cap - 1);
    d->ring[d->head] = e;
    d->count++;
    d->size += sz;
    return 0;
}

/* 5.1: an integer with an N-bit prefix. 0, or -1 if it runs past the
 * block or past 2^32 (no field or index needs more). */
static int get_int(const uint8_t **pp, const uint8_t *end, unsigned prefix, uint32_t *out)
{
    const uint8_t *p = *pp;
    uint32_t max = (1u << prefix) - 1;
    uint32_t v = *p++ & max;
    if (v == max) {
        unsigned shift = 0;
        for (;;) {
            if (p == end || shift > 28)
                return -1;
            uint32_t b = *p++;
            uint64_t add = (uint64_t)(b & 0x7f) << shift;
            if (v + add > 0xffffffffu)
                return -1;
            v += (uint32_t)add;
            shift += 7;
            if (!(b & 0x80))
                break;
        }
    }
    *pp = p;
    *out = v;
    return 0;
}

/* 5.2: a string literal; Huffman-coded ones are decoded into scratch at
 * *at (advanced), which has room for the whole block decoded. */
static int get_string(const uint8_t **pp, const uint8_t *end, h2_scratch *scratch, size_t *at,
                      const char **s, size_t *len)
{
    if (*pp == end)
        return H2_HPACK_ERROR;
    int huff = (**pp & 0x80) != 0;
    uint32_t n;
    if (get_int(pp, end, 7, &n) != 0 || (size_t)(end - *pp) < n)
        return H2_HPACK_ERROR;
    const uint8_t *p = *pp;
    *pp += n;
    if (!huff) {
        *s = (const char *)p;
        *len = n;
        return 0;
    }
    long got = h2_huff_decode(p, n, scratch->p + *at);
    if (got < 0)
        return H2_HPACK_ERROR;
    *s = scratch->p + *at;
    *len = (size_t)got;
    *at += (size_t)got;
    return 0;
}

/* The field of dynamic entry e, as h2_hpack_field says. */
static inline void entry_field(h2_hpack_entry *e, h2_hpack_field *f)
{
    f->name_index = e->name_index;
    f->name = e->name_index != 0 ? static_table[e->name_index].name : e->data;
    f->nlen = e->nlen;
    f->value = e->data + e->nlen;
    f->vlen = e->vlen;
    f->flags = H2_HPACK_ENTRY_VALUE;
    f->memo = &e->memo;
}

/* The field of table index i, 2.3.3: 1..61 static, then the dynamic table
 * newest first, with a static index of its name (i itself for a static
 * entry). -1 if there is no such entry. */
static inline int lookup(const h2_hpack *d, uint32_t i, h2_hpack_field *f)
{
    if (i == 0)
        return -1;
    if (i <= STATIC_COUNT) {
        f->name_index = i;
        f->name = static_table[i].name;
        f->nlen = static_table[i].nlen;
        f->value = static_table[i].value;
        f->vlen = static_table[i].vlen;
        f->flags = H2_HPACK_STATIC_VALUE;
        f->memo = NULL;
        return 0;
    }
    i -= STATIC_COUNT + 1;
    if (i >= d->count)
        return -1;
    entry_field(entry_at(d, i), f);
    return 0;
}

int h2_hpack_decode(h2_hpack *d, const uint8_t *block, size_t len, h2_scratch *scratch,
                    h2_hpack_emit emit, void *ud)
{
    if (len == 0)
        return 0; /* an empty block is valid (and may have no buffer) */
    const uint8_t *p = block, *end = block + len;
    int fields = 0;
    /* A field's name and value together are at most the block; decoded,
     * Huffman code grows by 8/5 at most (no code is under 5 bits). */
    size_t room = len / 5 * 8 + 16;
    if (scratch->cap < room) {
        char *grown = realloc(scratch->p, room);
        if (grown == NULL)
            return H2_HPACK_NOMEM;
        scratch->p = grown;
        scratch->cap = room;
    }
    while (p < end) {
        uint8_t b = *p;
        h2_hpack_field f;
        size_t at = 0;
        uint32_t idx;
        if (b & 0x80) { /* 6.1 indexed field */
            if (get_int(&p, end, 7, &idx) != 0 || lookup(d, idx, &f) != 0)
                return H2_HPACK_ERROR;
        } else if ((b & 0xe0) == 0x20) { /* 6.3 dynamic table size update */
            /* 4.2: only at the start of a block, within our limit. */
            if (fields > 0 || get_int(&p, end, 5, &idx) != 0 || idx > d->limit)
                return H2_HPACK_ERROR;
            d->max = idx;
            evict_to(d, d->max);
            continue;
        } else {
            /* 6.2.1 with incremental indexing (01, 6-bit index), 6.2.2
             * without (0000) and 6.2.3 never indexed (0001), 4-bit index. */
            int indexing = (b & 0xc0) == 0x40;
            if (get_int(&p, end, indexing ? 6 : 4, &idx) != 0)
                return H2_HPACK_ERROR;
            int rc;
            if (idx > 0) {
                if (lookup(d, idx, &f) != 0)
                    return H2_HPACK_ERROR;
                f.flags = 0; /* the name's entry; the value is a literal */
            } else {
                if ((rc = get_string(&p, end, scratch, &at, &f.name, &f.nlen)) != 0)
                    return rc;
                f.name_index = 0;
                f.flags = 0;
                f.memo = NULL;
            }
            if ((rc = get_string(&p, end, scratch, &at, &f.value, &f.vlen)) != 0)
                return rc;
            if (indexing && entry_size(f.nlen, f.vlen) > d->max) {
                /* 4.4: an entry larger than the table empties it and is not
                 * added. Its name may be one of the entries going, so the
                 * field is handed on first. */
                fields++;
                rc = emit(ud, &f);
                evict_to(d, 0);
                if (rc != 0)
                    return rc;
                continue;
            }
            if (indexing) {
                /* The entry copies name and value; the copies are what is
                 * handed on, since inserting may evict the name's entry. */
                if ((rc = insert(d, f.name, f.nlen, f.name_index, f.value, f.vlen)) != 0)
                    return rc;
                entry_field(entry_at(d, 0), &f);
            }
        }
        fields++;
        int rc = emit(ud, &f);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- encoding ------------------------------------------------------------ */

size_t h2_hpack_int(uint8_t *out, uint8_t first, unsigned prefix, uint64_t v)
{
    uint64_t max = (1u << prefix) - 1;
    if (v < max) {
        out[0] = (uint8_t)(first | v);
        return 1;
    }
    size_t n = 0;
    out[n++] = (uint8_t)(first | max);
    v -= max;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(0x80 | (v & 0x7f));
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

/* The static table's index of each name from 15 on, by a hash of its
 * length and three of its bytes under which no two names collide. */
#define NAME_HASH(len, c0, c1, last) (((len)*1u + (c0)*2u + (last)*14u + (c1)) % 256u)
static const uint8_t name_slot[256] = {
    52, 0,  0, 0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  57, 0, 0,  0,  56, 0,  0,  0,  0,  0,  0,
    0,  0,  0, 0,  24, 0,  0,  45, 0,  0,  0,  0,  0,  0,  0, 0,  0,  0,  0,  0,  0,  0,  0,  0,
    0,  0,  0, 0,  0,  0,  0,  0,  37, 0,  0,  0,  0,  0,  0, 0,  0,  0,  0,  0,  20, 0,  0,  0,
    23, 29, 0, 0,  25, 0,  0,  0,  0,  0,  0,  46, 0,  0,  0, 0,  0,  0,  0,  0,  0,  0,  0,  0,
    0,  0,  0, 0,  0,  0,  0,  0,  0,  49, 0,  0,  0,  0,  0, 0,  0,  0,  0,  0,  0,  0,  0,  0,
    0,  0,  0, 0,  18, 0,  0,  0,  0,  0,  0,  19, 0,  0,  0, 0,  0,  0,  0,  15, 51, 54, 0,  0,
    53, 47, 0, 36, 0,  0,  0,  0,  0,  0,  0,  38, 0,  0,  0, 0,  35, 0,  0,  0,  0,  0,  60, 0,
    0,  0,  0, 0,  0,  0,  0,  0,  0,  0,  21, 33, 0,  22, 0, 0,  0,  0,  17, 0,  0,  0,  44, 58,
    0,  32, 0, 0,  0,  0,  42, 31, 30, 0,  0,  27, 0,  0,  0, 40, 50, 43, 0,  0,  0,  0,  16, 0,
    0,  0,  0, 55, 0,  0,  0,  0,  0,  0,  0,  0,  34, 0,  0, 26, 0,  0,  48, 0,  0,  0,  0,  59,
    39, 0,  0, 28, 0,  41, 0,  0,  0,  0,  0,  61, 0,  0,  0, 0,
};

unsigned h2_hpack_static_name(const char *name, size_t len)
{
    /* Names from 15 (accept-charset) on appear once each; :status and
     * the request pseudo-fields are not response field names. */
    if (len < 2 || len > 27)
        return 0;
    const unsigned char *n = (const unsigned char *)name;
    unsigned i = name_slot[NAME_HASH(len, n[0], n[1], n[len - 1])];
    if (i != 0 && static_table[i].nlen == len && memcmp(static_table[i].name, name, len) == 0)
        return i;
    return 0;
}

size_t h2_hpack_literal(uint8_t *out, unsigned name_index, const char *name, size_t nlen,
                        const char *value, size_t vlen)
{
    size_t n;
    if (name_index > 0) {
        n = h2_hpack_int(out, 0x00, 4, name_index);
    } else {
        out[0] = 0x00;
        n = 1 + h2_hpack_int(out + 1, 0x00, 7, nlen);
        memcpy(out + n, name, nlen);
        n += nlen;
    }
    n += h2_hpack_int(out + n, 0x00, 7, vlen);
    memcpy(out + n, value, vlen);
    return n + vlen;
}

size_t h2_hpack_status(uint8_t *out, int status)
{
    char digits[3] = {(char)('0' + status / 100 % 10), (char)('0' + status / 10 % 10),
                      (char)('0' + status % 10)};
    /* Indexed (6.1) where a static entry holds it: 8..14 are :status. */
    for (unsigned i = 8; i <= 14; i++) {
        if (memcmp(static_table[i].value, digits, 3) == 0) {
            out[0] = (uint8_t)(0x80 | i);
            return 1;
        }
    }
    return h2_hpack_literal(out, 8, NULL, 0, digits, 3);
}
