/* tests/windows/criterion/criterion/criterion.h — a small stand-in for
 * Criterion (https://github.com/Snaipe/Criterion), which has no Windows
 * build: the subset of its C API keel's unit tests use, so that the same
 * tests/unit/test_*.c compile and run on Windows (mingw-w64 under Wine, or
 * MSVC). The build puts tests/windows/criterion first on the include path
 * when KEEL_MINI_CRITERION is on (the default on Windows); elsewhere the
 * real Criterion is used.
 *
 * Supported:
 *   Test(suite, name, .timeout = S, .init = f, .fini = f, .disabled = 1,
 *        .exit_code = N, .description = "...")
 *   TestSuite(suite, same fields)          defaults for the suite's tests
 *   cr_assert / cr_expect [_eq _neq _lt _leq _gt _geq _null _not_null _zero
 *        _not_zero _str_eq _str_neq _str_empty _str_not_empty _arr_eq
 *        _arr_neq _float_eq _float_neq], cr_assert_fail, cr_expect_fail,
 *        cr_skip_test, cr_log_info/warn/error — each with an optional
 *        printf-style message, as in Criterion's classic API.
 *
 * Semantics kept from Criterion: every test runs in its own process (a
 * crash or a hang fails that test only), cr_assert* ends the test,
 * cr_expect* records the failure and goes on, .timeout is in seconds.
 * The runner (runner.c) supplies main(): see its usage (--help).
 */
#ifndef KL_MINI_CRITERION_H
#define KL_MINI_CRITERION_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kl_posix_compat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fields Test(...) and TestSuite(...) accept after the names. */
struct criterion_test_extra_data {
    int kl_sentinel_; /* lets the initializer list be empty */
    void (*init)(void);
    void (*fini)(void);
    int signal;    /* accepted, not checked: Windows has no signals */
    int exit_code; /* the test passes only if it exits with this code */
    int disabled;  /* reported as skipped */
    const char *description;
    double timeout; /* seconds; 0 = the runner's default */
    void *data;
};

struct kl_cr_test {
    const char *suite;
    const char *name;
    void (*fn)(void);
    const char *file;
    unsigned line;
    struct criterion_test_extra_data extra;
    struct kl_cr_test *next;
};

struct kl_cr_suite {
    const char *name;
    struct criterion_test_extra_data extra;
    struct kl_cr_suite *next;
};

void kl_cr_register_test(struct kl_cr_test *t);
void kl_cr_register_suite(struct kl_cr_suite *s);

/* Reports a failed check: `fatal` ends the test at once. `expr` describes
 * the check; `fmt` is the user's message ("" when none was given). */
void kl_cr_fail(int fatal, const char *file, unsigned line, const char *expr, const char *fmt, ...);
void kl_cr_check_str(int fatal, int want_equal, const char *a, const char *b, const char *file,
                     unsigned line, const char *a_text, const char *b_text, const char *fmt, ...);
void kl_cr_skip(const char *file, unsigned line, const char *fmt, ...);
void kl_cr_log(const char *level, const char *fmt, ...);

/* ---- registration (before main) ------------------------------------------ */

#if defined(_MSC_VER) && !defined(__clang__)
#pragma section(".CRT$XCU", read)
#define KL_CR_CONSTRUCTOR(f)                                                                       \
    static void f(void);                                                                           \
    __declspec(allocate(".CRT$XCU")) void (*const f##_kl_ctor)(void) = f;                          \
    static void f(void)
#else
#define KL_CR_CONSTRUCTOR(f)                                                                       \
    static void f(void) __attribute__((constructor));                                              \
    static void f(void)
#endif

#define Test(suite, name, ...)                                                                     \
    static void kl_cr_fn_##suite##_##name(void);                                                   \
    static struct kl_cr_test kl_cr_test_##suite##_##name = {                                       \
        #suite,   #name,    kl_cr_fn_##suite##_##name,                                             \
        __FILE__, __LINE__, {.kl_sentinel_ = 0, __VA_ARGS__},                                      \
        NULL};                                                                                     \
    KL_CR_CONSTRUCTOR(kl_cr_reg_##suite##_##name)                                                  \
    {                                                                                              \
        kl_cr_register_test(&kl_cr_test_##suite##_##name);                                         \
    }                                                                                              \
    static void kl_cr_fn_##suite##_##name(void)

#define TestSuite(suite, ...)                                                                      \
    static struct kl_cr_suite kl_cr_suite_##suite = {                                              \
        #suite, {.kl_sentinel_ = 0, __VA_ARGS__}, NULL};                                           \
    KL_CR_CONSTRUCTOR(kl_cr_regsuite_##suite)                                                      \
    {                                                                                              \
        kl_cr_register_suite(&kl_cr_suite_##suite);                                                \
    }                                                                                              \
    struct kl_cr_suite_end_##suite

/* ---- assertions ------------------------------------------------------------
 * `"" __VA_ARGS__` turns an absent message into "" and a present one into
 * its own literal: Criterion's messages are literals followed by their
 * arguments. Every operand is evaluated exactly once. */

#define KL_CR_CHECK(fatal, cond, expr, ...)                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            kl_cr_fail((fatal), __FILE__, __LINE__, (expr), "" __VA_ARGS__);                       \
    } while (0)

#define KL_CR_CMP(fatal, a, op, b, ...) KL_CR_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)

#define KL_CR_STR(fatal, eq, a, b, ...)                                                            \
    kl_cr_check_str((fatal), (eq), (a), (b), __FILE__, __LINE__, #a, #b, "" __VA_ARGS__)

#define KL_CR_FLOAT_EQ(a, b, eps) (((a) - (b) <= (eps)) && ((b) - (a) <= (eps)))

#define cr_assert(cond, ...)     KL_CR_CHECK(1, cond, #cond, __VA_ARGS__)
#define cr_expect(cond, ...)     KL_CR_CHECK(0, cond, #cond, __VA_ARGS__)
#define cr_assert_not(cond, ...) KL_CR_CHECK(1, !(cond), "!(" #cond ")", __VA_ARGS__)
#define cr_expect_not(cond, ...) KL_CR_CHECK(0, !(cond), "!(" #cond ")", __VA_ARGS__)
#define cr_assert_fail(...)      kl_cr_fail(1, __FILE__, __LINE__, "cr_assert_fail()", "" __VA_ARGS__)
#define cr_expect_fail(...)      kl_cr_fail(0, __FILE__, __LINE__, "cr_expect_fail()", "" __VA_ARGS__)
#define cr_skip_test(...)        kl_cr_skip(__FILE__, __LINE__, "" __VA_ARGS__)

#define cr_assert_eq(a, b, ...)  KL_CR_CMP(1, a, ==, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...)  KL_CR_CMP(0, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) KL_CR_CMP(1, a, !=, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) KL_CR_CMP(0, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...)  KL_CR_CMP(1, a, <, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...)  KL_CR_CMP(0, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) KL_CR_CMP(1, a, <=, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) KL_CR_CMP(0, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...)  KL_CR_CMP(1, a, >, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...)  KL_CR_CMP(0, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) KL_CR_CMP(1, a, >=, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) KL_CR_CMP(0, a, >=, b, __VA_ARGS__)

#define cr_assert_null(p, ...)     KL_CR_CHECK(1, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_null(p, ...)     KL_CR_CHECK(0, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) KL_CR_CHECK(1, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) KL_CR_CHECK(0, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_zero(v, ...)     KL_CR_CHECK(1, (v) == 0, #v " == 0", __VA_ARGS__)
#define cr_expect_zero(v, ...)     KL_CR_CHECK(0, (v) == 0, #v " == 0", __VA_ARGS__)
#define cr_assert_not_zero(v, ...) KL_CR_CHECK(1, (v) != 0, #v " != 0", __VA_ARGS__)
#define cr_expect_not_zero(v, ...) KL_CR_CHECK(0, (v) != 0, #v " != 0", __VA_ARGS__)

#define cr_assert_str_eq(a, b, ...)     KL_CR_STR(1, 1, a, b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...)     KL_CR_STR(0, 1, a, b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...)    KL_CR_STR(1, 0, a, b, __VA_ARGS__)
#define cr_expect_str_neq(a, b, ...)    KL_CR_STR(0, 0, a, b, __VA_ARGS__)
#define cr_assert_str_empty(s, ...)     KL_CR_STR(1, 1, s, "", __VA_ARGS__)
#define cr_expect_str_empty(s, ...)     KL_CR_STR(0, 1, s, "", __VA_ARGS__)
#define cr_assert_str_not_empty(s, ...) KL_CR_STR(1, 0, s, "", __VA_ARGS__)
#define cr_expect_str_not_empty(s, ...) KL_CR_STR(0, 0, s, "", __VA_ARGS__)

#define cr_assert_arr_eq(a, b, n, ...)                                                             \
    KL_CR_CHECK(1, memcmp((a), (b), (n)) == 0, "memcmp(" #a ", " #b ", " #n ") == 0", __VA_ARGS__)
#define cr_expect_arr_eq(a, b, n, ...)                                                             \
    KL_CR_CHECK(0, memcmp((a), (b), (n)) == 0, "memcmp(" #a ", " #b ", " #n ") == 0", __VA_ARGS__)
#define cr_assert_arr_neq(a, b, n, ...)                                                            \
    KL_CR_CHECK(1, memcmp((a), (b), (n)) != 0, "memcmp(" #a ", " #b ", " #n ") != 0", __VA_ARGS__)
#define cr_expect_arr_neq(a, b, n, ...)                                                            \
    KL_CR_CHECK(0, memcmp((a), (b), (n)) != 0, "memcmp(" #a ", " #b ", " #n ") != 0", __VA_ARGS__)

#define cr_assert_float_eq(a, b, eps, ...)                                                         \
    KL_CR_CHECK(1, KL_CR_FLOAT_EQ(a, b, eps), #a " == " #b " (within " #eps ")", __VA_ARGS__)
#define cr_expect_float_eq(a, b, eps, ...)                                                         \
    KL_CR_CHECK(0, KL_CR_FLOAT_EQ(a, b, eps), #a " == " #b " (within " #eps ")", __VA_ARGS__)
#define cr_assert_float_neq(a, b, eps, ...)                                                        \
    KL_CR_CHECK(1, !KL_CR_FLOAT_EQ(a, b, eps), #a " != " #b " (within " #eps ")", __VA_ARGS__)
#define cr_expect_float_neq(a, b, eps, ...)                                                        \
    KL_CR_CHECK(0, !KL_CR_FLOAT_EQ(a, b, eps), #a " != " #b " (within " #eps ")", __VA_ARGS__)

#define cr_log_info(...)  kl_cr_log("info", __VA_ARGS__)
#define cr_log_warn(...)  kl_cr_log("warn", __VA_ARGS__)
#define cr_log_error(...) kl_cr_log("error", __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
