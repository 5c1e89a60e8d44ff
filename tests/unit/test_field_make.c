/* keel_field_make and keel_field_free (ABI 1.12): a prepared field made at
 * run time is checked as keel_field_prepare checks one (token names, no
 * control byte but HTAB in values, the protocol's own fields refused) and
 * laid out the same way: the views, the whole field line HTTP/1.1 copies,
 * the name's token HTTP/2 classifies by. Any thread: made and freed here
 * on the test's, outside any server. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>

#include "http/http.h"

static const keel_prepared_field *make(const char *name, const char *value, size_t value_len)
{
    const keel_prepared_field *f = (const keel_prepared_field *)1;
    int rc = keel_field_make(name, strlen(name), value, value_len, &f);
    if (rc != KEEL_OK) {
        cr_assert_null(f, "%s: *out must be NULL on an error", name);
        return NULL;
    }
    cr_assert_not_null(f);
    return f;
}

Test(field_make, laid_out_as_a_prepared_field)
{
    const char value[] = "\"6b1321b4.24d1e8ee-c\"";
    const keel_prepared_field *f = make("ETag", value, strlen(value));
    cr_assert_not_null(f);
    const kl_field *k = &f->field;
    cr_assert_eq(k->name.len, 4);
    cr_assert(memcmp(k->name.ptr, "ETag", 4) == 0 && k->name.ptr[4] == '\0');
    cr_assert_eq(k->value.len, strlen(value));
    cr_assert(memcmp(k->value.ptr, value, strlen(value)) == 0 &&
              k->value.ptr[k->value.len] == '\0');
    const char line[] = "ETag: \"6b1321b4.24d1e8ee-c\"\r\n";
    cr_assert_eq(k->line_len, strlen(line));
    cr_assert(memcmp(k->line, line, strlen(line)) == 0, "line: %.*s", (int)k->line_len, k->line);
    cr_assert_eq(k->token, KEEL_HDR_ETAG + 1);
    /* The name as written, classified in any case; an unknown one has
     * token 1 + KEEL_HDR_UNKNOWN. */
    const keel_prepared_field *g = make("last-modified", "Fri, 04 Dec 2026 20:25:24 GMT", 29);
    cr_assert_not_null(g);
    cr_assert(memcmp(g->field.line, "last-modified: Fri", 18) == 0);
    cr_assert_eq(g->field.token, KEEL_HDR_LAST_MODIFIED + 1);
    const keel_prepared_field *u = make("X-Made", "", 0);
    cr_assert_not_null(u, "an empty value is a value");
    cr_assert_eq(u->field.token, KEEL_HDR_UNKNOWN + 1);
    cr_assert_eq(u->field.line_len, 10);
    cr_assert(memcmp(u->field.line, "X-Made: \r\n", 10) == 0);
    keel_field_free(f);
    keel_field_free(g);
    keel_field_free(u);
    keel_field_free(NULL);
}

Test(field_make, the_value_is_its_length_not_a_string)
{
    /* Not NUL-terminated: the bytes after value_len are not read. */
    const char buf[] = "abc\r\nInjected: 1";
    const keel_prepared_field *f = make("X-Part", buf, 3);
    cr_assert_not_null(f);
    cr_assert_eq(f->field.value.len, 3);
    cr_assert(memcmp(f->field.line, "X-Part: abc\r\n", 13) == 0);
    keel_field_free(f);
}

Test(field_make, values_that_may_not_be_sent)
{
    /* RFC 9110 5.5: no CR, LF, NUL or other control byte but HTAB (and
     * DEL): a splitting attempt is refused, never cut. */
    static const char *const bad[] = {"a\r\nInjected: 1", "a\nb", "a\rb", "a\x01", "\x7f"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_null(make("X-Bad", bad[i], strlen(bad[i])), "value %zu", i);
    cr_assert_null(make("X-Bad", "a\0b", 3), "a NUL inside");
    for (int c = 0; c < 256; c++) {
        char v[3] = {'a', (char)c, 'b'};
        int ok = c == '\t' || (c >= 0x20 && c != 0x7f);
        const keel_prepared_field *f = make("X-Byte", v, 3);
        cr_assert_eq(f != NULL, ok, "byte 0x%02x", c);
        keel_field_free(f);
    }
}

Test(field_make, names_that_may_not_be_sent)
{
    static const char *const bad[] = {"Bad Name", "X:Y", "X\tY", "(x)", "X\r\nY", "é"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_null(make(bad[i], "v", 1), "name %s", bad[i]);
    cr_assert_null(make("", "v", 1), "an empty name");
    const keel_prepared_field *f = (const keel_prepared_field *)1;
    cr_assert_eq(keel_field_make("X\0Y", 3, "v", 1, &f), KEEL_ERR_INVAL);
    cr_assert_null(f, "a NUL inside the name");
}

Test(field_make, the_protocols_fields_are_refused)
{
    /* As keel_field_prepare: framing, the connection's fields, Date. */
    static const char *const owned[] = {"Content-Length", "Transfer-Encoding", "Connection",
                                        "Keep-Alive",     "Proxy-Connection",  "TE",
                                        "Upgrade",        "Trailer",           "Date",
                                        "content-length"};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        cr_assert_null(make(owned[i], "1", 1), "%s", owned[i]);
}

Test(field_make, null_arguments)
{
    const keel_prepared_field *f = (const keel_prepared_field *)1;
    cr_assert_eq(keel_field_make(NULL, 1, "v", 1, &f), KEEL_ERR_INVAL);
    cr_assert_null(f);
    f = (const keel_prepared_field *)1;
    cr_assert_eq(keel_field_make("X", 1, NULL, 0, &f), KEEL_ERR_INVAL);
    cr_assert_null(f);
    cr_assert_eq(keel_field_make("X", 1, "v", 1, NULL), KEEL_ERR_INVAL);
}
