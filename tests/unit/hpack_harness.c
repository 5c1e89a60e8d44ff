/* hpack_harness.c — see hpack_harness.h. */
#include "hpack_harness.h"

#include <criterion/criterion.h>

#include <string.h>

static int collect(void *ud, const h2_hpack_field *hf)
{
    const char *name = hf->name, *value = hf->value;
    size_t nlen = hf->nlen, vlen = hf->vlen;
    unsigned name_index = hf->name_index;
    fields *f = ud;
    cr_assert_lt(f->n, MAX_FIELDS, "more fields than the test expects");
    cr_assert_lt(nlen, sizeof f->name[0]);
    cr_assert_lt(vlen, sizeof f->value[0]);
    memcpy(f->name[f->n], name, nlen);
    f->name[f->n][nlen] = '\0';
    memcpy(f->value[f->n], value, vlen);
    f->value[f->n][vlen] = '\0';
    f->nlen[f->n] = nlen;
    f->vlen[f->n] = vlen;
    f->name_index[f->n] = name_index;
    f->n++;
    return 0;
}

int decode(h2_hpack *d, h2_scratch *s, const uint8_t *block, size_t len, fields *out)
{
    memset(out, 0, sizeof *out);
    return h2_hpack_decode(d, block, len, s, collect, out);
}

void expect_fields(const fields *got, const field *want, size_t n)
{
    cr_assert_eq(got->n, n, "%zu fields decoded, %zu expected", got->n, n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(got->nlen[i], strlen(want[i].name), "field %zu: name length", i);
        cr_assert_str_eq(got->name[i], want[i].name, "field %zu: name '%s', expected '%s'", i,
                         got->name[i], want[i].name);
        cr_assert_eq(got->vlen[i], strlen(want[i].value), "field %zu (%s): value length", i,
                     want[i].name);
        cr_assert_str_eq(got->value[i], want[i].value, "field %zu (%s): '%s', expected '%s'", i,
                         want[i].name, got->value[i], want[i].value);
    }
}

void expect_table(h2_hpack *d, h2_scratch *s, const field *want, size_t n, size_t size)
{
    cr_assert_eq(d->count, n, "%u entries in the table, %zu expected", d->count, n);
    cr_assert_eq(d->size, size, "table size %zu, %zu expected", d->size, size);
    size_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t block[4];
        size_t len = h2_hpack_int(block, 0x80, 7, 62 + i);
        fields f;
        cr_assert_eq(decode(d, s, block, len, &f), 0, "index %zu", 62 + i);
        expect_fields(&f, &want[i], 1);
        sum += strlen(want[i].name) + strlen(want[i].value) + 32;
    }
    cr_assert_eq(sum, size, "the expected size is not the sum of the expected entries");
}

size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int half = -1;
    for (const char *p = hex; *p != '\0'; p++) {
        int v;
        if (*p >= '0' && *p <= '9')
            v = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            v = *p - 'a' + 10;
        else
            continue;
        if (half < 0) {
            half = v;
        } else {
            cr_assert_lt(n, cap);
            out[n++] = (uint8_t)(half << 4 | v);
            half = -1;
        }
    }
    cr_assert_eq(half, -1, "odd number of hex digits");
    return n;
}

int decode_hex(h2_hpack *d, h2_scratch *s, const char *hex, fields *out)
{
    uint8_t block[512];
    size_t len = unhex(hex, block, sizeof block);
    return decode(d, s, block, len, out);
}
