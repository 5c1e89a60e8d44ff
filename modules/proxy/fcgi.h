/* fcgi.h — FastCGI 1.0 records and the CGI response head, as pure
 * functions over bytes (no keel, no allocation but what the caller
 * gives): what fastcgi.c sends and reads, and what tests/fuzz/fuzz_fcgi.c
 * feeds hostile input to.
 *
 * The specification: "FastCGI Specification", Mark R. Brown, Open Market,
 * 1996 (sections cited as "FastCGI 3.3"); the response head is a CGI
 * response, RFC 3875 6.
 */
#ifndef KEEL_PROXY_FCGI_H
#define KEEL_PROXY_FCGI_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* FastCGI 8: record types and roles. */
enum {
    FCGI_BEGIN_REQUEST = 1,
    FCGI_ABORT_REQUEST = 2,
    FCGI_END_REQUEST = 3,
    FCGI_PARAMS = 4,
    FCGI_STDIN = 5,
    FCGI_STDOUT = 6,
    FCGI_STDERR = 7,
};
#define FCGI_HEADER_LEN       8
#define FCGI_MAX_CONTENT      65535 /* contentLength is two bytes (FastCGI 3.3) */
#define FCGI_RESPONDER        1
#define FCGI_KEEP_CONN        1
#define FCGI_REQUEST_COMPLETE 0
/* One request per connection at a time: always the same id (FastCGI 3.3:
 * "The Web server re-uses FastCGI request IDs"; 0 is for management). */
#define FCGI_ID 1

/* The 8-byte record header for a record of content_len (<= 65535) bytes. */
void fcgi_header(unsigned char out[FCGI_HEADER_LEN], int type, size_t content_len);

/* FCGI_BEGIN_REQUEST for a Responder, FCGI_KEEP_CONN if keep: 16 bytes. */
void fcgi_begin_request(unsigned char out[16], int keep);

/* A name-value pair (FastCGI 3.4): lengths below 128 in one byte, others
 * in four with the high bit set. fcgi_pair_size says how many bytes
 * fcgi_pair_put writes (0 if a length is 2^31 or more: not encodable). */
size_t fcgi_pair_size(size_t name_len, size_t value_len);
/* The two lengths alone (the name and value follow): 2 to 8 bytes. */
size_t fcgi_pair_head(unsigned char *out, size_t name_len, size_t value_len);
size_t fcgi_pair_put(unsigned char *out, const char *name, size_t name_len, const char *value,
                     size_t value_len);

/* ---- reading the application's records ------------------------------------ */

enum {
    FCGI_EV_MORE = 0, /* everything given was consumed; call again with more */
    FCGI_EV_STDOUT,   /* span holds FCGI_STDOUT content */
    FCGI_EV_STDERR,   /* span holds FCGI_STDERR content */
    FCGI_EV_END,      /* FCGI_END_REQUEST read: app_status, protocol_status */
    FCGI_EV_ERROR     /* not FastCGI, or not what a Responder may send */
};

typedef struct fcgi_reader {
    unsigned char head[FCGI_HEADER_LEN];
    size_t head_len;      /* header bytes gathered */
    int type;             /* the current record's, 0 between records */
    size_t content_left;  /* of the current record */
    size_t padding_left;  /* after its content */
    unsigned char end[8]; /* FCGI_END_REQUEST's body, gathered */
    size_t end_len;
    uint32_t app_status;
    int protocol_status;
    int ended; /* FCGI_END_REQUEST was read: nothing more is valid */
} fcgi_reader;

/* Reads from data[0..len): consumes *used bytes and returns the first event
 * found (FCGI_EV_MORE when none: all of data was consumed). A STDOUT or
 * STDERR span points into data. Records of other types, of another
 * request id, a version other than 1, an END_REQUEST whose body is not 8
 * bytes, or any byte after FCGI_END_REQUEST give FCGI_EV_ERROR, after
 * which the reader must not be used again (the connection is closed). */
int fcgi_read(fcgi_reader *r, const char *data, size_t len, size_t *used, const char **span,
              size_t *span_len);

/* ---- the CGI response head (RFC 3875 6.2, 6.3) ----------------------------- */

/* a[0..n) is lower (NUL-terminated, lower case), ASCII case ignored
 * (inline: with a literal, its length is the compiler's) */
static inline int fcgi_iequal(const char *a, size_t n, const char *lower)
{
    if (strlen(lower) != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)a[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c + 32);
        if (c != (unsigned char)lower[i])
            return 0;
    }
    return 1;
}

typedef struct fcgi_field {
    uint32_t name, name_len, value, value_len; /* offsets into the head */
    /* The name's keel_header_token (keel/header_tokens.h, inline: no keel
     * call), classified once where the field is parsed so that whoever
     * relays the field asks an integer. */
    uint32_t token;
} fcgi_field;

/* Where the head ends in buf[0..len) (the offset just past the empty line
 * ending it, LF or CRLF), or 0 while it has not ended. from: how many of
 * these bytes an earlier call was given (and found no end in), so that a
 * head arriving in many pieces is not searched again from its start. */
size_t fcgi_head_end(const char *buf, size_t len, size_t from);

/* Parses a head that fcgi_head_end found whole (len is its offset): its
 * fields into fields[0..cap) (Status left out), their number in *nfields
 * (counted even beyond cap, so that a first call with cap 0 sizes the
 * array), each with its name's token, the response's status in *status: Status's code (200..599),
 * else 302 with a Location, else 200 (RFC 3875 6.2.3, 6.3.3). 0, or -1
 * for a head that is not a valid CGI response: a line that is not
 * "name: value" with a token name, a value holding a control byte, a
 * folded line, a Status not of three digits in 200..599 (1xx is HTTP's
 * hop, not a CGI script's), more than one Status. */
int fcgi_head_parse(const char *buf, size_t len, fcgi_field *fields, size_t cap, size_t *nfields,
                    int *status);

#endif
