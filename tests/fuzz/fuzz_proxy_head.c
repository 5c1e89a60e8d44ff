/* fuzz_proxy_head — the proxy's fast reading of a plain upstream response
 * (modules/proxy/fasthead.c) against llhttp's, which reads every response
 * the fast path does not take. Both are pure here (no keel call), compiled
 * in alone with llhttp.
 *
 * The input is one read of an upstream's response. When px_fast_head_scan
 * takes it, llhttp must read the same bytes as one whole response ending
 * exactly at the read's end (on_message_complete pausing it, as
 * response.c's does), and say the same: the status, the fields in order
 * (each name and value byte for byte, llhttp's spans joined), the body,
 * whether the connection stays open; and no 1xx, 204, 304, upgrade or
 * Transfer-Encoding among what was taken. Each field's token must be
 * keel_header_token's of its name, and every offset lie within the head.
 * An input the fast path leaves is llhttp's alone: nothing to compare. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/header_tokens.h>
#include <llhttp.h>

#include "fasthead.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_proxy_head: " __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_FIELDS 64
#define MAX_BYTES  (1 << 16)

typedef struct seen {
    char names[MAX_FIELDS][MAX_BYTES / 8], values[MAX_FIELDS][MAX_BYTES / 8];
    size_t name_len[MAX_FIELDS], value_len[MAX_FIELDS];
    size_t nfields;
    int in_value;
    char body[MAX_BYTES];
    size_t body_len;
    int complete, overflow;
} seen;

static seen S;

static int on_message_begin(llhttp_t *p)
{
    (void)p;
    S.nfields = 0;
    S.in_value = 0;
    S.body_len = 0;
    return 0;
}

static void span(char *buf, size_t *len, size_t cap, const char *at, size_t n)
{
    if (*len + n > cap) {
        S.overflow = 1;
        return;
    }
    memcpy(buf + *len, at, n);
    *len += n;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    (void)p;
    if (S.nfields == 0 || S.in_value) {
        if (S.nfields == MAX_FIELDS) {
            S.overflow = 1;
            return 0;
        }
        S.name_len[S.nfields] = S.value_len[S.nfields] = 0;
        S.nfields++;
        S.in_value = 0;
    }
    span(S.names[S.nfields - 1], &S.name_len[S.nfields - 1], sizeof S.names[0], at, len);
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    (void)p;
    if (S.nfields == 0) {
        S.overflow = 1;
        return 0;
    }
    S.in_value = 1;
    span(S.values[S.nfields - 1], &S.value_len[S.nfields - 1], sizeof S.values[0], at, len);
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    (void)p;
    span(S.body, &S.body_len, sizeof S.body, at, len);
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    (void)p;
    S.complete = 1;
    return HPE_PAUSED;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fcgi_field fields[MAX_FIELDS];
    px_fast_head h;
    const char *d = (const char *)data;
    if (size > MAX_BYTES || !px_fast_head_scan(d, size, fields, MAX_FIELDS, &h))
        return 0;

    CHECK(h.head_len <= size && h.nfields <= MAX_FIELDS, "head %zu of %zu", h.head_len, size);
    CHECK(h.status >= 200 && h.status <= 599 && h.status != 204 && h.status != 304, "status %d",
          h.status);
    for (size_t i = 0; i < h.nfields; i++) {
        const fcgi_field *f = &fields[i];
        CHECK(f->name_len > 0 && f->name + f->name_len < h.head_len &&
                  f->value + f->value_len < h.head_len,
              "field %zu outside the head", i);
        CHECK(f->token == keel_header_token(d + f->name, f->name_len), "field %zu token", i);
        CHECK(f->token != KEEL_HDR_TRANSFER_ENCODING && f->token != KEEL_HDR_UPGRADE,
              "framing field %zu taken", i);
    }

    llhttp_settings_t settings;
    llhttp_settings_init(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_header_field = on_header_field;
    settings.on_header_value = on_header_value;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;
    llhttp_t parser;
    llhttp_init(&parser, HTTP_RESPONSE, &settings);
    S.complete = S.overflow = 0;
    S.nfields = 0;
    llhttp_errno_t err = llhttp_execute(&parser, d, size);
    CHECK(err == HPE_PAUSED && S.complete, "taken, but llhttp says %s (%s)", llhttp_errno_name(err),
          llhttp_get_error_reason(&parser) ? llhttp_get_error_reason(&parser) : "");
    CHECK(llhttp_get_error_pos(&parser) == d + size, "llhttp's response ends before the read's");
    CHECK(!S.overflow, "llhttp's spans out of bounds");
    CHECK(llhttp_get_status_code(&parser) == h.status, "status %d, llhttp %d", h.status,
          llhttp_get_status_code(&parser));
    CHECK(llhttp_get_upgrade(&parser) == 0, "llhttp sees an upgrade");
    CHECK(llhttp_should_keep_alive(&parser) == h.keep_alive, "keep-alive %d, llhttp %d",
          h.keep_alive, llhttp_should_keep_alive(&parser));
    CHECK(S.nfields == h.nfields, "%zu fields, llhttp %zu", h.nfields, S.nfields);
    for (size_t i = 0; i < h.nfields; i++) {
        const fcgi_field *f = &fields[i];
        CHECK(S.name_len[i] == f->name_len && memcmp(S.names[i], d + f->name, f->name_len) == 0,
              "field %zu's name", i);
        CHECK(S.value_len[i] == f->value_len &&
                  memcmp(S.values[i], d + f->value, f->value_len) == 0,
              "field %zu's value: [%.*s], llhttp [%.*s]", i, (int)f->value_len, d + f->value,
              (int)S.value_len[i], S.values[i]);
    }
    CHECK(S.body_len == size - h.head_len && memcmp(S.body, d + h.head_len, S.body_len) == 0,
          "body of %zu bytes, llhttp %zu", size - h.head_len, S.body_len);
    return 0;
}
