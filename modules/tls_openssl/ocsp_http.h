/* ocsp_http.h — the HTTP/1.x answer of an OCSP responder (RFC 6960
 * A.1), read by the stapling fetcher (ocsp.c) with llhttp. No keel or
 * OpenSSL type: tests/fuzz/fuzz_ocsp_http.c compiles it alone (with
 * llhttp). */
#ifndef KEEL_TLS_OPENSSL_OCSP_HTTP_H
#define KEEL_TLS_OPENSSL_OCSP_HTTP_H

#include <stddef.h>

#include <llhttp.h>

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

/* One answer being read: ko_ocsp_http_init, then ko_ocsp_http_feed with
 * each piece read, then ko_ocsp_http_end when the connection ends. Once
 * DONE or BAD, the outcome stays (bytes after a complete answer are
 * ignored). */
typedef struct ko_ocsp_http {
    llhttp_t parser;
    int state;        /* KO_OCSP_HTTP_MORE, _DONE or _BAD */
    int head_done;    /* the head's empty line was read */
    size_t head_seen; /* bytes given to the parser before the head ended */
    int status;       /* the status code, 100 to 999 */
    const char *why;  /* KO_OCSP_HTTP_BAD: a static string */
    size_t body_len;
    unsigned char body[KO_OCSP_HTTP_BODY_MAX];
} ko_ocsp_http;

void ko_ocsp_http_init(ko_ocsp_http *h);

/* Reads the next len bytes of the answer; returns the state. The
 * request was HTTP/1.0 (ocsp.c): a Transfer-Encoding answer is refused
 * (RFC 9112 6.1: not sent to a 1.0 client), so the body is delimited by
 * Content-Length or by the connection's end. */
int ko_ocsp_http_feed(ko_ocsp_http *h, const char *data, size_t len);

/* The connection has ended: a body without Content-Length ends here,
 * anything else incomplete is refused. Returns DONE or BAD. */
int ko_ocsp_http_end(ko_ocsp_http *h);

#endif
