/* Targets with variables: "https://$host$request_uri", "/new/$1?x=$2".
 * Parsed once at load into pieces, so that an unknown name is a config
 * error there and a request only copies. nginx's names, with ${name} for
 * a name followed by letters and $$ for a dollar sign. */
#include "rewrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    enum rw_var var;
} var_names[] = {
    {"scheme", RW_VAR_SCHEME},
    {"host", RW_VAR_HOST},
    {"https_host", RW_VAR_HTTPS_HOST},
    {"request_uri", RW_VAR_REQUEST_URI},
    {"uri", RW_VAR_URI},
    {"args", RW_VAR_ARGS},
    {"query", RW_VAR_ARGS},
    {"is_args", RW_VAR_IS_ARGS},
    {"server_port", RW_VAR_SERVER_PORT},
    {"remote_addr", RW_VAR_REMOTE_ADDR},
};

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int add_piece(rw_template *t, rw_piece p)
{
    rw_piece *grown = realloc(t->pieces, (t->npieces + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    t->pieces = grown;
    t->pieces[t->npieces++] = p;
    return 0;
}

int rw_template_parse(rw_template *t, const char *text, char *why, size_t whylen)
{
    memset(t, 0, sizeof *t);
    t->max_capture = -1;
    const char *p = text, *lit = text;
    int in_query = 0;
    while (1) {
        if (*p != '\0' && *p != '$') {
            if (*p == '?' && !in_query) {
                /* The first '?' is a piece of its own: it parts the path
                 * from the query. */
                if ((p > lit &&
                     add_piece(t, (rw_piece){RW_LITERAL, 0, lit, (size_t)(p - lit), 0})) ||
                    add_piece(t, (rw_piece){RW_LITERAL, 0, p, 1, RW_PART_SEPARATOR}) != 0)
                    goto nomem;
                lit = p + 1;
                in_query = t->has_query = 1;
            }
            p++;
            continue;
        }
        if (p > lit && add_piece(t, (rw_piece){RW_LITERAL, 0, lit, (size_t)(p - lit), in_query}))
            goto nomem;
        if (*p == '\0')
            break;
        /* p is at '$' */
        const char *name = p + 1, *end;
        int braced = *name == '{';
        if (braced) {
            name++;
            end = strchr(name, '}');
            if (end == NULL) {
                snprintf(why, whylen, "'${' without '}' in '%s'", text);
                goto fail;
            }
        } else if (*name == '$') {
            if (add_piece(t, (rw_piece){RW_LITERAL, 0, name, 1, in_query}) != 0)
                goto nomem;
            lit = p = name + 1;
            continue;
        } else if (*name >= '0' && *name <= '9') {
            end = name + 1; /* $12 is $1 then "2", as in nginx */
        } else {
            end = name;
            while (is_name_char(*end))
                end++;
        }
        size_t len = (size_t)(end - name);
        rw_piece piece = {RW_VARIABLE, 0, NULL, 0, in_query};
        if (len == 1 && name[0] >= '0' && name[0] <= '9') {
            piece.kind = RW_CAPTURE;
            piece.which = name[0] - '0';
            if (piece.which > t->max_capture)
                t->max_capture = piece.which;
        } else {
            size_t i = 0;
            while (i < sizeof var_names / sizeof var_names[0] &&
                   !(strlen(var_names[i].name) == len && memcmp(var_names[i].name, name, len) == 0))
                i++;
            if (len == 0 || i == sizeof var_names / sizeof var_names[0]) {
                snprintf(why, whylen,
                         len ? "unknown variable '$%.*s' (known: $scheme $host $https_host "
                               "$request_uri $uri $args $query $is_args $server_port "
                               "$remote_addr $1..$9)"
                             : "'$' names no variable (write $$ for a dollar sign)",
                         (int)len, name);
                goto fail;
            }
            piece.which = (int)var_names[i].var;
            t->vars |= 1u << var_names[i].var;
        }
        if (add_piece(t, piece) != 0)
            goto nomem;
        lit = p = braced ? end + 1 : end;
    }
    t->ends_query = t->has_query && text[0] != '\0' && text[strlen(text) - 1] == '?';
    return 0;
nomem:
    snprintf(why, whylen, "out of memory");
fail:
    rw_template_free(t);
    return -1;
}

void rw_template_free(rw_template *t)
{
    free(t->pieces);
    t->pieces = NULL;
    t->npieces = 0;
}

/* ---- output ---- */

void rw_buf_init(rw_buf *b)
{
    b->ptr = b->inline_bytes;
    b->len = 0;
    b->cap = sizeof b->inline_bytes;
    b->heap = 0;
    b->failed = 0;
    b->inline_bytes[0] = '\0';
}

void rw_buf_free(rw_buf *b)
{
    if (b->heap)
        free(b->ptr);
    rw_buf_init(b);
}

static int reserve(rw_buf *b, size_t n)
{
    if (b->failed)
        return -1;
    if (b->cap - b->len > n) /* and room for a NUL */
        return 0;
    size_t cap = b->cap;
    while (cap - b->len <= n)
        cap *= 2;
    char *p = b->heap ? realloc(b->ptr, cap) : malloc(cap);
    if (p == NULL) {
        b->failed = 1;
        return -1;
    }
    if (!b->heap)
        memcpy(p, b->ptr, b->len);
    b->ptr = p;
    b->cap = cap;
    b->heap = 1;
    return 0;
}

void rw_buf_add(rw_buf *b, const char *p, size_t n)
{
    if (n == 0 || reserve(b, n) != 0)
        return;
    memcpy(b->ptr + b->len, p, n);
    b->len += n;
    b->ptr[b->len] = '\0';
}

/* RFC 3986 3.3 pchar and "/": what a decoded value may keep as it is in a
 * URI; everything else is percent-encoded (a decoded "?" or "#" must not
 * start a query or a fragment, a space or a control byte must not reach a
 * field value). */
static int keeps(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("-._~!$&'()*+,;=:@/", c) != NULL;
}

static void add_escaped(rw_buf *b, const char *p, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c != '\0' && keeps(c))
            continue;
        rw_buf_add(b, p + start, i - start);
        char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
        rw_buf_add(b, esc, 3);
        start = i + 1;
    }
    rw_buf_add(b, p + start, n - start);
}

void rw_template_expand(const rw_template *t, const rw_value *vals, const rw_captures *caps,
                        int uri_escape, int part, rw_buf *out)
{
    for (size_t i = 0; i < t->npieces; i++) {
        const rw_piece *p = &t->pieces[i];
        if (part != RW_PART_ALL && p->in_query != part)
            continue;
        const char *s;
        size_t n;
        int decoded;
        if (p->kind == RW_LITERAL) {
            rw_buf_add(out, p->text, p->len);
            continue;
        }
        if (p->kind == RW_CAPTURE) {
            int k = p->which;
            if (caps == NULL || k >= caps->n || caps->ovector[2 * k] == PCRE2_UNSET)
                continue; /* a group that did not take part: empty, as in nginx */
            s = caps->subject + caps->ovector[2 * k];
            n = caps->ovector[2 * k + 1] - caps->ovector[2 * k];
            decoded = 1; /* captures are of $uri, which is decoded */
        } else {
            s = vals[p->which].ptr;
            n = vals[p->which].len;
            decoded = p->which == RW_VAR_URI;
        }
        if (s == NULL || n == 0)
            continue;
        if (decoded && (uri_escape || p->in_query == RW_PART_QUERY))
            add_escaped(out, s, n);
        else
            rw_buf_add(out, s, n);
    }
}
