/* keel_time_format against the C library's gmtime and strftime, over fixed
 * dates (the epoch, leap days, century rules, the last representable day)
 * and a sweep of pseudo-random instants from 1900 to 9999. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <keel/keel.h>
#include <string.h>
#include <time.h>

/* 0 where the C library cannot say (Windows: nothing before 1970). */
static int reference(int64_t t, int style, char *out, size_t size)
{
    time_t tt = (time_t)t;
    struct tm tm;
#ifdef _WIN32
    if (gmtime_s(&tm, &tt) != 0)
        return 0;
#else
    cr_assert(gmtime_r(&tt, &tm) != NULL);
#endif
    const char *fmt = style == KEEL_TIME_HTTP  ? "%a, %d %b %Y %H:%M:%S GMT"
                      : style == KEEL_TIME_CLF ? "%d/%b/%Y:%H:%M:%S +0000"
                                               : "%Y-%m-%dT%H:%M:%SZ";
    cr_assert(strftime(out, size, fmt, &tm) > 0);
    return 1;
}

static void check(int64_t t)
{
    static const int styles[] = {KEEL_TIME_HTTP, KEEL_TIME_CLF, KEEL_TIME_ISO};
    for (size_t i = 0; i < 3; i++) {
        char got[64], want[64];
        size_t n = keel_time_format(t, styles[i], got, sizeof got);
        if (!reference(t, styles[i], want, sizeof want))
            return;
        cr_assert_str_eq(got, want, "t=%lld style %d", (long long)t, styles[i]);
        cr_assert_eq(n, strlen(want));
    }
}

Test(clock, fixed_dates)
{
    static const int64_t dates[] = {
        0,
        86399,
        86400,
        784111777 /* RFC 9110's example */,
        951782400 /* 2000-02-29 */,
        4107542400 /* 2100-03-01 */,
        -1,
        -86401,
        -2208988800 /* 1900-01-01 */,
        253402300799 /* 9999-12-31 23:59:59 */,
        1709164800 /* 2024-02-29 */,
        1798761599 /* 2026-12-31 23:59:59 */,
    };
    for (size_t i = 0; i < sizeof dates / sizeof dates[0]; i++)
        check(dates[i]);
}

Test(clock, sweep)
{
    uint64_t x = 88172645463325252u;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int64_t t = -2208988800 + (int64_t)(x % (253402300799u + 2208988800u));
        check(t);
    }
}

Test(clock, too_small_or_unknown)
{
    char buf[29]; /* the HTTP date needs 30 with its NUL */
    cr_assert_eq(keel_time_format(784111777, KEEL_TIME_HTTP, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "");
    char big[64];
    cr_assert_eq(keel_time_format(784111777, 42, big, sizeof big), 0);
    cr_assert_eq(keel_time_format(253402300800, KEEL_TIME_ISO, big, sizeof big),
                 0); /* year 10000 */
}
