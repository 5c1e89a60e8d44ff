/* keel/util.h — small helpers every module ends up writing: ASCII case
 * folding, field values, HTTP list fields, IP addresses and CIDR blocks,
 * words, on/off, copies and buffers that grow, reading a file at an offset,
 * intrusive lists and queues, free lists, a mutex and once for module-wide state, and
 * (keel/header_tokens.h, included at the end) the well-known field names as
 * integers.
 *
 * Header-only: every function is static inline (the lists are macros), so using them takes no
 * slot in the host's table, works with any host version and adds nothing
 * to the ABI. Nothing here calls the host or depends on a library beyond
 * the C library (and POSIX or Windows for the file read, the mutex and
 * the once, which a module's process has anyway); only the helpers under "Memory that
 * grows" allocate. C11 and C++ (and MSVC) alike; include it after or
 * without keel/keel.h.
 *
 * Threads: every function is safe on any thread for the objects the caller
 * owns; keel_mutex and keel_once are how state shared between threads is
 * guarded.
 *
 * Strings are byte views (pointer and length, no NUL needed) unless a
 * function's name ends in _z or it says "NUL-terminated". A NULL pointer
 * with length 0 is an empty view.
 */
#ifndef KEEL_UTIL_H
#define KEEL_UTIL_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#define KEEL__UTIL_LEAN
#endif
#include <windows.h>
#ifdef KEEL__UTIL_LEAN
#undef WIN32_LEAN_AND_MEAN
#undef KEEL__UTIL_LEAN
#endif
#include <io.h>
#else
#include <errno.h>
#include <pthread.h>
#include <sys/types.h>
#include <unistd.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ASCII case ---------------------------------------------------------
 * HTTP's case-insensitive names (field names, tokens, schemes: RFC 9110
 * 5.1, 5.6.2) fold ASCII letters only. Unlike tolower() and strcasecmp(),
 * these never consult the locale (a Turkish locale folds 'I' to a dotless
 * 'ı'), never take a negative char as an index, and bytes >= 0x80 compare
 * as themselves. */

/* c with 'A'..'Z' folded to 'a'..'z'; any other value unchanged. */
static inline int keel_ascii_lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Compares a and b (NUL-terminated) ignoring ASCII case, as strcmp does:
 * <0, 0, >0 by the folded bytes as unsigned char. */
static inline int keel_ascii_casecmp(const char *a, const char *b)
{
    for (;; a++, b++) {
        int x = keel_ascii_lower((unsigned char)*a), y = keel_ascii_lower((unsigned char)*b);
        if (x != y || x == 0)
            return x - y;
    }
}

/* The same over at most n bytes, stopping at a NUL in both (strncasecmp's
 * contract): a view compared with a prefix, "bytes=" at the start of a
 * Range field, say. */
static inline int keel_ascii_ncasecmp(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int x = keel_ascii_lower((unsigned char)a[i]), y = keel_ascii_lower((unsigned char)b[i]);
        if (x != y || x == 0)
            return x - y;
    }
    return 0;
}

/* 1 if a[0..alen) and b[0..blen) are the same bytes ignoring ASCII case
 * (NUL bytes compare as any other), else 0. */
static inline int keel_ascii_iequal(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return 0;
    for (size_t i = 0; i < alen; i++)
        if (keel_ascii_lower((unsigned char)a[i]) != keel_ascii_lower((unsigned char)b[i]))
            return 0;
    return 1;
}

/* keel_ascii_iequal against lc[0..n), which is lower case already (a
 * literal such as "content-length"): only a's bytes are folded, for the
 * paths that compare every field name with known ones (h2o's
 * h2o_lcstris). */
static inline int keel_ascii_iequal_lc(const char *a, size_t alen, const char *lc, size_t n)
{
    if (alen != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (keel_ascii_lower((unsigned char)a[i]) != (unsigned char)lc[i])
            return 0;
    return 1;
}

/* keel_ascii_iequal of a view and a NUL-terminated string (a literal, a
 * field name a caller passed). */
static inline int keel_ascii_iequal_z(const char *a, size_t alen, const char *b)
{
    return keel_ascii_iequal(a, alen, b, strlen(b));
}

/* The value of a hexadecimal digit (either case), or -1. */
static inline int keel_hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = keel_ascii_lower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* ---- tokens (RFC 9110 5.6.2) ---------------------------------------------
 * A token (a field name, a method, a list element such as a Vary entry)
 * is one or more tchar: "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" /
 * "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA. */

/* 1 if the byte c is a tchar, else 0: a bit of two words for each of the
 * 128 ASCII codes, as fast as a table and without one per module. */
static inline int keel_token_char(int c)
{
    static const unsigned long long tchar_bits[2] = {0x03ff6cfa00000000ull, 0x57ffffffc7fffffeull};
    return c >= 0 && c < 128 && ((tchar_bits[c >> 6] >> (c & 63)) & 1);
}

/* ---- field values (RFC 9110 5.5) ----------------------------------------
 * A field value is field-vchar (VCHAR and obs-text) with SP and HTAB
 * between; NUL, CR, LF, the other controls and DEL may not stand in it (a
 * CR or LF in a value a server writes would split the message). */

/* 1 if the byte c may stand in a field value, else 0. */
static inline int keel_field_value_char(int c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* The index of the first byte of s[0..len) that may not stand in a field
 * value, or len if every one may: a configured Server string, say,
 * checked once before it goes into every response. */
static inline size_t keel_field_value_check(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && keel_field_value_char((unsigned char)s[i]))
        i++;
    return i;
}

/* ---- HTTP lists (RFC 9110 5.6.1) -----------------------------------------
 * Fields such as Connection, Upgrade, TE, Accept-Encoding, Vary hold a
 * comma-separated list: `#element` is [ element ] *( OWS "," OWS [ element ] ),
 * and a recipient accepts empty elements ("a, , b", ",a,"). OWS is spaces
 * and tabs (5.6.3). A comma inside a quoted string (5.6.4) does not
 * separate elements. Tokens compare case-insensitively (5.6.2). */

/* Steps *cursor (in list[.. end)) to the next non-empty element: 1 with
 * *elem and *elem_len set to it, OWS trimmed from both ends (parameters,
 * ";q=0.5", are left in it); 0 at the end of the list.
 *
 *     const char *at = v.ptr, *e; size_t n;
 *     while (keel_list_next(&at, v.ptr + v.len, &e, &n)) ...
 */
static inline int keel_list_next(const char **cursor, const char *end, const char **elem,
                                 size_t *elem_len)
{
    const char *p = *cursor;
    while (p != NULL && p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        const char *start = p;
        int quoted = 0;
        for (; p < end && (quoted || *p != ','); p++) {
            if (*p == '"')
                quoted = !quoted;
            else if (*p == '\\' && quoted && p + 1 < end)
                p++; /* quoted-pair: the next byte is literal */
        }
        const char *stop = p;
        while (stop > start && (stop[-1] == ' ' || stop[-1] == '\t'))
            stop--;
        if (stop > start) {
            *cursor = p;
            *elem = start;
            *elem_len = (size_t)(stop - start);
            return 1;
        }
    }
    *cursor = end;
    return 0;
}

/* The element's token before any parameters: "gzip" of "gzip;q=0",
 * "websocket" of "websocket" (OWS before the ';' trimmed, 5.6.6). */
static inline size_t keel_list_token_length(const char *elem, size_t elem_len)
{
    const char *semi = (const char *)memchr(elem, ';', elem_len);
    size_t n = semi != NULL ? (size_t)(semi - elem) : elem_len;
    while (n > 0 && (elem[n - 1] == ' ' || elem[n - 1] == '\t'))
        n--;
    return n;
}

/* 1 if some element of the list list[0..len) is `token` (NUL-terminated;
 * ASCII case ignored), its parameters aside: "close" in a Connection field,
 * "websocket" in Upgrade, "100-continue" in Expect. Says nothing about a
 * weight: "gzip;q=0" lists gzip, as refused (a caller that honours
 * q-values walks the elements with keel_list_next). */
static inline int keel_list_has(const char *list, size_t len, const char *token)
{
    const char *at = list, *elem;
    size_t n, tlen = strlen(token);
    if (list == NULL)
        return 0; /* (NULL + 0 is undefined in C) */
    while (keel_list_next(&at, list + len, &elem, &n))
        if (keel_ascii_iequal(elem, keel_list_token_length(elem, n), token, tlen))
            return 1;
    return 0;
}

/* ---- Words ---------------------------------------------------------------
 * Steps *cursor (in s[.. end)) over blanks (spaces and tabs) and, if
 * commas is non-zero, commas too, to the next word: 1 with *word and
 * *word_len set, 0 at the end. Config values that list names
 * ("http1 static, stats") and allow lists are split this way. */
static inline int keel_word_next(const char **cursor, const char *end, int commas,
                                 const char **word, size_t *word_len)
{
    const char *p = *cursor;
    while (p != NULL && p < end && (*p == ' ' || *p == '\t' || (commas && *p == ',')))
        p++;
    const char *start = p;
    while (p != NULL && p < end && *p != ' ' && *p != '\t' && !(commas && *p == ','))
        p++;
    *cursor = p != NULL ? p : end;
    if (p == start)
        return 0;
    *word = start;
    *word_len = (size_t)(p - start);
    return 1;
}

/* Writes the words of the NUL-terminated s (split as keel_word_next does)
 * into buf, sep between them: a config value's words as a field's list
 * ("GET, POST" with ", "). A word that does not fit, with room for a
 * separator and the NUL, ends the list there. Returns buf, NUL-terminated
 * (size > 0). */
static inline char *keel_words_join(const char *s, int commas, const char *sep, char *buf,
                                    size_t size)
{
    size_t o = 0, sep_len = strlen(sep), len;
    const char *at = s, *end = s + strlen(s), *w;
    while (keel_word_next(&at, end, commas, &w, &len) && o + len + sep_len + 1 < size) {
        if (o > 0) {
            memcpy(buf + o, sep, sep_len);
            o += sep_len;
        }
        memcpy(buf + o, w, len);
        o += len;
    }
    buf[o] = '\0';
    return buf;
}

/* A boolean inside a module's own value syntax (proxy's `websocket=on`,
 * static's `listing=off`), NUL-terminated: on, yes, true, 1 set *out to 1;
 * off, no, false, 0 to 0, as written here (lower case); 0, or -1 for any
 * other word (*out untouched). */
static inline int keel_onoff_parse_z(const char *s, int *out)
{
    static const char *const words[] = {"off", "on", "no", "yes", "false", "true", "0", "1"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(s, words[i]) == 0) {
            *out = (int)(i % 2);
            return 0;
        }
    return -1;
}

/* ---- IP addresses and CIDR blocks ------------------------------------------
 * An address is held as 16 bytes in network order; IPv4 as its IPv4-mapped
 * IPv6 form ::ffff:a.b.c.d (RFC 4291 2.5.5.2), so that one comparison
 * serves both families and 127.0.0.1 also matches a dual-stack socket's
 * ::ffff:127.0.0.1. Parsed here rather than with inet_pton so that a
 * module needs no socket library (ws2_32 on Windows), and strictly: an
 * IPv4 part with a leading zero ("010") is refused, since inet_aton and
 * getaddrinfo read it as octal. */

typedef struct keel_ip {
    unsigned char bytes[16];
} keel_ip;

/* An address and the length of its prefix over all 128 bits (an IPv4
 * block /24 is 96 + 24 = 120). */
typedef struct keel_cidr {
    keel_ip addr;
    unsigned bits;
} keel_cidr;

/* 1 if ip is an IPv4 address (held IPv4-mapped). */
static inline int keel_ip_is_v4(const keel_ip *ip)
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(ip->bytes, mapped, 12) == 0;
}

/* A dotted quad: four decimal parts 0..255 without leading zeros. */
static inline int keel__ip_parse_v4(const char *s, size_t len, unsigned char out[4])
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= len || s[i] != '.')
                return 0;
            i++;
        }
        size_t start = i;
        unsigned v = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 3)
            v = v * 10 + (unsigned)(s[i++] - '0');
        if (i == start || v > 255 || (s[start] == '0' && i - start > 1))
            return 0;
        out[part] = (unsigned char)v;
    }
    return i == len;
}

/* RFC 4291 2.2: eight groups of up to four hex digits, one "::" for a run
 * of zero groups, optionally a dotted quad as the last 32 bits. */
static inline int keel__ip_parse_v6(const char *s, size_t len, unsigned char out[16])
{
    unsigned char a[16] = {0};
    int n = 0, gap = -1; /* bytes written; where "::" stands */
    size_t i = 0;
    if (len >= 2 && s[0] == ':' && s[1] == ':') {
        gap = 0;
        i = 2;
    } else if (len >= 1 && s[0] == ':') {
        return 0;
    }
    while (i < len) {
        if (n == 16)
            return 0;
        if (memchr(s + i, '.', len - i) != NULL && memchr(s + i, ':', len - i) == NULL) {
            if (n > 12 || !keel__ip_parse_v4(s + i, len - i, a + n))
                return 0;
            n += 4;
            break;
        }
        unsigned v = 0;
        size_t start = i;
        int h;
        while (i < len && i - start < 4 && (h = keel_hex_value((unsigned char)s[i])) >= 0) {
            v = v * 16 + (unsigned)h;
            i++;
        }
        if (i == start)
            return 0;
        a[n++] = (unsigned char)(v >> 8);
        a[n++] = (unsigned char)v;
        if (i == len)
            break;
        if (s[i++] != ':')
            return 0;
        if (i < len && s[i] == ':') {
            if (gap >= 0)
                return 0;
            gap = n;
            i++;
        } else if (i == len) {
            return 0; /* a trailing single ':' */
        }
    }
    if (gap < 0 && n != 16)
        return 0;
    if (gap >= 0) {
        if (n > 14)
            return 0;
        memmove(a + 16 - (n - gap), a + gap, (size_t)(n - gap));
        memset(a + gap, 0, (size_t)(16 - n));
    }
    memcpy(out, a, 16);
    return 1;
}

/* Parses an IPv4 ("192.0.2.1") or IPv6 ("2001:db8::1", "::ffff:192.0.2.1")
 * literal, s[0..len) exactly (no brackets, port or zone). 1 with *out
 * set, or 0 (*out unchanged). */
static inline int keel_ip_parse(const char *s, size_t len, keel_ip *out)
{
    unsigned char v4[4];
    if (s == NULL)
        return 0;
    if (keel__ip_parse_v4(s, len, v4)) {
        memset(out->bytes, 0, 10);
        out->bytes[10] = out->bytes[11] = 0xff;
        memcpy(out->bytes + 12, v4, 4);
        return 1;
    }
    return keel__ip_parse_v6(s, len, out->bytes);
}

/* Parses "ADDRESS" (a block of one: /32 or /128) or "ADDRESS/BITS", BITS
 * counted in the address's own family (0..32 for IPv4, 0..128 for IPv6).
 * The address's bits beyond the prefix are kept as written (and ignored
 * by keel_cidr_match). 1 with *out set, or 0. */
static inline int keel_cidr_parse(const char *s, size_t len, keel_cidr *out)
{
    if (s == NULL)
        return 0;
    const char *slash = (const char *)memchr(s, '/', len);
    size_t alen = slash != NULL ? (size_t)(slash - s) : len;
    keel_cidr c;
    if (!keel_ip_parse(s, alen, &c.addr))
        return 0;
    int v4 = memchr(s, ':', alen) == NULL; /* ::ffff:a.b.c.d counts its bits as IPv6 */
    unsigned max = v4 ? 32 : 128, bits = max;
    if (slash != NULL) {
        const char *p = slash + 1, *end = s + len;
        if (p == end || end - p > 3)
            return 0;
        bits = 0;
        for (; p < end; p++) {
            if (*p < '0' || *p > '9')
                return 0;
            bits = bits * 10 + (unsigned)(*p - '0');
        }
        if (bits > max)
            return 0;
    }
    c.bits = v4 ? bits + 96 : bits;
    *out = c;
    return 1;
}

/* 1 if ip lies in the block. */
static inline int keel_cidr_match(const keel_cidr *block, const keel_ip *ip)
{
    unsigned bits = block->bits;
    for (unsigned i = 0; i < 16 && bits > 0; i++) {
        unsigned take = bits >= 8 ? 8 : bits;
        unsigned mask = (0xffu << (8 - take)) & 0xffu;
        if ((ip->bytes[i] & mask) != (block->addr.bytes[i] & mask))
            return 0;
        bits -= take;
    }
    return 1;
}

/* ---- Memory that grows ----------------------------------------------------
 * Copies and buffers a module builds up piece by piece: a config word kept,
 * a header block arriving in frames, a page being written. Unlike the rest
 * of this header these allocate, with the C library's malloc and realloc:
 * what they return or grow is the caller's, given back with free(). */

/* A copy of the n bytes at s with a NUL after them (strndup, which the
 * Windows C library lacks, except that exactly n bytes are read: s needs
 * no NUL); NULL when memory runs out. */
static inline char *keel_strndup(const char *s, size_t n)
{
    char *d = (char *)malloc(n + 1);
    if (d != NULL) {
        if (n > 0)
            memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Reallocates the array at *arrayp to count elements of size bytes. The
 * pointer is read and written as bytes: arrayp may be the address of a
 * pointer of any object type, which a void ** must not be used to alias. */
static inline int keel__realloc_at(void *arrayp, size_t count, size_t size)
{
    if (size > 0 && count > (size_t)-1 / size)
        return -1;
    void *array;
    memcpy(&array, arrayp, sizeof array);
    void *grown = realloc(array, count * size);
    if (grown == NULL)
        return -1;
    memcpy(arrayp, &grown, sizeof grown);
    return 0;
}

/* The copy keel_strndup makes, with ASCII letters folded to lower case
 * (keel_ascii_lower): a name compared case-insensitively, kept folded
 * once (a media type, a host name, a protocol token). */
static inline char *keel_strndup_lower(const char *s, size_t n)
{
    char *d = keel_strndup(s, n);
    if (d != NULL)
        for (size_t i = 0; i < n; i++)
            d[i] = (char)keel_ascii_lower((unsigned char)d[i]);
    return d;
}

/* Makes room for at least need elements of size bytes in an array that has
 * room for *cap. arrayp is the address of the caller's pointer to it (a
 * T **, NULL-valued while the array is empty): the room doubles, from first
 * (or 1) for an empty array, until need fits, and the pointer is set to the
 * array realloc moved it to. 0, or -1 when memory runs out or the size
 * overflows (the pointer, the elements and *cap are then as they were). */
static inline int keel_reserve(void *arrayp, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t room = *cap > 0 ? *cap : first > 0 ? first : 1;
    while (room < need) {
        if (room > (size_t)-1 / 2)
            return -1;
        room *= 2;
    }
    if (keel__realloc_at(arrayp, room, size) != 0)
        return -1;
    *cap = room;
    return 0;
}

/* Makes an array of n elements of size bytes one element longer (realloc
 * to n + 1), arrayp as for keel_reserve: for lists built once, at load,
 * where keeping a capacity is not worth it. 0, or -1 when memory runs out
 * (the array as it was). */
static inline int keel_array_add(void *arrayp, size_t n, size_t size)
{
    return n == (size_t)-1 ? -1 : keel__realloc_at(arrayp, n + 1, size);
}

/* Appends the n bytes at p to a byte buffer holding *len bytes with room
 * for *cap, growing it as keel_reserve does (bufp: the address of the
 * caller's char * or unsigned char * to it). A NUL is kept after the
 * bytes (not counted in *len), so that text built this way is a C string
 * once anything was appended. 0, or -1 when memory runs out (the buffer
 * as it was). */
static inline int keel_append(void *bufp, size_t *len, size_t *cap, const void *p, size_t n,
                              size_t first)
{
    if (n == 0)
        return 0;
    if (n >= (size_t)-1 - *len || keel_reserve(bufp, cap, *len + n + 1, 1, first) != 0)
        return -1;
    char *buf;
    memcpy(&buf, bufp, sizeof buf);
    memcpy(buf + *len, p, n);
    *len += n;
    buf[*len] = '\0';
    return 0;
}

/* ---- Intrusive doubly linked lists -----------------------------------------
 * Structs that carry their own `next` and `prev` pointers, on a list
 * headed by a pointer to the first one (NULL: empty), with no sentinel:
 * BSD <sys/queue.h>'s LIST_INSERT_HEAD and LIST_REMOVE. Removal is O(1),
 * so a connection can keep what it must cancel (its streams, the jobs it
 * has in flight) without a search. Macros, so that any struct will do;
 * they evaluate their arguments more than once: pass plain lvalues. */

/* Puts node first on the list at head. */
#define KEEL_LIST_PUSH(head, node)                                                                 \
    do {                                                                                           \
        (node)->prev = NULL;                                                                       \
        (node)->next = (head);                                                                     \
        if ((head) != NULL)                                                                        \
            (head)->prev = (node);                                                                 \
        (head) = (node);                                                                           \
    } while (0)

/* Takes node, which is on the list at head, off it (its own pointers are
 * left as they were). */
#define KEEL_LIST_REMOVE(head, node)                                                               \
    do {                                                                                           \
        if ((node)->prev != NULL)                                                                  \
            (node)->prev->next = (node)->next;                                                     \
        else                                                                                       \
            (head) = (node)->next;                                                                 \
        if ((node)->next != NULL)                                                                  \
            (node)->next->prev = (node)->prev;                                                     \
    } while (0)

/* ---- Intrusive queues --------------------------------------------------------
 * Structs that carry a link to the next one (through a member the caller
 * names), on a queue known by pointers to its first and last (both NULL:
 * empty), taken from the front in the order they were appended: BSD
 * <sys/queue.h>'s STAILQ_INSERT_TAIL. What waits its turn (the streams
 * with data to send, the callbacks due on a worker's next turn) keeps its
 * order without a search. A macro, so that any struct will do; it
 * evaluates its arguments more than once: pass plain lvalues. */

/* Puts node last on the queue from head to tail. */
#define KEEL_QUEUE_APPEND(head, tail, node, link)                                                  \
    do {                                                                                           \
        (node)->link = NULL;                                                                       \
        if ((tail) != NULL)                                                                        \
            (tail)->link = (node);                                                                 \
        else                                                                                       \
            (head) = (node);                                                                       \
        (tail) = (node);                                                                           \
    } while (0)

/* ---- Reading a file at an offset ---------------------------------------------
 * What a module reads back of a file it holds open (a cached small file,
 * a spooled request body, a range for HTTP/2 DATA frames). */

/* Reads exactly len bytes at offset off of the file open as descriptor fd
 * into buf, leaving the descriptor's position alone: pread(2), again after
 * a signal or a short read; on Windows ReadFile at that offset (of the
 * descriptor's handle), at most 1 GiB a call. 0, or -1 at an error or at
 * the file's end before len bytes. It blocks while the disk reads: on a
 * worker, for bytes the page cache holds; else on a thread of its own. */
static inline int keel_pread_all(int fd, void *buf, size_t len, unsigned long long off)
{
    char *p = (char *)buf;
#if defined(_WIN32)
    HANDLE h = (HANDLE)_get_osfhandle(fd);
    if (h == INVALID_HANDLE_VALUE)
        return -1;
    while (len > 0) {
        OVERLAPPED at;
        memset(&at, 0, sizeof at);
        at.Offset = (DWORD)off;
        at.OffsetHigh = (DWORD)(off >> 32);
        DWORD want = len > 0x40000000u ? 0x40000000u : (DWORD)len, got = 0;
        if (!ReadFile(h, p, want, &got, &at) || got == 0)
            return -1;
        p += got;
        len -= got;
        off += got;
    }
#else
    while (len > 0) {
        ssize_t got = pread(fd, p, len, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        p += got;
        len -= (size_t)got;
        off += (unsigned long long)got;
    }
#endif
    return 0;
}

/* KEEL_ADDRESS_SANITIZED is 1 in builds with AddressSanitizer (GCC says
 * so with __SANITIZE_ADDRESS__, Clang with __has_feature), else 0. A free
 * list hands a block out again at once, so ASan cannot see a use after
 * it was given back: sanitized builds should free such blocks instead. */
#if defined(__SANITIZE_ADDRESS__)
#define KEEL_ADDRESS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KEEL_ADDRESS_SANITIZED 1
#endif
#endif
#ifndef KEEL_ADDRESS_SANITIZED
#define KEEL_ADDRESS_SANITIZED 0
#endif

/* ---- Free lists ---------------------------------------------------------------
 * Blocks of one kind that a worker is done with (a connection's state, an
 * output buffer), kept on a singly linked list through a member the caller
 * names, for the next taker to reuse without a malloc (nginx's free
 * buffer chains, h2o's mem pools). The caller bounds the list with its
 * count, checked before KEEL_FREELIST_GIVE (what does not go on it is
 * freed), so that a burst does not pin memory; one list per worker needs
 * no lock. Macros, so that any struct will do; they evaluate their
 * arguments more than once: pass plain lvalues. */

/* item: the first block on list, taken off it; NULL if list is empty. */
#define KEEL_FREELIST_TAKE(item, list, count, link)                                                \
    do {                                                                                           \
        (item) = (list);                                                                           \
        if ((item) != NULL) {                                                                      \
            (list) = (item)->link;                                                                 \
            (count)--;                                                                             \
        }                                                                                          \
    } while (0)

/* Puts item first on list. */
#define KEEL_FREELIST_GIVE(item, list, count, link)                                                \
    do {                                                                                           \
        (item)->link = (list);                                                                     \
        (list) = (item);                                                                           \
        (count)++;                                                                                 \
    } while (0)

/* Empties list, calling free_fn on each block (passed as void *), and
 * sets count to 0: at a worker's stop. */
#define KEEL_FREELIST_DRAIN(list, count, link, free_fn)                                            \
    do {                                                                                           \
        while ((list) != NULL) {                                                                   \
            void *keel__freelist_item = (list);                                                    \
            (list) = (list)->link;                                                                 \
            free_fn(keel__freelist_item);                                                          \
        }                                                                                          \
        (count) = 0;                                                                               \
    } while (0)

/* ---- A mutex and a once for module-wide state ---------------------------
 * For what a module shares between its workers (a cache, a counter a
 * service hands out) and for one-time set-up that does not fit in load.
 * Statically initialised, so a module needs no init or destroy call:
 *
 *     static keel_mutex lock = KEEL_MUTEX_INIT;
 *     static keel_once once = KEEL_ONCE_INIT;
 *     keel_once_run(&once, init_tables);
 *     keel_mutex_lock(&lock); ... keel_mutex_unlock(&lock);
 *
 * pthreads on POSIX; on Windows an SRWLOCK (exclusive) and InitOnce,
 * which need neither initialisation nor destruction either. The mutex is
 * not recursive: locking it twice on one thread deadlocks. Nothing on a
 * request path should wait on one (a worker would stall its whole loop):
 * hold it for a few instructions, or use per-worker state instead. */

#if defined(_WIN32)
typedef struct keel_mutex {
    SRWLOCK lock;
} keel_mutex;
#define KEEL_MUTEX_INIT                                                                            \
    {                                                                                              \
        SRWLOCK_INIT                                                                               \
    }

typedef struct keel_once {
    INIT_ONCE once;
} keel_once;
#define KEEL_ONCE_INIT                                                                             \
    {                                                                                              \
        INIT_ONCE_STATIC_INIT                                                                      \
    }

static inline void keel_mutex_lock(keel_mutex *m)
{
    AcquireSRWLockExclusive(&m->lock);
}

static inline void keel_mutex_unlock(keel_mutex *m)
{
    ReleaseSRWLockExclusive(&m->lock);
}

static inline BOOL CALLBACK keel__once_call(PINIT_ONCE once, PVOID param, PVOID *context)
{
    (void)once;
    (void)context;
    (*(void (**)(void))param)();
    return TRUE;
}

/* Runs fn exactly once per keel_once, however many threads call this at
 * the same time; every caller returns after fn has returned. */
static inline void keel_once_run(keel_once *o, void (*fn)(void))
{
    InitOnceExecuteOnce(&o->once, keel__once_call, (PVOID)&fn, NULL);
}
#else
typedef struct keel_mutex {
    pthread_mutex_t lock;
} keel_mutex;
#define KEEL_MUTEX_INIT                                                                            \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER                                                                  \
    }

typedef struct keel_once {
    pthread_once_t once;
} keel_once;
#define KEEL_ONCE_INIT                                                                             \
    {                                                                                              \
        PTHREAD_ONCE_INIT                                                                          \
    }

static inline void keel_mutex_lock(keel_mutex *m)
{
    pthread_mutex_lock(&m->lock);
}

static inline void keel_mutex_unlock(keel_mutex *m)
{
    pthread_mutex_unlock(&m->lock);
}

/* Runs fn exactly once per keel_once, however many threads call this at
 * the same time; every caller returns after fn has returned. */
static inline void keel_once_run(keel_once *o, void (*fn)(void))
{
    pthread_once(&o->once, fn);
}
#endif

/* The system's initialisers spell null pointers 0 (glibc's
 * PTHREAD_MUTEX_INITIALIZER, Windows' SRWLOCK_INIT), which C++ code built
 * with -Wzero-as-null-pointer-constant -Werror rejects where the macro is
 * expanded, in the module's file. In C++14 and later KEEL_MUTEX_INIT is a
 * constexpr call that expands them here, with the warning off: still a
 * constant, so the mutex is initialised before any code runs. */
#if defined(__cplusplus) && __cplusplus >= 201402L && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wzero-as-null-pointer-constant"
static inline constexpr keel_mutex keel__mutex_init()
{
    keel_mutex m = KEEL_MUTEX_INIT;
    return m;
}
static inline constexpr keel_once keel__once_init()
{
    keel_once o = KEEL_ONCE_INIT;
    return o;
}
#pragma GCC diagnostic pop
#undef KEEL_MUTEX_INIT
#undef KEEL_ONCE_INIT
#define KEEL_MUTEX_INIT keel__mutex_init()
#define KEEL_ONCE_INIT  keel__once_init()
#endif

#ifdef __cplusplus
}
#endif

/* The well-known field names as small integers (keel_header_token). */
#include "header_tokens.h"

#endif
