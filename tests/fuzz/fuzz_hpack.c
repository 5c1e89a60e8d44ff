/* fuzz_hpack — the h2 module's HPACK decoder (RFC 7541; modules/h2/hpack.c
 * and hpack_huffman.c: the h2_codec library, linked alone) on
 * arbitrary header blocks, several per input through one decoder, so the
 * dynamic table carries state from block to block as on a connection.
 *
 * Input: one byte, the decoder's limit (SETTINGS_HEADER_TABLE_SIZE: the
 * byte times 64, 0 to 16,320; the table starts at 4,096 whatever it is,
 * 4.2), then blocks, each a 2-byte big-endian length and that many bytes
 * (the last one cut to what remains).
 *
 * Checked besides ASan/UBSan/leaks:
 *   - the result is 0, H2_HPACK_ERROR or H2_HPACK_NOMEM; after an error
 *     the connection would end (RFC 9113 4.3), so the input does too;
 *   - every emitted name and value is readable and sane in length: no
 *     longer than the block decoded (Huffman grows by 8/5 at most) plus
 *     the largest entry a table may hold;
 *   - the table keeps 4.1's accounting: its size is the sum of its entries
 *     (each read back through an indexed field) and at most its maximum,
 *     which is at most the limit once the encoder has set it;
 *   - the fields of a block, re-encoded with the module's own encoder
 *     (literals without indexing, h2_hpack_literal) and decoded by a fresh
 *     decoder, come back the same; every value survives a Huffman round
 *     trip (h2_huff_encode, h2_huff_decode);
 *   - where a field came from (h2_hpack_field) holds: a whole static
 *     field has a static name index and no memo; a dynamic entry's memo
 *     starts at zero and keeps what was left in it, and the entry's name
 *     (and, for a whole field, value) is what it was then (RFC 7541
 *     2.3.2: entries never change; h2 checks a field once per entry). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpack.h"

typedef struct emitted {
    size_t block_len, max_entry;
    uint8_t *enc; /* the fields re-encoded */
    size_t enc_len, enc_cap;
    size_t fields;
    unsigned sum; /* every byte read, so ASan sees every one */
} emitted;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_hpack: %s\n", what);
        abort();
    }
}

/* A memo as this harness fills it: a hash of the entry's name in the low
 * 16 bits, of its value (once a whole field was seen) in the high ones,
 * each with its top bit set when there. */
static uint32_t bytes_hash(const char *p, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return (h & 0x7fff) | 0x8000;
}

static void check_memo(const h2_hpack_field *f)
{
    check(!(f->flags & H2_HPACK_STATIC_VALUE) || (f->name_index != 0 && f->memo == NULL),
          "a static field with a dynamic entry's memo or no static name");
    check(!(f->flags & H2_HPACK_ENTRY_VALUE) || f->memo != NULL,
          "a dynamic entry's field without its memo");
    if (f->memo == NULL)
        return;
    uint32_t m = *f->memo;
    uint32_t name = bytes_hash(f->name, f->nlen);
    check((m & 0xffff) == 0 || (m & 0xffff) == name, "an entry's name changed under its memo");
    m = (m & 0xffff0000u) | name;
    if (f->flags & H2_HPACK_ENTRY_VALUE) {
        uint32_t value = bytes_hash(f->value, f->vlen) << 16;
        check((m & 0xffff0000u) == 0 || (m & 0xffff0000u) == value,
              "an entry's value changed under its memo");
        m = (m & 0xffff) | value;
    }
    *f->memo = m;
}

static int on_field(void *ud, const h2_hpack_field *hf)
{
    const char *name = hf->name, *value = hf->value;
    size_t nlen = hf->nlen, vlen = hf->vlen;
    unsigned name_index = hf->name_index;
    emitted *e = ud;
    check_memo(hf);
    /* A literal is at most the block decoded; an indexed name or field
     * at most the largest table entry (static ones are shorter than 64). */
    size_t bound = e->block_len / 5 * 8 + 8 + (e->max_entry > 64 ? e->max_entry : 64);
    check(nlen + vlen <= bound, "a field longer than its block and the table allow");
    check(nlen == 0 || name != NULL, "a name without bytes");
    check(vlen == 0 || value != NULL, "a value without bytes");
    /* A name known by a static index is that entry's name. */
    check(name_index <= 61, "a name index past the static table");
    check(name_index == 0 || (name_index >= 15 ? h2_hpack_static_name(name, nlen) == name_index
                                               : nlen > 0 && name[0] == ':'),
          "a name index that is not the name's");
    for (size_t i = 0; i < nlen; i++)
        e->sum += (unsigned char)name[i];
    for (size_t i = 0; i < vlen; i++)
        e->sum += (unsigned char)value[i];

    size_t need = e->enc_len + H2_HPACK_LITERAL_MAX(nlen, vlen);
    if (need > e->enc_cap) {
        size_t cap = need * 2;
        uint8_t *p = realloc(e->enc, cap);
        check(p != NULL, "out of memory");
        e->enc = p;
        e->enc_cap = cap;
    }
    size_t n = h2_hpack_literal(e->enc + e->enc_len, 0, name, nlen, value, vlen);
    check(n <= H2_HPACK_LITERAL_MAX(nlen, vlen), "a literal longer than H2_HPACK_LITERAL_MAX");
    e->enc_len += n;
    e->fields++;

    /* 5.2 / Appendix B on whatever bytes the values hold. */
    size_t hlen = h2_huff_len(value, vlen);
    uint8_t *h = malloc(hlen + 1);
    char *back = malloc(hlen * 8 / 5 + 1);
    check(h != NULL && back != NULL, "out of memory");
    check(h2_huff_encode(value, vlen, h) == hlen, "h2_huff_encode and h2_huff_len disagree");
    check(h2_huff_decode(h, hlen, back) == (long)vlen, "a Huffman round trip changed the length");
    check(memcmp(back, value, vlen) == 0, "a Huffman round trip changed the bytes");
    free(h);
    free(back);
    return 0;
}

/* The re-encoded fields decoded again and encoded once more: the same
 * bytes, field for field (the encoding is deterministic). */
typedef struct replay {
    const uint8_t *enc;
    size_t len, at, fields;
} replay;

static int replay_field(void *ud, const h2_hpack_field *hf)
{
    const char *name = hf->name, *value = hf->value;
    size_t nlen = hf->nlen, vlen = hf->vlen;
    unsigned name_index = hf->name_index;
    replay *r = ud;
    (void)name_index;
    uint8_t *tmp = malloc(H2_HPACK_LITERAL_MAX(nlen, vlen));
    check(tmp != NULL, "out of memory");
    size_t n = h2_hpack_literal(tmp, 0, name, nlen, value, vlen);
    check(n <= r->len - r->at && memcmp(tmp, r->enc + r->at, n) == 0,
          "a field re-encoded decodes to another field");
    r->at += n;
    r->fields++;
    free(tmp);
    return 0;
}

/* 4.1: the size is the sum of the entries, each name + value + 32. */
static size_t entry_bytes;
static int entry_size(void *ud, const h2_hpack_field *hf)
{
    const char *name = hf->name, *value = hf->value;
    size_t nlen = hf->nlen, vlen = hf->vlen;
    unsigned name_index = hf->name_index;
    (void)ud;
    (void)name;
    (void)name_index;
    (void)value;
    entry_bytes += nlen + vlen + 32;
    return 0;
}

static void check_table(h2_hpack *d, h2_scratch *s)
{
    check(d->size <= d->max, "the table is larger than its maximum (4.1)");
    size_t total = 0;
    for (uint32_t i = 0; i < d->count; i++) {
        uint8_t idx[8];
        size_t n = h2_hpack_int(idx, 0x80, 7, 62 + (uint64_t)i);
        entry_bytes = 0;
        check(h2_hpack_decode(d, idx, n, s, entry_size, NULL) == 0,
              "an entry of the table cannot be read back");
        total += entry_bytes;
    }
    check(total == d->size, "the table's size is not the sum of its entries (4.1)");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t limit = (size_t)data[0] * 64;
    data++;
    size--;

    static h2_scratch scratch, scratch2;
    h2_hpack d;
    h2_hpack_init(&d, limit);
    int set = 0; /* the encoder has sent a size update */
    emitted e = {0};
    while (size >= 2) {
        size_t len = (size_t)data[0] << 8 | data[1];
        data += 2;
        size -= 2;
        if (len > size)
            len = size;
        const uint8_t *block = data;
        data += len;
        size -= len;

        e.block_len = len;
        e.max_entry = d.max > limit ? d.max : limit;
        e.enc_len = 0;
        e.fields = 0;
        int rc = h2_hpack_decode(&d, block, len, &scratch, on_field, &e);
        check(rc == 0 || rc == H2_HPACK_ERROR || rc == H2_HPACK_NOMEM,
              "h2_hpack_decode returned what it documents not");
        if (rc != 0)
            break; /* the table is unusable: the connection ends (RFC 9113 4.3) */
        if (len > 0 && (block[0] & 0xe0) == 0x20)
            set = 1;
        if (set)
            check(d.max <= limit, "the table's maximum is above the limit (4.2)");
        check_table(&d, &scratch);

        /* Our own literals, decoded without a table's help. */
        h2_hpack again;
        h2_hpack_init(&again, 0);
        /* Never NULL, even empty: hpack.c does arithmetic on it. */
        const uint8_t *enc = e.enc != NULL ? e.enc : (const uint8_t *)"";
        replay r = {enc, e.enc_len, 0, 0};
        check(h2_hpack_decode(&again, enc, e.enc_len, &scratch2, replay_field, &r) == 0,
              "the fields re-encoded do not decode");
        check(r.fields == e.fields && r.at == e.enc_len,
              "the fields re-encoded decode to another count");
        check(again.count == 0, "a literal without indexing went into the table");
        h2_hpack_free(&again);
    }
    h2_hpack_free(&d);
    free(e.enc);
    /* The scratch is kept between inputs, as a worker's is. */
    return 0;
}
