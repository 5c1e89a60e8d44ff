/* encoding.c — Accept-Encoding q-values (RFC 9110 12.5.3), for choosing a
 * precompressed sibling (file.br, file.gz).
 *
 * A coding is acceptable when the field names it (or "x-gzip" for gzip,
 * 8.4.1.3) with a q above 0, or, when it is not named, when "*" is there
 * with a q above 0. No field at all means identity only for a coding we
 * would have to announce (12.5.3 says any coding is acceptable then, but
 * nginx's gzip_static and every browser-facing server send identity:
 * a client that says nothing may not decode).
 */
#include "static.h"

#include <string.h>

/* q = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), as 0..1000. */
static int parse_q(const char *p, const char *end)
{
    if (p >= end || (*p != '0' && *p != '1'))
        return -1;
    int q = (*p - '0') * 1000;
    p++;
    if (p < end && *p == '.') {
        p++;
        int scale = 100;
        for (int i = 0; i < 3 && p < end && *p >= '0' && *p <= '9'; i++, p++) {
            q += (*p - '0') * scale;
            scale /= 10;
        }
    }
    return q > 1000 ? 1000 : q;
}

int st_accept_q(keel_str accept, const char *coding)
{
    if (accept.ptr == NULL)
        return 0;
    size_t clen = strlen(coding);
    int named = -1, star = -1;
    const char *at = accept.ptr, *el;
    size_t len;
    while (keel_list_next(&at, accept.ptr + accept.len, &el, &len)) {
        size_t nlen = keel_list_token_length(el, len);
        int q = 1000;
        /* parameters: only q counts */
        for (const char *p = el + nlen, *end = el + len; p < end;) {
            if (*p == ';') {
                p++;
                while (p < end && (*p == ' ' || *p == '\t'))
                    p++;
                if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
                    int v = parse_q(p + 2, end);
                    q = v < 0 ? 0 : v;
                }
            } else {
                p++;
            }
        }
        if (nlen == 1 && el[0] == '*')
            star = q;
        else if (keel_ascii_iequal(el, nlen, coding, clen) ||
                 (strcmp(coding, "gzip") == 0 && keel_ascii_iequal(el, nlen, "x-gzip", 6)))
            named = q > named ? q : named;
    }
    if (named >= 0)
        return named;
    return star > 0 ? star : 0;
}
