/* range.c — the Range field (RFC 9110 14.1.2, 14.2) for bytes.
 *
 *   ranges-specifier = "bytes" "=" 1#( first-pos "-" [ last-pos ]
 *                                    / "-" suffix-length )
 *
 * Decisions, each with its source:
 *   - a unit other than bytes, or a field that does not parse (a range
 *     whose last-pos is below its first-pos included) is ignored: the
 *     whole representation, 200 (14.2: a server MAY ignore Range);
 *   - more ranges than max_ranges: ignored, 200 (nginx's max_ranges);
 *     max_ranges = 0 turns ranges off;
 *   - satisfiable ranges whose lengths add up to more than the file:
 *     ignored, 200 (nginx's rule; it defeats "bytes=0-,0-,0-..." asking
 *     for the same bytes many times, 14.3's denial-of-service note);
 *   - no satisfiable range: 416 with "bytes * / size" (15.5.17), which an
 *     empty file always gives;
 *   - overlapping or adjacent ranges are coalesced (14.3 allows it; nginx
 *     does not), and the parts keep the order in which they were asked for
 *     (14.6 SHOULD), each merged part where its first member was.
 */
#include "static.h"

#include <stdlib.h>
#include <string.h>

typedef struct spec {
    st_range r;
    size_t order; /* index in the field */
} spec;

static const char *skip_ows(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* A decimal number, saturating (a position past 2^64 is past any file). */
static const char *number(const char *p, const char *end, uint64_t *out, int *ok)
{
    uint64_t v = 0;
    const char *start = p;
    while (p < end && *p >= '0' && *p <= '9') {
        uint64_t d = (uint64_t)(*p - '0');
        v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
        p++;
    }
    *ok = p > start;
    *out = v;
    return p;
}

static int by_first(const void *a, const void *b)
{
    const spec *x = a, *y = b;
    return x->r.first < y->r.first ? -1 : x->r.first > y->r.first;
}

static int by_order(const void *a, const void *b)
{
    const spec *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

int st_range_parse(const char *value, size_t len, uint64_t size, uint64_t max_ranges,
                   st_range **ranges, size_t *n)
{
    const char *p = value, *end = value + len;
    *ranges = NULL;
    *n = 0;
    if (max_ranges == 0)
        return ST_RANGE_NONE;
    p = skip_ows(p, end);
    if (end - p < 6 || keel_ascii_ncasecmp(p, "bytes=", 6) != 0)
        return ST_RANGE_NONE;
    p += 6;
    spec *specs = malloc((size_t)max_ranges * sizeof *specs);
    if (specs == NULL)
        return ST_RANGE_NONE;
    size_t count = 0, nsat = 0;
    uint64_t total = 0;
    int elements = 0;
    for (;;) {
        p = skip_ows(p, end);
        if (p < end && *p == ',') { /* empty list elements are allowed (5.6.1) */
            p++;
            continue;
        }
        if (p >= end)
            break;
        uint64_t first = 0, last = UINT64_MAX;
        int ok, suffix = 0;
        if (*p == '-') {
            suffix = 1;
            p = number(p + 1, end, &last, &ok);
            if (!ok)
                goto ignore;
        } else {
            p = number(p, end, &first, &ok);
            if (!ok || p >= end || *p != '-')
                goto ignore;
            p++;
            if (p < end && *p >= '0' && *p <= '9') {
                p = number(p, end, &last, &ok);
                if (last < first)
                    goto ignore;
            }
        }
        p = skip_ows(p, end);
        if (p < end && *p != ',')
            goto ignore;
        if ((uint64_t)++elements > max_ranges)
            goto ignore;
        /* Satisfiable (14.1.1)? */
        if (suffix) {
            if (last == 0 || size == 0)
                continue;
            uint64_t n_last = last > size ? size : last;
            first = size - n_last;
            last = size - 1;
        } else {
            if (first >= size)
                continue;
            if (last >= size)
                last = size - 1;
        }
        uint64_t length = last - first + 1;
        total += length;
        if (total > size)
            goto ignore;
        specs[count++] = (spec){{first, last}, nsat++};
    }
    if (elements == 0)
        goto ignore;
    if (count == 0) {
        free(specs);
        return ST_RANGE_UNSAT;
    }
    /* Coalesce: sort by start, merge what touches, then back to the
     * order of first appearance. */
    qsort(specs, count, sizeof *specs, by_first);
    size_t out = 0;
    for (size_t i = 0; i < count; i++) {
        if (out > 0 && specs[i].r.first <= specs[out - 1].r.last + 1) {
            spec *m = &specs[out - 1];
            if (specs[i].r.last > m->r.last)
                m->r.last = specs[i].r.last;
            if (specs[i].order < m->order)
                m->order = specs[i].order;
        } else {
            specs[out++] = specs[i];
        }
    }
    qsort(specs, out, sizeof *specs, by_order);
    st_range *r = malloc(out * sizeof *r);
    if (r == NULL)
        goto ignore;
    for (size_t i = 0; i < out; i++)
        r[i] = specs[i].r;
    free(specs);
    *ranges = r;
    *n = out;
    return ST_RANGE_OK;
ignore:
    free(specs);
    return ST_RANGE_NONE;
}
