/* accept.c — which content coding a client accepts (RFC 9110 12.5.3).
 *
 *     Accept-Encoding  = #( codings [ weight ] )
 *     codings          = content-coding / "identity" / "*"
 *     weight           = OWS ";" OWS "q=" qvalue
 *     qvalue           = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
 *
 * The field comes from the client, so anything goes: an element that does
 * not parse is skipped, never trusted and never fatal. gzip, x-gzip (the
 * same coding, RFC 9110 8.4.1.3), deflate, br, zstd, identity and "*"
 * matter here; other codings are read past.
 *
 * No keel function is called here: the unit tests compile this file in.
 */
#include <string.h>

#include <keel/util.h>

#include "kd.h"

void kd_accept_init(kd_accept *acc)
{
    *acc = (kd_accept){0, -1, -1, -1, -1, -1, -1};
}

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static int equals(const char *s, size_t n, const char *lit)
{
    return keel_ascii_iequal_z(s, n, lit);
}

/* A qvalue in thousandths, or -1 if [s, s+n) is not one. */
static int parse_qvalue(const char *s, size_t n)
{
    if (n == 0 || (s[0] != '0' && s[0] != '1'))
        return -1;
    int q = (s[0] - '0') * 1000;
    if (n == 1)
        return q;
    if (s[1] != '.' || n > 5)
        return -1;
    int scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        q += (s[i] - '0') * scale;
    }
    return q <= 1000 ? q : -1;
}

/* Skips a quoted-string starting at s[i] == '"' (RFC 9110 5.6.4), so that
 * a comma or semicolon inside a parameter's value ends nothing. */
static size_t skip_quoted(const char *s, size_t len, size_t i)
{
    for (i++; i < len && s[i] != '"'; i++)
        if (s[i] == '\\' && i + 1 < len)
            i++;
    return i < len ? i + 1 : len;
}

/* One list element [s, s+n): its coding and its weight (1000 unless a
 * well-formed q parameter says otherwise; -1 if q is malformed, which
 * drops the element). */
static void add_element(kd_accept *acc, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] != ';' && !is_ows(s[i]))
        i++;
    const char *name = s;
    size_t name_len = i;
    if (name_len == 0)
        return;
    int q = 1000;
    while (i < n) {
        while (i < n && (is_ows(s[i]) || s[i] == ';'))
            i++;
        size_t ps = i;
        while (i < n && s[i] != '=' && s[i] != ';' && !is_ows(s[i]))
            i++;
        size_t pn = i - ps;
        while (i < n && is_ows(s[i]))
            i++;
        if (i >= n || s[i] != '=')
            continue;
        i++;
        while (i < n && is_ows(s[i]))
            i++;
        size_t vs = i;
        if (i < n && s[i] == '"')
            i = skip_quoted(s, n, i);
        else
            while (i < n && s[i] != ';' && !is_ows(s[i]))
                i++;
        if (pn == 1 && keel_ascii_lower((unsigned char)s[ps]) == 'q') {
            q = parse_qvalue(s + vs, i - vs);
            if (q < 0)
                return;
        }
    }
    int *slot = NULL;
    if (equals(name, name_len, "gzip") || equals(name, name_len, "x-gzip"))
        slot = &acc->q_gzip;
    else if (equals(name, name_len, "deflate"))
        slot = &acc->q_deflate;
    else if (equals(name, name_len, "br"))
        slot = &acc->q_br;
    else if (equals(name, name_len, "zstd"))
        slot = &acc->q_zstd;
    else if (equals(name, name_len, "identity"))
        slot = &acc->q_ident;
    else if (equals(name, name_len, "*"))
        slot = &acc->q_star;
    /* Listed twice: the higher weight wins (the RFC does not say; being
     * generous costs nothing here). */
    if (slot != NULL && q > *slot)
        *slot = q;
}

void kd_accept_add(kd_accept *acc, const char *value, size_t len)
{
    acc->seen = 1;
    const char *at = value, *el;
    size_t n;
    if (value == NULL)
        return;
    while (keel_list_next(&at, value + len, &el, &n))
        add_element(acc, el, n);
}

/* The coding to use among `offered`. A coding not listed takes the weight
 * of "*", if any, else is not acceptable (RFC 9110 12.5.3); q=0 means
 * "not acceptable". Ties go to zstd, then br, then gzip (Caddy's order:
 * zstd and br compress text better than gzip at a like cost, and every
 * client that offers them decodes them), and gzip beats deflate: every
 * client that takes deflate takes gzip, and "deflate" has a history of
 * being sent raw by servers and misread by clients (RFC 9110 8.4.1.2
 * notes it). A client that rates identity above the best gets the body as
 * it is. */
int kd_accept_choose_from(const kd_accept *acc, unsigned offered)
{
    if (!acc->seen)
        return KD_IDENTITY; /* no field: any coding is acceptable, but the
                               client said nothing, so nothing is gained */
    static const int order[] = {KD_ZSTD, KD_BR, KD_GZIP, KD_DEFLATE};
    int best = KD_IDENTITY, best_q = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        int c = order[i];
        if (!(offered & (1u << c)))
            continue;
        int listed = c == KD_ZSTD   ? acc->q_zstd
                     : c == KD_BR   ? acc->q_br
                     : c == KD_GZIP ? acc->q_gzip
                                    : acc->q_deflate;
        int q = listed >= 0 ? listed : acc->q_star >= 0 ? acc->q_star : 0;
        if (q > best_q) {
            best = c;
            best_q = q;
        }
    }
    if (best_q <= 0 || acc->q_ident > best_q)
        return KD_IDENTITY;
    return best;
}

int kd_accept_choose(const kd_accept *acc)
{
    return kd_accept_choose_from(acc, (1u << KD_GZIP) | (1u << KD_DEFLATE));
}
