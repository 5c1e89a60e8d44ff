/* hpack_huffman.c — HPACK's static Huffman code (RFC 7541 5.2, Appendix B). */
#include "hpack.h"

#include <stdint.h>

/* RFC 7541 Appendix B, by symbol (256 is EOS): the code, right-aligned, and
 * its length in bits. */
static const uint32_t huff_code[257] = {
    0x1ff8,     0x7fffd8,  0xfffffe2,  0xfffffe3, 0xfffffe4, 0xfffffe5,  0xfffffe6,  0xfffffe7,
    0xfffffe8,  0xffffea,  0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb,  0xfffffec,
    0xfffffed,  0xfffffee, 0xfffffef,  0xffffff0, 0xffffff1, 0xffffff2,  0x3ffffffe, 0xffffff3,
    0xffffff4,  0xffffff5, 0xffffff6,  0xffffff7, 0xffffff8, 0xffffff9,  0xffffffa,  0xffffffb,
    0x14,       0x3f8,     0x3f9,      0xffa,     0x1ff9,    0x15,       0xf8,       0x7fa,
    0x3fa,      0x3fb,     0xf9,       0x7fb,     0xfa,      0x16,       0x17,       0x18,
    0x0,        0x1,       0x2,        0x19,      0x1a,      0x1b,       0x1c,       0x1d,
    0x1e,       0x1f,      0x5c,       0xfb,      0x7ffc,    0x20,       0xffb,      0x3fc,
    0x1ffa,     0x21,      0x5d,       0x5e,      0x5f,      0x60,       0x61,       0x62,
    0x63,       0x64,      0x65,       0x66,      0x67,      0x68,       0x69,       0x6a,
    0x6b,       0x6c,      0x6d,       0x6e,      0x6f,      0x70,       0x71,       0x72,
    0xfc,       0x73,      0xfd,       0x1ffb,    0x7fff0,   0x1ffc,     0x3ffc,     0x22,
    0x7ffd,     0x3,       0x23,       0x4,       0x24,      0x5,        0x25,       0x26,
    0x27,       0x6,       0x74,       0x75,      0x28,      0x29,       0x2a,       0x7,
    0x2b,       0x76,      0x2c,       0x8,       0x9,       0x2d,       0x77,       0x78,
    0x79,       0x7a,      0x7b,       0x7ffe,    0x7fc,     0x3ffd,     0x1ffd,     0xffffffc,
    0xfffe6,    0x3fffd2,  0xfffe7,    0xfffe8,   0x3fffd3,  0x3fffd4,   0x3fffd5,   0x7fffd9,
    0x3fffd6,   0x7fffda,  0x7fffdb,   0x7fffdc,  0x7fffdd,  0x7fffde,   0xffffeb,   0x7fffdf,
    0xffffec,   0xffffed,  0x3fffd7,   0x7fffe0,  0xffffee,  0x7fffe1,   0x7fffe2,   0x7fffe3,
    0x7fffe4,   0x1fffdc,  0x3fffd8,   0x7fffe5,  0x3fffd9,  0x7fffe6,   0x7fffe7,   0xffffef,
    0x3fffda,   0x1fffdd,  0xfffe9,    0x3fffdb,  0x3fffdc,  0x7fffe8,   0x7fffe9,   0x1fffde,
    0x7fffea,   0x3fffdd,  0x3fffde,   0xfffff0,  0x1fffdf,  0x3fffdf,   0x7fffeb,   0x7fffec,
    0x1fffe0,   0x1fffe1,  0x3fffe0,   0x1fffe2,  0x7fffed,  0x3fffe1,   0x7fffee,   0x7fffef,
    0xfffea,    0x3fffe2,  0x3fffe3,   0x3fffe4,  0x7ffff0,  0x3fffe5,   0x3fffe6,   0x7ffff1,
    0x3ffffe0,  0x3ffffe1, 0xfffeb,    0x7fff1,   0x3fffe7,  0x7ffff2,   0x3fffe8,   0x1ffffec,
    0x3ffffe2,  0x3ffffe3, 0x3ffffe4,  0x7ffffde, 0x7ffffdf, 0x3ffffe5,  0xfffff1,   0x1ffffed,
    0x7fff2,    0x1fffe3,  0x3ffffe6,  0x7ffffe0, 0x7ffffe1, 0x3ffffe7,  0x7ffffe2,  0xfffff2,
    0x1fffe4,   0x1fffe5,  0x3ffffe8,  0x3ffffe9, 0xffffffd, 0x7ffffe3,  0x7ffffe4,  0x7ffffe5,
    0xfffec,    0xfffff3,  0xfffed,    0x1fffe6,  0x3fffe9,  0x1fffe7,   0x1fffe8,   0x7ffff3,
    0x3fffea,   0x3fffeb,  0x1ffffee,  0x1ffffef, 0xfffff4,  0xfffff5,   0x3ffffea,  0x7ffff4,
    0x3ffffeb,  0x7ffffe6, 0x3ffffec,  0x3ffffed, 0x7ffffe7, 0x7ffffe8,  0x7ffffe9,  0x7ffffea,
    0x7ffffeb,  0xffffffe, 0x7ffffec,  0x7ffffed, 0x7ffffee, 0x7ffffef,  0x7fffff0,  0x3ffffee,
    0x3fffffff,
};
static const uint8_t huff_len[257] = {
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6,  10, 10, 12, 13, 6,  8,  11, 10, 10, 8,  11, 8,  6,  6,  6,
    5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8,  15, 6,  12, 10, 13, 6,  7,  7,  7,  7,  7,  7,
    7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8,  13, 19, 13, 14, 6,
    15, 5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5,  6,  7,  6,  5,  5,  6,  7,  7,
    7,  7,  7,  15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21,
    23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24,
    21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
};

/* The same code is canonical (codes of one length are consecutive and
 * ordered by symbol, shorter codes first), so decoding needs only, per
 * length, the first code, how many codes have it and where their symbols
 * start in the symbols sorted by (length, symbol). */
static const uint32_t huff_first[31] = {
    0x0,      0x0,       0x0,       0x0,       0x0,       0x0,      0x14,       0x5c,
    0xf8,     0x0,       0x3f8,     0x7fa,     0xffa,     0x1ff8,   0x3ffc,     0x7ffc,
    0x0,      0x0,       0x0,       0x7fff0,   0xfffe6,   0x1fffdc, 0x3fffd2,   0x7fffd8,
    0xffffea, 0x1ffffec, 0x3ffffe0, 0x7ffffde, 0xfffffe2, 0x0,      0x3ffffffc,
};
static const uint16_t huff_count[31] = {
    0, 0, 0, 0, 0, 10, 26, 32, 6,  0, 5,  3,  2,  6, 2, 3,
    0, 0, 0, 3, 8, 13, 26, 29, 12, 4, 15, 19, 29, 0, 4,
};
static const uint16_t huff_base[31] = {
    0, 0, 0, 0,  0,  0,   10,  36,  68,  0,   74,  79,  82,  84, 90,  92,
    0, 0, 0, 95, 98, 106, 119, 145, 174, 186, 190, 205, 224, 0,  253,
};
static const uint16_t huff_sorted[257] = {
    48,  49,  50,  97,  99,  101, 105, 111, 115, 116, 32,  37,  45,  46,  47,  51,  52,  53,  54,
    55,  56,  57,  61,  65,  95,  98,  100, 102, 103, 104, 108, 109, 110, 112, 114, 117, 58,  66,
    67,  68,  69,  70,  71,  72,  73,  74,  75,  76,  77,  78,  79,  80,  81,  82,  83,  84,  85,
    86,  87,  89,  106, 107, 113, 118, 119, 120, 121, 122, 38,  42,  44,  59,  88,  90,  33,  34,
    40,  41,  63,  39,  43,  124, 35,  62,  0,   36,  64,  91,  93,  126, 94,  125, 60,  96,  123,
    92,  195, 208, 128, 130, 131, 162, 184, 194, 224, 226, 153, 161, 167, 172, 176, 177, 179, 209,
    216, 217, 227, 229, 230, 129, 132, 133, 134, 136, 146, 154, 156, 160, 163, 164, 169, 170, 173,
    178, 181, 185, 186, 187, 189, 190, 196, 198, 228, 232, 233, 1,   135, 137, 138, 139, 140, 141,
    143, 147, 149, 150, 151, 152, 155, 157, 158, 165, 166, 168, 174, 175, 180, 182, 183, 188, 191,
    197, 231, 239, 9,   142, 144, 145, 148, 159, 171, 206, 215, 225, 236, 237, 199, 207, 234, 235,
    192, 193, 200, 201, 202, 205, 210, 213, 218, 219, 238, 240, 242, 243, 255, 203, 204, 211, 212,
    214, 221, 222, 223, 241, 244, 245, 246, 247, 248, 250, 251, 252, 253, 254, 2,   3,   4,   5,
    6,   7,   8,   11,  12,  14,  15,  16,  17,  18,  19,  20,  21,  23,  24,  25,  26,  27,  28,
    29,  30,  31,  127, 220, 249, 10,  13,  22,  256,
};

/* By the next 8 bits of input: the symbol whose code they start with,
 * when that code is 8 bits or shorter, as symbol | length << 9; 0 when
 * the code is longer (every symbol of 8 bits or less has a nonzero length). */
static const uint16_t huff_fast[256] = {
    0x0a30, 0x0a30, 0x0a30, 0x0a30, 0x0a30, 0x0a30, 0x0a30, 0x0a30, 0x0a31, 0x0a31, 0x0a31, 0x0a31,
    0x0a31, 0x0a31, 0x0a31, 0x0a31, 0x0a32, 0x0a32, 0x0a32, 0x0a32, 0x0a32, 0x0a32, 0x0a32, 0x0a32,
    0x0a61, 0x0a61, 0x0a61, 0x0a61, 0x0a61, 0x0a61, 0x0a61, 0x0a61, 0x0a63, 0x0a63, 0x0a63, 0x0a63,
    0x0a63, 0x0a63, 0x0a63, 0x0a63, 0x0a65, 0x0a65, 0x0a65, 0x0a65, 0x0a65, 0x0a65, 0x0a65, 0x0a65,
    0x0a69, 0x0a69, 0x0a69, 0x0a69, 0x0a69, 0x0a69, 0x0a69, 0x0a69, 0x0a6f, 0x0a6f, 0x0a6f, 0x0a6f,
    0x0a6f, 0x0a6f, 0x0a6f, 0x0a6f, 0x0a73, 0x0a73, 0x0a73, 0x0a73, 0x0a73, 0x0a73, 0x0a73, 0x0a73,
    0x0a74, 0x0a74, 0x0a74, 0x0a74, 0x0a74, 0x0a74, 0x0a74, 0x0a74, 0x0c20, 0x0c20, 0x0c20, 0x0c20,
    0x0c25, 0x0c25, 0x0c25, 0x0c25, 0x0c2d, 0x0c2d, 0x0c2d, 0x0c2d, 0x0c2e, 0x0c2e, 0x0c2e, 0x0c2e,
    0x0c2f, 0x0c2f, 0x0c2f, 0x0c2f, 0x0c33, 0x0c33, 0x0c33, 0x0c33, 0x0c34, 0x0c34, 0x0c34, 0x0c34,
    0x0c35, 0x0c35, 0x0c35, 0x0c35, 0x0c36, 0x0c36, 0x0c36, 0x0c36, 0x0c37, 0x0c37, 0x0c37, 0x0c37,
    0x0c38, 0x0c38, 0x0c38, 0x0c38, 0x0c39, 0x0c39, 0x0c39, 0x0c39, 0x0c3d, 0x0c3d, 0x0c3d, 0x0c3d,
    0x0c41, 0x0c41, 0x0c41, 0x0c41, 0x0c5f, 0x0c5f, 0x0c5f, 0x0c5f, 0x0c62, 0x0c62, 0x0c62, 0x0c62,
    0x0c64, 0x0c64, 0x0c64, 0x0c64, 0x0c66, 0x0c66, 0x0c66, 0x0c66, 0x0c67, 0x0c67, 0x0c67, 0x0c67,
    0x0c68, 0x0c68, 0x0c68, 0x0c68, 0x0c6c, 0x0c6c, 0x0c6c, 0x0c6c, 0x0c6d, 0x0c6d, 0x0c6d, 0x0c6d,
    0x0c6e, 0x0c6e, 0x0c6e, 0x0c6e, 0x0c70, 0x0c70, 0x0c70, 0x0c70, 0x0c72, 0x0c72, 0x0c72, 0x0c72,
    0x0c75, 0x0c75, 0x0c75, 0x0c75, 0x0e3a, 0x0e3a, 0x0e42, 0x0e42, 0x0e43, 0x0e43, 0x0e44, 0x0e44,
    0x0e45, 0x0e45, 0x0e46, 0x0e46, 0x0e47, 0x0e47, 0x0e48, 0x0e48, 0x0e49, 0x0e49, 0x0e4a, 0x0e4a,
    0x0e4b, 0x0e4b, 0x0e4c, 0x0e4c, 0x0e4d, 0x0e4d, 0x0e4e, 0x0e4e, 0x0e4f, 0x0e4f, 0x0e50, 0x0e50,
    0x0e51, 0x0e51, 0x0e52, 0x0e52, 0x0e53, 0x0e53, 0x0e54, 0x0e54, 0x0e55, 0x0e55, 0x0e56, 0x0e56,
    0x0e57, 0x0e57, 0x0e59, 0x0e59, 0x0e6a, 0x0e6a, 0x0e6b, 0x0e6b, 0x0e71, 0x0e71, 0x0e76, 0x0e76,
    0x0e77, 0x0e77, 0x0e78, 0x0e78, 0x0e79, 0x0e79, 0x0e7a, 0x0e7a, 0x1026, 0x102a, 0x102c, 0x103b,
    0x1058, 0x105a, 0x0000, 0x0000,
};

/* Eight bytes of input, the first most significant (compilers make it one
 * load and a byte swap). */
static inline uint64_t load_be64(const uint8_t *p)
{
    return (uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40 |
           (uint64_t)p[3] << 32 | (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 |
           (uint64_t)p[6] << 8 | (uint64_t)p[7];
}

long h2_huff_decode(const uint8_t *in, size_t n, char *out)
{
    /* acc holds the next `bits` bits of input, most significant first;
     * below them, maybe some of the input's bits after those (never
     * others). */
    uint64_t acc = 0;
    unsigned bits = 0;
    size_t i = 0, o = 0;
    for (;;) {
        /* Refilled once under 32 bits (the longest code is 30), eight
         * bytes at a time while there are eight: the whole bytes that fit
         * are counted, and the bits of the next one that came along are
         * its own, or-ed in again, unchanged, by the next refill. */
        if (bits < 32) {
            if (n - i >= 8) {
                acc |= load_be64(in + i) >> bits;
                unsigned take = (63 - bits) >> 3;
                i += take;
                bits += take * 8;
            } else {
                while (bits <= 56 && i < n) {
                    acc |= (uint64_t)in[i++] << (56 - bits);
                    bits += 8;
                }
            }
        }
        /* Most symbols of text have codes of 5 to 8 bits: one lookup. */
        unsigned e = huff_fast[acc >> 56];
        unsigned len = e >> 9;
        if (len != 0 && len <= bits) {
            out[o++] = (char)(e & 0xff);
            acc <<= len;
            bits -= len;
            continue;
        }
        /* Longer codes: canonical, so at each length a code is a symbol
         * when it falls in that length's run. */
        unsigned l = 9;
        for (; l <= 30 && l <= bits; l++) {
            uint32_t k = (uint32_t)(acc >> (64 - l)) - huff_first[l];
            if (k < huff_count[l])
                break;
        }
        if (l > 30)
            return -1; /* cannot happen with a complete code */
        if (l > bits || len > bits)
            break; /* what is left is no whole code: padding, checked below */
        unsigned sym = huff_sorted[huff_base[l] + ((uint32_t)(acc >> (64 - l)) - huff_first[l])];
        if (sym == 256)
            return -1; /* 5.2: EOS in a string is an error */
        out[o++] = (char)sym;
        acc <<= l;
        bits -= l;
    }
    /* 5.2: at most 7 bits of padding, the EOS code's most significant
     * bits, which are all ones. */
    if (bits > 7 || (bits > 0 && (acc >> (64 - bits)) != (1u << bits) - 1))
        return -1;
    return (long)o;
}

size_t h2_huff_len(const char *s, size_t n)
{
    uint64_t bits = 0;
    for (size_t i = 0; i < n; i++)
        bits += huff_len[(unsigned char)s[i]];
    return (size_t)((bits + 7) / 8);
}

size_t h2_huff_encode(const char *s, size_t n, uint8_t *out)
{
    uint64_t acc = 0;
    unsigned bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned sym = (unsigned char)s[i];
        acc = acc << huff_len[sym] | huff_code[sym];
        bits += huff_len[sym];
        while (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    if (bits > 0) /* padded with the EOS code's leading ones */
        out[o++] = (uint8_t)(acc << (8 - bits) | ((1u << (8 - bits)) - 1));
    return o;
}
