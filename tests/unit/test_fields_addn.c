/* keel_response_fields_addn (ABI 1.13): fields the caller vouches for,
 * added in one call. The list it leaves is the one that many
 * keel_response_header_add calls leave (names, values, NUL-terminated
 * copies, order), with the tokens given kept; framing fields are taken
 * out at the head as header_add's are; the argument errors add nothing;
 * and what a caller vouches for (kl_field_vouched) is what header_add
 * would have accepted. The response lives in a bare request here, no
 * server: only its field list and arena are used. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

static keel_request *bare_request(void)
{
    keel_request *req = calloc(1, sizeof *req);
    cr_assert_not_null(req);
    req->arena.at = req->inline_arena;
    req->arena.end = req->inline_arena + sizeof req->inline_arena;
    req->res.req = req;
    req->res.headers = req->res.inline_headers;
    req->res.headers_cap = sizeof req->res.inline_headers / sizeof req->res.inline_headers[0];
    return req;
}

static void bare_free(keel_request *req)
{
    if (req->res.headers != req->res.inline_headers)
        free(req->res.headers);
    /* each arena block starts with the pointer to the next */
    void *b = req->arena.blocks;
    while (b != NULL) {
        void *next = *(void **)b;
        free(b);
        b = next;
    }
    free(req);
}

static keel_field view(const char *name, const char *value, unsigned token)
{
    return (keel_field){{name, strlen(name)}, {value, strlen(value)}, NULL, 0, token};
}

/* The same fields both ways: by name one at a time, and in one batch of
 * views that are not NUL-terminated where they lie. */
static const struct {
    const char *name, *value;
    unsigned token; /* 1 + keel_header_token, or 0: not classified */
} relayed[] = {
    {"Content-Type", "text/plain", KEEL_HDR_CONTENT_TYPE + 1},
    {"Content-Length", "13", KEEL_HDR_CONTENT_LENGTH + 1},
    {"X-Upstream", "a\tb \x80\xff", 1},
    {"x-not-classified", "", 0},
    {"Connection", "close", KEEL_HDR_CONNECTION + 1},
    {"Cache-Control", "no-cache", KEEL_HDR_CACHE_CONTROL + 1},
    {"Set-Cookie", "a=1", KEEL_HDR_SET_COOKIE + 1},
    {"Set-Cookie", "b=2", KEEL_HDR_SET_COOKIE + 1},
    {"Vary", "Accept-Encoding", KEEL_HDR_VARY + 1},
    {"Transfer-Encoding", "chunked", 0},
};
#define NRELAYED (sizeof relayed / sizeof relayed[0])

/* One buffer "name:valueXname:valueX...": every view is followed by a
 * byte that is not NUL, so a copy that stopped at a NUL would show. */
static char *packed(keel_field *out)
{
    char *buf = malloc(4096), *at = buf;
    cr_assert_not_null(buf);
    for (size_t i = 0; i < NRELAYED; i++) {
        size_t nl = strlen(relayed[i].name), vl = strlen(relayed[i].value);
        memcpy(at, relayed[i].name, nl);
        at[nl] = ':';
        memcpy(at + nl + 1, relayed[i].value, vl);
        at[nl + 1 + vl] = 'X';
        out[i] = (keel_field){{at, nl}, {at + nl + 1, vl}, NULL, 0, relayed[i].token};
        at += nl + vl + 2;
    }
    return buf;
}

Test(fields_addn, the_list_header_add_leaves)
{
    keel_request *by_name = bare_request(), *batched = bare_request();
    for (size_t i = 0; i < NRELAYED; i++)
        cr_assert_eq(keel_response_header_add(&by_name->res, relayed[i].name, relayed[i].value),
                     KEEL_OK);
    keel_field fields[NRELAYED];
    char *buf = packed(fields);
    cr_assert_eq(keel_response_fields_addn(&batched->res, fields, NRELAYED, 0), KEEL_OK);
    memset(buf, '!', 4096); /* copied during the call: the caller's bytes may go */
    free(buf);
    keel_response *a = &by_name->res, *b = &batched->res;
    cr_assert_eq(b->nheaders, NRELAYED);
    cr_assert_eq(a->nheaders, b->nheaders);
    cr_assert(b->headers != b->inline_headers, "grew past the inline list");
    for (size_t i = 0; i < NRELAYED; i++) {
        const kl_field *x = &a->headers[i], *y = &b->headers[i];
        cr_assert_eq(y->name.len, x->name.len, "%zu", i);
        cr_assert_eq(y->value.len, x->value.len, "%zu", i);
        cr_assert(memcmp(y->name.ptr, x->name.ptr, x->name.len + 1) == 0, "name %zu, NUL", i);
        cr_assert(memcmp(y->value.ptr, x->value.ptr, x->value.len + 1) == 0, "value %zu, NUL", i);
        cr_assert_null(y->line);
        cr_assert_eq(y->line_len, 0);
        cr_assert_eq(y->token, relayed[i].token, "%zu", i);
    }
    cr_assert(a->framing_fields && b->framing_fields);
    /* the declared length and the framing taken out the same way */
    cr_assert_eq(keel_response_header(b, "content-length").len, 2);
    int64_t la = kl_response_take_framing(a), lb = kl_response_take_framing(b);
    cr_assert_eq(la, 13);
    cr_assert_eq(lb, 13);
    cr_assert_eq(a->close_connection, 1);
    cr_assert_eq(b->close_connection, 1);
    cr_assert_eq(b->nheaders, NRELAYED - 3);
    cr_assert_eq(a->nheaders, b->nheaders);
    for (size_t i = 0; i < b->nheaders; i++)
        cr_assert(strcmp(a->headers[i].name.ptr, b->headers[i].name.ptr) == 0 &&
                      strcmp(a->headers[i].value.ptr, b->headers[i].value.ptr) == 0,
                  "%zu: %s", i, b->headers[i].name.ptr);
    bare_free(by_name);
    bare_free(batched);
}

/* Appended after what the list held, in order, with one arena copy. */
Test(fields_addn, appends_in_order)
{
    keel_request *req = bare_request();
    keel_response *res = &req->res;
    cr_assert_eq(keel_response_header_add(res, "X-First", "1"), KEEL_OK);
    keel_field two[] = {view("X-Second", "2", 0), view("X-Third", "3", 1)};
    cr_assert_eq(keel_response_fields_addn(res, two, 2, 0), KEEL_OK);
    cr_assert_eq(keel_response_header_count(res), 3);
    const char *names[] = {"X-First", "X-Second", "X-Third"};
    for (size_t i = 0; i < 3; i++) {
        keel_header h;
        cr_assert_eq(keel_response_header_at(res, i, &h), KEEL_OK);
        cr_assert(h.name.len == strlen(names[i]) && memcmp(h.name.ptr, names[i], h.name.len) == 0);
    }
    cr_assert_eq(strcmp(keel_response_header(res, "x-third").ptr, "3"), 0);
    /* nothing that may be framing was added: the head is not looked at */
    cr_assert_eq(res->framing_fields, 0);
    bare_free(req);
}

/* Only a framing token (or, not classified, a framing name's length)
 * makes the head look for framing. */
Test(fields_addn, framing_by_token)
{
    static const struct {
        keel_field f;
        int framing;
    } cases[] = {
        {{{"Content-Length", 14}, {"0", 1}, NULL, 0, KEEL_HDR_CONTENT_LENGTH + 1}, 1},
        {{{"Transfer-Encoding", 17}, {"chunked", 7}, NULL, 0, KEEL_HDR_TRANSFER_ENCODING + 1}, 1},
        {{{"Connection", 10}, {"close", 5}, NULL, 0, KEEL_HDR_CONNECTION + 1}, 1},
        {{{"Keep-Alive", 10}, {"timeout=5", 9}, NULL, 0, KEEL_HDR_KEEP_ALIVE + 1}, 1},
        {{{"Proxy-Connection", 16}, {"close", 5}, NULL, 0, KEEL_HDR_PROXY_CONNECTION + 1}, 1},
        {{{"Content-Length", 14}, {"0", 1}, NULL, 0, 0}, 1},
        {{{"X-Fourteen-Abc", 14}, {"0", 1}, NULL, 0, 1}, 0},
        {{{"Content-Type", 12}, {"a/b", 3}, NULL, 0, KEEL_HDR_CONTENT_TYPE + 1}, 0},
        {{{"Accept-Ranges", 13}, {"bytes", 5}, NULL, 0, 0}, 0},
        /* a token past this host's list (a newer module's) counts as 0 */
        {{{"Content-Length", 14}, {"0", 1}, NULL, 0, KEEL_HDR_COUNT_ + 1}, 1},
        {{{"X-Newer-Name", 12}, {"v", 1}, NULL, 0, KEEL_HDR_COUNT_ + 5}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        keel_request *req = bare_request();
        cr_assert_eq(keel_response_fields_addn(&req->res, &cases[i].f, 1, 0), KEEL_OK);
        cr_assert_eq(req->res.framing_fields != 0, cases[i].framing, "%zu: %s", i,
                     cases[i].f.name.ptr);
        unsigned kept = cases[i].f.token <= KEEL_HDR_COUNT_ ? cases[i].f.token : 0;
        cr_assert_eq(req->res.headers[0].token, kept, "%zu: the token kept", i);
        if (cases[i].framing) {
            kl_response_take_framing(&req->res);
            cr_assert_eq(req->res.nheaders, 0, "%zu: taken out", i);
        }
        bare_free(req);
    }
}

Test(fields_addn, argument_errors_add_nothing)
{
    keel_request *req = bare_request();
    keel_response *res = &req->res;
    keel_field one = view("X-A", "1", 0);
    cr_assert_eq(keel_response_fields_addn(NULL, &one, 1, 0), KEEL_ERR_INVAL);
    cr_assert_eq(keel_response_fields_addn(res, NULL, 1, 0), KEEL_ERR_INVAL);
    cr_assert_eq(keel_response_fields_addn(res, &one, 1, 1), KEEL_ERR_INVAL);
    cr_assert_eq(res->nheaders, 0);
    cr_assert_eq(keel_response_fields_addn(res, NULL, 0, 0), KEEL_OK);
    cr_assert_eq(keel_response_fields_addn(res, &one, 0, 0), KEEL_OK);
    cr_assert_eq(res->nheaders, 0);
    res->head_sent = 1;
    cr_assert_eq(keel_response_fields_addn(res, &one, 1, 0), KEEL_ERR_STATE);
    cr_assert_eq(res->nheaders, 0);
    bare_free(req);
}

/* What the caller vouches for is what keel_response_header_add accepts:
 * every byte in a name and a value, and the token. */
Test(fields_addn, vouched_is_what_header_add_accepts)
{
    for (int c = 1; c < 256; c++) {
        char name[] = "X-Ab", value[] = "a b";
        name[2] = (char)c;
        value[1] = (char)c;
        keel_field n = view(name, "v", 0), v = view("X-Ab", value, 0);
        cr_assert_eq(kl_field_vouched(&n), kl_field_name_length(name) == 4, "name byte 0x%02x", c);
        cr_assert_eq(kl_field_vouched(&v), kl_field_value_length(value) == 3, "value byte 0x%02x",
                     c);
    }
    keel_field nul_value = {{"X-A", 3}, {"a\0b", 3}, NULL, 0, 0};
    keel_field nul_name = {{"X\0A", 3}, {"v", 1}, NULL, 0, 0};
    keel_field empty_name = {{"", 0}, {"v", 1}, NULL, 0, 0};
    keel_field empty_value = {{"X-A", 3}, {NULL, 0}, NULL, 0, 0};
    keel_field right_token = view("content-type", "a/b", KEEL_HDR_CONTENT_TYPE + 1);
    keel_field unknown_token = view("X-A", "v", KEEL_HDR_UNKNOWN + 1);
    keel_field wrong_token = view("Content-Type", "a/b", KEEL_HDR_CONTENT_LENGTH + 1);
    keel_field not_unknown = view("Content-Type", "a/b", KEEL_HDR_UNKNOWN + 1);
    cr_assert(!kl_field_vouched(&nul_value));
    cr_assert(!kl_field_vouched(&nul_name));
    cr_assert(!kl_field_vouched(&empty_name));
    cr_assert(kl_field_vouched(&empty_value));
    cr_assert(kl_field_vouched(&right_token));
    cr_assert(kl_field_vouched(&unknown_token));
    cr_assert(!kl_field_vouched(&wrong_token));
    cr_assert(!kl_field_vouched(&not_unknown));
    keel_field newer = view("X-Newer-Name", "v", KEEL_HDR_COUNT_ + 1);
    cr_assert(kl_field_vouched(&newer), "a token this host does not have is taken as 0");
}
