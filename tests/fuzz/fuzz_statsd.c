/* fuzz_statsd — the statsd module's line parser (modules/statsd/parse.c),
 * which calls no keel function and is compiled in alone. The input is one
 * datagram: it is split into lines (statsd_next_line) and each is parsed.
 *
 * Checked besides ASan/UBSan: every line lies inside the datagram, holds
 * no '\n', is not empty and ends where the datagram or a (CR)LF does; a parsed line's name is
 * non-empty and follows Prometheus' rules ([a-zA-Z_:][a-zA-Z0-9_:]*), its
 * labels are printable ASCII within the bound and end with '"' when
 * present, its value is finite, its rate within [1e-6, 1], and counters
 * and timings are not negative. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_statsd: " __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static int name_char(int c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *start = (const char *)data, *end = start + size, *cursor = start, *line;
    size_t len;
    while (statsd_next_line(&cursor, end, &line, &len)) {
        CHECK(line >= start && line + len <= end, "line outside the datagram");
        /* A line ends at '\n' or the end, one '\r' before either dropped
         * (a second one is the line's own). */
        const char *after = line + len;
        CHECK(len > 0 && memchr(line, '\n', len) == NULL &&
                  (after == end || *after == '\n' ||
                   (*after == '\r' && (after + 1 == end || after[1] == '\n'))),
              "bad line boundaries");
        statsd_metric m;
        int rc = statsd_parse_line(line, len, &m);
        CHECK(rc >= 0 && rc < STATSD_NREASONS, "reason %d", rc);
        CHECK(strcmp(statsd_reason_name(rc), "?") != 0, "reason %d has no name", rc);
        if (rc != STATSD_OK)
            continue;
        size_t n = strlen(m.name);
        CHECK(n > 0 && n <= STATSD_NAME_MAX + 1, "name length %zu", n);
        for (size_t i = 0; i < n; i++)
            CHECK(name_char((unsigned char)m.name[i], i == 0), "name '%s'", m.name);
        size_t l = strlen(m.labels);
        CHECK(l < STATSD_LABELS_MAX, "labels length %zu", l);
        CHECK(l == 0 || m.labels[l - 1] == '"', "labels '%s'", m.labels);
        for (size_t i = 0; i < l; i++)
            CHECK(m.labels[i] >= 0x20 && m.labels[i] <= 0x7e, "labels byte %d", m.labels[i]);
        CHECK(isfinite(m.value), "value not finite");
        CHECK(m.rate >= 1e-6 && m.rate <= 1, "rate %g", m.rate);
        CHECK(m.type == STATSD_GAUGE || m.value >= 0, "negative %s",
              m.type == STATSD_COUNTER ? "counter" : "timing");
        CHECK(m.type >= STATSD_COUNTER && m.type <= STATSD_TIMING, "type %d", m.type);
    }
    CHECK(cursor == end, "the cursor stopped before the end");
    return 0;
}
