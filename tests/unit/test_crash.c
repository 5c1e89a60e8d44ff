/* The portable half of the crash report (core/runtime/crash.c): the line
 * it writes from the thread's scope and the modules' address ranges, and
 * its signal-safe formatting. test_crash.c (integration) crashes the real
 * binary. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

/* platform.h (uv.h) brings winsock2.h, which must come before windows.h. */
#include "platform/platform.h"
#include "runtime/crash.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <dlfcn.h>
#endif

/* The line for `naddrs` addresses (the first exact), NUL-terminated. */
static const char *describe(const uintptr_t *addrs, size_t naddrs)
{
    static char line[640];
    size_t n = kl_crash_describe(line, sizeof line - 1, "SIGSEGV (segmentation fault)", addrs,
                                 naddrs, naddrs > 0);
    line[n] = '\0';
    cr_assert(n > 0 && line[n - 1] == '\n', "the line must end in one line break: '%s'", line);
    cr_assert(strchr(line, '\n') == line + n - 1, "more than one line: '%s'", line);
    return line;
}

Test(crash, numbers, .timeout = 10)
{
    char buf[24];
    kl_crash_format_dec(buf, 0);
    cr_expect_str_eq(buf, "0");
    kl_crash_format_dec(buf, UINT64_MAX);
    cr_expect_str_eq(buf, "18446744073709551615");
    kl_crash_format_hex(buf, 0);
    cr_expect_str_eq(buf, "0x0");
    kl_crash_format_hex(buf, 0x1139);
    cr_expect_str_eq(buf, "0x1139");
}

Test(crash, timestamps_match_the_calendar, .timeout = 10)
{
    char buf[32];
    kl_crash_format_time(buf, 0, 0);
    cr_expect_str_eq(buf, "1970-01-01T00:00:00.000Z");
    kl_crash_format_time(buf, 951782400, 7); /* a leap day in a year divisible by 400 */
    cr_expect_str_eq(buf, "2000-02-29T00:00:00.007Z");
    kl_crash_format_time(buf, 1000000000, 999);
    cr_expect_str_eq(buf, "2001-09-09T01:46:40.999Z");
    kl_crash_format_time(buf, 4107542399, 0); /* 2100 is not a leap year */
    cr_expect_str_eq(buf, "2100-02-28T23:59:59.000Z");
    kl_crash_format_time(buf, 4107542400, 0);
    cr_expect_str_eq(buf, "2100-03-01T00:00:00.000Z");
    /* Every day of a few years against the C library. */
    for (int64_t t = 1700000000; t < 1700000000 + 3 * 366 * 86400LL; t += 86400 + 3601) {
        struct tm tm;
        kl_gmtime(t, &tm);
        char want[32];
        strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
        kl_crash_format_time(buf, t, 0);
        cr_assert_str_eq(buf, want, "at %lld", (long long)t);
    }
}

Test(crash, thread_and_scope_without_module_code, .timeout = 10)
{
    const char *line = describe(NULL, 0);
    cr_expect(strstr(line, " [error] crash: SIGSEGV (segmentation fault) on another thread") !=
                  NULL,
              "%s", line);
    cr_expect(strstr(line, "outside any module's code") != NULL, "%s", line);

    kl_crash_self.role = KL_THREAD_WORKER;
    kl_crash_self.worker = 7;
    KL_IN_MODULE("alpha", line = describe(NULL, 0));
    cr_expect(strstr(line, "on worker 7 while module 'alpha' was running") != NULL, "%s", line);

    kl_crash_self.role = KL_THREAD_MAIN;
    KL_IN_MODULE("alpha", KL_IN_MODULE("beta", line = describe(NULL, 0)));
    cr_expect(strstr(line, "on the main thread while module 'beta' was running") != NULL, "%s",
              line);
    line = describe(NULL, 0);
    cr_expect(strstr(line, "outside any module's code") != NULL, "scope not restored: %s", line);
}

/* A module's shared object, as the loader records it: the address of its
 * descriptor. Never unloaded, as in keel. */
static const void *load_module(const char *name, char *path, size_t cap)
{
    char symbol[64];
    snprintf(symbol, sizeof symbol, "keel_module_%s", name);
    snprintf(path, cap, "%s/mod_%s%s", KEEL_TEST_MODULE_DIR, name, kl_module_suffix);
#ifdef _WIN32
    HMODULE lib = LoadLibraryA(path);
    cr_assert(lib != NULL, "LoadLibrary %s: error %lu", path, (unsigned long)GetLastError());
    const void *desc = (const void *)GetProcAddress(lib, symbol);
#else
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert(lib != NULL, "dlopen %s: %s", path, dlerror());
    const void *desc = dlsym(lib, symbol);
#endif
    cr_assert(desc != NULL, "no %s in %s", symbol, path);
    return desc;
}

Test(crash, addresses_in_a_modules_object_name_it, .timeout = 10)
{
    char path[512];
    const void *desc = load_module("target12", path, sizeof path);
    kl_crash_add_module("target12", path, desc);
    kl_crash_add_module("target12", path, desc); /* again: recorded once */

    uintptr_t addrs[] = {(uintptr_t)&describe, (uintptr_t)desc};
    char where[64];
    snprintf(where, sizeof where, " in module 'target12' (mod_target12%s+0x", kl_module_suffix);
    const char *line = describe(addrs, 2);
    cr_expect(strstr(line, where) != NULL, "%s", line);

    /* The code at fault wins over the scope, which is named too. */
    KL_IN_MODULE("caller", line = describe(addrs, 2));
    cr_expect(strstr(line, where) != NULL, "%s", line);
    cr_expect(strstr(line, ", called while module 'caller' was running") != NULL, "%s", line);

    /* A callback's address names its module when no frame does. */
    KL_IN_CALLBACK(desc, line = describe(NULL, 0));
    cr_expect(strstr(line, "while module 'target12' was running") != NULL, "%s", line);

    /* keel's own code is no module's. */
    uintptr_t own[] = {(uintptr_t)&describe};
    line = describe(own, 1);
    cr_expect(strstr(line, "outside any module's code") != NULL, "%s", line);
}
