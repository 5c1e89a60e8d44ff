/* upgrade — keel_response_upgrade end to end, for test_http_upgrade.c and
 * the upgrade-* protocol cases (tests/http/cases). Routes:
 *
 *   GET  /upgrade/:protocol        switches at once, from the handler
 *   GET  /later/:protocol[?ms=N]   switches from a timer (20 ms by default)
 *   GET  /offload/:protocol        switches from an offload's completion
 *   POST /upgrade/:protocol        switches without reading the body (refused)
 *   POST /read/:protocol[?ms=N]    reads the body whole, then switches (at
 *                                  once, or from a timer after N ms)
 *   GET  /begun/:protocol          streams a piece first, then tries (refused)
 *   GET  /status/:code             answers any status (for the reason phrases)
 *
 * Each sets "Upgrade: <protocol>" and asks to switch to the protocol of that
 * name. A refusal is answered normally, 200 "not upgraded: NAME\n" with
 * NAME the keel_status without its KEEL_ERR_ prefix, so a test sees which
 * refusal it was (and that the handler can still answer).
 *
 * Its filter's on_response_head adds "X-Head-Filter: <status>" to every
 * response and, seeing a 101, tries to change the status ("X-Set-Status:"
 * what that returned): the head filters of an upgrade run, cannot change
 * its status, and leave no trace on a refused upgrade's normal answer.
 *
 * "upper", the protocol switched to, writes its on_open arg (a greeting) and
 * then answers every line uppercased; "quit" closes. Its greeting proves the
 * 101 leaves before anything the new protocol writes, and its echo that the
 * bytes sent behind the request reach it exactly once. */
#include <keel/keel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char greeting[] = "upper ready\n";

/* ---- the protocol switched to ---------------------------------------------- */

static int upper_open(keel_conn *conn, void *arg)
{
    if (arg != NULL)
        return keel_conn_write_copy(conn, arg, strlen(arg));
    return KEEL_OK;
}

static int upper_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    char out[512];
    size_t at = 0;
    for (;;) {
        const char *nl = memchr(data + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (data + at)) + 1 : 0;
        if (n == 0 || n > sizeof out)
            break;
        if (n == 5 && memcmp(data + at, "quit\n", 5) == 0) {
            *consumed = len;
            keel_conn_close(conn);
            return KEEL_OK;
        }
        for (size_t i = 0; i < n; i++) {
            char ch = data[at + i];
            out[i] = ch >= 'a' && ch <= 'z' ? (char)(ch - 'a' + 'A') : ch;
        }
        int rc = keel_conn_write_copy(conn, out, n);
        if (rc != KEEL_OK)
            return rc;
        at += n;
    }
    *consumed = at; /* a partial line waits for the rest */
    return KEEL_OK;
}

static const keel_protocol upper = {
    .size = sizeof(keel_protocol),
    .name = "upper",
    .on_open = upper_open,
    .on_data = upper_data,
};

/* ---- switching --------------------------------------------------------------- */

static const char *status_name(int rc)
{
    switch (rc) {
    case KEEL_ERR_NOTFOUND:
        return "NOTFOUND";
    case KEEL_ERR_UNSUPPORTED:
        return "UNSUPPORTED";
    case KEEL_ERR_STATE:
        return "STATE";
    case KEEL_ERR_INVAL:
        return "INVAL";
    case KEEL_ERR_SHUTDOWN:
        return "SHUTDOWN";
    case KEEL_ERR_NOMEM:
        return "NOMEM";
    default:
        return "OTHER";
    }
}

/* The protocol named in the route, NUL-terminated in buf. */
static const char *protocol_of(keel_request *req, char *buf, size_t size)
{
    keel_str p = keel_request_param(req, "protocol");
    snprintf(buf, size, "%.*s", (int)p.len, p.ptr ? p.ptr : "");
    return buf;
}

/* Switches, or answers why not. The request is gone after this either way
 * (a refusal is answered at once). */
static void switch_or_answer(keel_request *req, keel_response *res, const char *protocol)
{
    keel_response_header_set(res, "Upgrade", protocol);
    int rc = keel_response_upgrade(res, protocol, (void *)greeting);
    if (rc == KEEL_OK || rc == KEEL_ERR_CLOSED)
        return;
    (void)req;
    char text[64];
    int n = snprintf(text, sizeof text, "not upgraded: %s\n", status_name(rc));
    keel_response_header_remove(res, "Upgrade");
    keel_response_header_set(res, "Content-Type", "text/plain");
    keel_response_send_copy(res, text, (size_t)n);
}

static int upgrade_now(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    char protocol[64];
    switch_or_answer(req, res, protocol_of(req, protocol, sizeof protocol));
    return KEEL_OK;
}

/* GET /later: the decision comes from a timer, while http1 waits paused
 * with the request's bytes (and whatever followed them) unconsumed. If the
 * client leaves first, the abort callback cancels the timer. */
struct later {
    keel_request *req;
    keel_response *res;
    keel_timer *timer;
    char protocol[64];
};

static void later_fire(keel_timer *timer, void *userdata)
{
    struct later *l = userdata;
    keel_timer_stop(timer);
    keel_request_on_abort(l->req, NULL, NULL); /* nothing left to cancel */
    switch_or_answer(l->req, l->res, l->protocol);
    free(l);
}

/* The client left before the timer fired. */
static void later_abandoned(keel_request *req, void *userdata)
{
    struct later *l = userdata;
    (void)req;
    keel_timer_stop(l->timer);
    free(l);
}

/* Switches after ms milliseconds from a timer. */
static int start_later(keel_request *req, keel_response *res, keel_module *module, uint64_t ms)
{
    struct later *l = calloc(1, sizeof *l);
    if (l == NULL)
        return KEEL_ERR_NOMEM;
    (void)module;
    l->req = req;
    l->res = res;
    protocol_of(req, l->protocol, sizeof l->protocol);
    l->timer = keel_timer_start(keel_request_worker(req), ms, 0, later_fire, l);
    if (l->timer == NULL) {
        free(l);
        return KEEL_ERR_NOMEM;
    }
    keel_request_on_abort(req, later_abandoned, l);
    return KEEL_OK;
}

/* ?ms=N (at most 99999), or def. */
static uint64_t query_ms(keel_request *req, uint64_t def)
{
    keel_str v;
    char digits[8];
    if (keel_request_query_param(req, "ms", &v) != KEEL_OK || v.len == 0 || v.len > 5)
        return def;
    snprintf(digits, sizeof digits, "%.*s", (int)v.len, v.ptr);
    return strtoull(digits, NULL, 10);
}

static int upgrade_later(keel_request *req, keel_response *res, void *userdata)
{
    return start_later(req, res, userdata, query_ms(req, 20));
}

/* GET /offload: the decision comes back from libuv's thread pool. */
struct job {
    keel_response *res;
    char protocol[64];
};

static void job_work(void *userdata)
{
    (void)userdata; /* nothing to compute: the point is the completion */
}

static void job_done(keel_request *req, int status, void *userdata)
{
    struct job *job = userdata;
    if (status == KEEL_OK)
        switch_or_answer(req, job->res, job->protocol);
    free(job);
}

static int upgrade_offload(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    struct job *job = calloc(1, sizeof *job);
    if (job == NULL)
        return KEEL_ERR_NOMEM;
    job->res = res;
    protocol_of(req, job->protocol, sizeof job->protocol);
    int rc = keel_offload(req, job_work, job_done, job);
    if (rc != KEEL_OK)
        free(job);
    return rc;
}

/* POST /read: the body first, whole, then the switch (from a timer with
 * ?ms=N: then http1 has consumed the body and holds a copy of the head). */
struct reading {
    keel_module *module;
    keel_response *res;
};

static void read_done(keel_request *req, int status, void *userdata)
{
    struct reading rd = *(struct reading *)userdata;
    free(userdata);
    char protocol[64];
    if (status != KEEL_OK)
        return; /* 413 is on its way, or the client left */
    uint64_t ms = query_ms(req, 0);
    if (ms == 0)
        switch_or_answer(req, rd.res, protocol_of(req, protocol, sizeof protocol));
    else if (start_later(req, rd.res, rd.module, ms) != KEEL_OK)
        keel_response_send_status(rd.res, 500);
}

static int upgrade_after_body(keel_request *req, keel_response *res, void *userdata)
{
    struct reading *rd = malloc(sizeof *rd);
    if (rd == NULL)
        return KEEL_ERR_NOMEM;
    *rd = (struct reading){userdata, res};
    int rc = keel_request_read_body(req, 0, read_done, rd);
    if (rc != KEEL_OK)
        free(rd);
    return rc;
}

/* GET /begun: a response already under way cannot become a 101. */
static int upgrade_begun(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    static const char piece[] = "partial\n";
    char protocol[64], text[64];
    keel_response_write(res, piece, sizeof piece - 1, NULL, NULL);
    int rc = keel_response_upgrade(res, protocol_of(req, protocol, sizeof protocol), NULL);
    int n = snprintf(text, sizeof text, "not upgraded: %s\n", status_name(rc));
    keel_response_write(res, text, (size_t)n, NULL, NULL);
    return keel_response_end(res);
}

/* GET /status/:code: a status line for any code. */
static int any_status(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    keel_str v = keel_request_param(req, "code");
    char digits[8];
    snprintf(digits, sizeof digits, "%.*s", (int)(v.len < 7 ? v.len : 7), v.ptr);
    int rc = keel_response_send_status(res, atoi(digits));
    return rc == KEEL_ERR_INVAL ? keel_response_send_status(res, 400) : rc;
}

static void upgrade_head(keel_request *req, keel_response *res, void *userdata)
{
    (void)req, (void)userdata;
    char status[16];
    snprintf(status, sizeof status, "%d", keel_response_status(res));
    keel_response_header_add(res, "X-Head-Filter", status);
    if (keel_response_status(res) == 101) {
        int rc = keel_response_set_status(res, 200);
        keel_response_header_add(res, "X-Set-Status", rc == KEEL_OK ? "OK" : status_name(rc));
    }
}

static keel_http_filter upgrade_filter = {
    .size = sizeof(keel_http_filter),
    .name = "upgrade",
    .on_response_head = upgrade_head,
};

static int upgrade_load(keel_module *module)
{
    int rc;
    upgrade_filter.userdata = module;
    if ((rc = keel_protocol_register(module, &upper)) < 0 ||
        (rc = keel_http_filter_add(module, &upgrade_filter)) < 0 ||
        (rc = keel_route_add(module, "GET", "/upgrade/:protocol", upgrade_now, module)) < 0 ||
        (rc = keel_route_add(module, "POST", "/upgrade/:protocol", upgrade_now, module)) < 0 ||
        (rc = keel_route_add(module, "GET", "/later/:protocol", upgrade_later, module)) < 0 ||
        (rc = keel_route_add(module, "GET", "/offload/:protocol", upgrade_offload, module)) < 0 ||
        (rc = keel_route_add(module, "POST", "/read/:protocol", upgrade_after_body, module)) < 0 ||
        (rc = keel_route_add(module, "GET", "/begun/:protocol", upgrade_begun, module)) < 0 ||
        (rc = keel_route_add(module, "GET", "/status/:code", any_status, module)) < 0)
        return rc;
    return KEEL_OK;
}

KEEL_MODULE(upgrade, .version = "1.0.0", .load = upgrade_load);
