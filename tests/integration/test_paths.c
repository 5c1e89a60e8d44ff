/* One rule for relative paths (docs/configuration.md): [keel] log and
 * [accesslog] path, given or by default, are relative to the config
 * file's folder like docroots, certificates and the pid file, whatever
 * the working directory keel starts in. */
#include "harness.h"

#include <stdlib.h>
#include <sys/stat.h>

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    if (buf != NULL)
        n = fread(buf, 1, cap - 1, f);
    fclose(f);
    if (buf != NULL)
        buf[n] = '\0';
    return buf;
}

static int file_has(const char *path, const char *needle)
{
    char *text = slurp(path);
    int found = text != NULL && strstr(text, needle) != NULL;
    free(text);
    return found;
}

static unsigned port_in(const char *path)
{
    char *text = slurp(path);
    const char *at = text ? strstr(text, "listening on 127.0.0.1:") : NULL;
    unsigned port = at ? (unsigned)atoi(at + strlen("listening on 127.0.0.1:")) : 0;
    free(text);
    return port;
}

static int get_ok(unsigned port, const char *path)
{
    int fd = kh_connect("127.0.0.1", port);
    if (fd < 0)
        return 0;
    char req[256], buf[2048];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", path);
    int ok = kh_send_str(fd, req) == 0;
    size_t n = ok ? kh_recv_n(fd, buf, sizeof buf, sizeof buf - 1, 5000) : 0;
    close(fd);
    return n > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0;
}

static int exists(const char *dir, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    return stat(path, &st) == 0;
}

/* Starts keel on `conf` from an empty working directory elsewhere; checks
 * that the error log `log` and the access log `access` appear beside the
 * config and nothing in the working directory. */
static void run_elsewhere(const char *conf, const char *log, const char *access)
{
    char cwd[] = "/tmp/keel-cwd-XXXXXX";
    cr_assert_not_null(mkdtemp(cwd));
    cr_assert(chdir(cwd) == 0);
    kh_proc *p = kh_spawn(conf, NULL);
    char logpath[600], accesspath[600];
    snprintf(logpath, sizeof logpath, "%s/%s", p->dir, log);
    snprintf(accesspath, sizeof accesspath, "%s/%s", p->dir, access);
    unsigned port = 0;
    kh_assert(p, KH_WAIT_UNTIL((port = port_in(logpath)) != 0, 10000),
              "no error log %s beside the config (working directory %s)", logpath, cwd);
    kh_assert(p, get_ok(port, "/hello/paths"), "no answer");
    kh_assert(p, KH_WAIT_UNTIL(file_has(accesspath, "GET /hello/paths "), 5000),
              "no access log %s beside the config", accesspath);
    kh_assert(p, !exists(cwd, log) && !exists(cwd, access),
              "a log was written in the working directory %s", cwd);
    kh_stop(p);
    unlink(logpath);
    unlink(accesspath);
    rmdir(cwd);
}

Test(paths, log_and_accesslog_beside_the_config, .timeout = 30)
{
    run_elsewhere("[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
                  "modules = http1 hello accesslog\nlog = keel.log\n"
                  "[accesslog]\npath = web-access.log\n",
                  "keel.log", "web-access.log");
}

Test(paths, default_accesslog_beside_the_config, .timeout = 30)
{
    run_elsewhere("[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
                  "modules = http1 hello accesslog\nlog = keel.log\n",
                  "keel.log", "access.log");
}
