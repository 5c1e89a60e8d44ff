/* hpack_harness.h — what the HPACK unit tests share (tests/unit/
 * test_hpack_*.c; CMake links hpack_harness.c and the h2 module's codec,
 * h2_codec, into them): decoding a block into copies of its fields,
 * checking them and the dynamic table, and the RFC's hex dumps as bytes.
 * The checks are Criterion asserts, for the test's own thread. */
#ifndef KEEL_TEST_HPACK_HARNESS_H
#define KEEL_TEST_HPACK_HARNESS_H

#include "hpack.h"

#include <stddef.h>
#include <stdint.h>

#define MAX_FIELDS 16

/* The fields one h2_hpack_decode call emitted, copied (they are valid
 * during the call only). */
typedef struct fields {
    size_t n;
    char name[MAX_FIELDS][128];
    char value[MAX_FIELDS][512];
    size_t nlen[MAX_FIELDS], vlen[MAX_FIELDS];
    unsigned name_index[MAX_FIELDS];
} fields;

typedef struct field {
    const char *name, *value;
} field;

/* h2_hpack_decode of block into out (cleared first), through collect:
 * what h2_hpack_decode returns. */
int decode(h2_hpack *d, h2_scratch *s, const uint8_t *block, size_t len, fields *out);

/* The same for a block written as in the RFC's hex dumps ("8286 8441"). */
int decode_hex(h2_hpack *d, h2_scratch *s, const char *hex, fields *out);

/* Asserts that got holds exactly the n fields of want, in order. */
void expect_fields(const fields *got, const field *want, size_t n);

/* Asserts the dynamic table, newest first, as a decoder sees it: each
 * entry read back through an indexed field (6.1; index 62 is the newest,
 * 2.3.3), which does not change the table. Then its size (4.1) and count. */
void expect_table(h2_hpack *d, h2_scratch *s, const field *want, size_t n, size_t size);

/* "8286 8441 ..." into out (at most cap bytes), spaces ignored: the
 * number of bytes. */
size_t unhex(const char *hex, uint8_t *out, size_t cap);

#endif
