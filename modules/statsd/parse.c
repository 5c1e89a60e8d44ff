/* parse.c — the statsd line protocol (parse.h). Nothing here allocates,
 * locks or calls keel: the fuzzer links it alone. */
#include "parse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

int statsd_next_line(const char **cursor, const char *end, const char **line, size_t *len)
{
    const char *p = *cursor;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        *cursor = nl ? nl + 1 : end;
        size_t n = (size_t)(stop - p);
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (n > 0) {
            *line = p;
            *len = n;
            return 1;
        }
        p = *cursor;
    }
    *cursor = end;
    return 0;
}

void statsd_sanitize(const char *name, size_t len, char *out)
{
    size_t o = 0;
    if (len > 0 && is_digit((unsigned char)name[0]))
        out[o++] = '_';
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)name[i];
        out[o++] = (char)(is_alpha(c) || is_digit(c) || c == '_' || c == ':' ? c : '_');
    }
    out[o] = '\0';
}

/* A finite decimal number: [+-]digits[.digits][(e|E)[+-]digits], at most
 * 63 bytes. strtod alone would take "inf", "nan" and hexadecimal; the
 * grammar is checked first and strtod only converts (keel never changes
 * the C locale, so '.' is the decimal point). */
static int parse_number(const char *s, size_t len, double *out)
{
    char buf[64];
    size_t i = 0, digits = 0;
    if (len == 0 || len >= sizeof buf)
        return 0;
    if (s[i] == '+' || s[i] == '-')
        i++;
    while (i < len && is_digit((unsigned char)s[i]))
        i++, digits++;
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && is_digit((unsigned char)s[i]))
            i++, digits++;
    }
    if (digits == 0)
        return 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t exp = 0;
        while (i < len && is_digit((unsigned char)s[i]))
            i++, exp++;
        if (exp == 0)
            return 0;
    }
    if (i != len)
        return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    double v = strtod(buf, NULL);
    if (!isfinite(v))
        return 0;
    *out = v;
    return 1;
}

typedef struct tag {
    char key[STATSD_NAME_MAX + 2];
    const char *value;
    size_t value_len;
} tag;

/* Appends s to labels at *pos; 0 if it does not fit. */
static int put(char *labels, size_t *pos, const char *s, size_t n)
{
    if (*pos + n >= STATSD_LABELS_MAX)
        return 0;
    memcpy(labels + *pos, s, n);
    *pos += n;
    labels[*pos] = '\0';
    return 1;
}

/* DogStatsD tags "k:v,k2:v2" (a tag without ':' has the value "") as
 * exposition labels, sorted by name so that one set of tags in any order
 * is one series. Label names follow the metric name's rules without ':';
 * "le" is refused (a histogram's own), as are names starting "__"
 * (Prometheus reserves them) and a name given twice. */
static int parse_tags(const char *s, size_t len, char *labels)
{
    tag tags[STATSD_TAGS_MAX];
    size_t ntags = 0, i = 0;
    while (i <= len) {
        const char *comma = memchr(s + i, ',', len - i);
        size_t end = comma ? (size_t)(comma - s) : len;
        const char *t = s + i;
        size_t tlen = end - i;
        i = end + 1;
        if (tlen == 0) {
            if (!comma)
                break;
            continue; /* "a:1,,b:2" */
        }
        if (ntags == STATSD_TAGS_MAX)
            return 0;
        const char *colon = memchr(t, ':', tlen);
        size_t klen = colon ? (size_t)(colon - t) : tlen;
        if (klen == 0 || klen > STATSD_NAME_MAX)
            return 0;
        tag *g = &tags[ntags];
        statsd_sanitize(t, klen, g->key); /* no ':' in it: the first one ended it */
        if (strcmp(g->key, "le") == 0 || strncmp(g->key, "__", 2) == 0)
            return 0;
        g->value = colon ? colon + 1 : t + tlen;
        g->value_len = colon ? tlen - klen - 1 : 0;
        /* Insertion in name order; a repeated name is refused. */
        size_t k = ntags;
        while (k > 0 && strcmp(tags[k - 1].key, g->key) > 0)
            k--;
        if (k > 0 && strcmp(tags[k - 1].key, g->key) == 0)
            return 0;
        tag moved = *g;
        memmove(&tags[k + 1], &tags[k], (ntags - k) * sizeof *tags);
        tags[k] = moved;
        ntags++;
        if (!comma)
            break;
    }
    size_t pos = 0;
    labels[0] = '\0';
    for (size_t k = 0; k < ntags; k++) {
        if ((k > 0 && !put(labels, &pos, ",", 1)) ||
            !put(labels, &pos, tags[k].key, strlen(tags[k].key)) || !put(labels, &pos, "=\"", 2))
            return 0;
        for (size_t j = 0; j < tags[k].value_len; j++) {
            char c = tags[k].value[j];
            /* Printable ASCII only: a scraper wants UTF-8, and a control
             * byte has no place in a label. */
            if (c < 0x20 || c > 0x7e)
                return 0;
            /* Escaped as the exposition format wants: \\ and \". */
            if ((c == '\\' || c == '"') && !put(labels, &pos, "\\", 1))
                return 0;
            if (!put(labels, &pos, &c, 1))
                return 0;
        }
        if (!put(labels, &pos, "\"", 1))
            return 0;
    }
    return 1;
}

int statsd_parse_line(const char *line, size_t len, statsd_metric *out)
{
    const char *colon = memchr(line, ':', len);
    if (colon == NULL)
        return STATSD_BAD_FORMAT;
    size_t name_len = (size_t)(colon - line);
    if (name_len == 0 || name_len > STATSD_NAME_MAX)
        return STATSD_BAD_NAME;
    const char *p = colon + 1, *end = line + len;
    const char *bar = memchr(p, '|', (size_t)(end - p));
    if (bar == NULL)
        return STATSD_BAD_FORMAT;
    const char *value = p;
    size_t value_len = (size_t)(bar - p);

    /* The type: up to the next '|' or the end. */
    p = bar + 1;
    const char *next = memchr(p, '|', (size_t)(end - p));
    size_t type_len = (size_t)((next ? next : end) - p);
    if (type_len == 1 && p[0] == 'c')
        out->type = STATSD_COUNTER;
    else if (type_len == 1 && p[0] == 'g')
        out->type = STATSD_GAUGE;
    else if ((type_len == 2 && p[0] == 'm' && p[1] == 's') || (type_len == 1 && p[0] == 'h'))
        out->type = STATSD_TIMING;
    else if (type_len == 1 && p[0] == 's')
        return STATSD_UNSUPPORTED;
    else
        return STATSD_BAD_TYPE;
    if (!parse_number(value, value_len, &out->value))
        return STATSD_BAD_VALUE;
    out->delta = out->type == STATSD_GAUGE && (value[0] == '+' || value[0] == '-');
    /* A counter only goes up (Prometheus), and a duration is not negative. */
    if ((out->type == STATSD_TIMING || out->type == STATSD_COUNTER) && out->value < 0)
        return STATSD_BAD_VALUE;

    out->rate = 1;
    out->labels[0] = '\0';
    int seen_rate = 0, seen_tags = 0;
    while (next != NULL) {
        p = next + 1;
        next = memchr(p, '|', (size_t)(end - p));
        size_t n = (size_t)((next ? next : end) - p);
        if (n > 0 && p[0] == '@') {
            if (seen_rate++ || !parse_number(p + 1, n - 1, &out->rate) || !(out->rate >= 1e-6) ||
                out->rate > 1)
                return STATSD_BAD_RATE;
        } else if (n > 0 && p[0] == '#') {
            if (seen_tags++ || !parse_tags(p + 1, n - 1, out->labels))
                return STATSD_BAD_TAGS;
        } else if (n == 0) {
            return STATSD_BAD_FORMAT;
        }
        /* Other sections (DogStatsD's |c:, |T) carry nothing for us. */
    }
    statsd_sanitize(line, name_len, out->name);
    return STATSD_OK;
}

const char *statsd_reason_name(int reason)
{
    static const char *const names[STATSD_NREASONS] = {
        [STATSD_OK] = "ok",         [STATSD_BAD_FORMAT] = "format",
        [STATSD_BAD_NAME] = "name", [STATSD_BAD_VALUE] = "value",
        [STATSD_BAD_TYPE] = "type", [STATSD_BAD_RATE] = "rate",
        [STATSD_BAD_TAGS] = "tags", [STATSD_UNSUPPORTED] = "unsupported",
    };
    return reason >= 0 && reason < STATSD_NREASONS ? names[reason] : "?";
}
