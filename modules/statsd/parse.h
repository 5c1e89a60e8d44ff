/* parse.h — the statsd line protocol (etsy statsd's, with DogStatsD's
 * tags), parsed without allocating, locking or calling keel: a pure
 * function the fuzzer (tests/fuzz/fuzz_statsd.c) drives directly.
 *
 *     name:value|type[|@rate][|#tag:value,tag:value]
 *
 * type: c (counter), g (gauge; a value written with + or - is a delta),
 * ms (timing, milliseconds), h (histogram, treated as a timing, as
 * Prometheus' statsd_exporter does), s (set: not supported). Sections
 * after the type that start with another letter (DogStatsD's |c:container,
 * |T timestamp) are ignored. */
#ifndef KEEL_STATSD_PARSE_H
#define KEEL_STATSD_PARSE_H

#include <stddef.h>

#define STATSD_NAME_MAX   200 /* bytes of a name as sent, and once sanitised (+ a '_') */
#define STATSD_LABELS_MAX 512 /* bytes of the label string built from the tags */
#define STATSD_TAGS_MAX   16  /* tags on one line */

enum statsd_type { STATSD_COUNTER, STATSD_GAUGE, STATSD_TIMING };

/* Why a line was refused: the reason label of statsd_lines_invalid_total. */
enum statsd_reason {
    STATSD_OK = 0,
    STATSD_BAD_FORMAT,  /* no ':' or '|' where they belong */
    STATSD_BAD_NAME,    /* empty or longer than STATSD_NAME_MAX */
    STATSD_BAD_VALUE,   /* not a finite decimal number */
    STATSD_BAD_TYPE,    /* not c, g, ms or h */
    STATSD_BAD_RATE,    /* @rate not in [0.000001, 1] */
    STATSD_BAD_TAGS,    /* too many, too long, reserved (le) or repeated */
    STATSD_UNSUPPORTED, /* a set (|s) */
    STATSD_NREASONS
};

typedef struct statsd_metric {
    /* Prometheus rules: [a-zA-Z_:][a-zA-Z0-9_:]*; room for the module's
     * prefix (64) and a counter's "_total" after the name. */
    char name[STATSD_NAME_MAX + 2 + 64 + 8];
    char labels[STATSD_LABELS_MAX]; /* k="v",... sorted by name; "" without tags */
    int type;                       /* enum statsd_type */
    int delta;                      /* gauge: the value had a sign: add it */
    double value;
    double rate; /* [1e-6, 1]; 1 without @ */
} statsd_metric;

/* Parses one line (no newline in it) into *out. STATSD_OK or a reason. */
int statsd_parse_line(const char *line, size_t len, statsd_metric *out);

/* The next line of a datagram from *cursor (lines end with \n, a \r
 * before it is dropped; empty lines are skipped): 1 with *line, *len set
 * and *cursor moved past it, 0 at the end. */
int statsd_next_line(const char **cursor, const char *end, const char **line, size_t *len);

/* Writes name (len bytes) to out under Prometheus' rules: every byte that
 * may not be in a metric name becomes '_', and a leading digit gets a '_'
 * before it. out has room for len + 2 bytes; it is NUL-terminated. */
void statsd_sanitize(const char *name, size_t len, char *out);

/* The reason's label value ("format", "name", ...). */
const char *statsd_reason_name(int reason);

#endif
