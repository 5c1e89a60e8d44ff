/* Checks that catch what they should (docs/running.md): `keel -t` refuses a
 * config that cannot serve and reports the descriptor budget; `keel -s
 * reload` runs the same full check before it signals, and says why it
 * did not. */
#include "harness.h"

#include <stdlib.h>

#define MODS "module_path = " KEEL_MODULE_DIR "\n"

Test(checks, check_refuses_a_config_without_listen, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn("[keel]\n" MODS "modules = http1\n", args);
    kh_assert(p, kh_wait_exit(p, 10000) == 1, "keel -t accepted a config with no listen line");
    kh_assert(p, strstr(kh_stderr(p), "no [keel] listen line") != NULL, "no reason given");
    kh_assert(p, strstr(kh_stderr(p), "configuration ok") == NULL, "-t said ok");
}

Test(checks, check_reports_the_descriptor_budget, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"-t", NULL};
    kh_next_nofile(4096, 4096);
    kh_proc *p = kh_spawn("[keel]\n" MODS "listen = 127.0.0.1:0 http1\nmodules = http1\n"
                          "workers = 1\nmax_connections = 1000\n",
                          args);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "keel -t failed");
    /* 2 x 1000 + 1 socket + 4 + 64 */
    kh_assert(p,
              strstr(kh_stderr(p), "descriptors: limit 4096; max_connections = 1000 with 1 worker "
                                   "and 1 listening socket needs up to 2069") != NULL,
              "no descriptor report");
}

/* The log file of the config is only tried by a check: the reason goes
 * to whoever ran it. */
Test(checks, check_answers_on_stderr_with_a_log_file, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn("[keel]\n" MODS "listen = 127.0.0.1:0 http1\n"
                          "modules = http1 static\nlog = /tmp/keel-check-unused.log\n"
                          "[static]\nmount = / /nonexistent-keel-docroot\n",
                          args);
    kh_assert(p, kh_wait_exit(p, 10000) == 1, "a missing docroot passed the check");
    kh_assert(p, strstr(kh_stderr(p), "/nonexistent-keel-docroot") != NULL,
              "the reason is not on stderr");
    unlink("/tmp/keel-check-unused.log");
}

static pid_t successor;

static void reload_fini(void)
{
    if (successor > 0)
        kill(successor, SIGKILL);
    successor = 0;
    kh_cleanup_all();
}

static void write_config(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

Test(checks, reload_is_checked_before_the_signal, .timeout = 60, .fini = reload_fini)
{
    const char *good = "[keel]\n" MODS "listen = 127.0.0.1:0 http1\nmodules = http1 static\n"
                       "pid_file = keel.pid\n[static]\nmount = / .\n";
    kh_proc *p = kh_start(good, NULL, 1, 10000);
    char pid_path[400];
    snprintf(pid_path, sizeof pid_path, "%s/keel.pid", p->dir);
    kh_assert(p, KH_WAIT_UNTIL(kh_read_pid(pid_path) == p->pid, 5000), "no pid file");
    const char *args[] = {"-c", p->conf, "-s", "reload", NULL};

    /* A docroot that is not there: keel -s reload says so and exits 1,
     * and the running keel is not asked. */
    write_config(p->conf, "[keel]\n" MODS "listen = 127.0.0.1:0 http1\nmodules = http1 static\n"
                          "pid_file = keel.pid\n[static]\nmount = / missing-docroot\n");
    kh_proc *ctl = kh_spawn(NULL, args);
    kh_assert(ctl, kh_wait_exit(ctl, 10000) == 1, "keel -s reload sent a config that fails");
    kh_assert(ctl, strstr(kh_stderr(ctl), "missing-docroot") != NULL, "no reason given");
    kh_assert(ctl, strstr(kh_stderr(ctl), "reload not sent") != NULL, "not said");
    /* An unknown key, the same. */
    write_config(p->conf, "[keel]\n" MODS "listen = 127.0.0.1:0 http1\nmodules = http1 static\n"
                          "pid_file = keel.pid\n[static]\nmount = / .\ntypo = 1\n");
    ctl = kh_spawn(NULL, args);
    kh_assert(ctl, kh_wait_exit(ctl, 10000) == 1, "keel -s reload sent an unknown key");
    kh_assert(ctl, strstr(kh_stderr(ctl), "typo") != NULL, "no reason given");
    kh_assert(p, kh_count_log(p, "reloading") == 0, "the running keel was signalled");

    /* A good config: signalled, and the new process takes over. */
    write_config(p->conf, good);
    ctl = kh_spawn(NULL, args);
    kh_assert(ctl, kh_wait_exit(ctl, 10000) == 0, "keel -s reload refused a good config");
    pid_t next = 0;
    kh_assert(p, KH_WAIT_UNTIL((next = kh_read_pid(pid_path)) > 0 && next != p->pid, 10000),
              "no reload after keel -s reload");
    successor = next;
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "the old process did not hand over");
    kill(next, SIGTERM);
    kh_assert(p, KH_WAIT_UNTIL(kill(next, 0) != 0, 10000), "the new process did not stop");
    successor = 0;
}

/* A check never creates the log file (run as root, it would leave one the
 * keel it checks for could not open as its user), but refuses a folder
 * that is not there. */
Test(checks, check_does_not_create_the_log_file, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn("[keel]\n" MODS "listen = 127.0.0.1:0 http1\nmodules = http1\n"
                          "log = new.log\n",
                          args);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "keel -t refused a log file it can create");
    char path[400];
    snprintf(path, sizeof path, "%s/new.log", p->dir);
    kh_assert(p, access(path, F_OK) != 0, "keel -t created %s", path);

    p = kh_spawn("[keel]\n" MODS "listen = 127.0.0.1:0 http1\nmodules = http1\n"
                 "log = no-such-folder/new.log\n",
                 args);
    kh_assert(p, kh_wait_exit(p, 10000) == 1, "keel -t accepted a log in a missing folder");
    kh_assert(p, strstr(kh_stderr(p), "cannot open log file") != NULL, "no reason given");
}
