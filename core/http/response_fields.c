/* A response's field list: adding, setting and removing header fields by
 * name, adding prepared fields (one or a batch), looking fields up,
 * trailers, and taking out the framing fields that are the protocol's to
 * write. What a field may hold is fields.c's; sending the head is
 * response.c's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

#include "http/http.h"

static int grow_fields(kl_field **list, size_t need, size_t *cap, kl_field *inline_list);

/* Appends a validated field, its strings copied into the request's arena.
 * `inline_list` is the list's initial storage inside the request (or
 * NULL): it is copied out, never realloc'ed. */
static int append_field(keel_request *req, kl_field **list, size_t *n, size_t *cap,
                        kl_field *inline_list, const char *name, size_t nl, const char *value,
                        size_t vl)
{
    if (*n + 1 > *cap && grow_fields(list, *n + 1, cap, inline_list) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    char *copy = kl_arena_alloc(&req->arena, nl + vl + 2);
    if (copy == NULL)
        return KEEL_ERR_NOMEM;
    memcpy(copy, name, nl + 1);
    memcpy(copy + nl + 1, value, vl + 1);
    (*list)[(*n)++] = (kl_field){{copy, nl}, {copy + nl + 1, vl}, NULL, 0, 0};
    return KEEL_OK;
}

/* Makes room for `need` fields in the list, which holds *cap (the arena
 * is not needed: a prepared field's strings outlive the requests that
 * carry it). Out of line: most responses fit in the inline list, and the
 * callers then need none of the registers a call to realloc takes. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
static int
grow_fields(kl_field **list, size_t need, size_t *cap, kl_field *inline_list)
{
    if (need <= *cap)
        return KEEL_OK;
    size_t c = *cap ? *cap * 2 : 8;
    while (c < need)
        c *= 2;
    kl_field *grown;
    if (*list != NULL && *list == inline_list) {
        if ((grown = malloc(c * sizeof *grown)) != NULL)
            memcpy(grown, *list, *cap * sizeof *grown);
    } else {
        grown = realloc(*list, c * sizeof *grown);
    }
    if (grown == NULL)
        return KEEL_ERR_NOMEM;
    *list = grown;
    *cap = c;
    return KEEL_OK;
}

/* Whether a name of `len` bytes may be one of the fields
 * kl_response_take_framing takes out (RFC 9110 7.6.1, and the framing the
 * protocol writes): Connection and Keep-Alive (10), Content-Length (14),
 * Proxy-Connection (16), Transfer-Encoding (17). The length alone: a
 * name is classified only by framing, and only if one may be there. */
static int framing_length(size_t len)
{
    return len == 10 || len == 14 || len == 16 || len == 17;
}

/* After a field was appended to the header section by name (rc KEEL_OK):
 * whether framing has anything to look at now. */
static int note_added(keel_response *res, int rc)
{
    if (rc == KEEL_OK)
        res->framing_fields |= framing_length(res->headers[res->nheaders - 1].name.len);
    return rc;
}

static int add_field(keel_request *req, kl_field **list, size_t *n, size_t *cap,
                     kl_field *inline_list, const char *name, const char *value)
{
    size_t nl = kl_field_name_length(name), vl = kl_field_value_length(value);
    if (nl == 0 || vl == SIZE_MAX)
        return KEEL_ERR_INVAL;
    return append_field(req, list, n, cap, inline_list, name, nl, value, vl);
}

/* Removes every field named name[0..nl); non-zero if there was one. */
static int remove_fields(keel_response *res, const char *name, size_t nl)
{
    size_t out = 0;
    /* Lengths first, here: most fields differ in length, and the call is
     * what a set costs when the name is new (the usual case). */
    for (size_t i = 0; i < res->nheaders; i++)
        if (res->headers[i].name.len != nl || !kl_name_equals(res->headers[i].name, name, nl))
            res->headers[out++] = res->headers[i];
    int found = out != res->nheaders;
    res->nheaders = out;
    return found;
}

int keel_response_header_remove(keel_response *res, const char *name)
{
    if (res->head_sent)
        return KEEL_ERR_STATE;
    return remove_fields(res, name, strlen(name)) ? KEEL_OK : KEEL_ERR_NOTFOUND;
}

int keel_response_header_add(keel_response *res, const char *name, const char *value)
{
    if (res->head_sent)
        return KEEL_ERR_STATE;
    return note_added(res, add_field(res->req, &res->headers, &res->nheaders, &res->headers_cap,
                                     res->inline_headers, name, value));
}

int keel_response_header_set(keel_response *res, const char *name, const char *value)
{
    if (res->head_sent)
        return KEEL_ERR_STATE;
    size_t nl = kl_field_name_length(name), vl = kl_field_value_length(value);
    if (nl == 0 || vl == SIZE_MAX)
        return KEEL_ERR_INVAL;
    remove_fields(res, name, nl);
    return note_added(res, append_field(res->req, &res->headers, &res->nheaders, &res->headers_cap,
                                        res->inline_headers, name, nl, value, vl));
}

int keel_response_field_add(keel_response *res, const keel_prepared_field *field, int replace)
{
    if (field == NULL)
        return KEEL_ERR_INVAL;
    if (res->head_sent)
        return KEEL_ERR_STATE;
    if (replace)
        remove_fields(res, field->field.name.ptr, field->field.name.len);
    if (res->nheaders + 1 > res->headers_cap &&
        grow_fields(&res->headers, res->nheaders + 1, &res->headers_cap, res->inline_headers) !=
            KEEL_OK)
        return KEEL_ERR_NOMEM;
    res->headers[res->nheaders++] = field->field;
    return KEEL_OK;
}

/* keel_response_fields_add with `replace`: each field removes its name's
 * fields, then joins. Out of line: the usual call adds without it. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
static int
fields_replace(keel_response *res, const keel_prepared_field *const *fields, size_t n)
{
    /* It removes as it goes: every entry is checked first. */
    for (size_t i = 0; i < n; i++)
        if (fields[i] == NULL)
            return KEEL_ERR_INVAL;
    if (res->head_sent)
        return KEEL_ERR_STATE;
    /* Room first: a failure adds and removes nothing. */
    if (grow_fields(&res->headers, res->nheaders + n, &res->headers_cap, res->inline_headers) !=
        KEEL_OK)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        /* One by one, as that many keel_response_field_add calls: a
         * later field replaces an earlier one of its name. */
        remove_fields(res, fields[i]->field.name.ptr, fields[i]->field.name.len);
        res->headers[res->nheaders++] = fields[i]->field;
    }
    return KEEL_OK;
}

int keel_response_fields_add(keel_response *res, const keel_prepared_field *const *fields, size_t n,
                             int replace)
{
    if (res == NULL || (fields == NULL && n > 0))
        return KEEL_ERR_INVAL;
    if (replace)
        return fields_replace(res, fields, n);
    if (res->head_sent)
        return KEEL_ERR_STATE;
    size_t at = res->nheaders;
    if (at + n > res->headers_cap &&
        grow_fields(&res->headers, at + n, &res->headers_cap, res->inline_headers) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    kl_field *out = res->headers + at;
    for (size_t i = 0; i < n; i++) {
        if (fields[i] == NULL)
            return KEEL_ERR_INVAL; /* nothing added: the count did not move */
        out[i] = fields[i]->field;
    }
    res->nheaders = at + n;
    return KEEL_OK;
}

/* Whether a field, by its token (1 + keel_header_token, 0 if not
 * classified) and its name's length, may be one kl_response_take_framing
 * takes out: the framing tokens, or for a name not classified the framing
 * names' lengths. */
static int framing_field(unsigned token, size_t name_len)
{
    switch (token) {
    case 0:
        return framing_length(name_len);
    case KEEL_HDR_CONTENT_LENGTH + 1:
    case KEEL_HDR_TRANSFER_ENCODING + 1:
    case KEEL_HDR_CONNECTION + 1:
    case KEEL_HDR_KEEP_ALIVE + 1:
    case KEEL_HDR_PROXY_CONNECTION + 1:
        return 1;
    default:
        return 0;
    }
}

/* A caller's token (1 + keel_header_token), or 0 for one past this
 * host's list (a module built with a newer list): the protocols index
 * their tables by it. */
static unsigned known_token(unsigned token)
{
    return token <= KEEL_HDR_COUNT_ ? token : 0;
}

/* The checks keel_response_fields_addn's caller vouches it made, run
 * where a lie should stop the program: debug and sanitizer builds. */
#if !defined(NDEBUG) || KEEL_ADDRESS_SANITIZED
#define KL_CHECK_VOUCHED 1
#endif

int keel_response_fields_addn(keel_response *res, const keel_field *fields, size_t n,
                              unsigned flags)
{
    if (res == NULL || (fields == NULL && n > 0) || flags != 0)
        return KEEL_ERR_INVAL;
    if (res->head_sent)
        return KEEL_ERR_STATE;
    if (n == 0)
        return KEEL_OK;
    size_t bytes = 0;
    int framing = 0;
    for (size_t i = 0; i < n; i++) {
#ifdef KL_CHECK_VOUCHED
        if (!kl_field_vouched(&fields[i]))
            abort(); /* the caller broke its promise (keel_response_fields_addn) */
#endif
        bytes += fields[i].name.len + fields[i].value.len + 2;
        framing |= framing_field(known_token(fields[i].token), fields[i].name.len);
    }
    size_t at = res->nheaders;
    if (at + n > res->headers_cap &&
        grow_fields(&res->headers, at + n, &res->headers_cap, res->inline_headers) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    /* One copy of every name and value, each NUL-terminated as a field
     * added by name is (callers read values as strings). */
    char *text = kl_arena_alloc(&res->req->arena, bytes);
    if (text == NULL)
        return KEEL_ERR_NOMEM;
    kl_field *out = res->headers + at;
    for (size_t i = 0; i < n; i++) {
        const keel_field *f = &fields[i];
        char *name = text, *value = text + f->name.len + 1;
        memcpy(name, f->name.ptr, f->name.len);
        name[f->name.len] = '\0';
        if (f->value.len > 0)
            memcpy(value, f->value.ptr, f->value.len);
        value[f->value.len] = '\0';
        text = value + f->value.len + 1;
        out[i] =
            (kl_field){{name, f->name.len}, {value, f->value.len}, NULL, 0, known_token(f->token)};
    }
    res->nheaders = at + n;
    res->framing_fields |= framing;
    return KEEL_OK;
}

keel_str keel_response_header(keel_response *res, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < res->nheaders; i++)
        if (kl_name_equals(res->headers[i].name, name, nl))
            return res->headers[i].value;
    return (keel_str){NULL, 0};
}

int keel_response_trailer_add(keel_response *res, const char *name, const char *value)
{
    if (res->ended)
        return KEEL_ERR_STATE;
    return add_field(res->req, &res->trailers, &res->ntrailers, &res->trailers_cap, NULL, name,
                     value);
}

size_t keel_response_header_count(keel_response *res)
{
    return res->nheaders;
}

int keel_response_header_at(keel_response *res, size_t index, keel_header *out)
{
    if (index >= res->nheaders)
        return KEEL_ERR_NOTFOUND;
    *out = (keel_header){res->headers[index].name, res->headers[index].value};
    return KEEL_OK;
}

/* ---- framing ---------------------------------------------------------- */

/* Fields the core never hands to a protocol, because they describe one
 * connection rather than the message (RFC 9110 7.6.1): each protocol writes
 * its own, or none (HTTP/2 forbids them, RFC 9113 8.2.2). Upgrade is the
 * exception: it is end-to-end meaningful in a 101 or 426 (RFC 9110 7.8,
 * 15.5.22), so it is passed on, and an HTTP/2 module drops it; TE is a
 * request's. Each field's name is classified once, here. */
int64_t kl_response_take_framing_fields(keel_response *res)
{
    int64_t length = -1;
    int seen_length = 0;
    size_t out = 0;
    for (size_t i = 0; i < res->nheaders; i++) {
        const kl_field *f = &res->headers[i];
        unsigned token = f->token ? f->token - 1 : keel_header_token(f->name.ptr, f->name.len);
        switch (token) {
        case KEEL_HDR_CONTENT_LENGTH:
            if (seen_length++)
                continue; /* the first one counts */
            int64_t v = 0;
            int ok = f->value.len > 0 && f->value.len < 19;
            for (size_t j = 0; ok && j < f->value.len; j++) {
                ok = f->value.ptr[j] >= '0' && f->value.ptr[j] <= '9';
                v = v * 10 + (f->value.ptr[j] - '0');
            }
            if (ok)
                length = v;
            continue;
        case KEEL_HDR_CONNECTION:
            /* A handler's "Connection: close" still means what it says:
             * it becomes the flag the protocol asks for. */
            if (keel_list_has(f->value.ptr, f->value.len, "close"))
                res->close_connection = 1;
            continue;
        case KEEL_HDR_KEEP_ALIVE:
        case KEEL_HDR_PROXY_CONNECTION:
        case KEEL_HDR_TRANSFER_ENCODING:
            continue;
        default:
            /* Kept: moved down only after a field was taken out. */
            if (out != i)
                res->headers[out] = *f;
            out++;
            break;
        }
    }
    res->nheaders = out;
    return length;
}
