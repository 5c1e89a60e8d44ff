/* input.c — the frames a client sends (RFC 9113 4, 6), parsed where they
 * lie in the connection's read buffer, and the stream states they move
 * (5.1).
 *
 * A frame is handled once it is whole; until then its bytes stay
 * unconsumed in the connection's buffer (keel_protocol.on_data), which
 * never holds more than one frame of ours to parse: [h2] max_frame_size
 * bounds it. DATA is the exception: its payload is handed to the stream
 * as it arrives, so a 16 KiB frame is not waited for.
 *
 * Errors follow 5.4: a connection error is GOAWAY and the end (h2_fail),
 * a stream error RST_STREAM on that stream. Every header block is decoded,
 * even one whose stream is refused or ignored: the HPACK table is the
 * connection's (4.3).
 *
 * What a stream's frames carry (its fields, body, end) and a window
 * the peer widened are told to the layers above through the connection's
 * events (c->ev: writer.h), which the module fills.
 */
#include "state.h"

#include <stdlib.h>
#include <string.h>

/* ---- header blocks ------------------------------------------------------------- */

/* The fields of a block nobody keeps are only counted: the same HPACK
 * bomb limit as a stream's (request.c). */
typedef struct discard_ctx {
    h2_conn *c;
    uint64_t size;
} discard_ctx;

static int discard_field(void *ud, const h2_hpack_field *f)
{
    discard_ctx *d = ud;
    d->size += f->nlen + f->vlen + 32;
    if (d->size > (uint64_t)d->c->w->cfg->max_header_list * 16) {
        h2_calm(d->c, H2_FLOOD_HPACK);
        return 1;
    }
    return 0;
}

/* 0, or -1 if the connection ends (COMPRESSION_ERROR, 4.3, or a flood). */
static int decode(h2_conn *c, const uint8_t *block, size_t len, h2_hpack_emit emit, void *ud)
{
    int rc = h2_hpack_decode(&c->dec, block, len, &c->w->scratch, emit, ud);
    if (rc == 0)
        return 0;
    if (rc == H2_HPACK_ERROR)
        h2_fail(c, H2_COMPRESSION_ERROR);
    else if (rc == H2_HPACK_NOMEM)
        h2_fail(c, H2_INTERNAL_ERROR);
    return -1;
}

static int discard_block(h2_conn *c, const uint8_t *block, size_t len)
{
    discard_ctx d = {c, 0};
    return decode(c, block, len, discard_field, &d);
}

/* Remembers a stream we never opened (refused, ignored) as closed, so
 * that frames the client already sent on it are dropped. */
static void closed_unopened(h2_conn *c, int32_t sid)
{
    c->closed_ids[c->closed_at++ % H2_CLOSED_RING] = (uint32_t)sid | H2_CLOSED_IGNORE;
}

/* A stream error (5.4.2) on sid from a malformed PRIORITY frame, which
 * may come on a stream in any state (5.1): the error is the frame's own,
 * so it is answered with RST_STREAM on an open or idle stream, and on one
 * that closed by its exchange ending (the client may send PRIORITY after
 * our answer ended the stream; h2spec 6.3/2 does, and waits for the
 * reset). Not after our own RST_STREAM: 5.1 says to ignore what the client
 * sent before it saw it. A stream closed too long ago to be remembered is
 * left alone. RST_STREAMs we are made to send count against max_resets
 * (h2_send_rst), so a client cannot turn this into a flood. */
static void stream_error(h2_conn *c, int32_t sid, uint32_t code)
{
    h2_stream *s = h2_stream_find(c, sid);
    if (s != NULL) {
        h2_stream_error(s, code);
    } else if (sid > c->last_sid) {
        /* A stream never opened: reset once, and remembered as reset by
         * us, so that a second malformed frame the client sent before it
         * saw ours gets nothing (5.1). It may still be opened later: a
         * HEADERS above last_sid opens a stream whatever the ring says. */
        if (h2_closed_lookup(c, sid) != 1) {
            h2_send_rst(c, (uint32_t)sid, code);
            closed_unopened(c, sid);
        }
    } else if (h2_closed_lookup(c, sid) == 0) {
        h2_send_rst(c, (uint32_t)sid, code);
    }
}

/* Streams the client opened after our GOAWAY: ignored (6.8). */
static int after_goaway(const h2_conn *c, int32_t sid)
{
    return c->goaway_sent && sid > c->goaway_sid;
}

/* The trailers of an open stream (8.1), or a block on a stream that may
 * take none. */
static void trailer_block(h2_conn *c, h2_stream *s, uint8_t flags, const uint8_t *block, size_t len)
{
    if (s->remote_ended || !(flags & H2_FLAG_END_STREAM)) {
        if (discard_block(c, block, len) != 0)
            return;
        /* 5.1: half-closed (remote) takes no HEADERS; 8.1: trailers end
         * the stream (without END_STREAM the request is malformed). */
        if (s->remote_ended)
            h2_stream_error(s, H2_STREAM_CLOSED);
        else
            h2_stream_malformed(s);
        return;
    }
    s->in_trailers = 1;
    s->busy++;
    if (decode(c, block, len, c->ev->field, s) == 0) {
        s->remote_ended = 1;
        c->ev->trailers(s);
    }
    s->busy--;
    h2_stream_maybe_free(s);
}

static void header_block(h2_conn *c, int32_t sid, uint8_t flags, const uint8_t *block, size_t len,
                         int self_dependent)
{
    const h2_config *cfg = c->w->cfg;
    h2_stream *s = h2_stream_find(c, sid);
    if (s != NULL && !self_dependent) {
        trailer_block(c, s, flags, block, len);
        return;
    }
    if (s != NULL || sid <= c->last_sid) {
        if (discard_block(c, block, len) != 0)
            return;
        if (s != NULL) { /* 5.3.1: a stream depending on itself */
            h2_stream_error(s, H2_PROTOCOL_ERROR);
            return;
        }
        int closed = h2_closed_lookup(c, sid);
        if (closed == 1 || after_goaway(c, sid))
            return; /* we reset it or never took it: dropped */
        /* 5.1: a closed stream; 5.1.1: an id below one already used. */
        h2_fail(c, closed == 0 ? H2_STREAM_CLOSED : H2_PROTOCOL_ERROR);
        return;
    }
    c->last_sid = sid;
    if (after_goaway(c, sid) || self_dependent || c->nopen >= cfg->max_concurrent_streams) {
        if (discard_block(c, block, len) != 0)
            return;
        closed_unopened(c, sid);
        if (self_dependent) {
            h2_send_rst(c, (uint32_t)sid, H2_PROTOCOL_ERROR); /* 5.3.1 */
        } else if (!after_goaway(c, sid)) {
            /* 5.1.2: over SETTINGS_MAX_CONCURRENT_STREAMS; the client may
             * retry it (8.7). */
            h2_count(c, c->w->mod->m.limit[H2_LIMIT_STREAMS]);
            h2_send_rst(c, (uint32_t)sid, H2_REFUSED_STREAM);
        }
        return;
    }
    s = h2_stream_new(c, sid);
    if (s == NULL) {
        if (discard_block(c, block, len) == 0) {
            closed_unopened(c, sid);
            h2_send_rst(c, (uint32_t)sid, H2_REFUSED_STREAM);
        }
        return;
    }
    s->busy++;
    if (decode(c, block, len, c->ev->field, s) == 0) {
        int end = (flags & H2_FLAG_END_STREAM) != 0;
        if (end)
            s->remote_ended = 1;
        c->ev->headers(s);
        if (end)
            c->ev->end(s);
    }
    s->busy--;
    h2_stream_maybe_free(s);
}

static int block_append(h2_conn *c, const uint8_t *p, size_t n)
{
    return keel_append(&c->block, &c->block_len, &c->block_cap, p, n, 4096);
}

/* [h2] header_timeout: a header block, from its HEADERS frame to its
 * END_HEADERS, and any frame but DATA (which is read as it comes), must
 * arrive whole within it of its first byte. Bytes arriving do not renew
 * it: a block trickled a byte at a time stays under every size and frame
 * limit (max_header_block, max_continuations) while holding its bytes.
 *
 * A connection with no stream open and none answering has nothing but
 * this block (or frame, or its preface) under way: its deadline is the
 * core's (keel_conn_set_deadline), as http1's head, so that a worker at
 * max_connections may close it for a new client (connections trickling
 * blocks would otherwise hold every slot until their deadlines). With
 * streams under way it is the module's tick (h2.c): the core's would offer
 * them to that reclaiming, and hold their write timeout. Either ends the
 * connection at the deadline (GOAWAY ENHANCE_YOUR_CALM). */
static void deadline_start(h2_conn *c)
{
    if (c->block_deadline_ms != 0)
        return;
    uint64_t ms = c->w->cfg->header_timeout_ms;
    c->block_deadline_ms = keel_worker_now_ms(c->w->worker) + ms;
    if (c->nopen == 0 && c->nactive == 0) {
        c->core_deadline = 1;
        keel_conn_set_deadline(c->conn, ms);
    } else {
        c->ev->timer(c);
    }
}

/* The block or frame is whole. */
static void deadline_clear(h2_conn *c)
{
    if (c->block_deadline_ms == 0)
        return;
    c->block_deadline_ms = 0;
    if (c->core_deadline) {
        c->core_deadline = 0;
        keel_conn_set_deadline(c->conn, 0);
    }
}

/* 6.2 */
static void on_headers(h2_conn *c, uint8_t flags, int32_t sid, const uint8_t *p, uint32_t len)
{
    if ((sid & 1) == 0) {
        h2_fail(c, H2_PROTOCOL_ERROR); /* 5.1.1: clients open odd ids (0 too) */
        return;
    }
    h2_headers_payload hf;
    int rc = h2_decode_headers(flags, sid, p, len, &hf);
    if (rc != 0) {
        h2_fail(c, (uint32_t)rc);
        return;
    }
    /* 5.3.1: a stream cannot depend on itself. */
    int self_dependent = hf.has_priority && hf.priority.dependency == sid;
    const uint8_t *frag = hf.fragment;
    size_t n = hf.fragment_len;
    if (flags & H2_FLAG_END_HEADERS) {
        header_block(c, sid, flags, frag, n, self_dependent);
        return;
    }
    c->in_block = 1;
    deadline_start(c); /* from this frame's first byte if it came in pieces */
    c->block_sid = sid;
    c->block_flags = flags;
    c->block_self_dep = self_dependent != 0;
    c->block_len = 0;
    if (block_append(c, frag, n) != 0)
        h2_fail(c, H2_INTERNAL_ERROR);
}

/* 6.10 */
static void on_continuation(h2_conn *c, uint8_t flags, int32_t sid, const uint8_t *p, uint32_t len)
{
    if (!c->in_block || sid != c->block_sid) {
        h2_fail(c, H2_PROTOCOL_ERROR);
        return;
    }
    if (block_append(c, p, len) != 0) {
        h2_fail(c, H2_INTERNAL_ERROR);
        return;
    }
    if (!(flags & H2_FLAG_END_HEADERS))
        return;
    c->in_block = 0;
    uint8_t first = c->block_flags;
    size_t n = c->block_len;
    c->block_len = 0;
    header_block(c, sid, first, c->block, n, c->block_self_dep);
}

/* ---- DATA (6.1) ---------------------------------------------------------------- */

/* The frame's header (and pad length) arrived: checks, flow control, and
 * where its payload goes. -1 if the connection ends, else the payload
 * bytes used (the pad length). */
static int data_begin(h2_conn *c, uint8_t flags, int32_t sid, uint32_t length, const uint8_t *p)
{
    uint32_t head, pad;
    int rc = h2_decode_data(flags, sid, length, p, &head, &pad);
    if (rc != 0) {
        h2_fail(c, (uint32_t)rc);
        return -1;
    }
    if (h2_window_take_conn(c, length) != 0) {
        h2_fail(c, H2_FLOW_CONTROL_ERROR);
        return -1;
    }
    h2_stream *s = h2_stream_find(c, sid);
    c->data_to_stream = 0;
    if (s == NULL) {
        if (sid > c->last_sid) {
            h2_fail(c, H2_PROTOCOL_ERROR); /* 5.1: DATA on an idle stream */
            return -1;
        }
        h2_window_conn_back(c, length);
        /* 5.1: closed. A stream closed recently and not by our reset is
         * the peer's error; one we reset or refused, or closed longer ago
         * than the ring remembers (a hundred streams answered before
         * their bodies came, say), may have DATA in flight that the
         * client could not withdraw: dropped. */
        if (h2_closed_lookup(c, sid) == 0 && !after_goaway(c, sid)) {
            h2_fail(c, H2_STREAM_CLOSED);
            return -1;
        }
    } else if (s->remote_ended) {
        h2_window_conn_back(c, length);
        h2_stream_error(s, H2_STREAM_CLOSED); /* 5.1: half-closed (remote) */
    } else if (h2_window_take_stream(s, length) != 0) {
        h2_window_conn_back(c, length);
        h2_stream_error(s, H2_FLOW_CONTROL_ERROR);
    } else {
        if (head + pad > 0)
            h2_window_back(s, head + pad); /* padding: nobody reads it */
        c->data_to_stream = 1;
    }
    c->in_data = 1;
    c->data_sid = sid;
    c->data_flags = flags;
    c->data_left = length - head - pad;
    c->pad_left = pad;
    return (int)head;
}

static void data_chunk(h2_conn *c, const uint8_t *p, size_t n)
{
    if (!c->data_to_stream)
        return; /* its windows went back at the frame's start */
    /* Looked up again: the stream may have ended between two reads. */
    h2_stream *s = h2_stream_find(c, c->data_sid);
    if (s == NULL) {
        h2_window_conn_back(c, n);
        return;
    }
    s->busy++;
    if (s->reset_pending)
        h2_window_back(s, n); /* nobody will read it */
    else
        c->ev->data(s, p, n); /* a handler's, a tunnel's, or nobody's (request.c) */
    s->busy--;
    h2_stream_maybe_free(s);
}

static void data_end(h2_conn *c)
{
    c->in_data = 0;
    if (!c->data_to_stream)
        return;
    h2_stream *s = h2_stream_find(c, c->data_sid);
    if (s == NULL)
        return;
    if (!(c->data_flags & H2_FLAG_END_STREAM)) {
        /* The rest of a body awaited after the response (stream.c): the
         * client cannot send more without a WINDOW_UPDATE, which bytes
         * nobody reads do not get; it is asked to stop (8.1). */
        if (s->local_ended && h2_window_spent(s))
            h2_stream_reset(s, H2_NO_ERROR);
        return;
    }
    s->progress_ms = keel_worker_now_ms(c->w->worker);
    s->busy++;
    c->ev->end(s);
    s->busy--;
    h2_stream_maybe_free(s);
}

/* ---- the other frames ---------------------------------------------------------- */

static void settings_acked(h2_conn *c)
{
    const h2_config *cfg = c->w->cfg;
    if (c->settings_acked)
        return;
    c->settings_acked = 1;
    /* Our values hold from now (6.5.3): the decoder's table limit, and the
     * stream windows opened while the client could still count on 65,535. */
    c->dec.limit = cfg->header_table_size;
    h2_window_settings_acked(c);
}

/* 6.5 */
static void on_settings(h2_conn *c, uint8_t flags, int32_t sid, const uint8_t *p, uint32_t len)
{
    uint32_t nset;
    int rc = h2_decode_settings(flags, sid, p, len, &nset);
    if (rc != 0) {
        h2_fail(c, (uint32_t)rc);
        return;
    }
    if (flags & H2_FLAG_ACK) {
        settings_acked(c);
        return;
    }
    c->settings_seen = 1;
    int widened = 0;
    int64_t new_window = -1; /* the last INITIAL_WINDOW_SIZE of the frame */
    for (uint32_t i = 0; i < nset; i++) {
        uint16_t id;
        uint32_t v;
        h2_setting_at(p, i, &id, &v);
        switch (id) {
        case H2_SET_HEADER_TABLE_SIZE:
            c->enc_update = 1; /* send.c: our table's size, 0, in the next block */
            break;
        case H2_SET_INITIAL_WINDOW_SIZE:
            new_window = v; /* applied once, below: only the last counts */
            break;
        case H2_SET_MAX_FRAME_SIZE:
            c->peer_max_frame = v;
            break;
        default:
            break; /* MAX_CONCURRENT_STREAMS: we open none; others: 6.5.2 ignore */
        }
    }
    if (new_window >= 0) {
        /* 6.9.2: every open stream's window moves by the difference. */
        int64_t delta = new_window - c->peer_initial_window;
        c->peer_initial_window = (uint32_t)new_window;
        for (h2_stream *s = c->streams; s != NULL && delta != 0; s = s->next) {
            if (s->closed)
                continue;
            s->send_window += delta;
            if (s->send_window > H2_MAX_WINDOW) {
                h2_fail(c, H2_FLOW_CONTROL_ERROR);
                return;
            }
        }
        widened = delta > 0;
    }
    h2_send_settings_ack(c);
    if (widened)
        c->ev->window(c, NULL);
}

/* 6.9 */
static void on_window_update(h2_conn *c, int32_t sid, const uint8_t *p, uint32_t len)
{
    uint32_t inc;
    int rc = h2_decode_window_update(p, len, &inc);
    if (rc != 0) {
        h2_fail(c, (uint32_t)rc);
        return;
    }
    if (sid == 0) {
        if (inc == 0) {
            h2_fail(c, H2_PROTOCOL_ERROR);
            return;
        }
        int64_t before = c->send_window;
        c->send_window += inc;
        if (c->send_window > H2_MAX_WINDOW) {
            h2_fail(c, H2_FLOW_CONTROL_ERROR);
            return;
        }
        /* Streams stop only when a window is used up (send.c): if the
         * connection's was, any may wait on it. */
        if (before <= 0)
            c->ev->window(c, NULL);
        return;
    }
    h2_stream *s = h2_stream_find(c, sid);
    if (s == NULL) {
        if (sid > c->last_sid)
            h2_fail(c, H2_PROTOCOL_ERROR); /* 5.1: idle */
        return;                            /* closed: may cross our END_STREAM */
    }
    if (inc == 0) {
        h2_stream_error(s, H2_PROTOCOL_ERROR);
        return;
    }
    if (s->send_window + inc > H2_MAX_WINDOW) {
        /* The window stays what it was: a complete response goes out
         * within it, then the reset (h2_stream_error). */
        h2_stream_error(s, H2_FLOW_CONTROL_ERROR);
        return;
    }
    s->send_window += inc;
    c->ev->window(c, s);
}

/* 6.4 */
static void on_rst_stream(h2_conn *c, int32_t sid, const uint8_t *p, uint32_t len)
{
    uint32_t code;
    int rc = h2_decode_rst_stream(sid, p, len, &code);
    if (rc == 0 && sid > c->last_sid)
        rc = H2_PROTOCOL_ERROR; /* 5.1: idle */
    if (rc != 0) {
        h2_fail(c, (uint32_t)rc);
        return;
    }
    h2_stream *s = h2_stream_find(c, sid);
    int wasted = s != NULL && !(s->resp_ended && s->queue == NULL);
    if (h2_limits_reset(c, code, wasted) != 0 || s == NULL)
        return;
    s->busy++;
    h2_stream_close(s, code, 0); /* a held head goes with it (ev->closed) */
    s->busy--;
    h2_stream_maybe_free(s);
}

/* 6.3 */
static void on_priority(h2_conn *c, int32_t sid, const uint8_t *p, uint32_t len)
{
    h2_priority prio;
    int rc = h2_decode_priority(sid, p, len, &prio);
    if (rc == H2_FRAME_SIZE_ERROR) {
        stream_error(c, sid, H2_FRAME_SIZE_ERROR); /* 6.3: a stream error */
        return;
    }
    if (rc != 0) {
        h2_fail(c, (uint32_t)rc);
        return;
    }
    /* Deprecated (5.3.2) and not acted on; only its one rule is checked. */
    if (prio.dependency == sid)
        stream_error(c, sid, H2_PROTOCOL_ERROR); /* 5.3.1 */
}

/* 6.7 */
static void on_ping(h2_conn *c, uint8_t flags, int32_t sid, const uint8_t *p, uint32_t len)
{
    int rc = h2_decode_ping(sid, len);
    if (rc != 0) {
        h2_fail(c, (uint32_t)rc);
        return;
    }
    if (!(flags & H2_FLAG_ACK))
        h2_send_ping_ack(c, p);
}

/* 6.8 */
static void on_goaway(h2_conn *c, int32_t sid, const uint8_t *p, uint32_t len)
{
    h2_goaway_payload g;
    int rc = h2_decode_goaway(sid, p, len, &g);
    if (rc != 0) {
        h2_fail(c, (uint32_t)rc);
        return;
    }
    /* The client opens no more streams; those open finish (h2_pump closes
     * the connection after them). */
    c->goaway_recv = 1;
}

static void on_frame(h2_conn *c, uint8_t type, uint8_t flags, int32_t sid, const uint8_t *p,
                     uint32_t len)
{
    switch (type) {
    case H2_HEADERS:
        on_headers(c, flags, sid, p, len);
        break;
    case H2_CONTINUATION:
        on_continuation(c, flags, sid, p, len);
        break;
    case H2_SETTINGS:
        on_settings(c, flags, sid, p, len);
        break;
    case H2_WINDOW_UPDATE:
        on_window_update(c, sid, p, len);
        break;
    case H2_RST_STREAM:
        on_rst_stream(c, sid, p, len);
        break;
    case H2_PRIORITY:
        on_priority(c, sid, p, len);
        break;
    case H2_PING:
        on_ping(c, flags, sid, p, len);
        break;
    case H2_GOAWAY:
        on_goaway(c, sid, p, len);
        break;
    case H2_PUSH_PROMISE:
        h2_fail(c, H2_PROTOCOL_ERROR); /* 8.4: clients do not push */
        break;
    default:
        break; /* 5.5: unknown types are ignored */
    }
}

void h2_input(h2_conn *c, const uint8_t *data, size_t len, size_t *consumed)
{
    const h2_config *cfg = c->w->cfg;
    const uint8_t *p = data, *end = data + len;
    if (!c->preface) {
        /* 3.4: not HTTP/2 at all: the connection ends at the first byte
         * that differs. */
        size_t n = len < H2_PREFACE_LEN ? len : H2_PREFACE_LEN;
        if (memcmp(p, H2_PREFACE, n) != 0) {
            h2_fail(c, H2_PROTOCOL_ERROR);
            *consumed = len;
            return;
        }
        if (n < H2_PREFACE_LEN) {
            deadline_start(c);
            *consumed = 0;
            return;
        }
        c->preface = 1;
        deadline_clear(c);
        p += H2_PREFACE_LEN;
    }
    /* The frame at `first` may have begun in an earlier read (its deadline
     * runs from then); every frame after it began in this one. */
    const uint8_t *first = p;
    while (!c->calm && !c->closing) {
        if (c->in_data) {
            size_t avail = (size_t)(end - p);
            if (c->data_left > 0) {
                size_t n = avail < c->data_left ? avail : c->data_left;
                if (n == 0)
                    break;
                c->data_left -= (uint32_t)n;
                data_chunk(c, p, n);
                p += n;
            } else if (c->pad_left > 0) {
                size_t n = avail < c->pad_left ? avail : c->pad_left;
                if (n == 0)
                    break;
                c->pad_left -= (uint32_t)n;
                p += n;
            } else {
                data_end(c);
            }
            continue;
        }
        if (p != first && !c->in_block)
            deadline_clear(c); /* the frame that had one is whole */
        if (end - p < H2_FRAME_HD)
            break;
        h2_frame_hd hd;
        h2_get_hd(p, &hd);
        uint32_t length = hd.length;
        uint8_t type = hd.type, flags = hd.flags;
        int32_t sid = hd.sid;
        if (length > cfg->max_frame_size) {
            h2_fail(c, H2_FRAME_SIZE_ERROR); /* 4.2 */
            break;
        }
        /* 3.4: the client's preface ends with SETTINGS; 6.2: nothing comes
         * between a HEADERS without END_HEADERS and its CONTINUATIONs. */
        if ((!c->settings_seen && (type != H2_SETTINGS || (flags & H2_FLAG_ACK))) ||
            (c->in_block && type != H2_CONTINUATION)) {
            h2_fail(c, H2_PROTOCOL_ERROR);
            break;
        }
        size_t avail = (size_t)(end - p) - H2_FRAME_HD;
        if (type == H2_DATA) {
            if ((flags & H2_FLAG_PADDED) && length > 0 && avail < 1)
                break; /* the pad length first */
            if (h2_limits_frame(c, type, flags, length) != 0)
                break;
            int head = data_begin(c, flags, sid, length, p + H2_FRAME_HD);
            if (head < 0)
                break;
            p += H2_FRAME_HD + (size_t)head;
            continue;
        }
        if (avail < length)
            break; /* the whole frame first */
        if (h2_limits_frame(c, type, flags, length) != 0)
            break;
        const uint8_t *payload = p + H2_FRAME_HD;
        p += H2_FRAME_HD + length;
        on_frame(c, type, flags, sid, payload, length);
    }
    /* After a connection error nothing more is read. */
    if (c->calm || c->closing) {
        *consumed = len;
        return;
    }
    *consumed = (size_t)(p - data);
    if (p < end && !c->in_data)
        deadline_start(c); /* a frame that is not whole yet */
    else if (!c->in_block)
        deadline_clear(c);
}
