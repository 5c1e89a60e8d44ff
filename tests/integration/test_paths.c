/* One rule for relative paths (docs/configuration.md): [keel] log and
 * [accesslog] path, given or by default, are relative to the config
 * file's folder like docroots, certificates and the pid file, whatever
 * the working directory keel starts in. */
#include "harness.h"

#include <stdlib.h>
#include <sys/stat.h>

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
    kh_assert(p, KH_WAIT_UNTIL((port = kh_log_file_port(logpath)) != 0, 10000),
              "no error log %s beside the config (working directory %s)", logpath, cwd);
    kh_assert(p, kh_get_ok(port, "/hello/paths"), "no answer");
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(accesspath, "GET /hello/paths "), 5000),
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
