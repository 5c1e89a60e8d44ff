/* The command line and config errors: every bad config names FILE:LINE and
 * exits 1; -t checks; --version; --help; --set. */
#define _GNU_SOURCE
#include "harness.h"

#include <keel/version.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define STR_(x) #x
#define STR(x)  STR_(x)

/* Runs keel on a config that must be refused; returns the process (exited,
 * status 1 checked) for further checks on its stderr. */
static kh_proc *refused(const char *config, const char *const *args)
{
    kh_proc *p = kh_spawn(config, args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "exit status %d, expected 1", status);
    kh_assert(p, kh_count_log(p, "listening on") == 0, "it listened despite a bad config");
    return p;
}

/* Asserts that stderr holds "CONF:LINE: " followed (anywhere on the same
 * line) by each of the fragments. */
static void assert_names_line(kh_proc *p, unsigned line, const char *frag1, const char *frag2)
{
    char where[400];
    snprintf(where, sizeof where, "%s:%u: ", p->conf, line);
    const char *s = strstr(kh_stderr(p), where);
    kh_assert(p, s != NULL, "no message naming '%s'", where);
    const char *eol = strchr(s, '\n');
    size_t len = eol ? (size_t)(eol - s) : strlen(s);
    char msg[1024];
    snprintf(msg, sizeof msg, "%.*s", (int)len, s);
    kh_assert(p, strstr(msg, frag1) != NULL, "the message '%s' lacks '%s'", msg, frag1);
    if (frag2)
        kh_assert(p, strstr(msg, frag2) != NULL, "the message '%s' lacks '%s'", msg, frag2);
    kh_assert(p, strstr(kh_stderr(p), "[error]") != NULL, "the message is not an [error] line");
}

#define BASE                                                                                       \
    "[keel]\n"                                                                                     \
    "listen = 127.0.0.1:0 echo\n"                                                                  \
    "modules = echo\n" KH_MODULE_PATH

Test(cli, unknown_key_in_keel_section, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = refused(BASE "bogus = 1\n", NULL);
    assert_names_line(p, 5, "[keel] unknown key 'bogus'", NULL);
    kh_stop(p);
}

Test(cli, unknown_key_in_module_section, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = refused(BASE "[echo]\n"
                              "greeting = hi\n"
                              "gretting = typo\n",
                         NULL);
    assert_names_line(p, 7, "[echo] unknown key 'gretting'", NULL);
    kh_stop(p);
}

Test(cli, section_of_unloaded_module, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = refused(BASE "[nosuchmodule]\n"
                              "key = value\n",
                         NULL);
    /* The section (line 5) or its first key (line 6) may be blamed. */
    char at5[400];
    snprintf(at5, sizeof at5, "%s:5: ", p->conf);
    assert_names_line(p, strstr(kh_stderr(p), at5) ? 5 : 6, "nosuchmodule", NULL);
    kh_stop(p);
}

Test(cli, bad_core_value, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = refused(BASE "workers = banana\n", NULL);
    assert_names_line(p, 5, "workers", NULL);
    kh_stop(p);
}

Test(cli, bad_duration, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = refused(BASE "idle_timeout = soon\n", NULL);
    assert_names_line(p, 5, "idle_timeout", NULL);
    kh_stop(p);
}

Test(cli, bad_module_value, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = refused(BASE "[echo]\n"
                              "max_line = huge\n",
                         NULL);
    assert_names_line(p, 6, "[echo]", "max_line");
    kh_stop(p);
}

Test(cli, bad_listen_line, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = refused("[keel]\n"
                         "modules = echo\n" KH_MODULE_PATH "listen = 127.0.0.1:notaport echo\n",
                         NULL);
    assert_names_line(p, 4, "listen", NULL);
    kh_stop(p);
}

Test(cli, listener_with_unknown_protocol, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = refused("[keel]\n"
                         "modules = echo\n" KH_MODULE_PATH "listen = 127.0.0.1:0 nosuchproto\n",
                         NULL);
    assert_names_line(p, 4, "nosuchproto", NULL);
    kh_stop(p);
}

Test(cli, syntax_error, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = refused(BASE "this line is not ini\n", NULL);
    assert_names_line(p, 5, "", NULL);
    kh_stop(p);
}

Test(cli, missing_config_file, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"-c", "/nonexistent/keel.conf", NULL};
    kh_proc *p = kh_spawn(NULL, args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "exit status %d", status);
    kh_assert(p, strstr(kh_stderr(p), "/nonexistent/keel.conf") != NULL,
              "the message does not name the file");
    kh_stop(p);
}

Test(cli, check_ok, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn(BASE "[echo]\ngreeting = hi\n", args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "keel -t exit status %d", status);
    char ok[400];
    snprintf(ok, sizeof ok, "[info] configuration ok: %s", p->conf);
    kh_assert(p, strstr(kh_stderr(p), ok) != NULL, "no '%s' line", ok);
    kh_assert(p, kh_count_log(p, "listening on") == 0, "-t opened a listener");
    kh_stop(p);
}

Test(cli, check_not_ok, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn(BASE "[echo]\nmax_line = -3\n", args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "keel -t exit status %d", status);
    assert_names_line(p, 6, "max_line", NULL);
    kh_assert(p, strstr(kh_stderr(p), "configuration ok") == NULL, "-t said ok");
    kh_stop(p);
}

Test(cli, check_catches_module_failure, .timeout = 30, .fini = kh_cleanup_all)
{
    /* -t loads the modules, so a module that cannot load fails the check. */
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn("[keel]\n"
                          "listen = 127.0.0.1:0 echo\n"
                          "modules = echo loadfail\n" KH_MODULE_PATH,
                          args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "keel -t exit status %d", status);
    kh_assert(p, strstr(kh_stderr(p), "module 'loadfail': load failed") != NULL,
              "no load failure reported");
    kh_stop(p);
}

Test(cli, version, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--version", NULL};
    kh_proc *p = kh_spawn(NULL, args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "exit status %d", status);
    const char *want =
        "keel " KEEL_VERSION_STRING " (ABI " STR(KEEL_ABI_MAJOR) "." STR(KEEL_ABI_MINOR) ")\n";
    kh_assert(p, strcmp(kh_stdout(p), want) == 0, "stdout was '%s', expected '%s'", p->out, want);
    kh_stop(p);
}

Test(cli, help, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--help", NULL};
    kh_proc *p = kh_spawn(NULL, args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "exit status %d", status);
    const char *out = kh_stdout(p);
    kh_assert(p, strstr(out, "sage") != NULL, "no usage text on stdout: '%s'", out);
    kh_assert(p,
              strstr(out, "-c") && strstr(out, "-t") && strstr(out, "--set") &&
                  strstr(out, "--version"),
              "the usage does not mention -c, -t, --set and --version: '%s'", out);
    kh_stop(p);
}

Test(cli, unknown_option, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--frobnicate", NULL};
    kh_proc *p = kh_spawn(NULL, args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status != 0 && status > 0, "exit status %d for an unknown option", status);
    kh_stop(p);
}

Test(cli, set_overrides_file, .timeout = 30, .fini = kh_cleanup_all)
{
    /* The file's listener is replaced by the --set one and greeting is
     * overridden. */
    const char *args[] = {"--set", "keel.listen=127.0.0.1:0 echo",
                          "--set", "echo.greeting=from set",
                          "--set", "keel.workers=1",
                          NULL};
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:1 echo\n"
                          "modules = echo\n" KH_MODULE_PATH "[echo]\n"
                          "greeting = from file\n",
                          args, 1, 10000);
    kh_assert(p, kh_count_log(p, "listening on") == 1, "expected exactly one listener");
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect failed");
    char buf[128];
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "from set\n") == 0, "greeting was '%s'", buf);
    close(fd);
    kh_stop(p);
}

Test(cli, set_with_unknown_key, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", "keel.bogus=1", NULL};
    kh_proc *p = refused(BASE, args);
    kh_assert(p, strstr(kh_stderr(p), "unknown key 'bogus'") != NULL, "not reported");
    kh_stop(p);
}

Test(cli, set_malformed, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", "noequalsign", NULL};
    kh_proc *p = refused(BASE, args);
    kh_assert(p, strstr(kh_stderr(p), "noequalsign") != NULL, "the message does not quote it");
    kh_stop(p);
}
