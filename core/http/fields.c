/* What a module may put in a response field (RFC 9110 5.1 names, 5.5
 * values): the checks every header and trailer setter runs
 * (http/response_fields.c), written for the hot path because a response sets
 * several (http/http.h), and the fields a module prepares once: at load
 * (keel_field_prepare) or at run time (keel_field_make). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

#include "http/http.h"

/* RFC 9110 5.1: field names are tokens (tchar: ALPHA, DIGIT and
 * "!#$%&'*+-.^_`|~"). A byte table: one load and test a character, where
 * a bitmap took five instructions (names are set several times a
 * response: this was a tenth of a small static file's user time). */
static const uint8_t tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
    ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1,  ['~'] = 1, ['0'] = 1,
    ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1,  ['7'] = 1, ['8'] = 1,
    ['9'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1,  ['F'] = 1, ['G'] = 1,
    ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1,  ['N'] = 1, ['O'] = 1,
    ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1,  ['V'] = 1, ['W'] = 1,
    ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1,  ['d'] = 1, ['e'] = 1,
    ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1,  ['l'] = 1, ['m'] = 1,
    ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1,  ['t'] = 1, ['u'] = 1,
    ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

/* The name's length, or 0 if it is not a token. */
size_t kl_field_name_length(const char *n)
{
    if (n == NULL)
        return 0;
    const unsigned char *p = (const unsigned char *)n;
    size_t i = 0;
    while (tchar[p[i]])
        i++;
    return p[i] == '\0' ? i : 0;
}

/* Bytes of an 8-byte word below 0x20 or equal to 0x7f, as the high bit of
 * each (the "haszero"/"hasless" tricks; a flag may be spurious, never
 * missing, so a flagged word is looked at byte by byte). */
static uint64_t control_bytes(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t below = (w - 0x20 * ones) & ~w & highs;
    uint64_t del = w ^ (0x7f * ones);
    return below | ((del - ones) & ~del & highs);
}

static int control_char(unsigned char c)
{
    return (c < 0x20 && c != '\t') || c == 0x7f;
}

static int bytes_clean(const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (control_char(p[i]))
            return 0;
    return 1;
}

/* RFC 9110 5.5: no CR, LF or other control characters (HTAB aside) in
 * p[0..len). Eight bytes at a time (values are dates, ETags, media types:
 * 20 to 40 bytes), the last word overlapping the one before it rather than
 * a tail read byte by byte. */
int kl_field_value_clean(const char *v, size_t len)
{
    const unsigned char *p = (const unsigned char *)v;
    if (len < 8)
        return bytes_clean(p, len);
    for (size_t i = 0;; i += 8) {
        if (i + 8 > len)
            i = len - 8;
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (control_bytes(w) != 0 && !bytes_clean(p + i, 8))
            return 0;
        if (i + 8 == len)
            return 1;
    }
}

/* This is what makes response splitting impossible through keel's API.
 * The value's length, or SIZE_MAX if it is not valid. */
size_t kl_field_value_length(const char *v)
{
    if (v == NULL)
        return SIZE_MAX;
    size_t len = strlen(v);
    return kl_field_value_clean(v, len) ? len : SIZE_MAX;
}

/* What keel_response_fields_addn's caller vouches for (keel/api_list.h):
 * a token name, a value without control bytes but HTAB, and a token that
 * is the name's (or 0, or one this host's list does not have: taken as 0).
 * Non-zero if the field is all that. */
int kl_field_vouched(const kl_field *f)
{
    if (f->name.ptr == NULL || f->name.len == 0 || (f->value.ptr == NULL && f->value.len > 0))
        return 0;
    for (size_t i = 0; i < f->name.len; i++)
        if (!tchar[(unsigned char)f->name.ptr[i]])
            return 0;
    if (f->value.len > 0 && !kl_field_value_clean(f->value.ptr, f->value.len))
        return 0;
    return f->token == 0 || f->token > KEEL_HDR_COUNT_ ||
           f->token == keel_header_token(f->name.ptr, f->name.len) + 1;
}

/* The fields keel_field_prepare refuses (keel_field_prepare in
 * keel/api_list.h): the message's framing and the connection's fields
 * (RFC 9110 6.4.1, 7.6.1), and Date, which the protocol writes
 * (RFC 9110 6.6.1). */
static int protocol_owned(unsigned token)
{
    switch (token) {
    case KEEL_HDR_CONTENT_LENGTH:
    case KEEL_HDR_TRANSFER_ENCODING:
    case KEEL_HDR_TRAILER:
    case KEEL_HDR_DATE:
        return 1;
    default:
        return (keel_header_token_flags(token) &
                (KEEL_HDR_FLAG_CONNECTION_SPECIFIC | KEEL_HDR_FLAG_HOP_BY_HOP)) != 0;
    }
}

int kl_prepared_field_new(const char *name, size_t nl, const char *value, size_t vl,
                          keel_prepared_field **out)
{
    *out = NULL;
    if (name == NULL || value == NULL || nl == 0 || memchr(name, '\0', nl) != NULL ||
        memchr(value, '\0', vl) != NULL || !kl_field_value_clean(value, vl))
        return KEEL_ERR_INVAL;
    /* name NUL value NUL, then the line: name ": " value CRLF. */
    size_t line_len = nl + vl + 4;
    if (line_len > UINT32_MAX)
        return KEEL_ERR_INVAL;
    keel_prepared_field *f = malloc(sizeof *f + nl + vl + 2 + line_len);
    if (f == NULL)
        return KEEL_ERR_NOMEM;
    char *text = (char *)(f + 1);
    memcpy(text, name, nl);
    text[nl] = '\0';
    unsigned token = keel_header_token(text, nl);
    if (kl_field_name_length(text) != nl || protocol_owned(token)) {
        free(f);
        return KEEL_ERR_INVAL;
    }
    memcpy(text + nl + 1, value, vl);
    text[nl + 1 + vl] = '\0';
    char *line = text + nl + vl + 2;
    memcpy(line, name, nl);
    memcpy(line + nl, ": ", 2);
    memcpy(line + nl + 2, value, vl);
    memcpy(line + nl + 2 + vl, "\r\n", 2);
    f->field = (kl_field){{text, nl}, {text + nl + 1, vl}, line, (uint32_t)line_len, token + 1};
    f->next = NULL;
    *out = f;
    return KEEL_OK;
}

int keel_field_make(const char *name, size_t name_len, const char *value, size_t value_len,
                    const keel_prepared_field **out)
{
    if (out == NULL)
        return KEEL_ERR_INVAL;
    keel_prepared_field *f;
    int rc = kl_prepared_field_new(name, name_len, value, value_len, &f);
    *out = f;
    return rc;
}

void keel_field_free(const keel_prepared_field *field)
{
    /* The caller's alone (keel_field_make): never on a module's list. */
    free((keel_prepared_field *)field);
}

void kl_prepared_fields_free(keel_prepared_field *list)
{
    while (list != NULL) {
        keel_prepared_field *next = list->next;
        free(list);
        list = next;
    }
}
