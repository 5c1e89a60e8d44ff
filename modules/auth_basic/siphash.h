/* auth_basic/siphash.h — SipHash-1-3 with a 128-bit output (Aumasson and
 * Bernstein, "SipHash: a fast short-input PRF", 2012), the keyed digest
 * the credential cache stores instead of passwords. No keel calls: the
 * unit test compiles siphash.c as it is. */
#ifndef AUTH_BASIC_SIPHASH_H
#define AUTH_BASIC_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define AB_SIPHASH_KEY 16
#define AB_SIPHASH_OUT 16

void ab_siphash128(const unsigned char key[AB_SIPHASH_KEY], const void *data, size_t len,
                   unsigned char out[AB_SIPHASH_OUT]);

#endif
