/* escape.c — making decoded names safe again: percent-encoding for URLs
 * (Location, listing links) and HTML escaping for listing text. A file
 * may be called `<script>.txt` or `a"b` or hold bytes that are not UTF-8;
 * none of them may reach a page or a header as markup or as a split. */
#include "static.h"

#include <string.h>

/* RFC 3986 2.3 unreserved, plus '/' when the input is a path. */
static int keep(unsigned char c, int path)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~' || (path && c == '/');
}

size_t st_url_encode(const char *s, size_t len, int path, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (keep(c, path)) {
            if (n + 1 >= cap)
                return 0;
            out[n++] = (char)c;
        } else {
            if (n + 3 >= cap)
                return 0;
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    if (n >= cap)
        return 0;
    out[n] = '\0';
    return n;
}

size_t st_html_escape(const char *s, size_t len, char *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        const char *rep = NULL;
        switch (s[i]) {
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '&':
            rep = "&amp;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&#39;";
            break;
        default:
            break;
        }
        size_t rl = rep ? strlen(rep) : 1;
        if (n + rl >= cap)
            return 0;
        if (rep)
            memcpy(out + n, rep, rl);
        else
            out[n] = s[i];
        n += rl;
    }
    if (n >= cap)
        return 0;
    out[n] = '\0';
    return n;
}
