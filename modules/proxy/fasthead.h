/* fasthead.h — a strict scanner for the plainest upstream response: one
 * read holding a whole HTTP/1.1 response, a 2xx..5xx status (not 204 or
 * 304), printable ASCII fields, a Content-Length body that ends the read.
 * Anything else — any byte or shape it does not know, any field that
 * frames the message or the connection in a way it does not read itself —
 * is left to llhttp (response.c), so what it accepts it must read exactly
 * as llhttp does: tests/fuzz/fuzz_proxy_head.c holds the two side by side.
 * A pure function (no keel call, no allocation), as fcgi.c.
 */
#ifndef KEEL_PROXY_FASTHEAD_H
#define KEEL_PROXY_FASTHEAD_H

#include "fcgi.h"

#include <stddef.h>

typedef struct px_fast_head {
    int status;
    int keep_alive;  /* what llhttp_should_keep_alive would say */
    size_t head_len; /* the head's bytes, its empty line included */
    size_t nfields;
} px_fast_head;

/* 1 if data[0..len) is such a response: its fields in fields[0..nfields)
 * (offsets into data, a value as llhttp gives it: leading blanks skipped,
 * trailing ones kept; each with its name's token), its body the bytes from
 * head_len to len. 0 otherwise, also for more than cap fields, with
 * nothing said: llhttp reads the bytes instead. */
int px_fast_head_scan(const char *data, size_t len, fcgi_field *fields, size_t cap,
                      px_fast_head *out);

#endif
