/* hpack.h — HPACK (RFC 7541): the decoder of request header blocks, with
 * its dynamic table, and the few encoding primitives responses need.
 *
 * The encoder keeps no dynamic table: every response field goes as a
 * literal without indexing (6.2.2), its name from the static table where
 * it is there. A response head then encodes the same in any order and on
 * any stream, so heads can be encoded when the handler gives them and sent
 * when their body is ready, and the work is a copy. What it costs is
 * bytes (~60 a response more than with indexing), on links where they are
 * cheap next to the CPU (h2o, nginx and nghttp2 all index).
 */
#ifndef KEEL_H2_HPACK_H
#define KEEL_H2_HPACK_H

#include <stddef.h>
#include <stdint.h>

typedef struct h2_hpack_entry h2_hpack_entry;

/* One connection's decoder. Zeroed, it is valid and empty. */
typedef struct h2_hpack {
    h2_hpack_entry **ring; /* newest at head, older below it (mod cap) */
    uint32_t cap, head, count;
    size_t size;  /* RFC 7541 4.1: names + values + 32 per entry */
    size_t max;   /* the table's maximum size, as the encoder last set it */
    size_t limit; /* the most the encoder may set: our SETTINGS_HEADER_TABLE_SIZE */
} h2_hpack;

/* Room the decoder decodes Huffman strings into: one per worker, grown. */
typedef struct h2_scratch {
    char *p;
    size_t cap;
} h2_scratch;

/* One decoded field, its strings and memo valid during the emit call only
 * (the static table's strings, where said below, for the program's life). */
typedef struct h2_hpack_field {
    const char *name, *value;
    size_t nlen, vlen;
    /* A static table index (1..61) whose name is this name, known without
     * comparing a byte (the field named it by index, or named a dynamic
     * entry whose name is a static one), or 0: the caller classifies the
     * name itself. When nonzero, name is the static table's own string,
     * which lives as long as the program. */
    unsigned name_index;
    unsigned flags; /* H2_HPACK_STATIC_VALUE, H2_HPACK_ENTRY_VALUE */
    /* The dynamic table entry that gave the field's name, or all of it
     * (H2_HPACK_ENTRY_VALUE), has a slot where the caller may keep what it
     * concluded of that entry: zero when the entry is made, never touched
     * by the decoder, and the entry never changes (RFC 7541 2.3.2), so a
     * check of its name (or value) made once holds as long as it is
     * referred to. NULL when no dynamic entry gave the field. */
    uint32_t *memo;
} h2_hpack_field;

/* The whole field is a static table entry's (6.1): the value is the
 * table's own string too, which lives as long as the program. */
#define H2_HPACK_STATIC_VALUE 1u
/* The whole field is the dynamic entry's whose memo this is (6.1, or a
 * field just added to the table, 6.2.1); without it a memo is of the
 * entry that gave the name only. */
#define H2_HPACK_ENTRY_VALUE 2u

/* A nonzero return stops decoding and is returned by h2_hpack_decode. */
typedef int (*h2_hpack_emit)(void *ud, const h2_hpack_field *f);

#define H2_HPACK_ERROR (-1) /* COMPRESSION_ERROR (RFC 9113 4.3) */
#define H2_HPACK_NOMEM (-2)

void h2_hpack_init(h2_hpack *d, size_t limit);
/* Decodes one whole header block. 0, H2_HPACK_ERROR, H2_HPACK_NOMEM or
 * what emit returned. After an error the table is unusable: the
 * connection ends (RFC 9113 4.3). */
int h2_hpack_decode(h2_hpack *d, const uint8_t *block, size_t len, h2_scratch *scratch,
                    h2_hpack_emit emit, void *ud);
void h2_hpack_free(h2_hpack *d);
void h2_scratch_free(h2_scratch *s);

/* ---- encoding (hpack.c) ---- */

/* An integer with an N-bit prefix (5.1) after the bits of `first`; returns
 * the bytes written (at most 11 for 64 bits). */
size_t h2_hpack_int(uint8_t *out, uint8_t first, unsigned prefix, uint64_t v);
/* The static table's index of a field name (lowercase), or 0. */
unsigned h2_hpack_static_name(const char *name, size_t len);
/* The most a literal field takes: what h2_hpack_literal may write. */
#define H2_HPACK_LITERAL_MAX(nlen, vlen) ((nlen) + (vlen) + 12)
/* A literal field without indexing (6.2.2): the name by index when
 * name_index > 0, else as a string; no Huffman coding. */
size_t h2_hpack_literal(uint8_t *out, unsigned name_index, const char *name, size_t nlen,
                        const char *value, size_t vlen);
/* :status (8.3.2 of RFC 9113): indexed when the static table has it. */
size_t h2_hpack_status(uint8_t *out, int status);

/* ---- hpack_huffman.c ---- */

/* Decodes n bytes of Huffman code (5.2, Appendix B) into out, which has
 * room for n * 8 / 5 + 1 bytes; the length, or -1 if the code is invalid
 * (EOS inside, padding longer than 7 bits or not all ones). */
long h2_huff_decode(const uint8_t *in, size_t n, char *out);
/* The length of s Huffman-coded, and the coding itself (out has room for
 * that many bytes). */
size_t h2_huff_len(const char *s, size_t n);
size_t h2_huff_encode(const char *s, size_t n, uint8_t *out);

#endif
