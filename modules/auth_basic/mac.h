/* auth_basic/mac.h — the credential cache's keyed digest: AES-128-CMAC
 * (NIST SP 800-38B, RFC 4493) on the CPU's AES instructions where it has
 * them (x86-64 AES-NI), else SipHash-1-3-128 (siphash.h). Both are PRFs
 * with a 128-bit key and output; which one a process uses is chosen once,
 * at ab_mac_init, so a cache never mixes them. No keel calls: the unit
 * test compiles mac.c as it is. */
#ifndef AUTH_BASIC_MAC_H
#define AUTH_BASIC_MAC_H

#include <stddef.h>
#include <stdint.h>

#include "siphash.h"

#define AB_MAC_KEY 16
#define AB_MAC_OUT 16

typedef struct ab_mac {
    /* AES-128's 11 round keys, then CMAC's subkeys K1 and K2 (16-byte
     * aligned for the AES instructions' memory operands). */
    _Alignas(16) unsigned char round_keys[11][16];
    _Alignas(16) unsigned char k1[16];
    _Alignas(16) unsigned char k2[16];
    unsigned char sip_key[AB_SIPHASH_KEY];
    int aes; /* 1: CMAC on AES instructions; 0: SipHash */
} ab_mac;

/* Sets m up from 16 secret bytes: CMAC if the CPU has AES instructions
 * and allow_aes is set (the unit test clears it to test the other path),
 * else SipHash-1-3-128. */
void ab_mac_init(ab_mac *m, const unsigned char key[AB_MAC_KEY], int allow_aes);

/* The digest of data[0..len) under m. Its time depends on len only. */
void ab_mac_digest(const ab_mac *m, const void *data, size_t len, unsigned char out[AB_MAC_OUT]);

/* Wipes the key material (volatile stores the compiler keeps). */
void ab_mac_wipe(ab_mac *m);

#endif
