/* frame.c — the HTTP/2 frame codec (frame.h): each frame type's payload
 * checked and decoded (RFC 9113 6), and the frames a server writes.
 *
 * The checks are the ones a frame fails by itself, in the order RFC 9113
 * 6 lists them for its type: the stream id the type requires, then the
 * payload's length, then its contents. What depends on a connection's
 * state (which stream ids are open, windows, our SETTINGS) is input.c's.
 */
#include "frame.h"

#include <string.h>

int h2_decode_data(uint8_t flags, int32_t sid, uint32_t length, const uint8_t *first,
                   uint32_t *head, uint32_t *pad)
{
    if (sid == 0)
        return H2_PROTOCOL_ERROR;
    *head = 0;
    *pad = 0;
    if (flags & H2_FLAG_PADDED) {
        if (length < 1)
            return H2_FRAME_SIZE_ERROR;
        *pad = first[0];
        *head = 1;
        /* 6.1: padding as long as the payload (or longer) is an error. */
        if (*pad >= length)
            return H2_PROTOCOL_ERROR;
    }
    return 0;
}

static void priority_at(const uint8_t *p, h2_priority *out)
{
    uint32_t dep = h2_get32(p);
    out->dependency = (int32_t)(dep & 0x7fffffffu);
    out->exclusive = (uint8_t)(dep >> 31);
    out->weight = p[4];
}

int h2_decode_headers(uint8_t flags, int32_t sid, const uint8_t *p, uint32_t len,
                      h2_headers_payload *out)
{
    if (sid == 0)
        return H2_PROTOCOL_ERROR;
    size_t off = 0, pad = 0;
    if (flags & H2_FLAG_PADDED) {
        if (len < 1)
            return H2_FRAME_SIZE_ERROR;
        pad = p[0];
        off = 1;
    }
    out->has_priority = 0;
    if (flags & H2_FLAG_PRIORITY) {
        if (len < off + 5)
            return H2_FRAME_SIZE_ERROR;
        priority_at(p + off, &out->priority);
        out->has_priority = 1;
        off += 5;
    }
    if (off + pad > len)
        return H2_PROTOCOL_ERROR; /* padding longer than the frame */
    out->fragment = p + off;
    out->fragment_len = len - off - pad;
    return 0;
}

int h2_decode_priority(int32_t sid, const uint8_t *p, uint32_t len, h2_priority *out)
{
    if (sid == 0)
        return H2_PROTOCOL_ERROR;
    if (len != 5)
        return H2_FRAME_SIZE_ERROR; /* a stream error (6.3) */
    priority_at(p, out);
    return 0;
}

int h2_decode_rst_stream(int32_t sid, const uint8_t *p, uint32_t len, uint32_t *code)
{
    if (sid == 0)
        return H2_PROTOCOL_ERROR;
    if (len != 4)
        return H2_FRAME_SIZE_ERROR;
    *code = h2_get32(p);
    return 0;
}

int h2_setting_check(uint16_t id, uint32_t value)
{
    switch (id) {
    case H2_SET_ENABLE_PUSH:
    case H2_SET_ENABLE_CONNECT_PROTOCOL: /* RFC 8441 3 */
    case H2_SET_NO_RFC7540_PRIORITIES:   /* RFC 9218 2.1 */
        return value > 1 ? H2_PROTOCOL_ERROR : 0;
    case H2_SET_INITIAL_WINDOW_SIZE:
        return value > H2_MAX_WINDOW ? H2_FLOW_CONTROL_ERROR : 0;
    case H2_SET_MAX_FRAME_SIZE:
        return value < H2_DEFAULT_FRAME_SIZE || value > H2_MAX_FRAME_SIZE ? H2_PROTOCOL_ERROR : 0;
    default:
        return 0;
    }
}

int h2_decode_settings(uint8_t flags, int32_t sid, const uint8_t *p, uint32_t len, uint32_t *n)
{
    if (sid != 0)
        return H2_PROTOCOL_ERROR;
    *n = 0;
    if (flags & H2_FLAG_ACK)
        return len != 0 ? H2_FRAME_SIZE_ERROR : 0;
    if (len % 6 != 0)
        return H2_FRAME_SIZE_ERROR;
    for (uint32_t i = 0; i < len / 6; i++) {
        uint16_t id;
        uint32_t v;
        h2_setting_at(p, i, &id, &v);
        int rc = h2_setting_check(id, v);
        if (rc != 0)
            return rc;
    }
    *n = len / 6;
    return 0;
}

int h2_decode_ping(int32_t sid, uint32_t len)
{
    if (sid != 0)
        return H2_PROTOCOL_ERROR;
    return len != 8 ? H2_FRAME_SIZE_ERROR : 0;
}

int h2_decode_goaway(int32_t sid, const uint8_t *p, uint32_t len, h2_goaway_payload *out)
{
    if (sid != 0)
        return H2_PROTOCOL_ERROR;
    if (len < 8)
        return H2_FRAME_SIZE_ERROR;
    out->last_sid = (int32_t)(h2_get32(p) & 0x7fffffffu);
    out->error_code = h2_get32(p + 4);
    out->debug = p + 8;
    out->debug_len = len - 8;
    return 0;
}

int h2_decode_window_update(const uint8_t *p, uint32_t len, uint32_t *increment)
{
    if (len != 4)
        return H2_FRAME_SIZE_ERROR;
    *increment = h2_get32(p) & 0x7fffffffu;
    return 0;
}

/* ---- encoding ---------------------------------------------------------------------- */

size_t h2_encode_settings(uint8_t *out, const h2_setting_value *set, size_t n)
{
    h2_put_hd(out, 6 * n, H2_SETTINGS, 0, 0);
    uint8_t *p = out + H2_FRAME_HD;
    for (size_t i = 0; i < n; i++, p += 6) {
        p[0] = (uint8_t)(set[i].id >> 8);
        p[1] = (uint8_t)set[i].id;
        h2_put32(p + 2, set[i].value);
    }
    return H2_SETTINGS_FRAME(n);
}

size_t h2_encode_settings_ack(uint8_t *out)
{
    h2_put_hd(out, 0, H2_SETTINGS, H2_FLAG_ACK, 0);
    return H2_FRAME_HD;
}

size_t h2_encode_rst_stream(uint8_t *out, uint32_t sid, uint32_t code)
{
    h2_put_hd(out, 4, H2_RST_STREAM, 0, sid);
    h2_put32(out + H2_FRAME_HD, code);
    return H2_RST_STREAM_FRAME;
}

size_t h2_encode_ping(uint8_t *out, uint8_t flags, const uint8_t opaque[8])
{
    h2_put_hd(out, 8, H2_PING, flags, 0);
    memcpy(out + H2_FRAME_HD, opaque, 8);
    return H2_PING_FRAME;
}

size_t h2_encode_goaway(uint8_t *out, int32_t last_sid, uint32_t code)
{
    h2_put_hd(out, 8, H2_GOAWAY, 0, 0);
    h2_put32(out + H2_FRAME_HD, (uint32_t)last_sid & 0x7fffffffu);
    h2_put32(out + H2_FRAME_HD + 4, code);
    return H2_GOAWAY_FRAME;
}

size_t h2_encode_window_update(uint8_t *out, uint32_t sid, uint32_t increment)
{
    h2_put_hd(out, 4, H2_WINDOW_UPDATE, 0, sid);
    h2_put32(out + H2_FRAME_HD, increment & 0x7fffffffu);
    return H2_WINDOW_UPDATE_FRAME;
}

size_t h2_headers_size(size_t len, size_t max_frame)
{
    size_t frames = len <= max_frame ? 1 : (len + max_frame - 1) / max_frame;
    return len + frames * H2_FRAME_HD;
}

size_t h2_encode_headers(uint8_t *out, uint32_t sid, int end_stream, const uint8_t *prefix,
                         size_t prefix_len, const uint8_t *block, size_t len, size_t max_frame)
{
    size_t total = prefix_len + len;
    uint8_t end = end_stream ? H2_FLAG_END_STREAM : 0;
    if (total <= max_frame) { /* a response head: one frame */
        h2_put_hd(out, total, H2_HEADERS, (uint8_t)(end | H2_FLAG_END_HEADERS), sid);
        if (prefix_len > 0)
            memcpy(out + H2_FRAME_HD, prefix, prefix_len);
        if (len > 0)
            memcpy(out + H2_FRAME_HD + prefix_len, block, len);
        return H2_FRAME_HD + total;
    }
    /* The prefix (at most max_frame) and what fits of the block, then 6.10:
     * the rest in CONTINUATIONs. */
    size_t first = max_frame;
    h2_put_hd(out, first, H2_HEADERS, end, sid);
    uint8_t *p = out + H2_FRAME_HD;
    if (prefix_len > 0)
        memcpy(p, prefix, prefix_len);
    if (first > prefix_len)
        memcpy(p + prefix_len, block, first - prefix_len);
    p += first;
    for (size_t at = first - prefix_len; at < len;) {
        size_t k = len - at <= max_frame ? len - at : max_frame;
        h2_put_hd(p, k, H2_CONTINUATION, at + k == len ? H2_FLAG_END_HEADERS : 0, sid);
        memcpy(p + H2_FRAME_HD, block + at, k);
        p += H2_FRAME_HD + k;
        at += k;
    }
    return (size_t)(p - out);
}
