/* The checks on what a module may put in a response field (RFC 9110 5.1
 * and 5.5: http/response.c), against byte-at-a-time references: every byte
 * value, at every position of values long enough to cross the 8-byte words
 * the value check reads, so a word trick that missed a byte (response
 * splitting) would show. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>

#include "http/http.h"

static int ref_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int ref_value_ok(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

Test(http_fields, every_byte_in_a_name)
{
    for (int c = 1; c < 256; c++)
        for (size_t len = 1; len <= 12; len++)
            for (size_t at = 0; at < len; at++) {
                char name[16];
                memset(name, 'x', len);
                name[len] = '\0';
                name[at] = (char)c;
                size_t want = ref_tchar((unsigned char)c) ? len : 0;
                cr_assert_eq(kl_field_name_length(name), want, "byte 0x%02x at %zu of %zu", c, at,
                             len);
            }
    cr_assert_eq(kl_field_name_length(""), 0);
    cr_assert_eq(kl_field_name_length(NULL), 0);
}

Test(http_fields, every_byte_in_a_value)
{
    for (int c = 1; c < 256; c++)
        for (size_t len = 1; len <= 40; len++)
            for (size_t at = 0; at < len; at++) {
                char value[48];
                memset(value, 'v', len);
                value[len] = '\0';
                value[at] = (char)c;
                size_t want = ref_value_ok((unsigned char)c) ? len : SIZE_MAX;
                cr_assert_eq(kl_field_value_length(value), want, "byte 0x%02x at %zu of %zu", c, at,
                             len);
            }
    cr_assert_eq(kl_field_value_length(""), 0);
    cr_assert_eq(kl_field_value_length(NULL), SIZE_MAX);
}

/* Bytes that borrow in the word arithmetic (0x80 and up, just above the
 * bounds) next to the ones that must be caught. */
Test(http_fields, neighbours_do_not_hide_a_control_byte)
{
    static const unsigned char edges[] = {0x00, 0x1f, 0x20, 0x21, 0x7e, 0x7f, 0x80, 0x81, 0xff};
    for (size_t a = 0; a < sizeof edges; a++)
        for (size_t b = 0; b < sizeof edges; b++)
            for (size_t at = 0; at + 1 < 16; at++) {
                unsigned char value[17];
                memset(value, 'v', 16);
                value[16] = '\0';
                value[at] = edges[a] ? edges[a] : 'v';
                value[at + 1] = edges[b] ? edges[b] : 'v';
                int ok = ref_value_ok(value[at]) && ref_value_ok(value[at + 1]);
                size_t got = kl_field_value_length((const char *)value);
                cr_assert_eq(got, ok ? 16 : SIZE_MAX, "0x%02x 0x%02x at %zu", value[at],
                             value[at + 1], at);
            }
}
