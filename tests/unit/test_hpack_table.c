/* The h2 module's HPACK dynamic table (RFC 7541 4.1 - 4.4): eviction, an
 * entry larger than the table, a new entry naming an evicted one, and the
 * ring wrapping and growing under many entries. */
#include <criterion/criterion.h>

#include "hpack_harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the dynamic table (4.1 - 4.4) ------------------------------------------------------ */

/* 33 bytes of "x" */
#define X33 "787878787878787878787878787878787878787878787878787878787878787878"

Test(hpack_table, eviction, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    /* Max 100 (31 + 69); three entries of 34 (1 + 1 + 32) bytes. */
    cr_assert_eq(decode_hex(&d, &s, "3f45 4001 6101 31 4001 6201 32", &f), 0);
    static const field two[] = {{"b", "2"}, {"a", "1"}};
    expect_table(&d, &s, two, 2, 68);
    /* 4.4: the third would make 102 > 100: the oldest goes first. */
    cr_assert_eq(decode_hex(&d, &s, "4001 6301 33", &f), 0);
    static const field evicted[] = {{"c", "3"}, {"b", "2"}};
    expect_table(&d, &s, evicted, 2, 68);
    /* One of 66 (1 + 33 + 32): evicting "b" is enough, 66 + 34 = 100 is
     * at the maximum, not over it (4.4). */
    cr_assert_eq(decode_hex(&d, &s, "4001 6421" X33, &f), 0);
    static const field full[] = {{"d", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}, {"c", "3"}};
    expect_table(&d, &s, full, 2, 100);
    /* One of 67 evicts both. */
    cr_assert_eq(decode_hex(&d, &s, "4001 6622 78" X33, &f), 0);
    static const field big[] = {{"f", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}};
    expect_table(&d, &s, big, 1, 67);
    /* 4.3: a smaller maximum evicts down to it; 0 empties the table. */
    cr_assert_eq(decode_hex(&d, &s, "3f03", &f), 0);
    expect_table(&d, &s, NULL, 0, 0);
    cr_assert_eq(decode_hex(&d, &s, "4001 6501 35", &f), 0);
    static const field e[] = {{"e", "5"}};
    expect_table(&d, &s, e, 1, 34);
    cr_assert_eq(decode_hex(&d, &s, "20", &f), 0);
    expect_table(&d, &s, NULL, 0, 0);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* 4.4: an entry larger than the maximum empties the table and is not
 * added; the field itself is still emitted. */
Test(hpack_table, entry_larger_than_table, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode_hex(&d, &s, "3f45 4001 6101 31 4001 6201 32", &f), 0);
    /* 1 + 68 + 32 = 101 > 100 */
    char hex[512];
    int n = snprintf(hex, sizeof hex, "4001 6344");
    for (int i = 0; i < 68; i++)
        n += snprintf(hex + n, sizeof hex - (size_t)n, "79");
    cr_assert_eq(decode_hex(&d, &s, hex, &f), 0);
    cr_assert_eq(f.n, 1);
    cr_assert_str_eq(f.name[0], "c");
    cr_assert_eq(f.vlen[0], 68);
    expect_table(&d, &s, NULL, 0, 0);
    /* The table works after: the next entry goes in. */
    cr_assert_eq(decode_hex(&d, &s, "4001 6401 34", &f), 0);
    static const field after[] = {{"d", "4"}};
    expect_table(&d, &s, after, 1, 34);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* 4.4: "A new entry can reference the name of an entry in the dynamic
 * table that will be evicted when adding this new entry": the name must
 * survive the eviction, in the new entry and in what is emitted. */
Test(hpack_table, name_of_an_evicted_entry, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    /* Max 70 (31 + 39); "name": "1" is 37 bytes. */
    cr_assert_eq(decode_hex(&d, &s, "3f27 4004 6e61 6d65 0131", &f), 0);
    /* Literal with indexing, name 62 ("name"), value "22": 38 bytes, and
     * 37 + 38 > 70 evicts the entry the name comes from. */
    cr_assert_eq(decode_hex(&d, &s, "7e02 3232", &f), 0);
    static const field want[] = {{"name", "22"}};
    expect_fields(&f, want, 1);
    expect_table(&d, &s, want, 1, 38);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* The same, when the new entry is larger than the whole table (4.4): the
 * table is emptied, the field still emitted with the name it referenced. */
Test(hpack_table, name_of_an_evicted_entry_too_large, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    /* Max 37; "name": "1" is 37 bytes; "name": "22" would be 38. */
    cr_assert_eq(decode_hex(&d, &s, "3f06 4004 6e61 6d65 0131", &f), 0);
    cr_assert_eq(d.count, 1);
    cr_assert_eq(decode_hex(&d, &s, "7e02 3232", &f), 0);
    static const field want[] = {{"name", "22"}};
    expect_fields(&f, want, 1);
    expect_table(&d, &s, NULL, 0, 0);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* Many entries through a table that keeps a few, so that the ring's head
 * wraps; then a larger table, so that it grows while wrapped. The
 * newest-first order (2.3.3) holds throughout. */
static void add_entry(h2_hpack *d, h2_scratch *s, const char *name)
{
    uint8_t block[16];
    size_t n = 0;
    block[n++] = 0x40; /* 6.2.1, new name */
    block[n++] = 3;
    memcpy(block + n, name, 3);
    n += 3;
    block[n++] = 1;
    block[n++] = 'v';
    fields f;
    cr_assert_eq(decode(d, s, block, n, &f), 0, "%s", name);
}

Test(hpack_table, ring_wraps_and_grows, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    char names[100][4];
    field want[100];
    h2_hpack_init(&d, 4096);
    /* 144 = 31 + 113: four entries of 36 (3 + 1 + 32) bytes. */
    cr_assert_eq(decode_hex(&d, &s, "3f71", &f), 0);
    int i = 0;
    for (; i < 30; i++) {
        snprintf(names[i], sizeof names[i], "k%02d", i);
        add_entry(&d, &s, names[i]);
        int kept = i + 1 < 4 ? i + 1 : 4;
        for (int k = 0; k < kept; k++)
            want[k] = (field){names[i - k], "v"};
        expect_table(&d, &s, want, (size_t)kept, (size_t)kept * 36);
    }
    /* Back to 4,096 (113 entries): 4 grow to 70 through several regrowths. */
    cr_assert_eq(decode_hex(&d, &s, "3fe11f", &f), 0);
    for (; i < 96; i++) {
        snprintf(names[i], sizeof names[i], "k%02d", i);
        add_entry(&d, &s, names[i]);
    }
    for (int k = 0; k < 70; k++)
        want[k] = (field){names[95 - k], "v"};
    expect_table(&d, &s, want, 70, 70 * 36);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}
