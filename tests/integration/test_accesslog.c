/* The accesslog module: Combined Log Format lines, escaping, and the
 * appender flushing everything before keel exits. */
#include "harness.h"

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
