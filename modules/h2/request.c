/* request.c — a stream's request: head and trailers.
 *
 * Request head: hpack.c hands each decoded field over once; it is checked
 * (RFC 9113 8.2, 8.3) and copied into the stream's own memory, which the
 * head the core sees points into until the stream is freed. What the HPACK
 * static table gave (a name, or a whole field) is not copied: the table's
 * strings live as long as the program. What a dynamic table entry gave is
 * checked once, the first time (the entry's memo, hpack.h: an entry never
 * changes), and copied every time (later blocks evict it). `:authority`
 * stands for Host (RFC 9113 8.3.1), split cookie fields are joined again
 * (8.2.3). A malformed request (8.1.1) is reset with PROTOCOL_ERROR.
 *
 * The request body is request_body.c.
 */
#include "h2.h"

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

/* ---- the request head ------------------------------------------------------- */

/* A view into the block's memory (hmem for the head, tmem for the
 * trailers) that moved from old to now, len bytes of it used. */
static void rebase(keel_str *v, const char *old, size_t len, const char *now)
{
    uintptr_t off = (uintptr_t)v->ptr - (uintptr_t)old;
    if (v->len > 0 && off < len)
        v->ptr = now + off;
}

/* Grows the memory of the block being decoded to take n more bytes. Its
 * views are pointers, rebased here, rather than offsets made pointers at
 * the block's end: a view may also point at the static table's strings,
 * which are not copied. The old memory is freed only once they are. */
static int grow_mem(h2_stream *s, size_t n)
{
    char **mem = s->in_trailers ? &s->tmem : &s->hmem;
    size_t len = s->in_trailers ? s->tlen : s->hlen;
    size_t *cap = s->in_trailers ? &s->tcap : &s->hcap;
    size_t want = *cap ? *cap : 512;
    while (want - len < n)
        want *= 2;
    char *grown = malloc(want);
    if (grown == NULL)
        return -1;
    char *old = *mem;
    if (len > 0)
        memcpy(grown, old, len);
    if (s->in_trailers) {
        for (size_t i = 0; i < s->ntr; i++) {
            rebase(&s->tr_fields[i].name, old, len, grown);
            rebase(&s->tr_fields[i].value, old, len, grown);
        }
    } else {
        for (size_t i = 0; i < s->nfields; i++) {
            rebase(&s->fields[i].name, old, len, grown);
            rebase(&s->fields[i].value, old, len, grown);
        }
        rebase(&s->method, old, len, grown);
        rebase(&s->scheme, old, len, grown);
        rebase(&s->authority, old, len, grown);
        rebase(&s->path, old, len, grown);
        rebase(&s->protocol, old, len, grown);
    }
    free(old);
    *mem = grown;
    *cap = want;
    return 0;
}

/* Room for n bytes at the end of the block's memory, taken; NULL if out of
 * memory. Views taken before stay valid (grow_mem). */
static inline char *take_mem(h2_stream *s, size_t n)
{
    size_t *len = s->in_trailers ? &s->tlen : &s->hlen;
    size_t cap = s->in_trailers ? s->tcap : s->hcap;
    if (cap - *len < n && grow_mem(s, n) != 0)
        return NULL;
    char *at = (s->in_trailers ? s->tmem : s->hmem) + *len;
    *len += n;
    return at;
}

/* Doubles a field list: the head's keeps each field's token after the
 * views, in the same block (keel_header's alignment covers uint16_t's);
 * the trailers' keeps none (tokens NULL). The inline storage is copied
 * out, never freed. */
static int grow_fields(keel_header **fields, uint16_t **tokens, size_t *cap,
                       const keel_header *inline_fields)
{
    size_t want = *cap ? *cap * 2 : 8;
    keel_header *f = malloc(want * (sizeof *f + (tokens != NULL ? sizeof **tokens : 0)));
    if (f == NULL)
        return -1;
    if (*cap > 0) {
        memcpy(f, *fields, *cap * sizeof *f);
        if (tokens != NULL)
            memcpy(f + want, *tokens, *cap * sizeof **tokens);
    }
    if (tokens != NULL)
        *tokens = (uint16_t *)(void *)(f + want);
    if (*fields != inline_fields)
        free(*fields);
    *fields = f;
    *cap = want;
    return 0;
}

#define IS(p, n, lit) ((n) == sizeof(lit) - 1 && memcmp((p), lit, sizeof(lit) - 1) == 0)

/* Character classes, one table lookup a byte (every field of every request
 * goes through them):
 *   C_NAME    a field name: RFC 9110 5.6.2 tchar, lowercase (RFC 9113 8.2.1)
 *   C_CTL     a control byte a field value may not hold (RFC 9110 5.5):
 *             below 0x20 but HTAB, and DEL
 * The pseudo-fields' grammars are the core's (keel_http_valid), the same
 * for every protocol. */
enum { C_NAME = 1, C_CTL = 64 };
static const uint8_t char_class[256] = {
    64, 64, 64, 64, 64, 64, 64, 64, 64, 0,  64, 64, 64, 64, 64, 64, /* 0x00 (HTAB: 0) */
    64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, /* 0x10 */
    0,  1,  0,  1,  1,  1,  1,  1,  0,  0,  1,  1,  0,  1,  1,  0,  /* 0x20  !"#$%&'()*+,-./ */
    1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  0,  0,  0,  0,  0,  0,  /* 0x30 0-9:;<=>? */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  /* 0x40 @A-O: not in names */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  1,  1,  /* 0x50 P-Z[\]^_ */
    1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  /* 0x60 `a-o */
    1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  0,  1,  0,  1,  64, /* 0x70 p-z{|}~ DEL */
    /* 0x80..0xff: none */
};

/* Every byte of s in class cls (and at least one). */
static int all_in(const char *s, size_t n, unsigned cls)
{
    for (size_t i = 0; i < n; i++)
        if (!(char_class[(unsigned char)s[i]] & cls))
            return 0;
    return n > 0;
}

/* Whether any byte of x is zero (the classic SWAR test). */
static inline uint64_t has_zero_byte(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101u;
    return (x - ones) & ~x & (ones * 0x80);
}

/* Bytes of x below 0x20 or equal to 0x7f, as the high bit of each; a flag
 * may be spurious (a byte after a borrow), never missing, so a flagged word
 * is looked at byte by byte (the "hasless" trick, as core/http/fields.c). */
static inline uint64_t control_bytes(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101u;
    return ((x - ones * 0x20) & ~x & (ones * 0x80)) | has_zero_byte(x ^ (ones * 0x7f));
}

static int control_char(unsigned char ch)
{
    return (char_class[ch] & C_CTL) != 0;
}

/* RFC 9113 8.2.1: no NUL, CR or LF anywhere, no whitespace at either end;
 * RFC 9110 5.5: no other control byte but HTAB either, which a gateway to
 * HTTP/1.1 could not carry (obs-text, 0x80 and above, it can). Eight bytes
 * at a time, in one pass, rather than a memchr per forbidden byte, each
 * walking the value again: every field of every request comes here
 * (docs/performance.md). */
static int value_ok(const char *v, size_t n)
{
    if (n == 0)
        return 1;
    if (v[0] == ' ' || v[0] == '\t' || v[n - 1] == ' ' || v[n - 1] == '\t')
        return 0;
    if (n < 8) {
        for (size_t i = 0; i < n; i++)
            if (control_char((unsigned char)v[i]))
                return 0;
        return 1;
    }
    /* Whole words, the last one overlapping the one before. */
    for (size_t i = 0;; i += 8) {
        if (i + 8 > n)
            i = n - 8;
        uint64_t x;
        memcpy(&x, v + i, 8);
        if (control_bytes(x) != 0)
            for (size_t k = i; k < i + 8; k++)
                if (control_char((unsigned char)v[k]))
                    return 0;
        if (i + 8 == n)
            return 1;
    }
}

/* RFC 9113 8.2.2: connection-specific fields make a request malformed;
 * TE may only say "trailers". */
static int connection_specific(unsigned token, const char *v, size_t vlen)
{
    return (keel_header_token_flags(token) & KEEL_HDR_FLAG_CONNECTION_SPECIFIC) &&
           !(token == KEEL_HDR_TE && IS(v, vlen, "trailers"));
}

enum { P_METHOD = 1, P_SCHEME = 2, P_AUTHORITY = 4, P_PATH = 8, P_PROTOCOL = 16 };

/* A pseudo-field of the head (8.3.1): known, once, before the others.
 * Which it is (P_*), or 0. */
static unsigned pseudo_field(h2_stream *s, unsigned token, const char *name, size_t nlen,
                             keel_str v)
{
    unsigned which = token == KEEL_HDR_PSEUDO_METHOD      ? P_METHOD
                     : token == KEEL_HDR_PSEUDO_SCHEME    ? P_SCHEME
                     : token == KEEL_HDR_PSEUDO_AUTHORITY ? P_AUTHORITY
                     : token == KEEL_HDR_PSEUDO_PATH      ? P_PATH
                     : IS(name, nlen, ":protocol")        ? P_PROTOCOL /* RFC 8441 4 */
                                                          : 0;
    if (which == 0 || s->in_trailers || s->regular_seen || (s->seen_pseudo & which))
        return 0;
    s->seen_pseudo |= (uint8_t)which;
    switch (which) {
    case P_METHOD:
        s->method = v;
        break;
    case P_SCHEME:
        s->scheme = v;
        break;
    case P_AUTHORITY:
        s->authority = v;
        break;
    case P_PROTOCOL:
        s->protocol = v;
        break;
    default:
        s->path = v;
        break;
    }
    return which;
}

/* content-length (RFC 9110 8.6): digits; repeated, the same value. */
static int content_length_field(h2_stream *s, const char *v, size_t n)
{
    int64_t cl = 0;
    if (n == 0 || n > 18)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        cl = cl * 10 + (v[i] - '0');
    }
    if (s->content_length >= 0 && s->content_length != cl)
        return -1;
    s->content_length = cl;
    return 0;
}

/* What h2_stream_field concluded of a dynamic table entry, in its memo
 * (hpack.h): its name is valid, its token in the low 16 bits; its value is
 * valid; for a pseudo-field, the value is in the grammar of its name. */
#define MEMO_NAME_OK    0x80000000u
#define MEMO_VALUE_OK   0x40000000u
#define MEMO_GRAMMAR_OK 0x20000000u /* a pseudo-field's value is in its grammar */
#define MEMO_TOKEN      0xffffu

static int pseudo_grammar_ok(unsigned which, keel_str v);

int h2_stream_field(void *stream, const h2_hpack_field *f)
{
    h2_stream *s = stream;
    h2_conn *c = s->c;
    const h2_config *cfg = c->w->cfg;
    const char *name = f->name, *value = f->value;
    size_t nlen = f->nlen, vlen = f->vlen;
    /* RFC 9113 6.5.2: the size of a field list is the sum of its fields'
     * names and values, 32 bytes more each. Beyond the limit nothing more
     * is kept (431 follows); far beyond it, the decoded list is out of all
     * proportion to what arrived: an HPACK bomb (RFC 7541 7.3), whose
     * answer is the connection's end. */
    s->list_size += nlen + vlen + 32;
    if (s->list_size > (uint64_t)cfg->max_header_list * 16) {
        h2_calm(c, H2_FLOOD_HPACK);
        return 1;
    }
    if (s->list_size > cfg->max_header_list) {
        s->too_large = 1;
        return 0;
    }
    if (s->malformed)
        return 0;
    /* Each name is classified once: one the HPACK decoder knows by a
     * static index is a valid one, and its token is a table away; one a
     * dynamic entry gave was checked when the entry first came; any other
     * is checked (RFC 9113 8.2.1: tchar, lower case; a pseudo-field after
     * its ':') and looked up. */
    uint32_t memo = f->memo != NULL ? *f->memo : 0;
    unsigned token;
    if (f->name_index != 0) {
        token = keel_header_token_of_hpack(f->name_index);
    } else if (memo & MEMO_NAME_OK) {
        token = memo & MEMO_TOKEN;
    } else {
        size_t colon = nlen > 0 && name[0] == ':';
        if (!all_in(name + colon, nlen - colon, C_NAME)) {
            s->malformed = 1; /* an empty name too */
            return 0;
        }
        token = keel_header_token(name, nlen);
        memo |= MEMO_NAME_OK | token;
        if (f->memo != NULL)
            *f->memo = memo;
    }
    /* The static table's values are valid; a dynamic entry's is checked
     * once. */
    int static_value = (f->flags & H2_HPACK_STATIC_VALUE) != 0;
    int entry_value = (f->flags & H2_HPACK_ENTRY_VALUE) != 0;
    if (!static_value && !(entry_value && (memo & MEMO_VALUE_OK))) {
        if (!value_ok(value, vlen)) {
            s->malformed = 1;
            return 0;
        }
        if (entry_value)
            *f->memo = memo | MEMO_VALUE_OK;
    }
    if (name[0] == ':') {
        /* Checked before anything is copied: once the head is complete
         * the core holds views into hmem, which must not move (a
         * pseudo-field in trailers, 8.1, would have grown it). */
        if (s->in_trailers || s->regular_seen) {
            s->malformed = 1;
            return 0;
        }
        /* The decoder's bytes are gone after the call: an empty value
         * points at a string that is not. */
        keel_str v = {static_value ? value : "", vlen};
        if (!static_value && vlen > 0) {
            char *at = take_mem(s, vlen);
            if (at == NULL) {
                s->malformed = 1; /* out of memory: the stream is reset */
                return 0;
            }
            v.ptr = memcpy(at, value, vlen);
        }
        unsigned which = pseudo_field(s, token, name, nlen, v);
        if (which == 0) {
            s->malformed = 1;
            return 0;
        }
        /* Each value's grammar (8.3.1) is checked once the head is whole
         * (head_ok), but for values known to be in it: the static table's
         * (GET, http, "/"; not :authority's, empty), and a dynamic entry's
         * that was, when the entry first came (its memo). */
        int known = static_value ? which != P_AUTHORITY : entry_value && (memo & MEMO_GRAMMAR_OK);
        if (!known && entry_value && pseudo_grammar_ok(which, v)) {
            *f->memo |= MEMO_GRAMMAR_OK;
            known = 1;
        }
        if (known)
            s->pseudo_ok |= (uint8_t)which;
        return 0;
    }
    s->regular_seen = 1;
    if (connection_specific(token, value, vlen) ||
        (!s->in_trailers && token == KEEL_HDR_CONTENT_LENGTH &&
         content_length_field(s, value, vlen) != 0)) {
        s->malformed = 1;
        return 0;
    }
    if (!s->in_trailers && token == KEEL_HDR_HOST) {
        if (s->host_at != 0) {
            s->malformed = 1; /* RFC 9110 7.2: one Host; two may name two authorities */
            return 0;
        }
        s->host_at = (uint32_t)s->nfields + 1; /* head_ok checks it against :authority */
    }
    int grown = 0;
    if (s->in_trailers) {
        if (s->ntr == s->tr_cap)
            grown = grow_fields(&s->tr_fields, NULL, &s->tr_cap, NULL);
    } else if (s->nfields == s->cap) {
        grown = grow_fields(&s->fields, &s->tokens, &s->cap, s->inline_fields);
    }
    /* Name and value copied together, one room taken for both; a name
     * of the static table's (name_index) is its string. */
    size_t copy_name = f->name_index != 0 ? 0 : nlen;
    size_t copy_value = static_value ? 0 : vlen;
    char *at = NULL;
    if (grown != 0 ||
        (copy_name + copy_value > 0 && (at = take_mem(s, copy_name + copy_value)) == NULL)) {
        s->malformed = 1; /* out of memory: the stream is reset */
        return 0;
    }
    keel_header h = {{name, nlen}, {static_value ? value : "", vlen}};
    if (copy_name > 0)
        h.name.ptr = memcpy(at, name, copy_name);
    if (copy_value > 0)
        h.value.ptr = memcpy(at + copy_name, value, copy_value);
    if (s->in_trailers) {
        s->tr_fields[s->ntr++] = h;
    } else {
        s->tokens[s->nfields] = (uint16_t)token;
        s->fields[s->nfields++] = h;
    }
    return 0;
}

/* RFC 9113 8.2.3: a client may split Cookie into one field per crumb; the
 * core (and HTTP/1 handlers) expect one, joined with "; ". */
static int join_cookies(h2_stream *s)
{
    size_t count = 0, total = 0, first = 0;
    for (size_t i = 0; i < s->nfields; i++) {
        if (s->tokens[i] == KEEL_HDR_COOKIE) {
            if (count++ == 0)
                first = i;
            total += s->fields[i].value.len + 2;
        }
    }
    if (count < 2)
        return 0;
    char *joined = malloc(total);
    if (joined == NULL)
        return -1;
    size_t at = 0, out = 0;
    for (size_t i = 0; i < s->nfields; i++) {
        if (s->tokens[i] == KEEL_HDR_COOKIE) {
            if (at > 0) {
                joined[at++] = ';';
                joined[at++] = ' ';
            }
            memcpy(joined + at, s->fields[i].value.ptr, s->fields[i].value.len);
            at += s->fields[i].value.len;
            if (i != first)
                continue; /* dropped from the list */
        }
        s->fields[out] = s->fields[i];
        s->tokens[out] = s->tokens[i];
        out++;
    }
    s->fields[first].value = (keel_str){joined, at};
    s->cookie = joined;
    s->head_nfields = out;
    return 0;
}

static void count_limit(h2_conn *c, enum h2_limit l)
{
    h2_count(c, c->w->mod->m.limit[l]);
}

/* ---- the pseudo-fields' grammars (RFC 9113 8.3.1) ----------------------- */

static int lower(int ch)
{
    return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
}

/* :path: the path and query of the target, origin-form, or "*" for
 * OPTIONS (asterisk-form); absolute-form is for :scheme and :authority to
 * say, and in :path it is malformed (8.3.1). No '#' (KEEL_HTTP_ORIGIN_FORM),
 * so no fragment reaches the core, which would resolve the dot segments
 * after it ("/admin#/../x" routed as "/x" while an upstream serves
 * "/admin"). */
static int path_ok(keel_str method, keel_str path)
{
    if (path.len == 1 && path.ptr[0] == '*')
        return h2_str_is(method, "OPTIONS");
    return keel_http_valid(KEEL_HTTP_ORIGIN_FORM, path.ptr, path.len);
}

/* :scheme: RFC 3986 3.1. Not limited to http and https (8.3.1: a gateway
 * may take other schemes), which are only looked at first. */
static int scheme_ok(keel_str s)
{
    return h2_str_is(s, "https") || h2_str_is(s, "http") ||
           keel_http_valid(KEEL_HTTP_SCHEME, s.ptr, s.len);
}

/* :authority, or Host (RFC 9110 7.2, KEEL_HTTP_AUTHORITY: no userinfo, RFC
 * 9113 8.3.1; not empty, RFC 9110 4.2.1): the host's length (before
 * ":port"), or 0 if v is not an authority. */
static size_t authority_host(keel_str v)
{
    if (!keel_http_valid(KEEL_HTTP_AUTHORITY, v.ptr, v.len))
        return 0;
    if (v.ptr[0] == '[')
        return (size_t)((const char *)memchr(v.ptr, ']', v.len) - v.ptr) + 1;
    const char *colon = memchr(v.ptr, ':', v.len);
    return colon != NULL ? (size_t)(colon - v.ptr) : v.len;
}

/* Whether v is in the grammar of the pseudo-field `which` (8.3.1). A
 * :path here is origin-form only ("*" is for path_ok, which knows the
 * method); a :protocol is left to h2_stream_headers_done. */
static int pseudo_grammar_ok(unsigned which, keel_str v)
{
    switch (which) {
    case P_METHOD:
        return keel_http_valid(KEEL_HTTP_TOKEN, v.ptr, v.len);
    case P_SCHEME:
        return scheme_ok(v);
    case P_AUTHORITY:
        return authority_host(v) != 0;
    case P_PATH:
        return keel_http_valid(KEEL_HTTP_ORIGIN_FORM, v.ptr, v.len);
    default:
        return 0;
    }
}

/* The port of an authority whose host is host_len bytes long; an absent or
 * empty one is the scheme's default (RFC 3986 6.2.3). */
static keel_str authority_port(keel_str v, size_t host_len, keel_str scheme)
{
    if (host_len + 1 < v.len)
        return (keel_str){v.ptr + host_len + 1, v.len - host_len - 1};
    if (h2_str_is(scheme, "http"))
        return (keel_str){"80", 2};
    if (h2_str_is(scheme, "https"))
        return (keel_str){"443", 3};
    return (keel_str){"", 0};
}

/* 8.3.1: a Host that "identifies an entity that differs from the entity
 * in :authority" makes the request malformed; the two are compared
 * normalized (RFC 3986 6.2.2, 6.2.3): the host ignoring case, the port
 * the scheme's default when absent. Both are valid authorities. */
static int same_authority(keel_str a, keel_str b, keel_str scheme)
{
    size_t ha = authority_host(a), hb = authority_host(b);
    if (ha != hb)
        return 0;
    for (size_t i = 0; i < ha; i++)
        if (lower((unsigned char)a.ptr[i]) != lower((unsigned char)b.ptr[i]))
            return 0;
    keel_str pa = authority_port(a, ha, scheme), pb = authority_port(b, hb, scheme);
    return pa.len == pb.len && memcmp(pa.ptr, pb.ptr, pa.len) == 0;
}

/* 8.3.1, 8.5: the pseudo-fields each there once (CONNECT: :method and
 * :authority only), each value in its grammar, and Host (one at most,
 * h2_stream_field) naming what :authority names, or standing for a
 * missing :authority. An http(s) request names its authority one way or
 * the other (8.3.1). */
static int head_ok(h2_stream *s, int connect)
{
    unsigned seen = s->seen_pseudo, unchecked = seen & ~s->pseudo_ok;
    if (!(seen & P_METHOD) || ((unchecked & P_METHOD) && !pseudo_grammar_ok(P_METHOD, s->method)))
        return 0;
    if (connect ? (seen & (P_SCHEME | P_PATH)) || !(seen & P_AUTHORITY)
                : (seen & (P_SCHEME | P_PATH)) != (P_SCHEME | P_PATH))
        return 0;
    if (!connect && (((unchecked & P_SCHEME) && !pseudo_grammar_ok(P_SCHEME, s->scheme)) ||
                     ((unchecked & P_PATH) && !path_ok(s->method, s->path))))
        return 0;
    if ((unchecked & P_AUTHORITY) && !pseudo_grammar_ok(P_AUTHORITY, s->authority))
        return 0;
    if (s->host_at != 0) {
        keel_str v = s->fields[s->host_at - 1].value;
        if (authority_host(v) == 0 ||
            ((seen & P_AUTHORITY) && !same_authority(s->authority, v, s->scheme)))
            return 0;
    } else if (!connect && !(seen & P_AUTHORITY) &&
               (h2_str_is(s->scheme, "http") || h2_str_is(s->scheme, "https"))) {
        return 0;
    }
    return 1;
}

static void or_empty(keel_str *v)
{
    if (v->ptr == NULL)
        v->ptr = "";
}

void h2_stream_trailers_done(h2_stream *s)
{
    if (s->malformed) {
        h2_stream_malformed(s); /* 8.1: e.g. a pseudo-field */
        return;
    }
    if (s->too_large && s->exchange) {
        h2_stream_answer(s, 431); /* trailers over max_header_list */
        return;
    }
    h2_stream_remote_end(s);
}

/* A head refused before its request exists (431 over max_header_list,
 * 413 over max_body by its content-length) is answered through the core
 * (keel_http_request_refuse), as http1's are, so that the listener's
 * `always` fields and the error pages apply to it too; the stream ends,
 * the connection stays. Nothing of the head is handed over (a head too
 * large was not even kept), and its DATA is nobody's (bad). */
static void stream_refuse(h2_stream *s, int status)
{
    s->method = (keel_str){"", 0}; /* HEAD or not: read by the sink */
    s->head = (keel_http_head){
        .size = sizeof(keel_http_head), .method = {"", 0}, .target = {"", 0}, .version = 20};
    s->bad = 1;
    s->req = keel_http_request_start(s->c->conn, &h2_sink, s, &s->head);
    if (s->req == NULL) {
        h2_stream_answer(s, status);
        return;
    }
    s->exchange = 1;
    s->busy++;
    keel_http_request_refuse(s->req, status);
    s->busy--;
}

void h2_stream_headers_done(h2_stream *s)
{
    h2_conn *c = s->c;
    const h2_config *cfg = c->w->cfg;
    if (s->too_large) {
        count_limit(c, H2_LIMIT_HEADER_LIST);
        stream_refuse(s, 431); /* RFC 9113 10.5.1 */
        return;
    }
    /* A pseudo-field that did not come is empty, not NULL. */
    or_empty(&s->method);
    or_empty(&s->scheme);
    or_empty(&s->authority);
    or_empty(&s->path);
    int connect = (s->seen_pseudo & P_METHOD) && h2_str_is(s->method, "CONNECT");
    /* RFC 8441 4: :protocol only on a CONNECT, only once we offered it; such
     * a CONNECT carries :scheme and :path as any request does. */
    int extended = (s->seen_pseudo & P_PROTOCOL) != 0;
    if (extended) {
        if (!connect || !cfg->enable_connect_protocol ||
            !keel_http_valid(KEEL_HTTP_TOKEN, s->protocol.ptr, s->protocol.len))
            s->malformed = 1;
    }
    /* Checked before anything is routed or forwarded: 8.1.1, a
     * content-length the DATA cannot match (none came) is malformed too. */
    if (s->malformed || !head_ok(s, connect && !extended) ||
        (s->remote_ended && s->content_length > 0)) {
        h2_stream_malformed(s);
        return;
    }
    if (connect && !extended) {
        /* RFC 9113 8.5: a tunnel to :authority is not offered. */
        h2_stream_answer(s, 501);
        return;
    }
    s->head_nfields = s->nfields;
    if (join_cookies(s) != 0) {
        h2_stream_answer(s, 500);
        return;
    }
    /* RFC 9113 8.3.1: :authority is the target's authority, and the core
     * and handlers look for Host: one is added when the client sent none
     * (one it sent names the same, head_ok). */
    if (s->host_at == 0 && (s->seen_pseudo & P_AUTHORITY)) {
        if (s->nfields == s->cap &&
            grow_fields(&s->fields, &s->tokens, &s->cap, s->inline_fields) != 0) {
            h2_stream_answer(s, 500);
            return;
        }
        /* Appended after the fields the core sees (joined cookies left
         * the tail unused): the bytes are the pseudo-field's. */
        s->fields[s->head_nfields] = (keel_header){{"host", 4}, s->authority};
        s->tokens[s->head_nfields] = KEEL_HDR_HOST;
        s->head_nfields++;
    }
    if (extended) {
        /* The handler sees the protocol asked for as a field (an
         * HTTP/1.1 handshake's Upgrade); its DATA is the tunnel's, not a
         * body (tunnel.c). */
        if (s->head_nfields == s->cap &&
            grow_fields(&s->fields, &s->tokens, &s->cap, s->inline_fields) != 0) {
            h2_stream_answer(s, 500);
            return;
        }
        s->fields[s->head_nfields] = (keel_header){{":protocol", 9}, s->protocol};
        s->tokens[s->head_nfields++] = 0; /* no token: not a field the core acts on */
        s->ext_connect = 1;
        s->content_length = -1;
    } else if (s->remote_ended) {
        s->content_length = 0;
    } else if (s->content_length < 0) {
        s->content_length = -1;
    }
    if (s->content_length > 0 && (uint64_t)s->content_length > cfg->max_body) {
        count_limit(c, H2_LIMIT_BODY);
        stream_refuse(s, 413);
        return;
    }
    s->head = (keel_http_head){
        .size = sizeof(keel_http_head),
        .method = s->method,
        .target = s->path,
        .version = 20,
        .headers = s->fields,
        .nheaders = s->head_nfields,
        .tokens = s->tokens,
        .content_length = s->ext_connect ? 0 : s->content_length,
        .stream_id = s->id,
        .max_body = cfg->max_body,
    };
    c->nstreams++;
    h2_count(c, c->w->mod->m.streams);
    if (cfg->max_requests != 0 && c->nstreams >= cfg->max_requests) {
        /* RFC 9113 6.8: the last stream it will take, then the end. */
        count_limit(c, H2_LIMIT_REQUESTS);
        h2_goaway(c);
    }
    s->counted = 1;
    c->nactive++;
    keel_metric_add(c->w->worker, c->w->mod->m.open_streams, 1);
    s->req = keel_http_request_start(c->conn, &h2_sink, s, &s->head);
    if (s->req == NULL) {
        h2_stream_answer(s, 500);
        return;
    }
    s->exchange = 1;
    s->dispatching = 1;
    s->busy++;
    keel_http_request_dispatch(s->req);
    s->dispatching = 0;
    s->busy--;
    h2_stream_pump_body(s);
}
