/* state.h — the connection's state: frames parsed and what they mean
 * (input.c), streams and their life cycle (stream.c), the receive windows
 * (window.c). Above the frame writer (writer.h); below the scheduler
 * (scheduler.h) and the module (h2.h), which it tells what happened through
 * the connection's h2_events, never by name.
 */
#ifndef KEEL_H2_STATE_H
#define KEEL_H2_STATE_H

#include "writer.h"

/* ---- streams (stream.c) ------------------------------------------------- */

/* One stream: each layer's part of it in one allocation (the request's
 * fields request.c's, the response head sink.c's, the queue and the ready
 * and held lists the scheduler's), as the connection's (writer.h). */
#define H2_INLINE_FIELDS 16
#define H2_HEAD_INLINE   320 /* bytes: a static file's head, encoded, is ~170 */

struct h2_stream {
    h2_stream *prev, *next; /* the connection's list of streams */
    h2_stream *hnext;       /* the connection's table by id (stream.c) */
    h2_stream *ready_next;  /* the connection's list of streams with DATA to go */
    h2_stream *reset_next;  /* the connection's list of resets to send */
    struct h2_conn *c;
    int32_t id;
    keel_request *req;

    /* The request head. While its block is decoded, names and values are
     * copied into hmem and the views hold offsets into it; once the block
     * is complete they become pointers (request.c). */
    keel_http_head head;
    keel_header *fields;
    uint16_t *tokens; /* each field's token (keel_header_token), after fields when grown */
    size_t nfields, cap;
    keel_header inline_fields[H2_INLINE_FIELDS];
    uint16_t inline_tokens[H2_INLINE_FIELDS];
    char *hmem;
    size_t hlen, hcap;
    keel_str method, path, authority, scheme;
    keel_str protocol;        /* RFC 8441 4: :protocol of an extended CONNECT */
    struct h2_tunnel *tunnel; /* the stream runs a protocol (tunnel.c) */
    uint32_t host_at;         /* the host field's index + 1 in fields, 0: none (request.c) */
    /* The final response head, HPACK-encoded, until it is sent. */
    _Alignas(8) uint8_t head_inline[H2_HEAD_INLINE];
    uint8_t *head_block; /* head_inline or head_heap */
    size_t head_len;
    size_t head_nfields; /* the fields the core sees (cookies joined, host added) */
    char *cookie;        /* the cookie fields joined (RFC 9113 8.2.3), or NULL */
    uint64_t conn_held;  /* buffered bytes whose connection window is held back */
    uint64_t list_size;  /* RFC 9113 6.5.2: name + value + 32 per field */
    uint8_t seen_pseudo; /* which of the four request pseudo-fields came */
    uint8_t pseudo_ok;   /* which of them are known to be in their grammar (request.c) */

    /* Flow control (RFC 9113 6.9): what we may send, what the peer may. */
    int64_t send_window;
    int64_t recv_window;
    uint32_t recv_unacked; /* body bytes consumed and not yet given back */

    /* The request body, held until the handler asks for it. */
    char *body;
    size_t body_len, body_cap;
    uint64_t body_seen;
    int64_t content_length; /* declared, or -1 */
    /* The request's trailer fields (RFC 9113 8.1), in tmem as the head is
     * in hmem, handed to the core before the body's end (ABI 1.5). */
    keel_header *tr_fields;
    size_t ntr, tr_cap;
    char *tmem;
    size_t tlen, tcap;

    /* The response body waiting for the peer's windows. */
    h2_piece *queue, *queue_tail;
    uint64_t queued;        /* bytes not yet in a batch */
    uint32_t nfiles;        /* file pieces in the queue */
    int64_t resp_left;      /* declared length still owed, or -1 */
    uint8_t *trailer_block; /* the response trailers, encoded */
    size_t trailer_len;
    uint8_t *head_heap;   /* a response head larger than head_inline */
    h2_stream *held_next; /* the connection's list of held heads */
    uint32_t rst_code;    /* with reset_pending or rst_after */

    uint64_t progress_ms;   /* last time the stream moved (stream_timeout) */
    uint64_t body_start_ms; /* the handler asked for the body (body_min_rate); 0: not yet */
    uint64_t paused_ms;     /* the handler paused its body (keel_request_body_pause) at */

    unsigned exchange : 1;    /* the core holds req (until done or abort) */
    unsigned dispatching : 1; /* inside keel_http_request_dispatch */
    unsigned want_body : 1;
    unsigned remote_ended : 1; /* END_STREAM received */
    unsigned body_ended : 1;   /* the end was handed to the core */
    unsigned head_sent : 1;
    unsigned final_sent : 1;    /* a final (non-1xx) head was given */
    unsigned resp_ended : 1;    /* the last body piece came */
    unsigned no_body : 1;       /* HEAD, 204, 304: the body is dropped */
    unsigned has_data : 1;      /* the final head is followed by DATA */
    unsigned closed : 1;        /* the stream is closed (RFC 9113 5.1) */
    unsigned too_large : 1;     /* the header list passed max_header_list */
    unsigned malformed : 1;     /* RFC 9113 8.1.1: reset with PROTOCOL_ERROR */
    unsigned in_trailers : 1;   /* the block being decoded is the trailers */
    unsigned regular_seen : 1;  /* a regular field came (pseudo-fields go first) */
    unsigned bad : 1;           /* answered by the module itself */
    unsigned counted : 1;       /* in c->nactive */
    unsigned held : 1;          /* final head not yet sent (c->held) */
    unsigned ready : 1;         /* on c->ready */
    unsigned reset_pending : 1; /* on c->resets */
    unsigned rst_after : 1;     /* RST_STREAM rst_code once the response has gone */
    unsigned local_ended : 1;   /* our END_STREAM went; the request's end is awaited */
    unsigned early : 1;         /* opened before our SETTINGS were acknowledged */
    unsigned body_paused : 1;   /* the handler paused its body: DATA is held, its window too */
    unsigned ext_connect : 1;   /* RFC 8441 extended CONNECT: DATA is a tunnel's, not a body */
    unsigned busy : 4;          /* inside a call that may end the exchange: do not free */
};

/* ---- input.c ------------------------------------------------------------ */

/* Parses the frames in data; *consumed is what was used (a partial frame
 * stays in the connection's buffer, except a DATA payload, read as it
 * comes). */
void h2_input(h2_conn *c, const uint8_t *data, size_t len, size_t *consumed);

/* ---- stream.c ----------------------------------------------------------- */

/* A new open stream (RFC 9113 5.1), on the table; NULL if out of memory. */
h2_stream *h2_stream_new(h2_conn *c, int32_t id);
/* The open stream of id, or NULL (closed ones are not found). */
h2_stream *h2_stream_find(h2_conn *c, int32_t id);
/* Whether id was closed recently and later frames on it are ignored
 * (1), closed and not ignored (0), or not known (-1). */
int h2_closed_lookup(h2_conn *c, int32_t id);
/* The stream closes (RFC 9113 5.1): off the table, its request body
 * dropped, the layers above told (ev->closed); freed once the core let go
 * of it. ignore: frames the peer still sends on it are dropped (we reset
 * it, or ended first). */
void h2_stream_close(h2_stream *s, uint32_t error_code, int ignore);
/* Frees the stream once it is closed and the core let go of it. */
void h2_stream_maybe_free(h2_stream *s);
/* Our END_STREAM was written: the stream closes (with RST_STREAM
 * NO_ERROR if the request was still coming, RFC 9113 8.1). */
void h2_stream_local_end(h2_stream *s);
/* Drops a request body held for the handler (its windows go back). */
void h2_stream_drop_body(h2_stream *s);
/* Resets a stream (RST_STREAM code, sent at the next pump) and ends its
 * exchange (when it closes). */
void h2_stream_reset(h2_stream *s, uint32_t code);
/* A stream error the client's request caused (RFC 9113 5.4.2): as
 * h2_stream_reset, but a response already complete goes out first, the
 * reset after it (8.1). */
void h2_stream_error(h2_stream *s, uint32_t code);
/* The request is malformed (8.1.1): counted, stream error PROTOCOL_ERROR. */
void h2_stream_malformed(h2_stream *s);
/* Sends the resets asked for (from the pump). */
void h2_stream_send_resets(h2_conn *c);

/* ---- window.c: the receive windows (RFC 9113 6.9) ------------------------ */

/* The connection's window as [h2] conn_window sets it, and the
 * WINDOW_UPDATE that opens it past 65,535 after our SETTINGS (6.9.2). */
void h2_window_conn_init(h2_conn *c);
void h2_window_open(h2_conn *c);
/* A new stream's window: initial_window, or 65,535 until our SETTINGS are
 * acknowledged, when h2_window_settings_acked takes the difference off. */
void h2_window_stream_init(h2_stream *s);
void h2_window_settings_acked(h2_conn *c);
/* A DATA frame of length bytes against the connection's / the stream's
 * window: taken, or -1 (nothing taken) if it does not fit (6.9.1). */
int h2_window_take_conn(h2_conn *c, uint32_t length);
int h2_window_take_stream(h2_stream *s, uint32_t length);
/* The stream's window is used up: the client cannot send more. */
int h2_window_spent(const h2_stream *s);
/* left more body bytes fit in both windows as they are. */
int h2_window_can_carry(const h2_stream *s, int64_t left);
/* n bytes the connection's window gives back (WINDOW_UPDATE in steps of
 * half of it). */
void h2_window_conn_back(h2_conn *c, size_t n);
/* n bytes nobody will read (padding, a stream answered without reading):
 * both windows given back. */
void h2_window_back(h2_stream *s, size_t n);
/* n body bytes held for the handler (the connection's window given back
 * unless the connection holds past body_buffer); n of them read by it
 * (the stream's given back, and the connection's if it was held); all
 * held ones dropped (the connection's held back given back). */
void h2_window_hold(h2_stream *s, size_t n);
void h2_window_read(h2_stream *s, size_t n);
void h2_window_drop_held(h2_stream *s);
static inline void h2_window_drop(h2_stream *s)
{
    if (s->body_len > 0 || s->conn_held > 0) /* most streams hold none: no call */
        h2_window_drop_held(s);
}
/* n body bytes after the exchange ended: the stream's window stays spent
 * if the response went first (stream.c), else both are given back. */
void h2_window_unread(h2_stream *s, size_t n);

#endif
