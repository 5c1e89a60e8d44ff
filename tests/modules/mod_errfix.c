/* errfix — the errors an error page may stand for (test_errors.c):
 *     GET /fail/status/NNN  keel_response_send_status(NNN)
 *     GET /fail/return      the handler returns an error: the core's 500
 *     GET /fail/own         a 500 with the handler's own body, which an
 *                           error page must leave alone
 *     GET /fail/page        answers its own path, for an error page that a
 *                           handler (not a file) serves
 *     POST /fail/body       reads the body with a 16-byte limit: the core's
 *                           413 past it */
#include <keel/keel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail_status(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    keel_str p = keel_request_path(req);
    int code = p.len == 16 ? atoi(p.ptr + 13) : 0;   /* "/fail/status/NNN" */
    keel_response_header_set(res, "X-Dropped", "1"); /* send_status starts afresh */
    return keel_response_send_status(res, code >= 400 && code <= 599 ? code : 500);
}

static int fail_return(keel_request *req, keel_response *res, void *ud)
{
    (void)req, (void)res, (void)ud;
    return KEEL_ERR_IO;
}

static int fail_own(keel_request *req, keel_response *res, void *ud)
{
    (void)req, (void)ud;
    keel_response_set_status(res, 500);
    keel_response_header_set(res, "Content-Type", "text/plain");
    return keel_response_send_copy(res, "own body\n", 9);
}

static int fail_page(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    keel_str m = keel_request_method(req), q = keel_request_query(req);
    char text[256];
    int n = snprintf(text, sizeof text, "page for %.*s query=%.*s\n", (int)m.len, m.ptr,
                     q.ptr ? (int)q.len : 1, q.ptr ? q.ptr : "-");
    keel_response_header_set(res, "Content-Type", "text/plain");
    return keel_response_send_copy(res, text, (size_t)n);
}

static void body_read(keel_request *req, int status, void *ud)
{
    keel_response *res = ud;
    (void)req;
    if (status == KEEL_OK) /* KEEL_ERR_LIMIT: the core is answering 413 */
        keel_response_send_copy(res, "read\n", 5);
}

static int fail_body(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    return keel_request_read_body(req, 16, body_read, res);
}

static int errfix_load(keel_module *m)
{
    int rc;
    if ((rc = keel_route_add(m, "GET", "/fail/status/*", fail_status, NULL)) < 0 ||
        (rc = keel_route_add(m, "GET", "/fail/return", fail_return, NULL)) < 0 ||
        (rc = keel_route_add(m, "GET", "/fail/own", fail_own, NULL)) < 0 ||
        (rc = keel_route_add(m, "GET", "/fail/page", fail_page, NULL)) < 0 ||
        (rc = keel_route_add(m, "POST", "/fail/body", fail_body, NULL)) < 0)
        return rc;
    return KEEL_OK;
}

KEEL_MODULE(errfix, .version = "1.0.0", .load = errfix_load);
