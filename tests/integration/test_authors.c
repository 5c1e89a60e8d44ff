/* What module authors asked for, through the real binary: a module that
 * targets an older ABI minor loads and serves; keel_config_error names the
 * FILE:LINE of the key; keel_module_worker_count is right in load;
 * keel_strerror; a module written in C++. */
#define _GNU_SOURCE
#include "test_http.h"

/* Starts keel on `modules` with one listener for `protocol` and `extra`
 * appended to the config. */
static kh_proc *start_with(const char *protocol, const char *modules, const char *extra)
{
    char config[2048];
    snprintf(config, sizeof config,
             "[keel]\n"
             "listen = 127.0.0.1:0 %s\n"
             "workers = 1\n"
             "modules = %s\n" KH_MODULE_PATH "%s",
             protocol, modules, extra ? extra : "");
    return kh_start(config, NULL, 1, 10000);
}

/* Sends one line and expects `want` back (a whole line). */
static void expect_line(kh_proc *p, unsigned port, const char *send, const char *want)
{
    int fd = kh_connect("127.0.0.1", port);
    kh_assert(p, fd >= 0, "connect failed");
    kh_assert(p, kh_send_str(fd, send) == 0, "send");
    char buf[512];
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, want) == 0, "sent '%s', got '%s', expected '%s'", send, buf, want);
    close(fd);
}

static void stop_cleanly(kh_proc *p)
{
    kh_signal(p, SIGTERM);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "exit status %d after SIGTERM", status);
    kh_stop(p);
}

/* Starts keel with `args` expecting it to refuse its config; returns it
 * exited. */
static kh_proc *refused_with(const char *config, const char *const *args)
{
    kh_proc *p = kh_spawn(config, args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "exit status %d, expected 1", status);
    return p;
}

static kh_proc *refused(const char *config)
{
    return refused_with(config, NULL);
}

#define AUTHORS_ONLY                                                                               \
    "[keel]\n"                                                                                     \
    "listen = 127.0.0.1:0 authors\n"                                                               \
    "modules = authors\n" KH_MODULE_PATH

/* ---- KEEL_TARGET_ABI_MINOR ------------------------------------------------ */

Test(authors, module_targeting_abi_1_2_loads_and_serves, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start_with("target12", "target12", "log_level = debug\n");
    kh_assert(p, strstr(kh_stderr(p), "module 'target12' 1.2.0 (ABI 1.2) loaded from") != NULL,
              "the descriptor does not say ABI 1.2");
    expect_line(p, kh_port(p, 0), "old host\n", "1.2: old host\n");
    stop_cleanly(p);
}

/* ---- keel_config_error ---------------------------------------------------- */

Test(authors, config_error_names_the_keys_line, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = refused("[keel]\n"                              /* 1 */
                         "listen = 127.0.0.1:0 authors\n"        /* 2 */
                         "modules = authors\n" KH_MODULE_PATH    /* 3, 4 */
                         "[authors]\n"                           /* 5 */
                         "; the mode is checked by the module\n" /* 6 */
                         "mode = turbo\n");                      /* 7 */
    char want[512];
    snprintf(want, sizeof want, "[error] %s:7: [authors] mode: expected fast or safe, got 'turbo'",
             p->conf);
    kh_assert(p, strstr(kh_stderr(p), want) != NULL, "no line '%s'", want);
    kh_assert(p, strstr(kh_stderr(p), "module 'authors': load failed: invalid configuration"),
              "the load failure is not reported");
    kh_stop(p);
}

Test(authors, config_error_for_an_absent_key_names_the_section, .timeout = 30,
     .fini = kh_cleanup_all)
{
    kh_proc *p = refused("[keel]\n"                           /* 1 */
                         "listen = 127.0.0.1:0 authors\n"     /* 2 */
                         "modules = authors\n" KH_MODULE_PATH /* 3, 4 */
                         "\n"                                 /* 5 */
                         "[authors]\n"                        /* 6 */
                         "require_port = on\n");              /* 7 */
    char want[512];
    snprintf(want, sizeof want, "[error] %s:6: [authors] port: required when require_port is on",
             p->conf);
    kh_assert(p, strstr(kh_stderr(p), want) != NULL, "no line '%s'", want);
    kh_stop(p);
}

Test(authors, config_error_for_a_set_value_says_so, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", "authors.mode=slow", NULL};
    kh_proc *p = refused_with(AUTHORS_ONLY, args);
    kh_assert(p, strstr(kh_stderr(p), "[error] --set: [authors] mode: expected fast or safe"),
              "the override is not named");
    kh_stop(p);
}

Test(authors, set_for_an_unknown_section_is_labelled_set, .timeout = 30, .fini = kh_cleanup_all)
{
    /* A section only --set made has no line: "--set:", never "--set:0:". */
    const char *args[] = {"--set", "kvv.x=1", NULL};
    kh_proc *p = refused_with(AUTHORS_ONLY, args);
    kh_assert(p,
              strstr(kh_stderr(p), "[error] --set: unknown section [kvv] (no module 'kvv' is "
                                   "loaded)") != NULL,
              "the override is not named");
    kh_assert(p, strstr(kh_stderr(p), "--set:0") == NULL, "a line number 0");
    kh_stop(p);
}

/* ---- registration errors name the clash ----------------------------------- */

/* Each refused registration, and the one line that must say why. */
static const struct {
    const char *clash, *line;
} clashes[] = {
    {"protocol", "module 'authors': protocol 'http1' is already registered by module 'http1'"},
    {"size", "module 'authors': protocol 'sizeless': .size is 0, at least "},
    {"route", "module 'authors': route POST /trailers/read clashes with a route of module "
              "'trailers'"},
    {"param", "module 'authors': route GET /upgrade/:other clashes with a route of module "
              "'upgrade'"},
    {"metric", "module 'authors': metric 'authors_total': invalid labels"},
};

Test(authors, registration_errors_name_the_clash, .timeout = 60, .fini = kh_cleanup_all)
{
    for (size_t i = 0; i < sizeof clashes / sizeof clashes[0]; i++) {
        char config[1024];
        snprintf(config, sizeof config,
                 "[keel]\n"
                 "listen = 127.0.0.1:0 http1\n"
                 "modules = http1 trailers upgrade authors\n" KH_MODULE_PATH "[authors]\n"
                 "clash = %s\n",
                 clashes[i].clash);
        kh_proc *p = refused(config);
        kh_assert(p, strstr(kh_stderr(p), clashes[i].line) != NULL, "clash %s: no line '%s'",
                  clashes[i].clash, clashes[i].line);
        kh_stop(p);
    }
}

/* ---- keel_module_worker_count, keel_strerror ------------------------------- */

Test(authors, worker_count_is_known_in_load, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:0 authors\n"
                          "workers = 3\n"
                          "modules = authors\n" KH_MODULE_PATH,
                          NULL, 1, 10000);
    kh_assert(p, strstr(kh_stderr(p), "authors: load sees 3 workers") != NULL,
              "load did not see the 3 workers");
    /* start compares with keel_worker_count on each worker and fails if
     * they differ, which would have stopped start-up. */
    expect_line(p, kh_port(p, 0), "hello\n", "strerror: connection closed\n");
    stop_cleanly(p);
}

Test(authors, worker_count_auto_is_resolved_before_load, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:0 authors\n"
                          "workers = auto\n"
                          "modules = authors\n" KH_MODULE_PATH,
                          NULL, 1, 10000);
    const char *err = kh_stderr(p);
    const char *started = strstr(err, " started: ");
    kh_assert(p, started != NULL, "no 'started' line");
    unsigned n = 0;
    kh_assert(p, sscanf(started, " started: %u worker", &n) == 1 && n > 0, "no worker count");
    char want[64];
    snprintf(want, sizeof want, "authors: load sees %u workers", n);
    kh_assert(p, strstr(err, want) != NULL, "load did not see the %u workers", n);
    stop_cleanly(p);
}

/* ---- ABI 1.8: stopping and reopen hooks ------------------------------------- */

Test(authors, stopping_hook_runs_on_each_worker_before_the_drain, .timeout = 30,
     .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:0 authors\n"
                          "workers = 2\n"
                          "modules = authors\n" KH_MODULE_PATH,
                          NULL, 1, 10000);
    kh_assert(p, strstr(kh_stderr(p), "stopping on worker") == NULL, "stopping before the stop");
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    for (unsigned w = 0; w < 2; w++) {
        char hook[64], stopped[64];
        snprintf(hook, sizeof hook, "authors: stopping on worker %u (1)\n", w);
        snprintf(stopped, sizeof stopped, "worker %u stopped: ", w);
        const char *at = strstr(kh_stderr(p), hook);
        kh_assert(p, at != NULL, "no '%s'", hook);
        kh_assert(p, strstr(at, stopped) != NULL, "worker %u stopped before its hook ran", w);
        kh_assert(p, kh_count_log(p, hook) == 1, "'%s' more than once", hook);
    }
    kh_stop(p);
}

Test(authors, reopen_hook_runs_on_sigusr1, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start_with("authors", "authors", NULL);
    kh_signal(p, SIGUSR1);
    kh_assert(p, kh_wait_log(p, "log files reopened", 10000), "no reopen");
    const char *hook = strstr(kh_stderr(p), "authors: reopen\n");
    kh_assert(p, hook != NULL, "the module's reopen did not run");
    kh_assert(p, strstr(hook, "log files reopened") != NULL, "reopen ran after the line");
    kh_signal(p, SIGUSR1);
    kh_assert(p, kh_wait_log_count(p, "authors: reopen\n", 2, 10000), "once per SIGUSR1");
    stop_cleanly(p);
}

/* ---- A module in C++ -------------------------------------------------------- */

Test(authors, cpp_module_serves_http, .timeout = 30, .fini = kh_cleanup_all)
{
#if KEEL_TEST_HAVE_CPP
    kh_proc *p = start_with("http1", "http1 cpp", "[cpp]\ngreeting = Hi\n");
    for (int i = 1; i <= 2; i++) {
        ht_resp r = {0};
        ht_roundtrip(p, "GET /cpp/world HTTP/1.1\r\nHost: x\r\n\r\n", &r);
        char want[128];
        snprintf(want, sizeof want, "Hi, world, from C++ (request %d on worker 0)", i);
        kh_assert(p, r.status == 200, "status %d", r.status);
        kh_assert(p, r.head && strstr(r.head, "\r\nX-Cpp: yes"), "the filter's header");
        kh_assert(p, r.body && strcmp(r.body, want) == 0, "body '%s', expected '%s'",
                  r.body ? r.body : "", want);
        ht_resp_free(&r);
    }
    /* keel_connect_options from C++: to keel's own listener. */
    char req[128];
    snprintf(req, sizeof req, "GET /cppconnect/%u HTTP/1.1\r\nHost: x\r\n\r\n", kh_port(p, 0));
    ht_resp r = {0};
    ht_roundtrip(p, req, &r);
    kh_assert(p, r.status == 202, "connect route: status %d", r.status);
    ht_resp_free(&r);
    kh_assert(p, kh_wait_log(p, "cpp: probe connected", 10000), "the probe did not connect");
    stop_cleanly(p);
#else
    cr_skip_test("no C++ compiler: mod_cpp was not built");
#endif
}

/* ---- keel_config_path (ABI 1.4) -------------------------------------------- */

Test(authors, config_path_is_relative_to_the_config_file, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start_with("authors", "authors", "[authors]\nfile = data/x.txt\n");
    char want[600];
    snprintf(want, sizeof want, "file resolves to %s/data/x.txt", p->dir);
    kh_assert(p, kh_wait_log(p, want, 5000), "expected '%s'", want);
    stop_cleanly(p);

    /* From --set (no file): as written, relative to the working directory. */
    const char *args[] = {"--set", "authors.file=rel/y.txt", NULL};
    char config[1024];
    snprintf(
        config, sizeof config,
        "[keel]\nlisten = 127.0.0.1:0 authors\nworkers = 1\nmodules = authors\n" KH_MODULE_PATH);
    p = kh_start(config, args, 1, 10000);
    kh_assert(p, kh_wait_log(p, "file resolves to rel/y.txt\n", 5000), "a --set path was changed");
    stop_cleanly(p);
}
