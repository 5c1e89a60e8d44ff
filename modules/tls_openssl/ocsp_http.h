/* ocsp_http.h — the HTTP/1.x answer of an OCSP responder (RFC 6960
 * A.1), read by the stapling fetcher (ocsp.c). Pure C, no keel or
 * OpenSSL type: tests/fuzz/fuzz_ocsp_http.c compiles it alone. */
#ifndef KEEL_TLS_OPENSSL_OCSP_HTTP_H
#define KEEL_TLS_OPENSSL_OCSP_HTTP_H

#include <stddef.h>

/* The most a response head may take; a longer one is refused. */
#define KO_OCSP_HTTP_HEAD_MAX 8192
/* The most a response body may take: an OCSP response for one
 * certificate is 1 to 4 KiB (a delegated responder's certificate
 * included); nginx reads at most 16 KiB. */
#define KO_OCSP_HTTP_BODY_MAX 32768

enum {
    KO_OCSP_HTTP_MORE = 0, /* incomplete: read more */
    KO_OCSP_HTTP_DONE = 1, /* status, body and body_len are set */
    KO_OCSP_HTTP_BAD = -1, /* malformed, over a bound or truncated: why says which */
};

typedef struct ko_ocsp_http {
    int status;      /* the status code, 100 to 999 */
    size_t body;     /* offset of the body in the buffer */
    size_t body_len; /* its length */
    const char *why; /* KO_OCSP_HTTP_BAD: a static string */
} ko_ocsp_http;

/* Parses the answer held in buf[0..len) (everything read so far). eof:
 * the connection has ended, so a body without Content-Length ends at
 * len. The request was HTTP/1.0 (ocsp.c): a Transfer-Encoding answer is
 * refused (RFC 9112 6.1: not sent to a 1.0 client). */
int ko_ocsp_http_parse(const char *buf, size_t len, int eof, ko_ocsp_http *out);

#endif
