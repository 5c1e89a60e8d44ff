/* ratelimit — request rate and concurrency limits per key, as nginx's
 * limit_req and limit_conn, per scope:
 *
 *     [ratelimit]
 *     zone_size = 65536              ; keys tracked at once, all workers
 *     [site api.example.com /api/]
 *     ratelimit.rate = 10            ; requests per period (10r/s)
 *     ratelimit.burst = 20
 *     ratelimit.key = header
 *     ratelimit.header = X-Api-Key
 *     ratelimit.connections = 4      ; requests in progress per key
 *
 * Every worker shares one fixed table (table.c): a key's state is one
 * 64-bit word changed with compare-and-swap, no lock. README.md lists the
 * files.
 */
#if defined(_WIN32)
#define _CRT_RAND_S /* rand_s: the system's RtlGenRandom */
#endif
#include <keel/keel.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if !defined(_WIN32)
#include <unistd.h> /* getentropy (glibc 2.25, the BSDs) */
#if defined(__APPLE__) || defined(__linux__)
#include <sys/random.h>
#endif
#endif

#include "../auth_basic/auth_basic.h"
#include "table.h"

enum { KEY_CLIENT, KEY_HEADER, KEY_USER };
static const char *const key_kinds[] = {"client", "header", "user", NULL};
static const char *const statuses[] = {"429", "503", NULL};

typedef struct rl_conf {
    int64_t zone_size;
    int64_t rate;
    uint64_t period_ms;
    int64_t burst;
    int nodelay;
    int key;
    const char *header;
    int status;
    int64_t connections;
    const char *zone;
} rl_conf;

static const keel_config_key rl_keys[] = {
    KEEL_KEY(rl_conf, zone_size, "zone_size", KEEL_CONFIG_INT, .def = "65536", .min = 64,
             .max = 1 << 28,
             .doc = "keys tracked at once by all workers together (8 bytes each); when full, "
                    "the oldest key of a bucket of 8 gives way"),
    KEEL_KEY(rl_conf, rate, "rate", KEEL_CONFIG_INT, .scopes = KEEL_SCOPE_ANY, .def = "0", .min = 0,
             .max = 1000000,
             .doc = "requests allowed per period and key (limit_req; 0: no rate limit)"),
    KEEL_KEY(rl_conf, period_ms, "period", KEEL_CONFIG_DURATION, .scopes = KEEL_SCOPE_ANY,
             .def = "1s", .min = 1, .max = 86400000,
             .doc = "the period `rate` counts in: 1s for nginx's r/s, 1m for r/m"),
    KEEL_KEY(rl_conf, burst, "burst", KEEL_CONFIG_INT, .scopes = KEEL_SCOPE_ANY, .def = "0",
             .min = 0, .max = 1000000,
             .doc = "requests over the rate accepted (delayed unless nodelay) before refusing"),
    KEEL_KEY(rl_conf, nodelay, "nodelay", KEEL_CONFIG_BOOL, .scopes = KEEL_SCOPE_ANY, .def = "off",
             .doc = "serve the burst at once instead of spacing it at the rate"),
    KEEL_KEY(rl_conf, key, "key", KEEL_CONFIG_ENUM, .scopes = KEEL_SCOPE_ANY, .def = "client",
             .choices = key_kinds,
             .doc = "what is limited: the client's address, a request header (`header`) or "
                    "the auth_basic user"),
    KEEL_KEY(rl_conf, header, "header", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY,
             .def = "X-Api-Key", .doc = "the header field whose value is the key (key = header)"),
    KEEL_KEY(rl_conf, status, "status", KEEL_CONFIG_ENUM, .scopes = KEEL_SCOPE_ANY, .def = "429",
             .choices = statuses, .doc = "the answer over the limit: 429 or 503"),
    KEEL_KEY(rl_conf, connections, "connections", KEEL_CONFIG_INT, .scopes = KEEL_SCOPE_ANY,
             .def = "0", .min = 0, .max = 1000000,
             .doc = "requests in progress per key (limit_conn; 0: no limit)"),
    KEEL_KEY(rl_conf, zone, "zone", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY, .def = "default",
             .doc = "scopes with the same zone share their keys' counts, as nginx's zones"),
};
KEEL_CONFIG_SCHEMA(rl_schema, rl_conf, rl_keys);

typedef struct rl_module {
    keel_http_filter before_auth, after_auth, release;
    int added_before, added_after, added_release; /* the filters added so far */
    keel_module *module;
    rl_table requests, conns;
    const auth_basic_service *auth; /* NULL: auth_basic not loaded before this module */
    uint64_t seed;                  /* random per process: the keys' hashes start from it */
    keel_metric *rejected_req, *rejected_conn, *delayed, *evicted;
    struct rl_scope *scopes; /* freed at unload */
} rl_module;

/* A scope's struct that limits, with what its requests would compute
 * each time, worked out once at load (keel_http_filter.scope): the
 * zone's and kind's part of the key's hash (the seed is known by then)
 * and the interval between two requests at the rate. */
typedef struct rl_scope {
    rl_module *rm;
    const rl_conf *conf;
    uint64_t zone_hash;
    uint64_t interval_us; /* at least 1 */
    struct rl_scope *next;
} rl_scope;

/* The key's hash: the zone's name, the kind, then the key's bytes. An
 * absent key (no such header, no user) is not limited, as nginx does for
 * an empty key. */
/* The client address's hash, remembered per worker for the last
 * connections seen: writing the address out costs more than the rest of
 * the filter, and every request of a keep-alive connection (or of an
 * HTTP/2 one) has the same. Connection ids are never reused. */
#define CLIENT_CACHE 64

typedef struct rl_worker {
    uint64_t conn_id[CLIENT_CACHE];
    uint64_t client_hash[CLIENT_CACHE];
} rl_worker;

static int client_hash(rl_module *rm, keel_request *req, uint64_t *out)
{
    rl_worker *w = keel_worker_state(keel_request_worker(req), rm->module);
    uint64_t id = keel_request_conn_id(req);
    size_t at = (size_t)(id % CLIENT_CACHE);
    if (w->conn_id[at] != id) {
        char ip[64];
        if (keel_request_peer_ip(req, ip, sizeof ip) != KEEL_OK)
            return 0;
        w->client_hash[at] = rl_hash(rm->seed, ip, strlen(ip));
        w->conn_id[at] = id;
    }
    *out = w->client_hash[at];
    return 1;
}

static int key_hash(const rl_scope *sc, keel_request *req, uint64_t *out)
{
    rl_module *rm = sc->rm;
    const rl_conf *c = sc->conf;
    keel_str k = {NULL, 0};
    uint64_t client;
    if (c->key == KEY_CLIENT) {
        if (client_hash(rm, req, &client))
            k = (keel_str){(const char *)&client, sizeof client};
    } else if (c->key == KEY_HEADER) {
        k = keel_request_header(req, c->header);
    } else if (rm->auth != NULL) {
        k = rm->auth->user(req);
    }
    if (k.ptr == NULL)
        return 0;
    *out = rl_hash_final(rl_hash(sc->zone_hash, k.ptr, k.len));
    return 1;
}

static int refuse(rl_module *rm, keel_request *req, keel_response *res, const rl_conf *c,
                  uint64_t retry_us, keel_metric *counter)
{
    keel_metric_add(keel_request_worker(req), counter, 1);
    /* Retry-After in whole seconds, rounded up (RFC 9110 10.2.3; RFC
     * 6585 4 for 429). */
    char secs[24];
    snprintf(secs, sizeof secs, "%llu", (unsigned long long)((retry_us + 999999) / 1000000));
    (void)rm;
    /* keel_response_send_status would drop the field: the body by hand. */
    static const char text429[] = "429 Too Many Requests\n",
                      text503[] = "503 Service Unavailable\n";
    int status = c->status == 1 ? 503 : 429;
    keel_response_set_status(res, status);
    keel_response_header_set(res, "Content-Type", "text/plain; charset=utf-8");
    keel_response_header_set(res, "Retry-After", retry_us ? secs : "1");
    return status == 429 ? keel_response_send(res, text429, sizeof text429 - 1, NULL, NULL)
                         : keel_response_send(res, text503, sizeof text503 - 1, NULL, NULL);
}

/* Without nodelay a request within the burst waits until its turn. */
static void delay_over(keel_timer *timer, void *ud)
{
    keel_request *req = ud;
    keel_timer_stop(timer);
    keel_request_on_abort(req, NULL, NULL);
    keel_request_continue(req);
}

static void delay_abandoned(keel_request *req, void *ud)
{
    (void)req;
    keel_timer_stop(ud);
}

static uint64_t base_ms; /* the loop time of the first request: TATs count from it */

static int limit(const rl_scope *sc, keel_request *req, keel_response *res)
{
    rl_module *rm = sc->rm;
    const rl_conf *c = sc->conf;
    uint64_t hash;
    if (!key_hash(sc, req, &hash))
        return KEEL_HTTP_NEXT;
    keel_worker *worker = keel_request_worker(req);

    if (c->connections > 0) {
        int evicted;
        size_t ticket = rl_conn_acquire(&rm->conns, hash, (uint64_t)c->connections, &evicted);
        if (ticket == 0)
            return refuse(rm, req, res, c, 0, rm->rejected_conn);
        if (evicted)
            keel_metric_add(worker, rm->evicted, 1);
        else /* released in the log phase, which runs for every request */
            keel_request_set_data(req, rm->module, (void *)(uintptr_t)ticket);
    }
    if (c->rate == 0)
        return KEEL_HTTP_NEXT;

    uint64_t now_ms = keel_worker_now_ms(worker);
    if (base_ms == 0 || now_ms < base_ms)
        base_ms = now_ms; /* the same value from any worker: a race is harmless */
    rl_verdict v = rl_gcra(&rm->requests, hash, (now_ms - base_ms + 1) * 1000, sc->interval_us,
                           (uint64_t)c->burst);
    if (v.evicted_live)
        keel_metric_add(worker, rm->evicted, 1);
    if (!v.allowed)
        return refuse(rm, req, res, c, v.retry_us, rm->rejected_req);
    /* Whole milliseconds, rounded down as nginx does: the clock is the
     * loop's, in milliseconds, so a request less than 1 ms early is on
     * time (a timer would cost more than the wait). */
    uint64_t delay_ms = v.wait_us / 1000;
    if (c->nodelay || delay_ms == 0)
        return KEEL_HTTP_NEXT;
    keel_timer *t = keel_timer_start(worker, delay_ms, 0, delay_over, req);
    if (t == NULL)
        return KEEL_ERR_NOMEM;
    keel_metric_add(worker, rm->delayed, 1);
    keel_request_on_abort(req, delay_abandoned, t);
    return KEEL_HTTP_DONE;
}

/* Limits by client or header run before auth_basic, as nginx's limit_req
 * (preaccess phase) runs before auth_basic (access): password guessing is
 * limited too, and a refused client costs no bcrypt. A limit by user runs
 * after it, on the user it verified. Each filter is in the pipelines of
 * the scopes whose limits are its own (scope_of). */
static int rl_limit(keel_request *req, keel_response *res, void *ud)
{
    return limit(ud, req, res);
}

/* The filters' part in a scope: the one before auth_basic where the scope
 * limits by client or header, the one after it where it limits by user,
 * neither where it does not limit. */
static int scope_of(rl_module *rm, const rl_conf *c, int by_user, void **scope_ud)
{
    if ((c->rate == 0 && c->connections == 0) || (c->key == KEY_USER) != by_user)
        return 0;
    rl_scope *sc = malloc(sizeof *sc);
    if (sc == NULL)
        return KEEL_ERR_NOMEM;
    unsigned char kind = (unsigned char)c->key;
    uint64_t interval_us = c->rate > 0 ? c->period_ms * 1000 / (uint64_t)c->rate : 0;
    *sc = (rl_scope){rm, c, rl_hash(rl_hash(rm->seed, c->zone, strlen(c->zone) + 1), &kind, 1),
                     interval_us ? interval_us : 1, rm->scopes};
    rm->scopes = sc;
    *scope_ud = sc;
    return 1;
}

static int rl_scope_before_auth(const void *conf, void *ud, void **scope_ud)
{
    return scope_of(ud, conf, 0, scope_ud);
}

static int rl_scope_after_auth(const void *conf, void *ud, void **scope_ud)
{
    return scope_of(ud, conf, 1, scope_ud);
}

static void rl_on_log(keel_request *req, keel_response *res, const keel_http_log_info *info,
                      void *ud)
{
    rl_module *rm = ud;
    (void)res;
    (void)info;
    size_t ticket = (size_t)(uintptr_t)keel_request_data(req, rm->module);
    if (ticket != 0) {
        rl_conn_release(&rm->conns, ticket);
        keel_request_set_data(req, rm->module, NULL);
    }
}

/* The filters a scope's limits need, each added once (from load for the
 * module's section, then for every scope): a request runs no ratelimit
 * call before auth_basic where every limit is by user, none after it
 * where none is, and no log hook where no scope limits connections. */
static int add_filters(keel_module *module, const void *conf, void *ud)
{
    rl_module *rm = ud;
    const rl_conf *c = conf;
    int rc = KEEL_OK;
    if (c->rate == 0 && c->connections == 0)
        return KEEL_OK;
    if (c->key != KEY_USER && !rm->added_before &&
        (rc = keel_http_filter_add(module, &rm->before_auth)) == KEEL_OK)
        rm->added_before = 1;
    if (rc == KEEL_OK && c->key == KEY_USER && !rm->added_after &&
        (rc = keel_http_filter_add(module, &rm->after_auth)) == KEEL_OK)
        rm->added_after = 1;
    if (rc == KEEL_OK && c->connections > 0 && !rm->added_release &&
        (rc = keel_http_filter_add(module, &rm->release)) == KEEL_OK)
        rm->added_release = 1;
    return rc;
}

/* The table keeps 29 bits of a key's hash at the default size (the
 * bucket and a 16-bit tag), not the key: two keys that agree on them share
 * a limit. With a known hash anyone could compute, offline, an API key or
 * an address of their /64 that shares a victim's and spend its limit for
 * it (nginx compares the keys themselves). A seed nobody outside the
 * process knows leaves only guessing online, which the limit itself
 * slows. FNV-1a is not a keyed PRF: docs/security.md says so. */
static int random_seed(uint64_t *out)
{
#if defined(_WIN32)
    unsigned int a, b;
    if (rand_s(&a) != 0 || rand_s(&b) != 0)
        return -1;
    *out = (uint64_t)a << 32 | b;
    return 0;
#else
    return getentropy(out, sizeof *out);
#endif
}

static void rl_free(rl_module *rm)
{
    while (rm->scopes != NULL) {
        rl_scope *next = rm->scopes->next;
        free(rm->scopes);
        rm->scopes = next;
    }
    rl_table_free(&rm->requests);
    rl_table_free(&rm->conns);
    free(rm);
}

static int ratelimit_load(keel_module *module)
{
    const rl_conf *c = keel_module_config(module);
    rl_module *rm = calloc(1, sizeof *rm);
    if (rm == NULL)
        return KEEL_ERR_NOMEM;
    rm->module = module;
    int rc = KEEL_OK;
    if (random_seed(&rm->seed) != 0)
        rc = keel_config_error(module, "zone_size", "no random bytes for the keys' hash seed");
    else if (rl_table_init(&rm->requests, (size_t)c->zone_size) != 0 ||
             rl_table_init(&rm->conns, (size_t)c->zone_size) != 0)
        rc = KEEL_ERR_NOMEM;
    const void *svc = NULL;
    if (keel_service_lookup(module, AUTH_BASIC_SERVICE, 1, &svc, NULL) == KEEL_OK)
        rm->auth = svc;
    else if (c->key == KEY_USER)
        rc = keel_config_error(module, "key",
                               "key = user needs auth_basic listed before "
                               "ratelimit in [keel] modules");
    if (rc == KEEL_OK &&
        (rc = keel_metric_new(module, "ratelimit_rejected_total", "requests refused over a limit",
                              KEEL_METRIC_COUNTER, "limit=\"req\"", &rm->rejected_req)) ==
            KEEL_OK &&
        (rc = keel_metric_new(module, "ratelimit_rejected_total", "requests refused over a limit",
                              KEEL_METRIC_COUNTER, "limit=\"conn\"", &rm->rejected_conn)) ==
            KEEL_OK &&
        (rc = keel_metric_new(module, "ratelimit_delayed_total",
                              "requests within the burst held until their turn",
                              KEEL_METRIC_COUNTER, NULL, &rm->delayed)) == KEEL_OK)
        rc = keel_metric_new(module, "ratelimit_evictions_total",
                             "keys still limited that gave their slot to another (the table is too "
                             "small)",
                             KEEL_METRIC_COUNTER, NULL, &rm->evicted);
    if (rc == KEEL_OK) {
        rm->before_auth = (keel_http_filter){
            .size = sizeof(keel_http_filter),
            .name = "ratelimit",
            .before = "auth_basic",
            .after = "rewrite", /* the limits of the scope a rewrite chose */
            .userdata = rm,
            .on_request = rl_limit,
            .scope = rl_scope_before_auth,
        };
        rm->after_auth = (keel_http_filter){
            .size = sizeof(keel_http_filter),
            .name = "ratelimit-user",
            .after = "auth_basic",
            .userdata = rm,
            .on_request = rl_limit,
            .scope = rl_scope_after_auth,
        };
        rm->release = (keel_http_filter){
            .size = sizeof(keel_http_filter),
            .name = "ratelimit-connections",
            .userdata = rm,
            .on_log = rl_on_log,
        };
        keel_module_set_data(module, rm);
        rc = add_filters(module, c, rm);
        if (rc == KEEL_OK)
            rc = keel_module_config_scopes(module, add_filters, rm);
        if (rc != KEEL_OK)
            keel_module_set_data(module, NULL);
    }
    if (rc != KEEL_OK)
        rl_free(rm);
    return rc;
}

static void ratelimit_unload(keel_module *module)
{
    rl_module *rm = keel_module_data(module);
    if (rm != NULL)
        rl_free(rm);
}

KEEL_MODULE(ratelimit, .version = "1.0.0", .load = ratelimit_load, .unload = ratelimit_unload,
            .worker_state_size = sizeof(rl_worker), .config = &rl_schema);
