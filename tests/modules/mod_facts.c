/* facts — what a handler knows of its request's connection through the
 * request-scoped calls of ABI 1.7 (keel_request_peer_name, _peer_ip,
 * _scheme, _transport_name, _conn_id), over any HTTP protocol. Serves
 * test_request_facts.c. Each line it logs (INFO) is
 *
 *     facts WHEN TARGET: peer=NAME ip=IP scheme=S transport=T conn=ID request_conn=C
 *
 * (NAME and IP "?" with the status's name when the call failed, T "-" for
 * plain TCP, C "set" or "null": what keel_request_conn says).
 *
 * Routes:
 *   GET /facts        logs "facts now", answers 200 "ok"
 *   GET /facts/hold   logs "facts held", asks nothing else, and never
 *                     answers: the client leaves, and the abort callback
 *                     logs "facts after abort" (the facts are first asked
 *                     then, after the connection, or the stream, is gone)
 *   GET /facts/later  answers 200 "ok" at once, but first starts an
 *                     offload (?ms=N on the pool, default 300) whose done
 *                     logs "facts offloaded": the request outlives its
 *                     exchange, and its connection if the client leaves
 *   GET /facts/fields sets log fields (ABI 1.8): tenant=acme, status=mine
 *                     (a name the access log's JSON has), tenant again
 *                     (=acme2, replacing), and tries the refused ones;
 *                     answers what each call returned and what the
 *                     getters see, one "name=value" a line
 *   GET /facts/cred   answers the peer's credentials (ABI 1.9,
 *                     keel_request_peer_cred) and address:
 *                     "uid=U gid=G pid=P peer=NAME ip=IP", or
 *                     "cred=ERROR peer=NAME ip=IP" when the call failed
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <keel/keel.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(_WIN32)
#include <windows.h>
#endif

static keel_module *self;

static void log_facts(keel_request *req, const char *when)
{
    char name[64], ip[64];
    int rc = keel_request_peer_name(req, name, sizeof name);
    if (rc != KEEL_OK)
        snprintf(name, sizeof name, "?%s", keel_strerror(rc));
    rc = keel_request_peer_ip(req, ip, sizeof ip);
    if (rc != KEEL_OK)
        snprintf(ip, sizeof ip, "?%s", keel_strerror(rc));
    const char *transport = keel_request_transport_name(req);
    keel_str target = keel_request_target(req);
    keel_log(self, KEEL_LOG_INFO,
             "facts %s %.*s: peer=%s ip=%s scheme=%s transport=%s conn=%llu request_conn=%s", when,
             (int)target.len, target.ptr, name, ip, keel_request_scheme(req),
             transport != NULL ? transport : "-", (unsigned long long)keel_request_conn_id(req),
             keel_request_conn(req) != NULL ? "set" : "null");
}

static int facts_now(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    log_facts(req, "now");
    keel_log(self, KEEL_LOG_INFO, "facts body_limit=%llu",
             (unsigned long long)keel_request_body_limit(req));
    return keel_response_send(res, "ok", 2, NULL, NULL);
}

static int facts_cred(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    uint32_t uid = 0, gid = 0;
    int64_t pid = 0;
    char name[64] = "", ip[64] = "", out[256];
    keel_request_peer_name(req, name, sizeof name);
    keel_request_peer_ip(req, ip, sizeof ip);
    int rc = keel_request_peer_cred(req, &uid, &gid, &pid);
    int n = rc == KEEL_OK
                ? snprintf(out, sizeof out, "uid=%lu gid=%lu pid=%lld peer=%s ip=%s",
                           (unsigned long)uid, (unsigned long)gid, (long long)pid, name, ip)
                : snprintf(out, sizeof out, "cred=%s peer=%s ip=%s", keel_strerror(rc), name, ip);
    return keel_response_send(res, out, (size_t)n, NULL, NULL);
}

static void on_abort(keel_request *req, void *userdata)
{
    (void)userdata;
    log_facts(req, "after abort");
}

static int facts_hold(keel_request *req, keel_response *res, void *userdata)
{
    (void)res;
    (void)userdata;
    keel_request_on_abort(req, on_abort, NULL);
    keel_log(self, KEEL_LOG_INFO, "facts held");
    return KEEL_OK;
}

static void sleep_ms(void *userdata)
{
    uint64_t ms = (uint64_t)(uintptr_t)userdata;
#if defined(_WIN32)
    Sleep((DWORD)ms);
#else
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
#endif
}

static void offloaded(keel_request *req, int status, void *userdata)
{
    (void)status;
    (void)userdata;
    log_facts(req, "offloaded");
}

static int facts_later(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    keel_str ms;
    uint64_t wait = 300;
    if (keel_request_query_param(req, "ms", &ms) == KEEL_OK)
        wait = (uint64_t)strtoull(ms.ptr, NULL, 10);
    int rc = keel_offload(req, sleep_ms, offloaded, (void *)(uintptr_t)wait);
    if (rc != KEEL_OK)
        return rc;
    return keel_response_send(res, "ok", 2, NULL, NULL);
}

static int facts_fields(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    char out[512], long_value[4097];
    memset(long_value, 'v', sizeof long_value);
    /* One call after the other (the order of a call's arguments is not). */
    int rc[10];
    rc[0] = keel_request_set_log_field(req, "tenant", "acme", 4);
    rc[1] = keel_request_set_log_field(req, "status", "mine", 4);
    rc[2] = keel_request_set_log_field(req, "tenant", "acme2", 5);
    rc[3] = keel_request_set_log_field(req, "", "x", 1);
    rc[4] = keel_request_set_log_field(req, "Upper", "x", 1);
    rc[5] = keel_request_set_log_field(req, "a-b", "x", 1);
    rc[6] = keel_request_set_log_field(req, "n23456789012345678901234567890123", "x", 1);
    rc[7] = keel_request_set_log_field(req, "nullvalue", NULL, 1);
    rc[8] = keel_request_set_log_field(req, "toolong", long_value, sizeof long_value);
    rc[9] = keel_request_set_log_field(req, "n2345678901234567890123456789012", long_value,
                                       sizeof long_value - 1);
    int n = snprintf(out, sizeof out,
                     "set=%d,%d,%d\nbad_name=%d,%d,%d,%d\nnull_value=%d\ntoo_long=%d\nmax_len=%d\n",
                     rc[0], rc[1], rc[2], rc[3], rc[4], rc[5], rc[6], rc[7], rc[8], rc[9]);
    keel_str t = keel_request_log_field(req, "tenant"), none = keel_request_log_field(req, "none");
    n += snprintf(out + n, sizeof out - (size_t)n, "tenant=%.*s\nnone=%s\n", (int)t.len, t.ptr,
                  none.ptr == NULL ? "null" : "set");
    keel_header f;
    for (size_t i = 0; keel_request_log_field_at(req, i, &f) == KEEL_OK; i++)
        n += snprintf(out + n, sizeof out - (size_t)n, "at%u=%.*s:%u\n", (unsigned)i,
                      (int)f.name.len, f.name.ptr, (unsigned)f.value.len);
    return keel_response_send(res, out, (size_t)n, NULL, NULL);
}

static int facts_load(keel_module *module)
{
    self = module;
    int rc;
    if ((rc = keel_route_add(module, "GET", "/facts", facts_now, NULL)) < 0 ||
        (rc = keel_route_add(module, "GET", "/facts/cred", facts_cred, NULL)) < 0 ||
        (rc = keel_route_add(module, "GET", "/facts/hold", facts_hold, NULL)) < 0 ||
        (rc = keel_route_add(module, "GET", "/facts/later", facts_later, NULL)) < 0 ||
        (rc = keel_route_add(module, "GET", "/facts/fields", facts_fields, NULL)) < 0)
        return rc;
    return KEEL_OK;
}

KEEL_MODULE(facts, .version = "1.0.0", .load = facts_load);
