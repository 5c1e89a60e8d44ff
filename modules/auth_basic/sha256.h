/* auth_basic/sha256.h — SHA-256 (FIPS 180-4), for the keyed digest the
 * credential cache stores instead of passwords. No keel calls: the unit test compiles sha256.c as
 * it is. */
#ifndef AUTH_BASIC_SHA256_H
#define AUTH_BASIC_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define AB_SHA256_LEN 32

typedef struct ab_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char block[64];
    size_t fill;
} ab_sha256;

void ab_sha256_init(ab_sha256 *s);
void ab_sha256_update(ab_sha256 *s, const void *data, size_t len);
void ab_sha256_final(ab_sha256 *s, unsigned char out[AB_SHA256_LEN]);

#endif
