/* h2.h — the module: the top layer of h2 (README.md has the table).
 *
 * The protocol's callbacks, [h2], timeouts and the table of events the
 * state reports (h2.c), each stream as an exchange of the core's HTTP
 * layer (request.c: the request; sink.c: the response), and a stream run
 * as a protocol's connection (tunnel.c). Below it: the scheduler and
 * output (scheduler.h), the connection's state (state.h), the frame writer
 * (writer.h), the codec (frame.h, hpack.h).
 */
#ifndef KEEL_H2_H2_H
#define KEEL_H2_H2_H

#include "scheduler.h"

/* ---- h2.c --------------------------------------------------------------- */

extern const keel_protocol h2_protocol;

/* Graceful end (RFC 9113 6.8): GOAWAY NO_ERROR naming the last stream
 * taken; streams in flight finish, then the connection closes. */
void h2_goaway(h2_conn *c);

/* Starts the per-connection tick that checks stream timeouts. */
void h2_tick_start(h2_conn *c);

const char *h2_date(h2_worker *w, size_t *len);

/* ---- request.c ---------------------------------------------------------- */

/* s equals the literal lit (case-sensitive: HTTP/2 field names are lower
 * case, methods are case-sensitive). */
static inline int h2_str_is(keel_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}
/* One decoded field of the stream's head or trailers (ev->field); 0, or
 * nonzero to stop decoding (a flood: the connection ends). */
int h2_stream_field(void *stream, const h2_hpack_field *f);
/* The request head is complete: check it and start the exchange
 * (ev->headers). */
void h2_stream_headers_done(h2_stream *s);
/* The trailers' block is complete (END_STREAM with it; ev->trailers). */
void h2_stream_trailers_done(h2_stream *s);
/* Request body bytes arrived (ev->data): the handler's, a tunnel's, or
 * nobody's. */
void h2_stream_data(h2_stream *s, const uint8_t *data, size_t len);
/* Keeps DATA for a reader to come (the handler, a tunnel's protocol), the
 * stream's window with it (window.c); out of memory, 500. */
void h2_stream_hold_data(h2_stream *s, const uint8_t *data, size_t len);
/* The end of the request body (ev->end). */
void h2_stream_remote_end(h2_stream *s);
/* Hands the core what is buffered if it asked for it (and has not
 * paused it). */
void h2_stream_pump_body(h2_stream *s);

/* ---- sink.c ------------------------------------------------------------- */

/* The sink through which the core answers a stream. */
extern const keel_http_sink h2_sink;
/* The encoded head of status with date, server and the given fields
 * (RFC 9113 8.2.2: connection-specific ones left out), into the stream's
 * head memory, or into out (cap bytes) for a 1xx; NULL if out of memory
 * or a field is not allowed. */
uint8_t *h2_encode_head(h2_stream *s, int status, const keel_header *h, size_t n,
                        int64_t content_length, uint8_t *out, size_t cap, size_t *len);
/* Answers a request the module refuses itself (431, 413, 400, 501, 500, 408). */
void h2_stream_answer(h2_stream *s, int status);

/* ---- tunnel.c: a stream as a connection (RFC 8441) ----------------------- */

typedef struct h2_tunnel h2_tunnel;
/* The sink's upgrade: an extended CONNECT's handler switched protocols;
 * 200, and the stream becomes the protocol's connection. */
int h2_tunnel_upgrade(void *exchange, int status, const keel_header *headers, size_t nheaders,
                      const char *protocol, void *arg);
/* DATA of an extended CONNECT: the tunnel's, or kept for it until the
 * handler has answered. */
void h2_tunnel_data(h2_stream *s, const uint8_t *data, size_t len);
/* The client's END_STREAM: the protocol's EOF. */
void h2_tunnel_remote_end(h2_stream *s);
/* The stream closed or the connection ends: the protocol's connection is
 * aborted. */
void h2_tunnel_stream_gone(h2_stream *s);
/* The client's FIN: nothing more can come on any tunnel (their EOF). */
void h2_tunnel_conn_eof(h2_conn *c);

#endif
