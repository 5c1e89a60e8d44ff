/* [keel] log_format = json: the error log as JSON lines (time, level,
 * worker, module, message), every string escaped, through the real
 * binary. */
#define _GNU_SOURCE
#include "harness.h"

#define JSON_CONFIG                                                                                \
    "[keel]\n"                                                                                     \
    "listen = 127.0.0.1:0 authors\n"                                                               \
    "workers = 1\n"                                                                                \
    "log_format = json\n"                                                                          \
    "modules = authors\n" KH_MODULE_PATH

/* Every line of the log is one object: starts with the time, ends with the
 * message's closing quote and brace. */
static void expect_json_lines(kh_proc *p)
{
    const char *line = kh_stderr(p);
    int n = 0;
    while (*line != '\0') {
        const char *eol = strchr(line, '\n');
        kh_assert(p, eol != NULL, "the last line does not end");
        kh_assert(p,
                  strncmp(line, "{\"time\":\"", 9) == 0 && eol - line > 2 && eol[-1] == '}' &&
                      eol[-2] == '"',
                  "not a JSON line: %.*s", (int)(eol - line), line);
        line = eol + 1;
        n++;
    }
    kh_assert(p, n > 0, "no lines");
}

Test(log_format, json_lines_name_level_worker_and_module, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(JSON_CONFIG, NULL, 1, 10000);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    expect_json_lines(p);
    /* A module's line, from load on the main thread. */
    kh_assert(p,
              strstr(kh_stderr(p), "\"level\":\"info\",\"worker\":null,\"module\":\"authors\","
                                   "\"message\":\"load sees 1 workers\"}\n") != NULL,
              "no module line");
    /* The core's, from the worker's thread. */
    kh_assert(p,
              strstr(kh_stderr(p), "\"level\":\"info\",\"worker\":0,\"module\":null,"
                                   "\"message\":\"worker 0 stopped: ") != NULL,
              "no worker line");
    kh_stop(p);
}

Test(log_format, json_strings_are_escaped, .timeout = 30, .fini = kh_cleanup_all)
{
    /* A quote, a control character, a byte that is not UTF-8 and a
     * character that is: the module quotes the value in its error. */
    const char *args[] = {"--set", "authors.mode=tu\"r\001bo\377\303\251", NULL};
    kh_proc *p = kh_spawn(JSON_CONFIG, args);
    kh_assert(p, kh_wait_exit(p, 10000) == 1, "the bad mode was taken");
    expect_json_lines(p);
    kh_assert(p,
              strstr(kh_stderr(p), "\"level\":\"error\",\"worker\":null,\"module\":null,"
                                   "\"message\":\"--set: [authors] mode: expected fast or safe, "
                                   "got 'tu\\\"r\\u0001bo\\ufffd\303\251'\"}\n") != NULL,
              "the value is not escaped");
    kh_stop(p);
}

Test(log_format, unknown_format_is_refused, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_expect_refused("[keel]\n"
                      "listen = 127.0.0.1:0 authors\n"
                      "log_format = xml\n"
                      "modules = authors\n" KH_MODULE_PATH,
                      3, "log_format: expected text or json", "log_format = xml");
}
