/* Log field names prepared at load (ABI 1.13: keel_log_name_prepare,
 * keel_request_set_log_field_named): checked as keel_request_set_log_field
 * checks a name, and a field set by one is the field of that name,
 * whichever way it was set first (one field, its first position, the last
 * value), its name pointing at the prepared one. A bare request, no
 * server: only its arena and log fields are used. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "http/http.h"

static keel_request *bare_request(void)
{
    keel_request *req = calloc(1, sizeof *req);
    cr_assert_not_null(req);
    req->arena.at = req->inline_arena;
    req->arena.end = req->inline_arena + sizeof req->inline_arena;
    return req;
}

static void bare_free(keel_request *req)
{
    void *b = req->arena.blocks; /* each block starts with the next one's address */
    while (b != NULL) {
        void *next = *(void **)b;
        free(b);
        b = next;
    }
    free(req);
}

static keel_log_name *prepared(const char *name)
{
    keel_log_name *n = (keel_log_name *)1;
    int rc = kl_log_name_new(name, &n);
    if (rc != KEEL_OK) {
        cr_assert_null(n, "%s: *out NULL on an error", name);
        return NULL;
    }
    return n;
}

Test(log_names, checked_as_set_log_field_checks)
{
    static const char *good[] = {"upstream_status", "a", "x9_", "abcdefghijklmnopqrstuvwxyz012345"};
    static const char *bad[] = {"", "Upper", "with-dash", "sp ace",
                                "abcdefghijklmnopqrstuvwxyz0123456"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        keel_log_name *n = prepared(good[i]);
        cr_assert_not_null(n, "%s", good[i]);
        cr_assert_eq(n->name.len, strlen(good[i]));
        cr_assert_str_eq(n->name.ptr, good[i]);
        cr_assert(n->name.ptr != good[i], "a copy");
        kl_log_names_free(n);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_null(prepared(bad[i]), "'%s' taken", bad[i]);
    cr_assert_null(prepared(NULL));
    const keel_log_name *out = (const keel_log_name *)1;
    cr_assert_eq(keel_log_name_prepare(NULL, "a", &out), KEEL_ERR_INVAL);
    cr_assert_null(out);
}

Test(log_names, one_field_whichever_way_it_is_set)
{
    keel_request *req = bare_request();
    keel_log_name *status = prepared("upstream_status"), *addr = prepared("upstream_addr");
    cr_assert_eq(keel_request_set_log_field(req, "upstream_addr", "first", 5), KEEL_OK);
    cr_assert_eq(keel_request_set_log_field_named(req, status, "200", 3), KEEL_OK);
    cr_assert_eq(keel_request_set_log_field_named(req, addr, "10.0.0.1:80", 11), KEEL_OK);
    cr_assert_eq(keel_request_set_log_field(req, "upstream_status", "502", 3), KEEL_OK);
    cr_assert_eq(keel_request_set_log_field_named(req, status, NULL, 0), KEEL_OK);
    cr_assert_eq(keel_request_set_log_field_named(req, status, "504", 3), KEEL_OK);
    keel_header h;
    cr_assert_eq(keel_request_log_field_at(req, 0, &h), KEEL_OK);
    cr_assert(h.name.len == 13 && memcmp(h.name.ptr, "upstream_addr", 13) == 0);
    cr_assert(h.value.len == 11 && strcmp(h.value.ptr, "10.0.0.1:80") == 0);
    cr_assert_eq(keel_request_log_field_at(req, 1, &h), KEEL_OK);
    cr_assert(h.name.ptr == status->name.ptr, "the prepared name, not a copy");
    cr_assert(h.value.len == 3 && strcmp(h.value.ptr, "504") == 0);
    cr_assert_eq(keel_request_log_field_at(req, 2, &h), KEEL_ERR_NOTFOUND);
    keel_str v = keel_request_log_field(req, "upstream_status");
    cr_assert(v.len == 3 && memcmp(v.ptr, "504", 3) == 0);
    bare_free(req);
    kl_log_names_free(status);
    kl_log_names_free(addr);
}

Test(log_names, argument_errors)
{
    keel_request *req = bare_request();
    keel_log_name *n = prepared("user");
    static char big[4097];
    cr_assert_eq(keel_request_set_log_field_named(NULL, n, "v", 1), KEEL_ERR_INVAL);
    cr_assert_eq(keel_request_set_log_field_named(req, NULL, "v", 1), KEEL_ERR_INVAL);
    cr_assert_eq(keel_request_set_log_field_named(req, n, NULL, 1), KEEL_ERR_INVAL);
    cr_assert_eq(keel_request_set_log_field_named(req, n, big, sizeof big), KEEL_ERR_INVAL);
    cr_assert_eq(keel_request_set_log_field_named(req, n, big, sizeof big - 1), KEEL_OK);
    req->logged = 1;
    cr_assert_eq(keel_request_set_log_field_named(req, n, "v", 1), KEEL_ERR_STATE);
    keel_str v = keel_request_log_field(req, "user");
    cr_assert_eq(v.len, 4096, "the last value set before the log phase");
    bare_free(req);
    kl_log_names_free(n);
}
