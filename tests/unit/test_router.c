/* The router's matching rules: literal over parameter over wildcard,
 * backtracking across methods, 404 versus 405 with Allow, HEAD served by
 * GET routes, and the registration errors. */
#include <criterion/criterion.h>

#include <string.h>

#include "http/http.h"

static int h_root, h_users, h_user, h_user_post, h_me, h_files, h_any, h_deep;

static int handler(keel_request *req, keel_response *res, void *ud)
{
    (void)req;
    (void)res;
    (void)ud;
    return 0;
}

static kl_route_node *routes;

static void add(const char *method, const char *pattern, int *tag)
{
    cr_assert_eq(kl_router_add(&routes, method, pattern, handler, tag), KEEL_OK, "%s %s", method,
                 pattern);
}

static void setup(void)
{
    routes = NULL;
    add("GET", "/", &h_root);
    add("GET", "/users", &h_users);
    add("GET", "/users/:id", &h_user);
    add("POST", "/users/:id", &h_user_post);
    add("GET", "/users/me", &h_me);
    add("GET", "/files/*", &h_files);
    add("*", "/any", &h_any);
    add("GET", "/a/:x/c/:y", &h_deep);
}

static void teardown(void)
{
    kl_router_free(routes);
}

static keel_str S(const char *s)
{
    return (keel_str){s, strlen(s)};
}

static int match(const char *method, const char *path, kl_route_match *m)
{
    return kl_router_match(routes, S(method), S(path), m);
}

static keel_str param(kl_route_match *m, const char *name)
{
    for (size_t i = 0; i < m->nparams; i++)
        if (m->names[i].len == strlen(name) && memcmp(m->names[i].ptr, name, m->names[i].len) == 0)
            return m->values[i];
    return (keel_str){NULL, 0};
}

static void expect_str(keel_str s, const char *want)
{
    cr_assert_not_null(s.ptr, "missing, expected '%s'", want);
    cr_expect(s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0, "got '%.*s', want '%s'",
              (int)s.len, s.ptr, want);
}

TestSuite(router, .init = setup, .fini = teardown, .timeout = 10);

Test(router, literal_beats_parameter)
{
    kl_route_match m;
    cr_assert_eq(match("GET", "/users/me", &m), 200);
    cr_expect_eq(m.userdata, &h_me);
    cr_assert_eq(match("GET", "/users/42", &m), 200);
    cr_expect_eq(m.userdata, &h_user);
    expect_str(param(&m, "id"), "42");
}

Test(router, root_and_exact_paths)
{
    kl_route_match m;
    cr_assert_eq(match("GET", "/", &m), 200);
    cr_expect_eq(m.userdata, &h_root);
    cr_assert_eq(match("GET", "/users", &m), 200);
    cr_expect_eq(m.userdata, &h_users);
    cr_expect_eq(match("GET", "/users/", &m), 404, "a trailing slash is a different path");
    cr_expect_eq(match("GET", "/nothing", &m), 404);
}

Test(router, backtracks_to_a_route_with_the_method)
{
    kl_route_match m;
    /* /users/me has only GET; POST falls back to /users/:id */
    cr_assert_eq(match("POST", "/users/me", &m), 200);
    cr_expect_eq(m.userdata, &h_user_post);
    expect_str(param(&m, "id"), "me");
}

Test(router, method_not_allowed_lists_allow)
{
    kl_route_match m;
    cr_assert_eq(match("DELETE", "/users", &m), 405);
    cr_expect_str_eq(m.allow, "GET, HEAD");
    cr_assert_eq(match("PUT", "/users/7", &m), 405);
    cr_expect(strstr(m.allow, "GET") && strstr(m.allow, "POST"), "allow: %s", m.allow);
}

Test(router, head_uses_get_routes)
{
    kl_route_match m;
    cr_assert_eq(match("HEAD", "/users", &m), 200);
    cr_expect_eq(m.userdata, &h_users);
}

Test(router, wildcard_takes_the_rest)
{
    kl_route_match m;
    cr_assert_eq(match("GET", "/files/a/b/c.txt", &m), 200);
    cr_expect_eq(m.userdata, &h_files);
    expect_str(param(&m, "*"), "a/b/c.txt");
}

Test(router, any_method_route)
{
    kl_route_match m;
    cr_assert_eq(match("PATCH", "/any", &m), 200);
    cr_expect_eq(m.userdata, &h_any);
}

Test(router, several_parameters)
{
    kl_route_match m;
    cr_assert_eq(match("GET", "/a/1/c/2", &m), 200);
    cr_expect_eq(m.userdata, &h_deep);
    expect_str(param(&m, "x"), "1");
    expect_str(param(&m, "y"), "2");
    cr_expect_eq(match("GET", "/a/1/d/2", &m), 404);
}

Test(router, registration_errors)
{
    cr_expect_eq(kl_router_add(&routes, "GET", "/users", handler, NULL), KEEL_ERR_EXISTS);
    cr_expect_eq(kl_router_add(&routes, "GET", "/users/:other", handler, NULL), KEEL_ERR_EXISTS,
                 "one parameter name per position");
    cr_expect_eq(kl_router_add(&routes, "GET", "no-slash", handler, NULL), KEEL_ERR_INVAL);
    cr_expect_eq(kl_router_add(&routes, "GET", "/x/*/y", handler, NULL), KEEL_ERR_INVAL);
    cr_expect_eq(kl_router_add(&routes, "G E T", "/x", handler, NULL), KEEL_ERR_INVAL);
    cr_expect_eq(kl_router_add(&routes, "GET", "/x//y", handler, NULL), KEEL_ERR_INVAL);
    cr_expect_eq(kl_router_add(&routes, "GET", "/x", NULL, NULL), KEEL_ERR_INVAL);
}
