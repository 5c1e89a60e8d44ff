/* rng.c — one CTR-DRBG per worker (mbedTLS contexts are not thread-safe),
 * plus one for load and one for the ticket keys. Each is seeded from the
 * system's entropy with a personalisation string naming its purpose and
 * worker, so two DRBGs never start from the same state even if the
 * entropy source misbehaved (NIST SP 800-90A 8.7.1). */
#include "kt.h"

#include <stdio.h>
#include <string.h>

int kt_rng_init(kt_rng *rng, const char *purpose, unsigned worker)
{
    char pers[96];
    int n = snprintf(pers, sizeof pers, "keel-tls %s worker %u", purpose, worker);
    mbedtls_entropy_init(&rng->entropy);
    mbedtls_ctr_drbg_init(&rng->drbg);
    int rc = mbedtls_ctr_drbg_seed(&rng->drbg, mbedtls_entropy_func, &rng->entropy,
                                   (const unsigned char *)pers, (size_t)n);
    if (rc != 0) {
        kt_rng_free(rng);
        return KEEL_ERR_IO;
    }
    rng->ready = 1;
    return KEEL_OK;
}

void kt_rng_free(kt_rng *rng)
{
    /* Both free functions wipe their state (the DRBG's key and V). */
    mbedtls_ctr_drbg_free(&rng->drbg);
    mbedtls_entropy_free(&rng->entropy);
    rng->ready = 0;
}

int kt_rng_random(void *ctx, unsigned char *out, size_t len)
{
    kt_rng *rng = ctx;
    return mbedtls_ctr_drbg_random(&rng->drbg, out, len);
}
