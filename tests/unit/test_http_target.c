/* Request-target handling: percent-decoding, dot segments, absolute-form,
 * the query, and the targets that must be refused with 400. */
#include <criterion/criterion.h>

#include <string.h>

#include "http/http.h"

static int parse(const char *target, keel_request *req)
{
    memset(req, 0, sizeof *req);
    req->arena.at = req->inline_arena;
    req->arena.end = req->inline_arena + sizeof req->inline_arena;
    req->head.target = (keel_str){target, strlen(target)};
    return kl_request_parse_target(req);
}

static void expect_path(const char *target, const char *path)
{
    keel_request req;
    cr_assert_eq(parse(target, &req), 0, "target %s", target);
    cr_expect(req.path.len == strlen(path) && memcmp(req.path.ptr, path, req.path.len) == 0,
              "%s: got '%.*s', want '%s'", target, (int)req.path.len, req.path.ptr, path);
}

static void expect_refused(const char *target)
{
    keel_request req;
    cr_expect_eq(parse(target, &req), 400, "%s must be refused", target);
}

Test(target, plain_paths_are_views, .timeout = 10)
{
    keel_request req;
    const char *t = "/a/b?x=1";
    cr_assert_eq(parse(t, &req), 0);
    cr_expect_eq(req.path.ptr, t, "no copy for a plain path");
    cr_expect_eq(req.path.len, 4);
    cr_expect(req.query.len == 3 && memcmp(req.query.ptr, "x=1", 3) == 0);
}

Test(target, percent_decoding, .timeout = 10)
{
    expect_path("/a%20b", "/a b");
    expect_path("/%41%42c", "/ABc");
    expect_path("/a+b", "/a+b"); /* '+' is literal in paths */
}

Test(target, dot_segments, .timeout = 10)
{
    expect_path("/a/./b", "/a/b");
    expect_path("/a/b/../c", "/a/c");
    expect_path("/a/b/..", "/a/");
    expect_path("/a/%2e%2e/b", "/b");
    expect_path("/.", "/");
}

/* Runs of '/' are one (nginx's merge_slashes): a path scope [/admin/] must
 * hold "//admin/x", which a file system reads as "/admin/x". */
Test(target, doubled_slashes_merged, .timeout = 10)
{
    expect_path("//admin/x", "/admin/x");
    expect_path("/%2Fadmin/x", "/admin/x");
    expect_path("/a///b//", "/a/b/");
    expect_path("//", "/");
    expect_path("/a//../b", "/b");
    expect_path("http://h//a", "/a");
    expect_refused("//..");
}

Test(target, absolute_form, .timeout = 10)
{
    expect_path("http://example.com/x/y?q", "/x/y");
    expect_path("http://example.com", "/");
}

Test(target, refused, .timeout = 10)
{
    expect_refused("/..");
    expect_refused("/a/../..");
    expect_refused("/%2e%2e/etc/passwd");
    expect_refused("/a%00b");
    expect_refused("/a%zz");
    expect_refused("/a%4");
    expect_refused("ftp:/x");
}

Test(target, asterisk_form, .timeout = 10)
{
    expect_path("*", "*");
}

/* A raw NUL in a target that needs no decoding stayed in the path (found
 * by tests/fuzz/fuzz_target): "/a\0xG" was routed as itself and read as
 * "/a" by any C-string consumer. Any NUL is refused, in the path or the
 * query. */
static int parse_n(const char *target, size_t len, keel_request *req)
{
    memset(req, 0, sizeof *req);
    req->arena.at = req->inline_arena;
    req->arena.end = req->inline_arena + sizeof req->inline_arena;
    req->head.target = (keel_str){target, len};
    return kl_request_parse_target(req);
}

Test(target, raw_nul_refused, .timeout = 10)
{
    keel_request req;
    static const char path[] = "/a\0\0\0\0xG\377&y=2";
    cr_expect_eq(parse_n(path, sizeof path - 1, &req), 400, "NUL in a plain path");
    static const char query[] = "/a?x=\0";
    cr_expect_eq(parse_n(query, sizeof query - 1, &req), 400, "NUL in the query");
    static const char absolute[] = "http://h\0/a";
    cr_expect_eq(parse_n(absolute, sizeof absolute - 1, &req), 400, "NUL in the authority");
    static const char escaped_then_query[] = "/a%41//b?x=\0";
    cr_expect_eq(parse_n(escaped_then_query, sizeof escaped_then_query - 1, &req), 400,
                 "NUL in the query after a path to decode");
    static const char ok[] = "/a?x=1";
    cr_expect_eq(parse_n(ok, sizeof ok - 1, &req), 0);
    static const char dot_before_query[] = "/a/.?x=1";
    cr_expect_eq(parse_n(dot_before_query, sizeof dot_before_query - 1, &req), 0);
    cr_expect(req.path.len == 3 && memcmp(req.path.ptr, "/a/", 3) == 0, "got '%.*s'",
              (int)req.path.len, req.path.ptr);
}
