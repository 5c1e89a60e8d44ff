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

size_t keel_time_format(int64_t seconds, int style, char *buf, size_t size)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    kl_gmtime(seconds, &tm);
    int n;
    switch (style) {
    case KEEL_TIME_HTTP:
        n = snprintf(buf, size, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7],
                     tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                     tm.tm_sec);
        break;
    case KEEL_TIME_CLF:
        n = snprintf(buf, size, "%02d/%s/%04d:%02d:%02d:%02d +0000", tm.tm_mday,
                     months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
        break;
    case KEEL_TIME_ISO:
        n = snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        break;
    default:
        n = -1;
    }
    if (n < 0 || (size_t)n >= size) {
        if (size > 0)
            buf[0] = '\0';
        return 0;
    }
    return (size_t)n;
}
