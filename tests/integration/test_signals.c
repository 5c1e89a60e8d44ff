/* Signals as operators send them (docs/running.md): SIGUSR1 and
 * `keel -s reopen` reopen the error log and every access log after a
 * rotation renamed them; SIGUSR2 does not kill keel. */
#include "harness.h"

#include <stdlib.h>
#include <sys/stat.h>

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

typedef struct logs {
    char error[400], access[400], error_old[400], access_old[400], pid[400];
} logs;

/* keel with its error log and an access log in its directory, serving. */
static kh_proc *start_logging(logs *l, unsigned *port)
{
    char dir[] = "/tmp/keel-signals-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    snprintf(l->error, sizeof l->error, "%s/keel.log", dir);
    snprintf(l->access, sizeof l->access, "%s/access.log", dir);
    snprintf(l->error_old, sizeof l->error_old, "%s/keel.log.1", dir);
    snprintf(l->access_old, sizeof l->access_old, "%s/access.log.1", dir);
    snprintf(l->pid, sizeof l->pid, "%s/keel.pid", dir);
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
             "workers = 2\nmodules = http1 hello accesslog\n"
             "log = %s\npid_file = %s\n"
             "[accesslog]\npath = %s\n",
             l->error, l->pid, l->access);
    kh_proc *p = kh_spawn(conf, NULL);
    kh_assert(p, KH_WAIT_UNTIL((*port = kh_log_file_port(l->error)) != 0, 10000),
              "keel did not log its port in %s", l->error);
    kh_assert(p, kh_get_ok(*port, "/hello/before"), "no answer before the rotation");
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(l->access, "GET /hello/before "), 5000),
              "the access log did not get the first request");
    /* logrotate's default: rename, then signal. */
    kh_assert(p, rename(l->error, l->error_old) == 0 && rename(l->access, l->access_old) == 0,
              "cannot rename the logs");
    return p;
}

/* After the reopen: new files under the old names get the lines, the
 * renamed ones no more. */
static void check_reopened(kh_proc *p, const logs *l, unsigned port)
{
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(l->error, "log files reopened"), 5000),
              "no new error log %s after the reopen", l->error);
    long long error_old = file_size(l->error_old), access_old = file_size(l->access_old);
    kh_assert(p, kh_get_ok(port, "/hello/after"), "no answer after the reopen");
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(l->access, "GET /hello/after "), 5000),
              "the new access log %s did not get the request", l->access);
    kh_assert(p, !kh_file_has(l->access_old, "/hello/after"), "the renamed access log grew");
    kh_assert(p, file_size(l->access_old) == access_old, "the renamed access log grew");

    /* The stop's lines go to the new error log too. */
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "keel did not exit cleanly");
    kh_assert(p, kh_file_has(l->error, "stopped"), "the new error log did not get the last line");
    kh_assert(p, file_size(l->error_old) == error_old, "the renamed error log grew");
    const char *files[] = {l->error, l->access, l->error_old, l->access_old, l->pid};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        unlink(files[i]);
    char dir[400];
    snprintf(dir, sizeof dir, "%s", l->error);
    *strrchr(dir, '/') = '\0';
    rmdir(dir);
}

Test(signals, sigusr1_reopens_the_logs, .timeout = 60)
{
    logs l;
    unsigned port;
    kh_proc *p = start_logging(&l, &port);
    kh_signal(p, SIGUSR1);
    check_reopened(p, &l, port);
    kh_stop(p);
}

Test(signals, keel_s_reopen_sends_it, .timeout = 60)
{
    logs l;
    unsigned port;
    kh_proc *p = start_logging(&l, &port);
    kh_assert(p, KH_WAIT_UNTIL(file_size(l.pid) > 0, 5000), "no pid file");
    /* The same config file: the control process finds keel by its pid file. */
    const char *args[] = {"-c", p->conf, "-s", "reopen", NULL};
    kh_proc *ctl = kh_spawn(NULL, args);
    kh_assert(ctl, kh_wait_exit(ctl, 10000) == 0, "keel -s reopen failed");
    check_reopened(p, &l, port);
    kh_stop(p);
}

Test(signals, sigusr2_is_not_fatal, .timeout = 30)
{
    const char *conf =
        "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\nmodules = http1 hello\n";
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    kh_signal(p, SIGUSR2);
    kh_assert(p, kh_wait_log(p, "SIGUSR2 ignored", 5000), "SIGUSR2 was not handled");
    kh_assert(p, kh_get_ok(kh_port(p, 0), "/hello/x"), "keel no longer serves after SIGUSR2");
    kh_stop(p);
}
