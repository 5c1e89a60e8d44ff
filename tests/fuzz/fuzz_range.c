/* fuzz_range — the static module's Range parser (modules/static/range.c,
 * st_range_parse), which calls no keel function and is compiled in.
 *
 * The input's first byte is max_ranges (0..63, 0 turning ranges off); its
 * second picks the representation's size: bit 7 set, the next eight bytes
 * (big-endian, any 64-bit value); else the byte itself (0..127, where
 * coalescing and clamping happen most). The rest is the field value.
 *
 * Checked besides ASan/UBSan: the result is NONE, OK or UNSAT; with OK,
 * 1..max_ranges ranges, each within the representation (first <= last <
 * size), pairwise neither overlapping nor adjacent (coalesced), adding up
 * to at most the size (nginx's rule); UNSAT only for a value that starts
 * with "bytes=". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "static.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_range: " __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static int by_first(const void *a, const void *b)
{
    const st_range *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint64_t max_ranges = data[0] % 64;
    uint64_t fsize;
    size_t skip;
    if (data[1] & 0x80) {
        if (size < 10)
            return 0;
        fsize = 0;
        for (int i = 0; i < 8; i++)
            fsize = fsize << 8 | data[2 + i];
        skip = 10;
    } else {
        fsize = data[1];
        skip = 2;
    }
    size_t vlen = size - skip;
    char *value = malloc(vlen ? vlen : 1); /* exactly the value: reads past it are seen */
    CHECK(value != NULL, "malloc");
    memcpy(value, data + skip, vlen);

    st_range *r = NULL;
    size_t n = 0;
    int rc = st_range_parse(value, vlen, fsize, max_ranges, &r, &n);
    CHECK(rc == ST_RANGE_NONE || rc == ST_RANGE_OK || rc == ST_RANGE_UNSAT, "result %d", rc);
    if (rc != ST_RANGE_OK)
        CHECK(r == NULL && n == 0, "ranges returned with result %d", rc);
    if (rc == ST_RANGE_UNSAT)
        CHECK(max_ranges > 0, "416 with ranges off");
    if (rc == ST_RANGE_OK) {
        CHECK(r != NULL && n >= 1 && n <= max_ranges, "%zu ranges (max %llu)", n,
              (unsigned long long)max_ranges);
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++) {
            CHECK(r[i].first <= r[i].last && r[i].last < fsize,
                  "range %zu is %llu-%llu for a size of %llu", i, (unsigned long long)r[i].first,
                  (unsigned long long)r[i].last, (unsigned long long)fsize);
            total += r[i].last - r[i].first + 1;
            CHECK(total <= fsize, "the ranges add up to more than the size");
        }
        qsort(r, n, sizeof *r, by_first);
        for (size_t i = 1; i < n; i++)
            CHECK(r[i].first > r[i - 1].last + 1, "ranges %llu-%llu and %llu-%llu not coalesced",
                  (unsigned long long)r[i - 1].first, (unsigned long long)r[i - 1].last,
                  (unsigned long long)r[i].first, (unsigned long long)r[i].last);
    }
    free(r);
    free(value);
    return 0;
}
