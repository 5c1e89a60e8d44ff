/* base64.c — RFC 4648 base64, for Sec-WebSocket-Key (which must decode to
 * 16 bytes, RFC 6455 4.2.1 item 5) and Sec-WebSocket-Accept. */
#include "ws.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void ws_base64_encode(const uint8_t *in, size_t len, char *out)
{
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *out++ = alphabet[v >> 18];
        *out++ = alphabet[(v >> 12) & 63];
        *out++ = alphabet[(v >> 6) & 63];
        *out++ = alphabet[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
        *out++ = alphabet[v >> 18];
        *out++ = alphabet[(v >> 12) & 63];
        *out++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        *out++ = '=';
    }
    *out = '\0';
}

static int value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long ws_base64_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
    if (len % 4 != 0)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            if (in[i + j] == '=' && i + 4 == len && j >= 2) {
                v[j] = 0;
                pad++;
            } else if (pad || (v[j] = value(in[i + j])) < 0) {
                return -1; /* a character outside the alphabet, or data after '=' */
            }
        }
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        uint8_t b[3] = {(uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w};
        /* The bits a padded group leaves over must be zero (canonical form). */
        if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff)))
            return -1;
        for (int j = 0; j < 3 - pad; j++) {
            if (n == cap)
                return -1;
            out[n++] = b[j];
        }
    }
    return (long)n;
}
