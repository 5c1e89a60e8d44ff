/* date.c — the Date header field, cached per worker.
 *
 * RFC 9110 6.6.1: an origin server with a clock MUST send Date on 2xx, 3xx
 * and 4xx responses (keel sends it on every one), in IMF-fixdate form. The
 * line is formatted at most once a second per worker: the loop's cached
 * millisecond clock tells cheaply whether a new loop turn began, only then
 * is the wall clock read, and only a new second is formatted (by the core's
 * keel_time_format, the same as the access log's). h2 compiles this file
 * too and sends the value alone (date.h).
 */
#include "date.h"

#include <string.h>

const char *date_cache_line(date_cache *d, keel_worker *w, size_t *len)
{
    uint64_t now = keel_worker_now_ms(w);
    if (now != d->checked_ms || d->len == 0) {
        d->checked_ms = now;
        int64_t t = keel_time_now();
        if (t != d->sec || d->len == 0) {
            char *p = d->line;
            memcpy(p, "Date: ", DATE_LINE_PREFIX);
            size_t n = keel_time_format(t, KEEL_TIME_HTTP, p + DATE_LINE_PREFIX,
                                        sizeof d->line - DATE_LINE_FRAMING);
            if (n == 0) {
                *len = 0; /* cannot happen: the buffer fits any year */
                return "";
            }
            memcpy(p + DATE_LINE_PREFIX + n, "\r\n", 2);
            d->sec = t;
            d->len = n + DATE_LINE_FRAMING;
        }
    }
    *len = d->len;
    return d->line;
}
