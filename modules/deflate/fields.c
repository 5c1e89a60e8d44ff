/* fields.c — reading response field values: media types (RFC 9110 8.3.1)
 * and comma-separated lists (RFC 9110 5.6.1), both case-insensitive.
 *
 * No keel function is called here: the unit tests compile this file in.
 */
#include <string.h>

#include <keel/util.h>

#include "kd.h"

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
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
            if (keel_ascii_iequal(mt, type_len, p, pl - 2))
                return 1;
        } else if (keel_ascii_iequal(mt, len, p, pl)) {
            return 1;
        }
    }
    return 0;
}

int kd_name_is(keel_str name, const char *lit)
{
    return name.ptr != NULL && keel_ascii_iequal_z(name.ptr, name.len, lit);
}

int kd_list_has(keel_str v, const char *token)
{
    return keel_list_has(v.ptr, v.len, token);
}
