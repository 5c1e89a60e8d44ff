/* compat.h — mbedTLS 2.28 and 3.x behind one spelling.
 *
 * Tested with Debian 12's 2.28.3 and with 3.6 (docs/tls.md). The
 * differences the module meets:
 *   - 3.x made most struct fields private: only the public accessors are
 *     used, plus x509_crt's subject / subject_alt_names, public in both;
 *   - mbedtls_pk_parse_key and mbedtls_pk_check_pair take an RNG in 3.x
 *     (for blinding the private-key operations they run);
 *   - versions: conf_{min,max}_version(major, minor) in 2.x,
 *     conf_{min,max}_tls_version(enum) in 3.x (3.2 on);
 *   - TLS 1.3 exists only in 3.x, with MBEDTLS_SSL_PROTO_TLS1_3, and
 *     needs psa_crypto_init() first;
 *   - the RSA_ALT sign callback lost its `mode` argument in 3.x.
 */
#ifndef KEEL_TLS_COMPAT_H
#define KEEL_TLS_COMPAT_H

#include <string.h>

#include <mbedtls/version.h>

#if MBEDTLS_VERSION_NUMBER < 0x03000000
#include <mbedtls/config.h>
#else
#include <mbedtls/build_info.h>
#endif

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ticket.h>
#include <mbedtls/x509_crt.h>

#if MBEDTLS_VERSION_NUMBER < 0x02100000
#error "the tls module needs mbedTLS 2.16 or newer (2.28 and 3.6 are tested)"
#endif

#if MBEDTLS_VERSION_NUMBER >= 0x03000000
#define KT_MBEDTLS3 1
#include <psa/crypto.h>
#else
#define KT_MBEDTLS3 0
#endif

#if KT_MBEDTLS3 && defined(MBEDTLS_SSL_PROTO_TLS1_3)
#define KT_HAVE_TLS13 1
#else
#define KT_HAVE_TLS13 0
#endif

#if !defined(MBEDTLS_SSL_ALPN) || !defined(MBEDTLS_SSL_SERVER_NAME_INDICATION) ||                  \
    !defined(MBEDTLS_X509_CRT_PARSE_C) || !defined(MBEDTLS_CTR_DRBG_C) ||                          \
    !defined(MBEDTLS_ENTROPY_C)
#error "the tls module needs an mbedTLS built with ALPN, SNI, X.509 parsing, CTR-DRBG and entropy"
#endif

#if defined(MBEDTLS_SSL_SESSION_TICKETS) && defined(MBEDTLS_SSL_TICKET_C)
#define KT_HAVE_TICKETS 1
#else
#define KT_HAVE_TICKETS 0
#endif

/* 2 = TLS 1.2, 3 = TLS 1.3 (the minor numbers of RFC 8446 D / RFC 5246 E). */
static inline void kt_conf_versions(mbedtls_ssl_config *conf, int min, int max)
{
#if KT_MBEDTLS3
    mbedtls_ssl_conf_min_tls_version(conf, min >= 3 ? MBEDTLS_SSL_VERSION_TLS1_3
                                                    : MBEDTLS_SSL_VERSION_TLS1_2);
    mbedtls_ssl_conf_max_tls_version(conf, max >= 3 ? MBEDTLS_SSL_VERSION_TLS1_3
                                                    : MBEDTLS_SSL_VERSION_TLS1_2);
#else
    (void)max;
    mbedtls_ssl_conf_min_version(conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_max_version(conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    (void)min;
#endif
}

static inline int kt_pk_parse_key(mbedtls_pk_context *pk, const unsigned char *key, size_t len,
                                  const char *pass, int (*rng)(void *, unsigned char *, size_t),
                                  void *rng_ctx)
{
    const unsigned char *pw = (const unsigned char *)pass;
    size_t pwlen = pass ? strlen(pass) : 0;
#if KT_MBEDTLS3
    return mbedtls_pk_parse_key(pk, key, len, pw, pwlen, rng, rng_ctx);
#else
    (void)rng;
    (void)rng_ctx;
    return mbedtls_pk_parse_key(pk, key, len, pw, pwlen);
#endif
}

static inline int kt_pk_check_pair(const mbedtls_pk_context *pub, const mbedtls_pk_context *prv,
                                   int (*rng)(void *, unsigned char *, size_t), void *rng_ctx)
{
#if KT_MBEDTLS3
    return mbedtls_pk_check_pair(pub, prv, rng, rng_ctx);
#else
    (void)rng;
    (void)rng_ctx;
    return mbedtls_pk_check_pair(pub, prv);
#endif
}

static inline int kt_pk_sign(mbedtls_pk_context *pk, mbedtls_md_type_t md,
                             const unsigned char *hash, size_t hash_len, unsigned char *sig,
                             size_t sig_size, size_t *sig_len,
                             int (*rng)(void *, unsigned char *, size_t), void *rng_ctx)
{
#if KT_MBEDTLS3
    return mbedtls_pk_sign(pk, md, hash, hash_len, sig, sig_size, sig_len, rng, rng_ctx);
#else
    (void)sig_size; /* 2.x writes at most MBEDTLS_PK_SIGNATURE_MAX_SIZE */
    return mbedtls_pk_sign(pk, md, hash, hash_len, sig, sig_len, rng, rng_ctx);
#endif
}

/* The subject and SAN list of a parsed certificate (public in both). */
#define KT_CRT_SUBJECT(crt) (&(crt)->subject)
#define KT_CRT_SAN(crt)     (&(crt)->subject_alt_names)

#endif
