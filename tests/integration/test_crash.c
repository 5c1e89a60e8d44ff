/* The crash report: when a module's code crashes keel, one [error] line
 * names the signal, the worker (or the main thread) and the module, and
 * the process still dies by that signal. mod_crash crashes on request. */
#define _GNU_SOURCE
#include "harness.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>

/* No core files from the crashes we cause; and under ASan, its own
 * handlers off, so that the signal reaches keel's (a real deployment has
 * no ASan). Inherited by the keel process. */
static void crash_env(void)
{
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof opts,
             "%s%shandle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:handle_abort=0",
             asan ? asan : "", asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}

static kh_proc *start_crash(int workers, const char *extra)
{
    crash_env();
    char config[2048];
    snprintf(config, sizeof config,
             "[keel]\n"
             "listen = 127.0.0.1:0 crash\n"
             "workers = %d\n"
             "modules = crash\n" KH_MODULE_PATH "%s",
             workers, extra ? extra : "");
    return kh_start(config, NULL, 1, 10000);
}

static void send_command(kh_proc *p, const char *command)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect failed");
    kh_assert(p, kh_send_str(fd, command) == 0, "send");
    /* The connection dies with keel; nothing to read. */
    close(fd);
}

/* keel died by `sig` (not exit, not another signal). */
static void expect_death_by(kh_proc *p, int sig)
{
    int status = kh_wait_exit(p, 20000);
    kh_assert(p, status == -1, "keel did not die by a signal (status %d)", status);
    kh_assert(p, WIFSIGNALED(p->status) && WTERMSIG(p->status) == sig,
              "keel died by signal %d, expected %d", WTERMSIG(p->status), sig);
}

/* Exactly one report line, holding every fragment. */
static void expect_report(kh_proc *p, const char *fragments[])
{
    kh_assert(p, kh_count_log(p, "] crash: ") == 1, "expected one crash line");
    const char *line = strstr(kh_stderr(p), "[error] crash: ");
    kh_assert(p, line != NULL, "the crash line is not an [error]");
    const char *eol = strchr(line, '\n');
    kh_assert(p, eol != NULL, "the crash line does not end");
    char text[1024];
    snprintf(text, sizeof text, "%.*s", (int)(eol - line), line);
    for (const char **f = fragments; *f != NULL; f++)
        kh_assert(p, strstr(text, *f) != NULL, "the crash line '%s' lacks '%s'", text, *f);
}

Test(crash, segv_on_a_connection_names_worker_and_module, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start_crash(1, NULL);
    send_command(p, "segv\n");
    expect_death_by(p, SIGSEGV);
    const char *want[] = {"crash: SIGSEGV (segmentation fault)", "on worker 0",
                          "in module 'crash' (mod_crash.so+0x", NULL};
    expect_report(p, want);
    kh_stop(p);
}

Test(crash, abort_in_libc_is_traced_to_the_module, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start_crash(1, NULL);
    send_command(p, "abort\n");
    expect_death_by(p, SIGABRT);
    const char *want[] = {"crash: SIGABRT (abort)", "on worker 0", "in module 'crash'", NULL};
    expect_report(p, want);
    kh_stop(p);
}

Test(crash, stack_overflow_is_reported, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start_crash(1, NULL);
    send_command(p, "overflow\n");
    expect_death_by(p, SIGSEGV);
    const char *want[] = {"crash: SIGSEGV (stack overflow)", "on worker 0", "in module 'crash'",
                          NULL};
    expect_report(p, want);
    kh_stop(p);
}

Test(crash, crash_in_a_timer_names_its_worker, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start_crash(2, NULL);
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect failed");
    kh_assert(p, kh_send_str(fd, "timer\n") == 0, "send");
    char line[64];
    kh_recv_line(fd, line, sizeof line, 5000);
    unsigned worker;
    kh_assert(p, sscanf(line, "worker %u", &worker) == 1, "got '%s'", line);
    close(fd);
    expect_death_by(p, SIGSEGV);
    char on[32];
    snprintf(on, sizeof on, "on worker %u", worker);
    const char *want[] = {"crash: SIGSEGV", on, "in module 'crash'", NULL};
    expect_report(p, want);
    kh_stop(p);
}

Test(crash, crash_in_load_is_on_the_main_thread, .timeout = 60, .fini = kh_cleanup_all)
{
    crash_env();
    kh_proc *p = kh_spawn("[keel]\n"
                          "listen = 127.0.0.1:0 crash\n"
                          "modules = crash\n" KH_MODULE_PATH "[crash]\n"
                          "in_load = on\n",
                          NULL);
    expect_death_by(p, SIGSEGV);
    const char *want[] = {"crash: SIGSEGV", "on the main thread", "in module 'crash'", NULL};
    expect_report(p, want);
    kh_stop(p);
}

/* A module file cut short (a copy interrupted, a full disk) faults inside
 * the dynamic loader with SIGBUS, before any module is recorded: the line
 * names the file being opened. */
Test(crash, truncated_module_file_is_named, .timeout = 60, .fini = kh_cleanup_all)
{
#if !defined(__linux__)
    /* Other loaders may check the file's size first (dyld refuses a
     * truncated Mach-O with an error): nothing to crash on. */
    cr_skip_test("a truncated module faults in the dynamic loader on Linux (ELF, glibc)");
#else
    crash_env();
    char dir[256];
    snprintf(dir, sizeof dir, "%s/keel-trunc-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(dir) != NULL, "mkdtemp");
    char whole[512], cut[512];
    snprintf(whole, sizeof whole, "%s/mod_crash.so", KEEL_TEST_MODULE_DIR);
    snprintf(cut, sizeof cut, "%s/mod_broken.so", dir);
    FILE *in = fopen(whole, "rb"), *out = fopen(cut, "wb");
    cr_assert(in != NULL && out != NULL, "copy %s", whole);
    /* The first page: the ELF header and program headers are whole, the
     * segments they map are past the end (debug sections make up the
     * back of the file, so cutting it in half is not enough). */
    char buf[4096];
    cr_assert(fread(buf, 1, sizeof buf, in) == sizeof buf, "read");
    cr_assert(fwrite(buf, 1, sizeof buf, out) == sizeof buf, "write");
    fclose(in);
    fclose(out);

    char config[1024];
    snprintf(config, sizeof config,
             "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 broken\n"
             "module_path = " KEEL_MODULE_DIR " %s\n",
             dir);
    kh_proc *p = kh_spawn(config, NULL);
    expect_death_by(p, SIGBUS);
    char names[600];
    snprintf(names, sizeof names, "while opening the module file %s", cut);
    const char *want[] = {"crash: SIGBUS", "on the main thread", names, NULL};
    expect_report(p, want);
    kh_stop(p);
    unlink(cut);
    rmdir(dir);
#endif
}

Test(crash, the_line_goes_to_the_log_file_too, .timeout = 60, .fini = kh_cleanup_all)
{
    char log[300];
    snprintf(log, sizeof log, "%s/keel-crash-log-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    char extra[400];
    snprintf(extra, sizeof extra, "log = %s\n", log);
    crash_env();
    char config[2048];
    snprintf(config, sizeof config,
             "[keel]\n"
             "listen = 127.0.0.1:0 crash\n"
             "workers = 1\n"
             "modules = crash\n" KH_MODULE_PATH "%s",
             extra);
    kh_proc *p = kh_spawn(config, NULL);
    /* Its log is the file: wait there for the listener. */
    int listening = 0;
    char text[8192] = "";
    for (long long end = kh_now_ms() + 10000; !listening && kh_now_ms() < end; kh_sleep_ms(20)) {
        FILE *f = fopen(log, "r");
        if (f != NULL) {
            size_t n = fread(text, 1, sizeof text - 1, f);
            text[n] = '\0';
            fclose(f);
        }
        listening = strstr(text, "listening on 127.0.0.1:") != NULL;
    }
    kh_assert(p, listening, "no listener in %s: %s", log, text);
    unsigned port = 0;
    sscanf(strstr(text, "listening on 127.0.0.1:"), "listening on 127.0.0.1:%u", &port);
    int fd = kh_connect("127.0.0.1", port);
    kh_assert(p, fd >= 0, "connect failed");
    kh_assert(p, kh_send_str(fd, "segv\n") == 0, "send");
    close(fd);
    expect_death_by(p, SIGSEGV);
    FILE *f = fopen(log, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    unlink(log);
    kh_assert(p, strstr(text, "[error] crash: SIGSEGV") != NULL, "not in the log file: %s", text);
    const char *want[] = {"crash: SIGSEGV", "in module 'crash'", NULL};
    expect_report(p, want); /* and on stderr */
    kh_stop(p);
}

Test(crash, crash_report_off_writes_nothing, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start_crash(1, "crash_report = off\n");
    send_command(p, "segv\n");
    expect_death_by(p, SIGSEGV);
    kh_assert(p, kh_count_log(p, "crash:") == 0, "a crash line although crash_report = off");
    kh_stop(p);
}
