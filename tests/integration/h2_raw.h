/* h2_raw.h — HTTP/2 frames written and read by hand, for integration
 * tests that need a client no library would be (one that sends HEADERS and
 * RST_STREAM in one write, or shuts its windows): RFC 9113 4.1's frame
 * header, and header blocks of HPACK literals without Huffman coding
 * (RFC 7541 6.2.2). Define _GNU_SOURCE and include harness.h first. */
#ifndef KEEL_TEST_H2_RAW_H
#define KEEL_TEST_H2_RAW_H

#include <poll.h>

#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

static __attribute__((unused)) size_t frame(char *out, unsigned type, unsigned flags, unsigned sid,
                                            const void *payload, size_t len)
{
    out[0] = (char)(len >> 16);
    out[1] = (char)(len >> 8);
    out[2] = (char)len;
    out[3] = (char)type;
    out[4] = (char)flags;
    out[5] = (char)((sid >> 24) & 0x7f);
    out[6] = (char)(sid >> 16);
    out[7] = (char)(sid >> 8);
    out[8] = (char)sid;
    if (len)
        memcpy(out + 9, payload, len);
    return 9 + len;
}

/* GET http://authority path: HPACK indexed :method GET and :scheme http,
 * literals without indexing for :path (name 4) and :authority (name 1). */
static __attribute__((unused)) size_t get_headers(char *out, unsigned sid, const char *path,
                                                  const char *authority)
{
    char block[256];
    size_t n = 0, pl = strlen(path), al = strlen(authority);
    block[n++] = (char)0x82;
    block[n++] = (char)0x86;
    block[n++] = 0x04;
    block[n++] = (char)pl;
    memcpy(block + n, path, pl);
    n += pl;
    block[n++] = 0x01;
    block[n++] = (char)al;
    memcpy(block + n, authority, al);
    n += al;
    return frame(out, 0x1, 0x5, sid, block, n); /* END_STREAM | END_HEADERS */
}

/* Reads frames until a HEADERS on stream sid; returns its first block
 * byte (0x88 is :status 200), or -1. */
static __attribute__((unused)) int await_headers(int fd, unsigned sid, int timeout_ms)
{
    long long end = kh_now_ms() + timeout_ms;
    static char buf[1 << 17];
    size_t have = 0;
    while (kh_now_ms() < end) {
        while (have >= 9) {
            size_t len = ((size_t)(unsigned char)buf[0] << 16) |
                         ((size_t)(unsigned char)buf[1] << 8) | (unsigned char)buf[2];
            if (have < 9 + len)
                break;
            unsigned type = (unsigned char)buf[3];
            unsigned s = ((unsigned)(buf[5] & 0x7f) << 24) |
                         ((unsigned)(unsigned char)buf[6] << 16) |
                         ((unsigned)(unsigned char)buf[7] << 8) | (unsigned char)buf[8];
            if (type == 0x1 && s == sid && len > 0)
                return (unsigned char)buf[9];
            memmove(buf, buf + 9 + len, have - 9 - len);
            have -= 9 + len;
        }
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 200) <= 0)
            continue;
        ssize_t r = read(fd, buf + have, sizeof buf - have);
        if (r <= 0)
            return -1;
        have += (size_t)r;
    }
    return -1;
}

#endif
