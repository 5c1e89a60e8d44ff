/* date.c — the Date header field, cached per worker.
 *
 * RFC 9110 6.6.1: an origin server with a clock MUST send Date on 2xx, 3xx
 * and 4xx responses (keel sends it on every one), in IMF-fixdate form. The
 * line is formatted at most once a second per worker: the loop's cached
 * millisecond clock tells cheaply whether a new loop turn began, only then
 * is the wall clock read, and only a new second is formatted (by the core's
 * keel_time_format, the same as the access log's).
 */
#include "h1.h"

#include <string.h>

const char *h1_date_line(h1_worker *w, size_t *len)
{
    uint64_t now = keel_worker_now_ms(w->worker);
    if (now != w->date_checked_ms || w->date_line_len == 0) {
        w->date_checked_ms = now;
        int64_t t = keel_time_now();
        if (t != w->date_sec || w->date_line_len == 0) {
            char *p = w->date_line;
            memcpy(p, "Date: ", 6);
            size_t n = keel_time_format(t, KEEL_TIME_HTTP, p + 6, sizeof w->date_line - 8);
            if (n == 0) {
                *len = 0; /* cannot happen: the buffer fits any year */
                return "";
            }
            memcpy(p + 6 + n, "\r\n", 2);
            w->date_sec = t;
            w->date_line_len = n + 8;
        }
    }
    *len = w->date_line_len;
    return w->date_line;
}
