/* [keel] user and group (docs/security.md): started as root, keel binds,
 * opens its files, then runs as the user for good; a reload keeps the
 * user and fails, saying why, on another one. These tests need root (CI
 * runs as root) and skip otherwise. */
#include "harness.h"

#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>

/* "Uid:\t65534\t65534\t65534\t65534" and the like from /proc/PID/status:
 * the four numbers (real, effective, saved, file system) of `field`. */
static int status_ids(pid_t pid, const char *field, long ids[4])
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    int found = 0;
    size_t len = strlen(field);
    while (!found && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, len) == 0 && line[len] == ':')
            found =
                sscanf(line + len + 1, "%ld %ld %ld %ld", &ids[0], &ids[1], &ids[2], &ids[3]) == 4;
    fclose(f);
    return found;
}

/* The first number after "field:" in /proc/PID/status, or -1. */
static long status_value(pid_t pid, const char *field)
{
    long ids[4] = {-1, -1, -1, -1};
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t len = strlen(field);
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            if (sscanf(line + len + 1, "%ld", &ids[0]) != 1)
                ids[0] = -1;
            break;
        }
    fclose(f);
    return ids[0];
}

static int runs_as(pid_t pid, uid_t uid, gid_t gid)
{
    long u[4], g[4];
    if (!status_ids(pid, "Uid", u) || !status_ids(pid, "Gid", g))
        return 0;
    for (int i = 0; i < 4; i++)
        if (u[i] != (long)uid || g[i] != (long)gid)
            return 0;
    return 1;
}

static pid_t successor;

static void privileges_fini(void)
{
    if (successor > 0)
        kill(successor, SIGKILL);
    successor = 0;
    kh_cleanup_all();
}

static struct passwd *nobody_or_skip(void)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to drop privileges (CI runs as root)");
    struct passwd *pw = getpwnam("nobody");
    if (pw == NULL)
        cr_skip_test("no user 'nobody' on this machine");
    return pw;
}

Test(privileges, runs_as_the_user_and_reloads, .timeout = 60, .fini = privileges_fini)
{
    struct passwd *pw = nobody_or_skip();
    uid_t uid = pw->pw_uid;
    gid_t gid = pw->pw_gid;
    /* The pid file's folder is the user's (systemd's RuntimeDirectory=):
     * a reload's new process, already that user, rewrites it. */
    char run[] = "/tmp/keel-run-XXXXXX";
    cr_assert_not_null(mkdtemp(run));
    cr_assert(chown(run, uid, gid) == 0);
    char pid_path[300], conf[1024];
    snprintf(pid_path, sizeof pid_path, "%s/keel.pid", run);
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\nworkers = 2\n"
             "modules = http1 hello\nuser = nobody\npid_file = %s\n",
             pid_path);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    kh_assert(p, KH_WAIT_UNTIL(kh_read_pid(pid_path) == p->pid, 5000), "no pid file");
    kh_assert(p, runs_as(p->pid, uid, gid), "keel (pid %d) does not run as nobody", (int)p->pid);
    kh_assert(p, status_value(p->pid, "NoNewPrivs") == 1, "no_new_privs is not set");
    kh_assert(p, kh_wait_log(p, "running as user nobody", 5000), "the drop is not logged");
    kh_assert(p, kh_get_ok(port, "/hello/x"), "no answer as nobody");

    /* The reload's new process reads the config as nobody. */
    cr_assert(chmod(p->dir, 0755) == 0 && chmod(p->conf, 0644) == 0);
    kh_signal(p, SIGHUP);
    pid_t next = 0;
    kh_assert(p, KH_WAIT_UNTIL((next = kh_read_pid(pid_path)) > 0 && next != p->pid, 10000),
              "the reload did not write a new pid");
    successor = next;
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "the old process did not drain and exit");
    kh_assert(p, runs_as(next, uid, gid), "the new process does not run as nobody");
    kh_assert(p, kh_get_ok(port, "/hello/y"), "no answer after the reload");

    /* Another user in the new config: the reload fails, saying why, and
     * the running keel serves on. */
    FILE *f = fopen(p->conf, "w");
    cr_assert(f != NULL);
    fputs(conf, f);
    fputs("group = root\n", f);
    fclose(f);
    kill(next, SIGHUP);
    /* The first process is gone; its stderr is still the new one's. */
    kh_assert(p, KH_WAIT_UNTIL(strstr(kh_stderr(p), "reload failed") != NULL, 10000),
              "the reload did not fail");
    kh_assert(p, strstr(kh_stderr(p), "cannot become") != NULL, "no reason for the failure");
    kh_assert(p, kh_get_ok(port, "/hello/z"), "no answer after the failed reload");
    kill(next, SIGTERM);
    kh_assert(p, KH_WAIT_UNTIL(kill(next, 0) != 0, 10000), "the new process did not stop");
    successor = 0;
    unlink(pid_path); /* removed by keel at exit; a leftover of a kill */
    rmdir(run);
}

Test(privileges, warns_when_root_without_user, .timeout = 30)
{
    nobody_or_skip();
    kh_proc *p = kh_start("[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
                          "modules = http1 hello\n",
                          NULL, 1, 10000);
    kh_assert(p, kh_wait_log(p, "running as root without [keel] user", 1000), "no warning");
    kh_stop(p);
}

Test(privileges, unknown_user_fails_the_check, .timeout = 30)
{
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn("[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
                          "modules = http1\nuser = no-such-user-keel\n",
                          args);
    kh_assert(p, kh_wait_exit(p, 10000) == 1, "keel -t accepted an unknown user");
    kh_assert(p, kh_wait_log(p, "no user 'no-such-user-keel'", 1000), "no reason given");
}

/* keel as nobody with its error log and an access log in `dir`; renames
 * both, sends SIGUSR1 and makes a request. */
static kh_proc *rotate_as_nobody(const char *dir, char names[4][300])
{
    snprintf(names[0], 300, "%s/keel.log", dir);
    snprintf(names[1], 300, "%s/access.log", dir);
    snprintf(names[2], 300, "%s/keel.log.1", dir);
    snprintf(names[3], 300, "%s/access.log.1", dir);
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
             "modules = http1 hello accesslog\nuser = nobody\nlog = %s\n"
             "[accesslog]\npath = %s\n",
             names[0], names[1]);
    kh_proc *p = kh_spawn(conf, NULL);
    unsigned port = 0;
    kh_assert(p, KH_WAIT_UNTIL((port = kh_log_file_port(names[0])) != 0, 10000), "no port");
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(names[0], "running as user nobody"), 5000),
              "did not drop");
    kh_assert(p, rename(names[0], names[2]) == 0 && rename(names[1], names[3]) == 0, "rename");
    kh_signal(p, SIGUSR1);
    /* The last line of the reopen, not its first ("SIGUSR1: reopening"):
     * a request served in between would be logged to the file before,
     * as it should. In the new error log, or in the old one if the
     * folder refused the new. */
    kh_assert(p,
              KH_WAIT_UNTIL(kh_file_has(names[0], "log files reopened") ||
                                kh_file_has(names[2], "log files reopened"),
                            5000),
              "the reopen's end is not logged");
    kh_assert(p, kh_get_ok(port, "/hello/rotated"), "no answer after the reopen");
    return p;
}

/* The log folder is the user's: the reopen creates the new files as the
 * user, and they get the lines. */
Test(privileges, reopen_after_the_drop, .timeout = 30, .fini = privileges_fini)
{
    struct passwd *pw = nobody_or_skip();
    char run[] = "/tmp/keel-logs-XXXXXX";
    cr_assert_not_null(mkdtemp(run));
    cr_assert(chown(run, pw->pw_uid, pw->pw_gid) == 0);
    char names[4][300];
    kh_proc *p = rotate_as_nobody(run, names);
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(names[1], "GET /hello/rotated "), 5000),
              "the new access log did not get the line");
    kh_assert(p, kh_file_has(names[0], "log files reopened"), "the new error log is empty");
    struct stat st;
    kh_assert(p, stat(names[1], &st) == 0 && st.st_uid == pw->pw_uid,
              "the new access log is not the user's");
    kh_stop(p);
    for (int i = 0; i < 4; i++)
        unlink(names[i]);
    rmdir(run);
}

/* A folder the user cannot write: the reopen fails, says so, and keel
 * keeps writing to the files it had (opened as root, before the drop). */
Test(privileges, reopen_refused_keeps_the_old_files, .timeout = 30, .fini = privileges_fini)
{
    nobody_or_skip();
    char run[] = "/tmp/keel-logs-XXXXXX";
    cr_assert_not_null(mkdtemp(run));
    cr_assert(chmod(run, 0755) == 0);
    char names[4][300];
    kh_proc *p = rotate_as_nobody(run, names);
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(names[3], "GET /hello/rotated "), 5000),
              "the line did not go to the file opened before");
    kh_assert(p, KH_WAIT_UNTIL(kh_file_has(names[2], "cannot reopen"), 5000),
              "the failure is not in the error log");
    kh_assert(p, access(names[1], F_OK) != 0, "an access log appeared where nobody cannot write");
    kh_stop(p);
    for (int i = 0; i < 4; i++)
        unlink(names[i]);
    rmdir(run);
}
