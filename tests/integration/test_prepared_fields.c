/* Prepared response fields (ABI 1.8: keel_field_prepare,
 * keel_response_field_add), through tests/modules/mod_prepared.c: the
 * fields reach the client as written, per scope, added or replacing; what
 * the core refuses to prepare (a name that is not a token, the framing
 * and connection fields, Date) stops `keel -t` with the file and line of
 * the value; preparing outside load is refused (the module's start checks
 * it, and the server would not start). */
#define _GNU_SOURCE
#include "harness.h"
#include "test_http.h"

#include <stdio.h>
#include <string.h>

#define BASE                                                                                       \
    "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n" KH_MODULE_PATH "modules = http1 "          \
    "prepared\n"

static void get(kh_proc *p, const char *host, ht_resp *r)
{
    char req[512];
    snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host);
    ht_roundtrip(p, req, r);
}

Test(prepared_fields, added_and_replacing_per_scope, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(BASE "[prepared]\nfield = X-One: 1\nfield = X-Two: two  words\n"
                               "field = X-Empty:\n"
                               "[site replace.test]\nprepared.replace = on\n"
                               "prepared.field = Content-Type: text/x-prepared\n"
                               "prepared.field = x-handler: prepared\n",
                          NULL, 1, 10000);
    ht_resp r = {0};
    get(p, "other.test", &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p, ht_header(&r, "X-One") && strcmp(ht_header(&r, "X-One"), "1") == 0, "X-One:\n%s",
              r.head);
    kh_assert(p, ht_header(&r, "X-Two") && strcmp(ht_header(&r, "X-Two"), "two  words") == 0,
              "X-Two:\n%s", r.head);
    kh_assert(p, ht_header(&r, "X-Empty") && ht_header(&r, "X-Empty")[0] == '\0', "X-Empty:\n%s",
              r.head);
    kh_assert(p, ht_header_count(&r, "X-Handler") == 1, "the handler's field:\n%s", r.head);
    ht_resp_free(&r);
    /* replace: the handler's Content-Type and X-Handler (another case of
     * the name) go; the prepared ones stand alone. */
    get(p, "replace.test", &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p,
              ht_header_count(&r, "Content-Type") == 1 &&
                  strcmp(ht_header(&r, "Content-Type"), "text/x-prepared") == 0,
              "Content-Type replaced:\n%s", r.head);
    kh_assert(p,
              ht_header_count(&r, "X-Handler") == 1 &&
                  strcmp(ht_header(&r, "X-Handler"), "prepared") == 0,
              "X-Handler replaced:\n%s", r.head);
    kh_assert(p, ht_header(&r, "X-One") == NULL, "the site's list replaces the section's");
    kh_assert(p,
              ht_header(&r, "Content-Length") && strcmp(ht_header(&r, "Content-Length"), "3") == 0,
              "framing untouched:\n%s", r.head);
    ht_resp_free(&r);
    kh_stop(p);
}

/* Each refused field, in the module's section or a scope: keel -t exits 1
 * naming the value's line. */
static const struct {
    const char *body;
    int line;
} refused[] = {
    {"[prepared]\nfield = Bad Name: v\n", 7},
    {"[prepared]\nfield = X-Ok: fine\nfield = Content-Length: 5\n", 8},
    {"[prepared]\nfield = Transfer-Encoding: chunked\n", 7},
    {"[prepared]\nfield = Connection: close\n", 7},
    {"[prepared]\nfield = Keep-Alive: timeout=5\n", 7},
    {"[prepared]\nfield = Upgrade: h2c\n", 7},
    {"[prepared]\nfield = Date: today\n", 7},
    {"[prepared]\nfield = : no name\n", 7},
    {"[site a.test]\nprepared.field = X-Fine: 1\n[site b.test]\nprepared.field = TE: trailers\n",
     9},
};

Test(prepared_fields, a_refused_field_names_its_line, .timeout = 120, .fini = kh_cleanup_all)
{
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char conf[2048], label[32];
        snprintf(conf, sizeof conf, "%s%s", BASE, refused[i].body);
        snprintf(label, sizeof label, "case %zu", i);
        kh_expect_refused(conf, refused[i].line, "keel_field_prepare refused the field", label);
    }
    /* The same fields, written right, pass. */
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn(BASE "[prepared]\nfield = X-Ok: fine\nfield = Vary: Origin\n", args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "keel -t exit status %d", status);
    kh_stop(p);
}

/* ABI 1.11: a scope's fields added in one keel_response_fields_add call
 * from a response head filter whose scope hook gave it the scope's data
 * (keel_http_filter.scope). With replace, a later field of a name takes
 * the earlier one's place (as that many keel_response_field_add calls);
 * without, both stay. The hook is asked once per struct, though a path
 * scope shares its site's; a scope without fields leaves the filter out;
 * the call's refusals (X-Batch-Error) change nothing. */
Test(prepared_fields, a_scopes_fields_in_one_call, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(BASE "[site batch.test]\nprepared.replace = on\n"
                               "prepared.head = X-Dup: 1\nprepared.head = x-dup: 2\n"
                               "prepared.head = X-Other: o\n"
                               "[site batch.test /p/]\n"
                               "[site keep.test]\nprepared.head = X-Dup: 1\n"
                               "prepared.head = X-Dup: 2\n",
                          NULL, 1, 10000);
    ht_resp r = {0};
    get(p, "batch.test", &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p, ht_header(&r, "X-Batch-Error") == NULL, "refusals:\n%s", r.head);
    kh_assert(p, ht_header_count(&r, "X-Dup") == 1 && strcmp(ht_header(&r, "X-Dup"), "2") == 0,
              "the later X-Dup replaces the earlier:\n%s", r.head);
    kh_assert(p, ht_header(&r, "X-Other") && strcmp(ht_header(&r, "X-Other"), "o") == 0,
              "X-Other:\n%s", r.head);
    kh_assert(p, ht_header(&r, "X-Scope-Asked") && strcmp(ht_header(&r, "X-Scope-Asked"), "1") == 0,
              "asked once for the site and its path scope:\n%s", r.head);
    kh_assert(p,
              ht_header(&r, "Content-Length") && strcmp(ht_header(&r, "Content-Length"), "3") == 0,
              "framing untouched:\n%s", r.head);
    ht_resp_free(&r);
    get(p, "keep.test", &r);
    kh_assert(p, ht_header(&r, "X-Batch-Error") == NULL, "refusals:\n%s", r.head);
    kh_assert(p, ht_header_count(&r, "X-Dup") == 2, "both X-Dup without replace:\n%s", r.head);
    ht_resp_free(&r);
    get(p, "other.test", &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p, ht_header(&r, "X-Head-Filter") == NULL && ht_header(&r, "X-Dup") == NULL,
              "no fields in this scope: the filter is not in its pipeline:\n%s", r.head);
    ht_resp_free(&r);
    kh_stop(p);
}

/* A scope hook's error fails the load (keel -t too), naming the filter. */
Test(prepared_fields, a_scope_hooks_error_stops_the_load, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *args[] = {"-t", NULL};
    kh_proc *p =
        kh_spawn(BASE "[site a.test]\nprepared.head = X-A: 1\nprepared.scope_error = on\n", args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status != 0, "keel -t exit status %d", status);
    kh_assert(p, strstr(kh_stderr(p), "filter 'prepared'") != NULL, "the filter named");
    kh_stop(p);
}

/* A module built for ABI 1.11 (mod_prepared.c targets it) loads on a 1.12
 * host, says so, and its 1.8 and 1.11 calls work as before. */
Test(prepared_fields, a_module_built_for_1_11_loads, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(
        "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\nlog_level = debug\n" KH_MODULE_PATH
        "modules = http1 prepared\n"
        "[prepared]\nfield = X-One: 1\nhead = X-Two: 2\n",
        NULL, 1, 10000);
    kh_assert(p, strstr(kh_stderr(p), "module 'prepared' 1.0.0 (ABI 1.11) loaded from") != NULL,
              "the load line");
    ht_resp r = {0};
    get(p, "a.test", &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p, ht_header(&r, "X-One") && strcmp(ht_header(&r, "X-One"), "1") == 0, "X-One:\n%s",
              r.head);
    kh_assert(p, ht_header(&r, "X-Two") && strcmp(ht_header(&r, "X-Two"), "2") == 0, "X-Two:\n%s",
              r.head);
    ht_resp_free(&r);
    kh_stop(p);
}
