/* core/runtime/config_values.c — what a config value's text means: the
 * integers, switches, sizes and durations described in config_values.h.
 * One reading for every caller, so that a value means the same whether
 * [keel], a declared key or a module's getter reads it. */
#include "runtime/config_values.h"

#include <keel/types.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
expected(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return KEEL_ERR_CONFIG;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Parses the leading decimal digits of s into *out (at most limit); returns
 * the first byte after them, or NULL if there are none or they exceed limit. */
static const char *parse_digits(const char *s, uint64_t limit, uint64_t *out)
{
    uint64_t v = 0;
    if (!is_digit(*s))
        return NULL;
    for (; is_digit(*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (limit - d) / 10)
            return NULL;
        v = v * 10 + d;
    }
    *out = v;
    return s;
}

int kl_parse_int(const char *s, int64_t min, int64_t max, int64_t *out, char *err, size_t errlen)
{
    uint64_t mag;
    int neg = s && *s == '-';
    const char *end =
        s ? parse_digits(s + neg, neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX, &mag) : NULL;

    if (end && *end == '\0') {
        /* mag may be INT64_MAX + 1: negate mag - 1 so nothing overflows */
        int64_t v = !neg ? (int64_t)mag : mag == 0 ? 0 : -(int64_t)(mag - 1) - 1;
        if (v >= min && v <= max) {
            *out = v;
            return KEEL_OK;
        }
    }
    return expected(err, errlen, "expected an integer between %" PRId64 " and %" PRId64, min, max);
}

static int same_nocase(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = (*a >= 'A' && *a <= 'Z') ? (char)(*a - 'A' + 'a') : *a;
        if (x != *b)
            return 0;
    }
    return *a == *b;
}

int kl_parse_bool(const char *s, int *out, char *err, size_t errlen)
{
    static const char *const words[] = {"off", "on", "no", "yes", "false", "true", "0", "1"};
    for (size_t i = 0; s && i < sizeof words / sizeof words[0]; i++) {
        if (same_nocase(s, words[i])) {
            *out = (int)(i % 2);
            return KEEL_OK;
        }
    }
    return expected(err, errlen, "expected on/off, yes/no, true/false or 1/0");
}

int kl_parse_size(const char *s, uint64_t *out, char *err, size_t errlen)
{
    uint64_t v;
    const char *end = s ? parse_digits(s, UINT64_MAX, &v) : NULL;
    unsigned shift = 0;

    if (end && *end) {
        switch (*end) {
        case 'k':
        case 'K':
            shift = 10;
            break;
        case 'm':
        case 'M':
            shift = 20;
            break;
        case 'g':
        case 'G':
            shift = 30;
            break;
        default:
            end = NULL;
        }
        if (end && end[1] != '\0')
            end = NULL;
    }
    if (!end || v > UINT64_MAX >> shift)
        return expected(err, errlen, "expected a size such as 64k or 1m");
    *out = v << shift;
    return KEEL_OK;
}

int kl_parse_duration_ms(const char *s, uint64_t *out, char *err, size_t errlen)
{
    static const struct {
        const char *suffix;
        uint64_t ms;
    } units[] = {{"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    uint64_t v;
    const char *end = s ? parse_digits(s, UINT64_MAX, &v) : NULL;

    for (size_t i = 0; end && i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            if (v > UINT64_MAX / units[i].ms)
                break;
            *out = v * units[i].ms;
            return KEEL_OK;
        }
    }
    return expected(err, errlen, "expected a duration such as 500ms, 10s or 5m");
}
