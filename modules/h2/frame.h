/* frame.h — the HTTP/2 frame codec (RFC 9113 4, 6, 7, 11): wire constants,
 * frame headers, each frame type's payload decoded and checked, and the
 * frames a server writes encoded.
 *
 * The codec is the bottom layer of the module and knows nothing above it:
 * no keel type, no connection, no stream, no allocation, only the C
 * library's integer types (as h2o's lib/http2/frame.c is to its
 * connection). It says whether a frame is well-formed by itself; what the
 * frame means for a stream or a connection (stream states, windows, the
 * limits a server sets) is the caller's (input.c). frame.c, hpack.c and
 * hpack_huffman.c are built as a library of their own without keel's
 * headers on the include path, unit-tested (tests/unit/test_h2_codec.c,
 * test_hpack_*.c) and fuzzed (fuzz_h2frame, fuzz_hpack) alone.
 *
 * Decoders return 0, or the error code (enum h2_error) of the connection
 * error the frame is (RFC 9113 5.4.1), except where a function says the
 * code is a stream error's. They read nothing beyond the length given.
 */
#ifndef KEEL_H2_FRAME_H
#define KEEL_H2_FRAME_H

#include <stddef.h>
#include <stdint.h>

/* RFC 9113 3.4: the client's connection preface, before its SETTINGS. */
#define H2_PREFACE     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN 24
#define H2_FRAME_HD    9 /* length (24) type (8) flags (8) R + stream id (32) */

enum h2_frame_type {
    H2_DATA = 0x0,
    H2_HEADERS = 0x1,
    H2_PRIORITY = 0x2,
    H2_RST_STREAM = 0x3,
    H2_SETTINGS = 0x4,
    H2_PUSH_PROMISE = 0x5,
    H2_PING = 0x6,
    H2_GOAWAY = 0x7,
    H2_WINDOW_UPDATE = 0x8,
    H2_CONTINUATION = 0x9,
};

enum h2_flag {
    H2_FLAG_END_STREAM = 0x1, /* DATA, HEADERS */
    H2_FLAG_ACK = 0x1,        /* SETTINGS, PING */
    H2_FLAG_END_HEADERS = 0x4,
    H2_FLAG_PADDED = 0x8,
    H2_FLAG_PRIORITY = 0x20,
};

/* RFC 9113 7. */
enum h2_error {
    H2_NO_ERROR = 0x0,
    H2_PROTOCOL_ERROR = 0x1,
    H2_INTERNAL_ERROR = 0x2,
    H2_FLOW_CONTROL_ERROR = 0x3,
    H2_SETTINGS_TIMEOUT = 0x4,
    H2_STREAM_CLOSED = 0x5,
    H2_FRAME_SIZE_ERROR = 0x6,
    H2_REFUSED_STREAM = 0x7,
    H2_CANCEL = 0x8,
    H2_COMPRESSION_ERROR = 0x9,
    H2_CONNECT_ERROR = 0xa,
    H2_ENHANCE_YOUR_CALM = 0xb,
    H2_INADEQUATE_SECURITY = 0xc,
    H2_HTTP_1_1_REQUIRED = 0xd,
};

/* RFC 9113 6.5.2, RFC 8441 3, RFC 9218 2.1. */
enum h2_setting {
    H2_SET_HEADER_TABLE_SIZE = 0x1,
    H2_SET_ENABLE_PUSH = 0x2,
    H2_SET_MAX_CONCURRENT_STREAMS = 0x3,
    H2_SET_INITIAL_WINDOW_SIZE = 0x4,
    H2_SET_MAX_FRAME_SIZE = 0x5,
    H2_SET_MAX_HEADER_LIST_SIZE = 0x6,
    H2_SET_ENABLE_CONNECT_PROTOCOL = 0x8,
    H2_SET_NO_RFC7540_PRIORITIES = 0x9,
};

#define H2_DEFAULT_WINDOW     65535
#define H2_DEFAULT_FRAME_SIZE 16384
#define H2_MAX_FRAME_SIZE     16777215 /* 2^24 - 1 (4.2) */
#define H2_MAX_WINDOW         0x7fffffff

static inline uint32_t h2_get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void h2_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* ---- frame headers (4.1) ---------------------------------------------------------- */

typedef struct h2_frame_hd {
    uint32_t length; /* of the payload */
    uint8_t type, flags;
    int32_t sid; /* the reserved bit is ignored on receipt */
} h2_frame_hd;

/* The frame header at p (H2_FRAME_HD bytes). */
static inline void h2_get_hd(const uint8_t *p, h2_frame_hd *hd)
{
    hd->length = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
    hd->type = p[3];
    hd->flags = p[4];
    hd->sid = (int32_t)(h2_get32(p + 5) & 0x7fffffffu);
}

/* A frame header at p; the reserved bit is sent as 0. */
static inline void h2_put_hd(uint8_t *p, size_t len, uint8_t type, uint8_t flags, uint32_t sid)
{
    p[0] = (uint8_t)(len >> 16);
    p[1] = (uint8_t)(len >> 8);
    p[2] = (uint8_t)len;
    p[3] = type;
    p[4] = flags;
    h2_put32(p + 5, sid & 0x7fffffffu);
}

/* ---- decoding payloads ------------------------------------------------------------ */

/* A priority block (5.3.2: deprecated, parsed only to be checked). */
typedef struct h2_priority {
    int32_t dependency;
    uint8_t exclusive;
    uint8_t weight; /* as sent: 0..255 for 1..256 */
} h2_priority;

/* DATA (6.1), from its header and the first payload byte (read only when
 * PADDED and length > 0), since DATA's payload is taken as it arrives:
 * *head is the payload bytes before the data (the pad length's), *pad the
 * padding after it; the data is length - *head - *pad bytes. */
int h2_decode_data(uint8_t flags, int32_t sid, uint32_t length, const uint8_t *first,
                   uint32_t *head, uint32_t *pad);

/* HEADERS (6.2): the header block fragment within the payload, less its
 * padding and priority block (*has_priority says whether there was one).
 * Stream id 0 is the only stream id checked: which ids a peer may open is
 * the stream state's (5.1.1). */
typedef struct h2_headers {
    const uint8_t *fragment;
    size_t fragment_len;
    int has_priority;
    h2_priority priority;
} h2_headers_payload;
int h2_decode_headers(uint8_t flags, int32_t sid, const uint8_t *p, uint32_t len,
                      h2_headers_payload *out);

/* PRIORITY (6.3). H2_FRAME_SIZE_ERROR is a stream error here; a stream
 * that depends on itself (5.3.1) is the caller's to see. */
int h2_decode_priority(int32_t sid, const uint8_t *p, uint32_t len, h2_priority *out);

/* RST_STREAM (6.4). */
int h2_decode_rst_stream(int32_t sid, const uint8_t *p, uint32_t len, uint32_t *code);

/* SETTINGS (6.5): the frame's shape, and each parameter's value (6.5.2:
 * H2_FLOW_CONTROL_ERROR for an initial window past 2^31-1, else
 * H2_PROTOCOL_ERROR), the first bad one deciding. *n is the number of
 * parameters (0 for an ACK), read with h2_setting_at. Unknown parameters
 * are valid (6.5.2: ignored). */
int h2_decode_settings(uint8_t flags, int32_t sid, const uint8_t *p, uint32_t len, uint32_t *n);
/* The i-th parameter of a SETTINGS payload h2_decode_settings accepted. */
static inline void h2_setting_at(const uint8_t *p, uint32_t i, uint16_t *id, uint32_t *value)
{
    p += (size_t)i * 6;
    *id = (uint16_t)((unsigned)p[0] << 8 | p[1]);
    *value = h2_get32(p + 2);
}
/* 0 if a parameter's value is allowed (6.5.2), else the error code. */
int h2_setting_check(uint16_t id, uint32_t value);

/* PING (6.7): the opaque data is the payload's 8 bytes. */
int h2_decode_ping(int32_t sid, uint32_t len);

/* GOAWAY (6.8). */
typedef struct h2_goaway {
    int32_t last_sid;
    uint32_t error_code;
    const uint8_t *debug; /* additional debug data */
    size_t debug_len;
} h2_goaway_payload;
int h2_decode_goaway(int32_t sid, const uint8_t *p, uint32_t len, h2_goaway_payload *out);

/* WINDOW_UPDATE (6.9): *increment may be 0, which is an error whose kind
 * (connection or stream) depends on the stream id (6.9). */
int h2_decode_window_update(const uint8_t *p, uint32_t len, uint32_t *increment);

/* ---- encoding frames -------------------------------------------------------------- */

/* Each writes a whole frame at out (room for the size named) and returns
 * its length. */

#define H2_RST_STREAM_FRAME    (H2_FRAME_HD + 4)
#define H2_WINDOW_UPDATE_FRAME (H2_FRAME_HD + 4)
#define H2_PING_FRAME          (H2_FRAME_HD + 8)
#define H2_GOAWAY_FRAME        (H2_FRAME_HD + 8) /* without debug data */
#define H2_SETTINGS_FRAME(n)   (H2_FRAME_HD + 6 * (size_t)(n))

typedef struct h2_setting_value {
    uint16_t id;
    uint32_t value;
} h2_setting_value;

size_t h2_encode_settings(uint8_t *out, const h2_setting_value *set, size_t n);
size_t h2_encode_settings_ack(uint8_t *out);
size_t h2_encode_rst_stream(uint8_t *out, uint32_t sid, uint32_t code);
size_t h2_encode_ping(uint8_t *out, uint8_t flags, const uint8_t opaque[8]);
size_t h2_encode_goaway(uint8_t *out, int32_t last_sid, uint32_t code);
size_t h2_encode_window_update(uint8_t *out, uint32_t sid, uint32_t increment);

/* A header block as HEADERS and as many CONTINUATIONs as frames of at most
 * max_frame bytes need (6.2, 6.10): prefix (prefix_len bytes, at most
 * max_frame: an HPACK size update, RFC 7541 4.2) and then block, the
 * HEADERS frame END_STREAM if end_stream. h2_headers_size is what it
 * writes. */
size_t h2_headers_size(size_t len, size_t max_frame);
size_t h2_encode_headers(uint8_t *out, uint32_t sid, int end_stream, const uint8_t *prefix,
                         size_t prefix_len, const uint8_t *block, size_t len, size_t max_frame);

#endif
