/* fields.c — reading response field values: media types (RFC 9110 8.3.1)
 * and comma-separated lists (RFC 9110 5.6.1), both case-insensitive.
 *
 * No keel function is called here: the unit tests compile this file in.
 */
#include <string.h>

#include "kd.h"

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* [s, s+n) equals the lower-case literal lit, ignoring case. */
static int equals(const char *s, size_t n, const char *lit, size_t litn)
{
    if (n != litn)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)s[i]) != lit[i])
            return 0;
    return 1;
}

/* media-type = type "/" subtype parameters: "text/html; charset=utf-8"
 * is text/html. Patterns: "type/subtype", "type/" and a star, a star. */
int kd_type_matches(keel_str ct, const char *const *patterns, size_t n)
{
    if (ct.ptr == NULL)
        return 0;
    size_t b = 0, e = 0;
    while (b < ct.len && is_ows(ct.ptr[b]))
        b++;
    e = b;
    while (e < ct.len && ct.ptr[e] != ';' && !is_ows(ct.ptr[e]))
        e++;
    const char *mt = ct.ptr + b;
    size_t len = e - b;
    const char *slash = memchr(mt, '/', len);
    if (slash == NULL || slash == mt || slash == mt + len - 1)
        return 0;
    size_t type_len = (size_t)(slash - mt);
    for (size_t i = 0; i < n; i++) {
        const char *p = patterns[i];
        size_t pl = strlen(p);
        if (pl == 1 && p[0] == '*')
            return 1;
        if (pl >= 2 && p[pl - 1] == '*' && p[pl - 2] == '/') {
            if (equals(mt, type_len, p, pl - 2))
                return 1;
        } else if (equals(mt, len, p, pl)) {
            return 1;
        }
    }
    return 0;
}

int kd_name_is(keel_str name, const char *lit)
{
    size_t n = strlen(lit);
    if (name.ptr == NULL || name.len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)name.ptr[i]) != lower((unsigned char)lit[i]))
            return 0;
    return 1;
}

int kd_list_has(keel_str v, const char *token)
{
    size_t tl = strlen(token), i = 0;
    if (v.ptr == NULL)
        return 0;
    while (i < v.len) {
        while (i < v.len && (is_ows(v.ptr[i]) || v.ptr[i] == ','))
            i++;
        size_t start = i;
        while (i < v.len && v.ptr[i] != ',')
            i++;
        size_t end = i;
        while (end > start && is_ows(v.ptr[end - 1]))
            end--;
        if (end - start == tl) {
            size_t j = 0;
            while (j < tl &&
                   lower((unsigned char)v.ptr[start + j]) == lower((unsigned char)token[j]))
                j++;
            if (j == tl)
                return 1;
        }
    }
    return 0;
}
