/* tests/windows/criterion/runner.c — main() and the checks behind the
 * Criterion stand-in in criterion/criterion.h.
 *
 * The runner lists the registered tests, sorted by suite and name, and runs
 * each one in a fresh process: on Windows it starts its own executable again
 * with --kl-run=SUITE/NAME (CreateProcess), elsewhere it forks. A test that
 * crashes, calls abort() or outruns its timeout fails alone and the others
 * still run. It prints one line per test and closes with
 *
 *     N passed, N failed[, N skipped]
 *
 * exiting 0 when nothing failed. Options: --list, --filter=GLOB (on
 * SUITE/NAME, * and ? wildcards), --timeout=SECONDS (default for tests
 * without .timeout: 60, or $KL_CR_TIMEOUT), --help.
 */
#include <criterion/criterion.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#else
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#endif

/* Exit codes of a test process (distinct from abort()'s 3 on Windows and
 * from the small codes tests may use with .exit_code). */
#define KL_CR_EXIT_FAILED  71
#define KL_CR_EXIT_SKIPPED 72

static struct kl_cr_test *tests;
static struct kl_cr_suite *suites;
static volatile long expect_failures;

void kl_cr_register_test(struct kl_cr_test *t)
{
    t->next = tests;
    tests = t;
}

void kl_cr_register_suite(struct kl_cr_suite *s)
{
    s->next = suites;
    suites = s;
}

/* ---- checks (in the test process) ------------------------------------------ */

static void vreport(const char *file, unsigned line, const char *what, const char *fmt, va_list ap)
{
    char msg[2048];
    msg[0] = '\0';
    if (fmt != NULL && fmt[0] != '\0')
        vsnprintf(msg, sizeof msg, fmt, ap);
    /* One write per report, so reports from several threads stay whole. */
    char line_buf[4096];
    if (msg[0] != '\0')
        snprintf(line_buf, sizeof line_buf, "%s:%u: %s\n    %s\n", file, line, msg, what);
    else
        snprintf(line_buf, sizeof line_buf, "%s:%u: %s\n", file, line, what);
    fputs(line_buf, stdout);
    fflush(stdout);
}

static void end_test(int code)
{
    fflush(stdout);
    fflush(stderr);
    /* _Exit: a fatal check may fire on any thread (a worker's callback);
     * atexit handlers and other threads must not run on after it. */
    _Exit(code);
}

static void failed(int fatal)
{
    if (fatal)
        end_test(KL_CR_EXIT_FAILED);
#if defined(_WIN32)
    InterlockedIncrement(&expect_failures);
#else
    __atomic_add_fetch(&expect_failures, 1, __ATOMIC_SEQ_CST);
#endif
}

void kl_cr_fail(int fatal, const char *file, unsigned line, const char *expr, const char *fmt, ...)
{
    char what[1024];
    snprintf(what, sizeof what, "%s: %s is false",
             fatal ? "assertion failed" : "expectation failed", expr);
    if (strncmp(expr, "cr_", 3) == 0)
        snprintf(what, sizeof what, "%s", expr);
    va_list ap;
    va_start(ap, fmt);
    vreport(file, line, what, fmt, ap);
    va_end(ap);
    failed(fatal);
}

void kl_cr_check_str(int fatal, int want_equal, const char *a, const char *b, const char *file,
                     unsigned line, const char *a_text, const char *b_text, const char *fmt, ...)
{
    int equal = a != NULL && b != NULL && strcmp(a, b) == 0;
    if (equal == want_equal && a != NULL && b != NULL)
        return;
    char what[3072];
    snprintf(what, sizeof what, "%s: %s %s %s\n      %s = \"%s\"\n      %s = \"%s\"",
             fatal ? "assertion failed" : "expectation failed", a_text,
             want_equal ? "==" : "!=", b_text, a_text, a ? a : "(null)", b_text, b ? b : "(null)");
    va_list ap;
    va_start(ap, fmt);
    vreport(file, line, what, fmt, ap);
    va_end(ap);
    failed(fatal);
}

void kl_cr_skip(const char *file, unsigned line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(file, line, "skipped", fmt, ap);
    va_end(ap);
    end_test(KL_CR_EXIT_SKIPPED);
}

void kl_cr_log(const char *level, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("[%s] %s\n", level, msg);
    fflush(stdout);
}

/* ---- the test list ------------------------------------------------------------ */

static struct criterion_test_extra_data effective(const struct kl_cr_test *t)
{
    struct criterion_test_extra_data e = t->extra;
    for (const struct kl_cr_suite *s = suites; s != NULL; s = s->next) {
        if (strcmp(s->name, t->suite) != 0)
            continue;
        if (e.init == NULL)
            e.init = s->extra.init;
        if (e.fini == NULL)
            e.fini = s->extra.fini;
        if (e.timeout <= 0)
            e.timeout = s->extra.timeout;
        if (!e.disabled)
            e.disabled = s->extra.disabled;
        if (e.exit_code == 0)
            e.exit_code = s->extra.exit_code;
    }
    return e;
}

static int compare_tests(const void *a, const void *b)
{
    const struct kl_cr_test *x = *(const struct kl_cr_test *const *)a;
    const struct kl_cr_test *y = *(const struct kl_cr_test *const *)b;
    int c = strcmp(x->suite, y->suite);
    return c ? c : strcmp(x->name, y->name);
}

/* `*` and `?` glob, as Criterion's --filter on "suite/name". */
static int glob_match(const char *pat, const char *s)
{
    if (*pat == '\0')
        return *s == '\0';
    if (*pat == '*')
        return glob_match(pat + 1, s) || (*s != '\0' && glob_match(pat, s + 1));
    if (*s != '\0' && (*pat == '?' || *pat == *s))
        return glob_match(pat + 1, s + 1);
    return 0;
}

static void test_id(const struct kl_cr_test *t, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", t->suite, t->name);
}

/* ---- the test process ------------------------------------------------------------ */

#ifdef _WIN32
static LONG WINAPI on_crash(EXCEPTION_POINTERS *info)
{
    char msg[128];
    snprintf(msg, sizeof msg, "crashed: exception 0x%08lx at %p\n",
             (unsigned long)info->ExceptionRecord->ExceptionCode,
             info->ExceptionRecord->ExceptionAddress);
    fputs(msg, stdout);
    fflush(stdout);
    /* The process ends with the exception code as its exit code, without
     * an error box or (under Wine) the debugger. */
    return EXCEPTION_EXECUTE_HANDLER;
}
#endif

static int run_here(const struct kl_cr_test *t)
{
    struct criterion_test_extra_data e = effective(t);
#ifdef _WIN32
    SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX);
    SetUnhandledExceptionFilter(on_crash);
#endif
    setvbuf(stdout, NULL, _IONBF, 0);
    if (e.init != NULL)
        e.init();
    t->fn();
    if (e.fini != NULL)
        e.fini();
    fflush(stdout);
    fflush(stderr);
    return expect_failures ? KL_CR_EXIT_FAILED : 0;
}

/* ---- running a test in its own process ------------------------------------------- */

enum outcome { PASSED, FAILED, SKIPPED };

static double now_ms(void)
{
#ifdef _WIN32
    return (double)GetTickCount64();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
#endif
}

/* Runs t in a child process; `why` receives the reason of a failure. */
static enum outcome run_isolated(const struct kl_cr_test *t, double timeout_s, char *why,
                                 size_t whylen)
{
    struct criterion_test_extra_data e = effective(t);
    char id[512];
    test_id(t, id, sizeof id);
    fflush(stdout);
    fflush(stderr);
#ifdef _WIN32
    wchar_t exe[32768];
    DWORD n = GetModuleFileNameW(NULL, exe, (DWORD)(sizeof exe / sizeof exe[0]));
    if (n == 0 || n >= sizeof exe / sizeof exe[0]) {
        snprintf(why, whylen, "cannot find the test executable (error %lu)", GetLastError());
        return FAILED;
    }
    static wchar_t cmd[33000];
    int used = _snwprintf(cmd, sizeof cmd / sizeof cmd[0] - 1, L"\"%ls\" --kl-run=", exe);
    for (const char *p = id; *p && used < (int)(sizeof cmd / sizeof cmd[0]) - 1; p++)
        cmd[used++] = (wchar_t)(unsigned char)*p;
    cmd[used] = L'\0';

    STARTUPINFOW si;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
    si.hStdOutput = GetStdHandle(STD_OUTPUT_HANDLE);
    si.hStdError = GetStdHandle(STD_ERROR_HANDLE);
    HANDLE std[3] = {si.hStdInput, si.hStdOutput, si.hStdError};
    for (int i = 0; i < 3; i++)
        if (std[i] != NULL && std[i] != INVALID_HANDLE_VALUE)
            SetHandleInformation(std[i], HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
    PROCESS_INFORMATION pi;
    if (!CreateProcessW(exe, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
        snprintf(why, whylen, "cannot start the test process (error %lu)", GetLastError());
        return FAILED;
    }
    CloseHandle(pi.hThread);
    DWORD wait = WaitForSingleObject(pi.hProcess, (DWORD)(timeout_s * 1000));
    if (wait != WAIT_OBJECT_0) {
        TerminateProcess(pi.hProcess, 1);
        WaitForSingleObject(pi.hProcess, 5000);
        CloseHandle(pi.hProcess);
        snprintf(why, whylen, "timed out after %gs", timeout_s);
        return FAILED;
    }
    DWORD code = 1;
    GetExitCodeProcess(pi.hProcess, &code);
    CloseHandle(pi.hProcess);
    if (code == KL_CR_EXIT_SKIPPED)
        return SKIPPED;
    if (code == (DWORD)e.exit_code)
        return PASSED;
    if (code == KL_CR_EXIT_FAILED)
        snprintf(why, whylen, "a check failed");
    else if (code >= 0xC0000000u)
        snprintf(why, whylen, "crashed (exception 0x%08lx)", (unsigned long)code);
    else if (code == 3)
        snprintf(why, whylen, "aborted (exit code 3)");
    else
        snprintf(why, whylen, "exited with code %lu (expected %d)", (unsigned long)code,
                 e.exit_code);
    return FAILED;
#else
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "fork failed");
        return FAILED;
    }
    if (pid == 0) {
        alarm((unsigned)(timeout_s + 0.999));
        _exit(run_here(t));
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        ;
    if (WIFSIGNALED(status)) {
        if (WTERMSIG(status) == SIGALRM)
            snprintf(why, whylen, "timed out after %gs", timeout_s);
        else
            snprintf(why, whylen, "crashed (signal %d)", WTERMSIG(status));
        return FAILED;
    }
    int code = WEXITSTATUS(status);
    if (code == KL_CR_EXIT_SKIPPED)
        return SKIPPED;
    if (code == e.exit_code)
        return PASSED;
    if (code == KL_CR_EXIT_FAILED)
        snprintf(why, whylen, "a check failed");
    else
        snprintf(why, whylen, "exited with code %d (expected %d)", code, e.exit_code);
    return FAILED;
#endif
}

/* ---- main ---------------------------------------------------------------------- */

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [--list] [--filter=SUITE/NAME-GLOB] [--timeout=SECONDS]\n"
            "Runs each test in its own process; prints N passed, N failed at the end.\n",
            prog);
}

int main(int argc, char **argv)
{
    const char *filter = NULL, *run = NULL;
    int list = 0;
    double default_timeout = 60;
    const char *env = getenv("KL_CR_TIMEOUT");
    if (env != NULL && atof(env) > 0)
        default_timeout = atof(env);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--kl-run=", 9) == 0)
            run = a + 9;
        else if (strcmp(a, "--list") == 0 || strcmp(a, "-l") == 0)
            list = 1;
        else if (strncmp(a, "--filter=", 9) == 0)
            filter = a + 9;
        else if (strcmp(a, "--filter") == 0 && i + 1 < argc)
            filter = argv[++i];
        else if (strncmp(a, "--timeout=", 10) == 0 && atof(a + 10) > 0)
            default_timeout = atof(a + 10);
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout, argv[0]);
            return 0;
        } else {
            fprintf(stderr, "%s: unknown option '%s'\n", argv[0], a);
            usage(stderr, argv[0]);
            return 2;
        }
    }

    size_t count = 0;
    for (struct kl_cr_test *t = tests; t != NULL; t = t->next)
        count++;
    struct kl_cr_test **sorted = calloc(count ? count : 1, sizeof *sorted);
    if (sorted == NULL)
        return 2;
    size_t k = 0;
    for (struct kl_cr_test *t = tests; t != NULL; t = t->next)
        sorted[k++] = t;
    qsort(sorted, count, sizeof *sorted, compare_tests);

    char id[512];
    if (run != NULL) {
        for (size_t i = 0; i < count; i++) {
            test_id(sorted[i], id, sizeof id);
            if (strcmp(id, run) == 0)
                return run_here(sorted[i]);
        }
        fprintf(stderr, "%s: no test %s\n", argv[0], run);
        return 2;
    }

    unsigned passed = 0, failed_n = 0, skipped = 0;
    for (size_t i = 0; i < count; i++) {
        const struct kl_cr_test *t = sorted[i];
        test_id(t, id, sizeof id);
        if (filter != NULL && !glob_match(filter, id))
            continue;
        if (list) {
            printf("%s\n", id);
            continue;
        }
        struct criterion_test_extra_data e = effective(t);
        if (e.disabled) {
            printf("[SKIP] %s::%s: disabled\n", t->suite, t->name);
            skipped++;
            continue;
        }
        double timeout = e.timeout > 0 ? e.timeout : default_timeout;
        char why[256] = "";
        double start = now_ms();
        enum outcome o = run_isolated(t, timeout, why, sizeof why);
        double took = now_ms() - start;
        switch (o) {
        case PASSED:
            printf("[PASS] %s::%s (%.0f ms)\n", t->suite, t->name, took);
            passed++;
            break;
        case SKIPPED:
            printf("[SKIP] %s::%s\n", t->suite, t->name);
            skipped++;
            break;
        case FAILED:
            printf("[FAIL] %s::%s: %s (%s:%u, %.0f ms)\n", t->suite, t->name, why, t->file, t->line,
                   took);
            failed_n++;
            break;
        }
        fflush(stdout);
    }
    free(sorted);
    if (list)
        return 0;
    if (skipped)
        printf("%u passed, %u failed, %u skipped\n", passed, failed_n, skipped);
    else
        printf("%u passed, %u failed\n", passed, failed_n);
    return failed_n ? 1 : 0;
}
