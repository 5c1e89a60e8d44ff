/* tests/windows/criterion/selftest.c — the runner's own test: one test for
 * each way a test can end. Most of them fail on purpose; the black-box
 * suite (tests/windows/blackbox.py) runs this program and checks that each
 * outcome is reported as it should be:
 *
 *     3 passed, 7 failed, 2 skipped
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>

#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#else
#include <pthread.h>
#include <unistd.h>
#endif

static int initialised;

static void set_up(void)
{
    initialised = 1;
}

static void tear_down(void)
{
    printf("fini ran\n");
}

Test(selftest, passes)
{
    cr_assert(1);
    cr_assert_eq(2 + 2, 4, "arithmetic");
    cr_expect_str_eq("a", "a");
    cr_assert_null(NULL);
    cr_assert_not_null("x");
    cr_assert_geq(3, 3);
}

Test(selftest, expected_exit_code, .exit_code = 5)
{
    exit(5);
}

Test(selftest, init_and_fini_run, .init = set_up, .fini = tear_down)
{
    cr_assert_eq(initialised, 1, ".init did not run");
}

Test(selftest, assert_fails)
{
    cr_assert_eq(1, 2, "one is not %d", 2);
    printf("not reached\n");
}

Test(selftest, expect_fails_and_goes_on)
{
    cr_expect(0);
    printf("went on after a failed expectation\n");
}

Test(selftest, str_eq_fails)
{
    cr_assert_str_eq("left", "right");
}

Test(selftest, crashes)
{
    volatile int *volatile p = NULL;
    *p = 1;
}

Test(selftest, aborts)
{
    abort();
}

Test(selftest, times_out, .timeout = 1)
{
#ifdef _WIN32
    Sleep(5000);
#else
    sleep(5);
#endif
}

#ifdef _WIN32
static DWORD WINAPI failing_thread(void *arg)
{
    (void)arg;
    cr_assert_fail("from another thread");
    return 0;
}
#else
static void *failing_thread(void *arg)
{
    (void)arg;
    cr_assert_fail("from another thread");
    return NULL;
}
#endif

Test(selftest, assert_in_thread)
{
#ifdef _WIN32
    HANDLE t = CreateThread(NULL, 0, failing_thread, NULL, 0, NULL);
    cr_assert_not_null(t);
    WaitForSingleObject(t, INFINITE);
#else
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, failing_thread, NULL), 0);
    pthread_join(t, NULL);
#endif
    printf("not reached\n");
}

Test(selftest, skipped)
{
    cr_skip_test("skipped on purpose");
}

Test(selftest, disabled, .disabled = 1)
{
    cr_assert_fail("a disabled test ran");
}
