/* frame.h — HTTP/2's wire constants (RFC 9113 6, 7, 11) and the byte
 * helpers the codec shares. */
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

/* A frame header at p (RFC 9113 4.1); the reserved bit is sent as 0. */
static inline void h2_put_hd(uint8_t *p, size_t len, uint8_t type, uint8_t flags, uint32_t sid)
{
    p[0] = (uint8_t)(len >> 16);
    p[1] = (uint8_t)(len >> 8);
    p[2] = (uint8_t)len;
    p[3] = type;
    p[4] = flags;
    h2_put32(p + 5, sid & 0x7fffffffu);
}

#endif
