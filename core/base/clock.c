/* Wall-clock time for modules, so that none needs its own (thread-unsafe
 * or platform-specific) gmtime. */
#include <stdio.h>
#include <time.h>

#include <keel/types.h>
#include <uv.h>

#include "platform/platform.h"

int64_t keel_time_now(void)
{
    uv_timeval64_t tv;
    uv_gettimeofday(&tv);
    return (int64_t)tv.tv_sec;
}

/* Days since 1970-01-01 to a civil date (Howard Hinnant's
 * civil_from_days, exact over the proleptic Gregorian calendar): no
 * gmtime, no locale, no lock. */
static void civil_from_days(int64_t z, int64_t *year, unsigned *month, unsigned *day)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *day = doy - (153 * mp + 2) / 5 + 1;
    *month = mp < 10 ? mp + 3 : mp - 9;
    *year = (int64_t)yoe + era * 400 + (*month <= 2);
}

static char *put2(char *p, unsigned v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
    return p + 2;
}

static char *put4(char *p, unsigned v)
{
    p = put2(p, v / 100);
    return put2(p, v % 100);
}

static char *put3(char *p, const char *s)
{
    p[0] = s[0];
    p[1] = s[1];
    p[2] = s[2];
    return p + 3;
}

/* The time of day, sod seconds after midnight, as hh:mm:ss. */
static char *put_hms(char *p, unsigned sod)
{
    p = put2(p, sod / 3600);
    *p++ = ':';
    p = put2(p, sod / 60 % 60);
    *p++ = ':';
    return put2(p, sod % 60);
}

/* Written digit by digit rather than with snprintf: dates go on every
 * static response (Last-Modified) and access-log line, where snprintf
 * and gmtime cost some 3,500 instructions a call (callgrind). */
size_t keel_time_format(int64_t seconds, int style, char *buf, size_t size)
{
    static const char days[7][4] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    int64_t daynum = seconds / 86400, rem = seconds % 86400;
    if (rem < 0) {
        rem += 86400;
        daynum--;
    }
    int64_t year;
    unsigned month, day, sod = (unsigned)rem;
    civil_from_days(daynum, &year, &month, &day);
    char out[40], *p = out;
    if (year < 0 || year > 9999 || size == 0) {
        if (size > 0)
            buf[0] = '\0';
        return 0;
    }
    switch (style) {
    case KEEL_TIME_HTTP: /* Sun, 06 Nov 1994 08:49:37 GMT */
        p = put3(p, days[((daynum % 7) + 7) % 7]);
        *p++ = ',';
        *p++ = ' ';
        p = put2(p, day);
        *p++ = ' ';
        p = put3(p, months[month - 1]);
        *p++ = ' ';
        p = put4(p, (unsigned)year);
        *p++ = ' ';
        p = put_hms(p, sod);
        p = put3(p, " GM");
        *p++ = 'T';
        break;
    case KEEL_TIME_CLF: /* 06/Nov/1994:08:49:37 +0000 */
        p = put2(p, day);
        *p++ = '/';
        p = put3(p, months[month - 1]);
        *p++ = '/';
        p = put4(p, (unsigned)year);
        *p++ = ':';
        p = put_hms(p, sod);
        p = put3(p, " +0");
        p = put3(p, "000");
        break;
    case KEEL_TIME_ISO: /* 1994-11-06T08:49:37Z */
        p = put4(p, (unsigned)year);
        *p++ = '-';
        p = put2(p, month);
        *p++ = '-';
        p = put2(p, day);
        *p++ = 'T';
        p = put_hms(p, sod);
        *p++ = 'Z';
        break;
    default:
        buf[0] = '\0';
        return 0;
    }
    size_t n = (size_t)(p - out);
    if (n >= size) {
        buf[0] = '\0';
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = out[i];
    buf[n] = '\0';
    return n;
}
