/* auth_basic/mac.c — the cache's keyed digest (mac.h). AES-128-CMAC as
 * RFC 4493 2.3 computes it, on AES-NI (Intel's white paper "Advanced
 * Encryption Standard (AES) New Instructions Set", 2010, gives the key
 * expansion): a 20-byte token is two AES blocks, some 60 instructions
 * with the round keys in memory, where SipHash-1-3 takes about 200. CMAC
 * is a PRF under AES's PRP assumption for any message length; the
 * instructions' time does not depend on the data (no tables), so the
 * digest leaks nothing through cache timing. Elsewhere SipHash-1-3-128. */
#include "mac.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define AB_AESNI 1
#include <cpuid.h>
#include <wmmintrin.h>
#define AESNI __attribute__((target("aes,sse2")))
#endif

#if defined(AB_AESNI)
/* RFC 4493 2.3 (the Generate_Subkey doubling): out = in << 1 in GF(2^128),
 * reduced by x^128 + x^7 + x^2 + x + 1 (0x87) when the top bit falls out. */
static void dbl(unsigned char out[16], const unsigned char in[16])
{
    unsigned char carry = (unsigned char)(in[0] >> 7);
    for (int i = 0; i < 15; i++)
        out[i] = (unsigned char)(in[i] << 1 | in[i + 1] >> 7);
    out[15] = (unsigned char)(in[15] << 1 ^ ((0u - carry) & 0x87));
}

static int cpu_has_aes(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_AES) != 0;
}

AESNI static __m128i expand_step(__m128i key, __m128i assist)
{
    assist = _mm_shuffle_epi32(assist, 0xff);
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    return _mm_xor_si128(key, assist);
}

/* aeskeygenassist takes its round constant as an immediate. */
#define EXPAND(rk, i, rcon)                                                                        \
    rk[i] = expand_step(rk[i - 1], _mm_aeskeygenassist_si128(rk[i - 1], rcon))

AESNI static __m128i encrypt(const ab_mac *m, __m128i x)
{
    const __m128i *rk = (const __m128i *)(const void *)m->round_keys;
    x = _mm_xor_si128(x, rk[0]);
    for (int i = 1; i < 10; i++)
        x = _mm_aesenc_si128(x, rk[i]);
    return _mm_aesenclast_si128(x, rk[10]);
}

AESNI static void aes_setup(ab_mac *m, const unsigned char key[AB_MAC_KEY])
{
    __m128i rk[11];
    rk[0] = _mm_loadu_si128((const __m128i *)(const void *)key);
    EXPAND(rk, 1, 0x01);
    EXPAND(rk, 2, 0x02);
    EXPAND(rk, 3, 0x04);
    EXPAND(rk, 4, 0x08);
    EXPAND(rk, 5, 0x10);
    EXPAND(rk, 6, 0x20);
    EXPAND(rk, 7, 0x40);
    EXPAND(rk, 8, 0x80);
    EXPAND(rk, 9, 0x1b);
    EXPAND(rk, 10, 0x36);
    for (int i = 0; i < 11; i++)
        _mm_store_si128((__m128i *)(void *)m->round_keys[i], rk[i]);
    unsigned char l[16];
    _mm_storeu_si128((__m128i *)(void *)l, encrypt(m, _mm_setzero_si128()));
    dbl(m->k1, l);
    dbl(m->k2, m->k1);
    volatile unsigned char *v = l;
    for (size_t i = 0; i < sizeof l; i++)
        v[i] = 0;
}

/* RFC 4493 2.4: CBC over the blocks; the last one XORed with K1 if it is
 * whole, else padded with 10* and XORed with K2 (an empty message is one
 * padded block). */
AESNI static void cmac(const ab_mac *m, const unsigned char *in, size_t len,
                       unsigned char out[AB_MAC_OUT])
{
    __m128i x = _mm_setzero_si128();
    size_t before_last = len == 0 ? 0 : (len - 1) / 16;
    for (size_t i = 0; i < before_last; i++, in += 16)
        x = encrypt(m, _mm_xor_si128(x, _mm_loadu_si128((const __m128i *)(const void *)in)));
    size_t rest = len - 16 * before_last;
    __m128i last;
    if (rest == 16) {
        last = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)in),
                             _mm_load_si128((const __m128i *)(const void *)m->k1));
    } else {
        unsigned char block[16] = {0};
        memcpy(block, in, rest);
        block[rest] = 0x80;
        last = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)block),
                             _mm_load_si128((const __m128i *)(const void *)m->k2));
    }
    _mm_storeu_si128((__m128i *)(void *)out, encrypt(m, _mm_xor_si128(x, last)));
}
#endif

void ab_mac_init(ab_mac *m, const unsigned char key[AB_MAC_KEY], int allow_aes)
{
    memset(m, 0, sizeof *m);
#if defined(AB_AESNI)
    if (allow_aes && cpu_has_aes()) {
        m->aes = 1;
        aes_setup(m, key);
        return;
    }
#else
    (void)allow_aes;
#endif
    memcpy(m->sip_key, key, sizeof m->sip_key);
}

void ab_mac_digest(const ab_mac *m, const void *data, size_t len, unsigned char out[AB_MAC_OUT])
{
#if defined(AB_AESNI)
    if (m->aes) {
        cmac(m, data, len, out);
        return;
    }
#endif
    ab_siphash128(m->sip_key, data, len, out);
}

void ab_mac_wipe(ab_mac *m)
{
    volatile unsigned char *v = (volatile unsigned char *)m;
    for (size_t i = 0; i < sizeof *m; i++)
        v[i] = 0;
}
