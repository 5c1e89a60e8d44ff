/* In-process tests of the runtime through the embedding API: registries,
 * services, module config getters, the loader's order rules, timers and
 * cross-thread posts. The modules here are compiled into the test program
 * (KEEL_LINKED), exactly as an embedder would do it. */
#include <criterion/criterion.h>

#include <string.h>

#include <keel/embed.h>
#include <uv.h>

static int noop_data(keel_conn *c, const char *d, size_t n, size_t *used)
{
    (void)c;
    (void)d;
    *used = n;
    return KEEL_OK;
}

/* ---- registries and services ------------------------------------------- */

static struct {
    int dup_protocol, bad_name, null_protocol, publish, dup_service;
    int lookup_ok, lookup_too_new, lookup_missing;
    uint32_t found_version;
    const void *found_table;
    int late_register;
} reg;

static const int service_table = 42;
static const keel_protocol proto_one = {
    .size = sizeof(keel_protocol), .name = "one", .on_data = noop_data};
static const keel_protocol proto_bad = {.size = sizeof(keel_protocol), .name = "Bad Name!"};

static int provider_load(keel_module *m)
{
    int rc = keel_protocol_register(m, &proto_one);
    reg.dup_protocol = keel_protocol_register(m, &proto_one);
    reg.bad_name = keel_protocol_register(m, &proto_bad);
    reg.null_protocol = keel_protocol_register(m, NULL);
    reg.publish = keel_service_publish(m, "counter", 3, &service_table);
    reg.dup_service = keel_service_publish(m, "counter", 4, &service_table);
    return rc;
}

static void consumer_unload(keel_module *m)
{
    reg.late_register = keel_service_publish(m, "late", 1, &service_table);
}

static int consumer_load(keel_module *m)
{
    reg.lookup_ok = keel_service_lookup(m, "counter", 2, &reg.found_table, &reg.found_version);
    const void *t;
    reg.lookup_too_new = keel_service_lookup(m, "counter", 9, &t, NULL);
    reg.lookup_missing = keel_service_lookup(m, "nope", 1, &t, NULL);
    return KEEL_OK;
}

static const char *const needs_provider[] = {"provider", NULL};
KEEL_MODULE(provider, .version = "1", .load = provider_load);
KEEL_MODULE(consumer, .version = "1", .dependencies = needs_provider, .load = consumer_load,
            .unload = consumer_unload);

Test(runtime, registries_and_services, .timeout = 20)
{
    keel_server *s = keel_server_new();
    cr_assert_not_null(s);
    cr_assert_eq(keel_server_add_module(s, &keel_module_provider), KEEL_OK);
    cr_assert_eq(keel_server_add_module(s, &keel_module_consumer), KEEL_OK);
    cr_assert_eq(keel_server_add_module(s, &keel_module_consumer), KEEL_ERR_EXISTS);
    cr_assert_eq(keel_server_load_config_string(s,
                                                "[keel]\nmodules = provider consumer\n"
                                                "listen = 127.0.0.1:0 one\n",
                                                "t.conf"),
                 KEEL_OK);
    cr_assert_eq(keel_server_check(s), KEEL_OK);
    cr_expect_eq(reg.dup_protocol, KEEL_ERR_EXISTS);
    cr_expect_eq(reg.bad_name, KEEL_ERR_INVAL);
    cr_expect_eq(reg.null_protocol, KEEL_ERR_INVAL);
    cr_expect_eq(reg.publish, KEEL_OK);
    cr_expect_eq(reg.dup_service, KEEL_ERR_EXISTS);
    cr_expect_eq(reg.lookup_ok, KEEL_OK);
    cr_expect_eq(reg.found_version, 3);
    cr_expect_eq(reg.found_table, &service_table);
    cr_expect_eq(reg.lookup_too_new, KEEL_ERR_ABI);
    cr_expect_eq(reg.lookup_missing, KEEL_ERR_NOTFOUND);
    cr_expect_eq(reg.late_register, KEEL_ERR_STATE, "registering after load must fail");
    keel_server_free(s);
}

Test(runtime, requires_order_is_enforced, .timeout = 20)
{
    keel_server *s = keel_server_new();
    keel_server_add_module(s, &keel_module_provider);
    keel_server_add_module(s, &keel_module_consumer);
    /* consumer listed before the provider it requires */
    keel_server_load_config_string(s, "[keel]\nmodules = consumer provider\n", "t.conf");
    cr_expect_eq(keel_server_check(s), KEEL_ERR_NOTFOUND);
    keel_server_free(s);
}

Test(runtime, unknown_protocol_in_listen_is_refused, .timeout = 20)
{
    keel_server *s = keel_server_new();
    keel_server_add_module(s, &keel_module_provider);
    keel_server_load_config_string(s, "[keel]\nlisten = 127.0.0.1:0 two\n", "t.conf");
    cr_expect_eq(keel_server_check(s), KEEL_ERR_CONFIG);
    keel_server_free(s);
}

/* ---- module config getters --------------------------------------------- */

static struct {
    int rc_str, rc_int, rc_bool, rc_size, rc_dur, rc_bad, rc_dup;
    const char *str, *first, *second, *missing_at;
    int64_t num;
    int flag;
    uint64_t size, dur, def_dur;
    size_t count;
} cfg;

static int configured_load(keel_module *m)
{
    cfg.rc_str = keel_config_string(m, "name", "none", &cfg.str);
    cfg.rc_int = keel_config_int(m, "count", 0, 1, 100, &cfg.num);
    cfg.rc_bool = keel_config_bool(m, "enabled", 0, &cfg.flag);
    cfg.rc_size = keel_config_size(m, "buffer", 0, &cfg.size);
    cfg.rc_dur = keel_config_duration_ms(m, "wait", 0, &cfg.dur);
    keel_config_duration_ms(m, "absent", 1234, &cfg.def_dur);
    int64_t ignored;
    cfg.rc_bad = keel_config_int(m, "too_big", 5, 1, 10, &ignored);
    const char *s;
    cfg.rc_dup = keel_config_string(m, "twice", NULL, &s);
    cfg.count = keel_config_count(m, "item");
    keel_config_string_at(m, "item", 0, &cfg.first);
    keel_config_string_at(m, "item", 1, &cfg.second);
    keel_config_string_at(m, "item", 2, &cfg.missing_at);
    return KEEL_OK;
}
KEEL_MODULE(configured, .version = "1", .load = configured_load);

Test(runtime, module_config_getters, .timeout = 20)
{
    keel_server *s = keel_server_new();
    keel_server_add_module(s, &keel_module_configured);
    keel_server_add_module(s, &keel_module_provider); /* the protocol a check wants */
    keel_server_load_config_string(s,
                                   "[keel]\nlisten = 127.0.0.1:0 one\n"
                                   "[configured]\nname = x y\ncount = 7\nenabled = yes\n"
                                   "buffer = 64k\nwait = 250ms\ntoo_big = 11\ntwice = a\n"
                                   "twice = b\nitem = one\nitem = two\n",
                                   "t.conf");
    cr_assert_eq(keel_server_set(s, "configured.count=9"), KEEL_OK);
    cr_expect_eq(keel_server_check(s), KEEL_OK);
    cr_expect_eq(cfg.rc_str, KEEL_OK);
    cr_expect_str_eq(cfg.str, "x y");
    cr_expect_eq(cfg.num, 9, "--set overrides the file");
    cr_expect_eq(cfg.flag, 1);
    cr_expect_eq(cfg.size, 65536);
    cr_expect_eq(cfg.dur, 250);
    cr_expect_eq(cfg.def_dur, 1234);
    cr_expect_eq(cfg.rc_bad, KEEL_ERR_CONFIG);
    cr_expect_eq(cfg.rc_dup, KEEL_ERR_CONFIG);
    cr_expect_eq(cfg.count, 2);
    cr_expect_str_eq(cfg.first, "one");
    cr_expect_str_eq(cfg.second, "two");
    cr_expect_null(cfg.missing_at);
    keel_server_free(s);
}

Test(runtime, unread_module_key_is_unknown, .timeout = 20)
{
    keel_server *s = keel_server_new();
    keel_server_add_module(s, &keel_module_provider);
    keel_server_load_config_string(s, "[provider]\ntypo = 1\n", "t.conf");
    cr_expect_eq(keel_server_check(s), KEEL_ERR_CONFIG);
    keel_server_free(s);
}

/* ---- timers and posts on running workers ------------------------------- */

#define WORKERS 2

static struct {
    keel_worker *workers[WORKERS];
    volatile int started, ticks[WORKERS], posted[WORKERS], stopped;
    uv_thread_t worker_thread[WORKERS];
    uv_thread_t posted_on[WORKERS];
    keel_timer *timer[WORKERS];
    /* Checked on the test's thread: Criterion's asserts are not for the
     * worker threads these callbacks run on. */
    volatile int state_missing, wrong_count, wrong_worker;
} rt;

static void on_tick(keel_timer *t, void *ud)
{
    unsigned id = (unsigned)(uintptr_t)ud;
    if (__atomic_add_fetch(&rt.ticks[id], 1, __ATOMIC_SEQ_CST) == 3)
        keel_timer_stop(t); /* stopping from inside the callback */
}

static int ticker_start(keel_module *m, keel_worker *w, void *state)
{
    (void)m;
    unsigned id = keel_worker_id(w);
    if (state == NULL)
        rt.state_missing = 1;
    if (keel_worker_count(w) != WORKERS)
        rt.wrong_count = 1;
    rt.workers[id] = w;
    rt.worker_thread[id] = uv_thread_self();
    rt.timer[id] = keel_timer_start(w, 5, 5, on_tick, (void *)(uintptr_t)id);
    __atomic_add_fetch(&rt.started, 1, __ATOMIC_SEQ_CST);
    return rt.timer[id] ? KEEL_OK : KEEL_ERR_NOMEM;
}

static void ticker_stop(keel_module *m, keel_worker *w, void *state)
{
    (void)m;
    (void)w;
    (void)state;
    __atomic_add_fetch(&rt.stopped, 1, __ATOMIC_SEQ_CST);
}

static int ticker_load(keel_module *m)
{
    return keel_protocol_register(m, &proto_one);
}

KEEL_MODULE(ticker, .version = "1", .load = ticker_load, .start = ticker_start, .stop = ticker_stop,
            .worker_state_size = 64);

static void on_posted(keel_worker *w, void *ud)
{
    unsigned id = (unsigned)(uintptr_t)ud;
    if (w != rt.workers[id])
        rt.wrong_worker = 1;
    rt.posted_on[id] = uv_thread_self();
    __atomic_store_n(&rt.posted[id], 1, __ATOMIC_SEQ_CST);
}

struct server_run {
    keel_server *server;
    int rc;
};

static void run_server(void *arg)
{
    struct server_run *run = arg;
    run->rc = keel_server_run(run->server);
}

static int wait_for(volatile int *flag, int value, int ms)
{
    for (int i = 0; i < ms; i++) {
        if (__atomic_load_n(flag, __ATOMIC_SEQ_CST) >= value)
            return 1;
        uv_sleep(1);
    }
    return 0;
}

Test(runtime, timers_and_posts_run_on_their_worker, .timeout = 30)
{
    keel_server *s = keel_server_new();
    keel_server_add_module(s, &keel_module_ticker);
    keel_server_load_config_string(s, "[keel]\nlisten = 127.0.0.1:0 one\nworkers = 2\n", "t.conf");
    struct server_run run = {s, -100};
    uv_thread_t thread;
    cr_assert_eq(uv_thread_create(&thread, run_server, &run), 0);
    cr_assert(wait_for(&rt.started, WORKERS, 5000), "workers started");
    cr_expect_neq(keel_server_listener_port(s, 0), 0, "port 0 was replaced by the bound port");
    for (unsigned i = 0; i < WORKERS; i++) {
        cr_assert(wait_for(&rt.ticks[i], 3, 5000), "worker %u timer ticked", i);
        cr_expect_eq(keel_worker_post(rt.workers[i], on_posted, (void *)(uintptr_t)i), KEEL_OK);
    }
    for (unsigned i = 0; i < WORKERS; i++) {
        cr_assert(wait_for(&rt.posted[i], 1, 5000), "post ran on worker %u", i);
        cr_expect(uv_thread_equal(&rt.posted_on[i], &rt.worker_thread[i]),
                  "post ran on the worker's own thread");
    }
    uv_sleep(30);
    for (unsigned i = 0; i < WORKERS; i++)
        cr_expect_eq(rt.ticks[i], 3, "a stopped timer does not fire again");
    keel_server_stop(s);
    uv_thread_join(&thread);
    cr_expect_eq(run.rc, KEEL_OK);
    cr_expect_eq(rt.stopped, WORKERS, "stop ran on every worker");
    cr_expect_eq(rt.state_missing, 0, "every worker got its module state");
    cr_expect_eq(rt.wrong_count, 0, "keel_worker_count");
    cr_expect_eq(rt.wrong_worker, 0, "a post runs with the worker it was posted to");
    keel_server_free(s);
}

/* ---- status strings ----------------------------------------------------- */

Test(runtime, every_status_has_a_description, .timeout = 10)
{
    /* KEEL_ERR_REFUSED is the last status (ABI 1.3); a new one must be
     * added to keel_strerror too. */
    for (int status = KEEL_OK; status >= KEEL_ERR_REFUSED; status--)
        cr_expect_str_neq(keel_strerror(status), "unknown error", "status %d", status);
    cr_expect_str_eq(keel_strerror(KEEL_ERR_REFUSED - 1), "unknown error");
    cr_expect_str_eq(keel_strerror(1), "unknown error");
}
