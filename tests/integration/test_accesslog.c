/* The accesslog module: Combined Log Format lines, escaping, and the
 * appender flushing everything before keel exits. */
#define _GNU_SOURCE /* test_http.h: memmem */
#include "harness.h"
#include "test_http.h"

#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

Test(accesslog, combined_lines_for_each_exchange, .timeout = 30)
{
    char dir[] = "/tmp/keel-accesslog-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char log[256], conf[1024];
    snprintf(log, sizeof log, "%s/access.log", dir);
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "workers = 2\nmodules = http1 hello accesslog\n"
             "listen = 127.0.0.1:0 http1\n[accesslog]\npath = %s\n",
             log);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    const char *req = "GET /hello/log HTTP/1.1\r\nHost: x\r\nReferer: http://r/\r\n"
                      "User-Agent: a \"quoted\" agent\r\n\r\n"
                      "GET /missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    kh_assert(p, kh_send_str(fd, req) == 0, "send");
    char buf[4096];
    kh_assert(p, kh_expect_eof(fd, buf, sizeof buf, 5000) != 0, "responses then close");
    close(fd);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");

    char *text = read_file(log);
    kh_assert(p, text != NULL, "log file %s exists", log);
    kh_assert(p,
              strstr(text, "\"GET /hello/log HTTP/1.1\" 200 11 \"http://r/\" "
                           "\"a \\\"quoted\\\" agent\"\n") != NULL,
              "first line, got:\n%s", text);
    kh_assert(p, strstr(text, "\"GET /missing HTTP/1.1\" 404 ") != NULL, "second line:\n%s", text);
    kh_assert(p, strncmp(text, "127.0.0.1 - - [", 15) == 0, "starts with the peer:\n%s", text);
    kh_stop(p);
    unlink(log);
    rmdir(dir);
}

/* keel with `modules` (accesslog last) and `sections` before
 * [accesslog], then `section` after it (path = DIR/access.log first).
 * Fills log with the file's path. */
static kh_proc *start_log_with(const char *modules, const char *sections, const char *section,
                               char *log, size_t size)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/keel-accesslog-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(log, size, "%s/access.log", dir);
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "workers = 1\nmodules = %s accesslog\n"
             "listen = 127.0.0.1:0 http1\n%s[accesslog]\npath = %s\n%s",
             modules, sections, log, section);
    return kh_start(conf, NULL, 1, 10000);
}

/* keel with http1, hello and accesslog. */
static kh_proc *start_log(const char *section, char *log, size_t size)
{
    return start_log_with("http1 hello", "", section, log, size);
}

static void remove_log(const char *log)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s", log);
    unlink(log);
    *strrchr(dir, '/') = '\0';
    rmdir(dir);
}

/* Sends the requests (the last with Connection: close) and reads to EOF. */
static void exchange(kh_proc *p, const char *requests)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    kh_assert(p, kh_send_str(fd, requests) == 0, "send");
    char buf[4096];
    kh_assert(p, kh_expect_eof(fd, buf, sizeof buf, 5000) != 0, "responses then close");
    close(fd);
}

Test(accesslog, json_lines, .timeout = 30)
{
    char log[256];
    kh_proc *p = start_log("format = json\n", log, sizeof log);
    exchange(p, "GET /hello/j?x=1 HTTP/1.1\r\nHost: h\r\nUser-Agent: a \"q\" \xc3\xa9\r\n"
                "Connection: close\r\n\r\n");
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(log, "\n"), 5000), "no line");
    char *text = read_file(log);
    kh_assert(p, strncmp(text, "{\"time\":\"", 9) == 0, "not a JSON object: %s", text);
    static const char *const fields[] = {"\"remote_addr\":\"127.0.0.1\"",
                                         "\"method\":\"GET\"",
                                         "\"uri\":\"/hello/j?x=1\"",
                                         "\"protocol\":\"HTTP/1.1\"",
                                         "\"status\":200",
                                         "\"body_bytes_sent\":9",
                                         "\"scheme\":\"http\"",
                                         "\"completed\":true",
                                         "\"tls_version\":null",
                                         "\"host\":\"h\"",
                                         "\"referer\":null",
                                         "\"user_agent\":\"a \\\"q\\\" \\u00c3\\u00a9\"",
                                         "}\n"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        kh_assert(p, strstr(text, fields[i]) != NULL, "no %s in %s", fields[i], text);
    kh_stop(p);
    remove_log(log);
}

Test(accesslog, template_variables, .timeout = 30)
{
    char log[256];
    kh_proc *p = start_log("format = \"<$request_method $uri $args $status $body_bytes_sent "
                           "$server_protocol [$http_x_test_header] [$sent_http_content_type] "
                           "${scheme}s $$ $request_length\"\n",
                           log, sizeof log);
    exchange(p, "POST /echo?a=b HTTP/1.1\r\nHost: h\r\nX-Test-Header: v w\r\n"
                "Content-Length: 3\r\nConnection: close\r\n\r\nabc");
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(log, "\n"), 5000), "no line");
    char *text = read_file(log);
    kh_assert(p, strncmp(text, "<POST /echo a=b 200 3 HTTP/1.1 [v w] [", 38) == 0, "got: %s", text);
    kh_assert(p, strstr(text, "] https $ 3\n") != NULL, "scheme, dollar, request_length: %s", text);
    kh_stop(p);
    remove_log(log);
}

/* keel refuses `format = FORMAT` at start-up, saying `why`. */
static void expect_refused(const char *format, const char *why)
{
    char conf[512];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "modules = http1 hello accesslog\n"
             "listen = 127.0.0.1:0 http1\n[accesslog]\npath = /tmp/keel-never.log\n"
             "format = \"%s\"\n",
             format);
    kh_proc *p = kh_spawn(conf, NULL);
    kh_assert(p, kh_wait_exit(p, 10000) == 1, "format %s was accepted", format);
    kh_assert(p, strstr(kh_stderr(p), why) != NULL, "no '%s'", why);
    unlink("/tmp/keel-never.log");
}

Test(accesslog, bad_template_is_refused, .timeout = 30)
{
    expect_refused("$remote_addr $nonsense", "unknown variable $nonsense");
    expect_refused("$field_Tenant", "$field_Tenant: a log field's name");
}

Test(accesslog, off_writes_nothing, .timeout = 30)
{
    char dir[] = "/tmp/keel-accesslog-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char conf[1024];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "modules = http1 hello accesslog\n"
             "listen = 127.0.0.1:0 http1\n[accesslog]\npath = off\n");
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    exchange(p, "GET /hello/x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    char off[400];
    snprintf(off, sizeof off, "%s/off", p->dir);
    kh_assert(p, access(off, F_OK) != 0, "path = off wrote a file named off");
    snprintf(off, sizeof off, "%s/access.log", p->dir);
    kh_assert(p, access(off, F_OK) != 0, "path = off wrote access.log");
    rmdir(dir);
}

/* A buffer holds lines until its flush interval or the stop: with an
 * hour's interval nothing is written while keel runs, all of it at the
 * stop. */
Test(accesslog, buffered_until_flush_or_stop, .timeout = 30)
{
    char log[256];
    kh_proc *p = start_log("buffer = 64k\nflush = 1h\n", log, sizeof log);
    exchange(p, "GET /hello/a HTTP/1.1\r\nHost: h\r\n\r\n"
                "GET /hello/b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    exchange(p, "GET /hello/c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    kh_assert(p, !kh_file_has(log, "GET"), "a buffered line was written before its time");
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    kh_assert(p, kh_file_has(log, "GET /hello/a ") && kh_file_has(log, "GET /hello/c "),
              "the buffered lines were lost at the stop");
    kh_stop(p);
    remove_log(log);

    /* A short interval writes them while keel runs. */
    p = start_log("buffer = 64k\nflush = 100ms\n", log, sizeof log);
    exchange(p, "GET /hello/d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(log, "GET /hello/d "), 5000), "not flushed in time");
    kh_stop(p);
    remove_log(log);
}

/* Sends one request (with Connection: close) and returns what came back,
 * up to EOF, in a static buffer. */
static const char *exchange_reply(kh_proc *p, const char *request)
{
    static char buf[16384];
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    kh_assert(p, kh_send_str(fd, request) == 0, "send");
    kh_assert(p, kh_expect_eof(fd, buf, sizeof buf, 5000) != 0, "response then close");
    close(fd);
    return buf;
}

/* Fields a module sets (keel_request_set_log_field, ABI 1.8): the
 * calls' answers as the test module reports them, then the JSON line has
 * each one (a name the line already has as field_NAME), in a template
 * too. */
Test(accesslog, module_log_fields, .timeout = 30)
{
    char log[256];
    kh_proc *p = start_log_with("http1 facts", "", "format = json\n", log, sizeof log);
    const char *reply =
        exchange_reply(p, "GET /facts/fields HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    static const char *const answers[] = {
        "set=0,0,0\n",     "bad_name=-2,-2,-2,-2\n",
        "null_value=-2\n", "too_long=-2\n",
        "max_len=0\n",     "tenant=acme2\n",
        "none=null\n",     "at0=tenant:5\n",
        "at1=status:4\n",  "at2=n2345678901234567890123456789012:4096\n"};
    for (size_t i = 0; i < sizeof answers / sizeof *answers; i++)
        kh_assert(p, strstr(reply, answers[i]) != NULL, "no %s in:\n%s", answers[i], reply);
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(log, "\n"), 5000), "no line");
    char *text = read_file(log);
    kh_assert(p, strstr(text, ",\"tenant\":\"acme2\"") != NULL, "no tenant: %s", text);
    kh_assert(p, strstr(text, ",\"field_status\":\"mine\"") != NULL, "no field_status: %s", text);
    kh_assert(p, strstr(text, "\"status\":200,") != NULL, "the fixed status was replaced: %s",
              text);
    kh_stop(p);
    remove_log(log);

    p = start_log_with("http1 facts", "", "format = \"[$field_tenant] [$field_none]\"\n", log,
                       sizeof log);
    exchange(p, "GET /facts/fields HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(log, "\n"), 5000), "no line");
    text = read_file(log);
    kh_assert(p, strcmp(text, "[acme2] [-]\n") == 0, "got: %s", text);
    kh_stop(p);
    remove_log(log);
}

/* $stream_id: HTTP/2's stream (h2load's two requests on one connection
 * are streams 1 and 3), "-" over HTTP/1.1; in JSON only over HTTP/2. */
Test(accesslog, stream_id, .timeout = 30)
{
    char log[256], a[128], b[128];
    kh_proc *p = start_log_with("http1 h2 hello", "",
                                "format = \"$stream_id $server_protocol $uri\"\n", log, sizeof log);
    snprintf(a, sizeof a, "http://127.0.0.1:%u/hello/a", kh_port(p, 0));
    snprintf(b, sizeof b, "http://127.0.0.1:%u/hello/b", kh_port(p, 0));
    /* h2load, not curl: curl 7.88 fails (exit 16) a second transfer on a
     * prior-knowledge connection, against nginx too. */
    const char *argv[] = {"h2load", "-n", "2", "-c", "1", "-m", "1", a, b, NULL};
    ht_run_result rr = ht_run(argv, 15000);
    kh_assert(p, rr.status == 0, "h2load exited %d", rr.status);
    ht_run_free(&rr);
    exchange(p, "GET /hello/c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(log, "/hello/c\n"), 5000), "no line for /hello/c");
    char *text = read_file(log);
    kh_assert(p,
              strstr(text, "1 HTTP/2.0 /hello/a\n") != NULL &&
                  strstr(text, "3 HTTP/2.0 /hello/b\n") != NULL &&
                  strstr(text, "- HTTP/1.1 /hello/c\n") != NULL,
              "got:\n%s", text);
    kh_stop(p);
    remove_log(log);
}

/* The proxy's fields: nginx's $upstream_addr, $upstream_status and
 * $upstream_response_time, for a relayed answer and for a dead server
 * (no status: "-"). */
Test(accesslog, upstream_fields_from_the_proxy, .timeout = 30)
{
    const char *up_conf = "[keel]\n" KH_MODULE_PATH "workers = 1\nmodules = http1 hello\n"
                          "listen = 127.0.0.1:0 http1\n";
    kh_proc *up = kh_start(up_conf, NULL, 1, 10000);
    unsigned dead = kh_free_port();
    char sections[512], log[256];
    snprintf(sections, sizeof sections,
             "[proxy]\nupstream = app 127.0.0.1:%u\nupstream = gone 127.0.0.1:%u\n"
             "pass = /hello/ app\npass = /gone/ gone\n",
             kh_port(up, 0), dead);
    kh_proc *p = start_log_with(
        "http1 proxy", sections,
        "format = \"$uri $status $upstream_addr $upstream_status $upstream_response_time\"\n", log,
        sizeof log);
    exchange(p, "GET /hello/x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    exchange(p, "GET /gone/x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(log, "/gone/x"), 5000), "no line for /gone/x");
    char *text = read_file(log), want[128];
    snprintf(want, sizeof want, "/hello/x 200 127.0.0.1:%u 200 0.", kh_port(up, 0));
    kh_assert(p, strstr(text, want) != NULL, "no '%s' in:\n%s", want, text);
    snprintf(want, sizeof want, "/gone/x 502 127.0.0.1:%u - 0.", dead);
    kh_assert(p, strstr(text, want) != NULL, "no '%s' in:\n%s", want, text);
    kh_stop(p);
    kh_stop(up);
    remove_log(log);
}
