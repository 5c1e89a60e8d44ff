/* date.h — the Date header field (RFC 9110 6.6.1), cached per worker: for
 * http1, and for h2, which compiles date.c too (modules/h2/CMakeLists.txt)
 * and sends the value without the line's framing. */
#ifndef KEEL_MODULES_HTTP1_DATE_H
#define KEEL_MODULES_HTTP1_DATE_H

#include <keel/keel.h>

#include <stddef.h>
#include <stdint.h>

/* A worker's Date line; zeroed (the worker state is), it is formatted on
 * first use. */
typedef struct date_cache {
    uint64_t checked_ms; /* the loop's clock when the wall clock was last read */
    int64_t sec;         /* the second the line shows */
    size_t len;          /* of line; 0 until formatted */
    char line[48];       /* "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" */
} date_cache;

/* "Date: " and the "\r\n" around the value in line. */
#define DATE_LINE_PREFIX  6
#define DATE_LINE_FRAMING 8

/* The line "Date: IMF-fixdate\r\n" for now, its length in *len: worker's
 * thread (w is the worker the cache belongs to). */
const char *date_cache_line(date_cache *d, keel_worker *w, size_t *len);

#endif
