/* certs.c — the server's certificates: `cert = CHAIN.pem KEY.pem
 * [passphrase=...]` lines read in load, checked (parses, key matches),
 * indexed by the names they carry, and chosen per handshake by the name
 * the client asks for (SNI, RFC 6066 3). The first line is the default,
 * served to clients that send no name or one no certificate carries.
 *
 * Everything here is built on the main thread and read-only afterwards,
 * shared by every worker's handshakes. Key material read from files is
 * wiped (mbedtls_platform_zeroize) as soon as it is parsed; the parsed
 * keys are wiped by mbedtls_pk_free at unload. */
#include "kt.h"

#include <keel/util.h>

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/ecdsa.h>
#include <mbedtls/oid.h>

/* ---- files ------------------------------------------------------------------- */

/* Reads a whole file, NUL-terminated (mbedTLS's PEM parser wants the NUL
 * counted in the length). */
static unsigned char *read_file(const char *path, size_t *len, int *err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        *err = errno;
        return NULL;
    }
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf != NULL) {
        if (n + 1 >= cap) {
            unsigned char *grown = malloc(cap * 2);
            if (grown != NULL)
                memcpy(grown, buf, n);
            mbedtls_platform_zeroize(buf, n);
            free(buf);
            buf = grown;
            cap *= 2;
            if (buf == NULL)
                break;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    int failed = ferror(f);
    fclose(f);
    if (buf == NULL || failed || n > (64u << 20)) {
        *err = buf == NULL ? ENOMEM : failed ? EIO : EFBIG;
        if (buf != NULL)
            mbedtls_platform_zeroize(buf, n);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n + 1;
    return buf;
}

static void free_file(unsigned char *buf, size_t len)
{
    if (buf != NULL)
        mbedtls_platform_zeroize(buf, len);
    free(buf);
}

static const char *mbed_reason(int rc, char *buf, size_t size)
{
    mbedtls_strerror(rc, buf, size);
    return buf;
}

/* ---- names --------------------------------------------------------------------- */

static int add_name(kt_cert *c, const unsigned char *p, size_t len)
{
    if (len == 0 || len > 253)
        return KEEL_OK; /* not a host name (RFC 1035 2.3.4); ignored */
    char *name = keel_strndup_lower((const char *)p, len);
    if (name == NULL || keel_array_add(&c->names, c->nnames, sizeof *c->names) != 0) {
        free(name);
        return KEEL_ERR_NOMEM;
    }
    c->names[c->nnames++] = name;
    return KEEL_OK;
}

/* The names a client may ask for: subjectAltName dNSName entries and the
 * subject's CN (RFC 6125 6.4.4 prefers the SANs; a server choosing among
 * its own certificates may take both). */
static int collect_names(kt_cert *c)
{
    const mbedtls_x509_crt *crt = &c->chain;
    for (const mbedtls_x509_sequence *s = KT_CRT_SAN(crt); s != NULL; s = s->next) {
        /* [2] IA5String dNSName (RFC 5280 4.2.1.6), context-specific. */
        if (s->buf.p != NULL && s->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2)) {
            int rc = add_name(c, s->buf.p, s->buf.len);
            if (rc != KEEL_OK)
                return rc;
        }
    }
    for (const mbedtls_x509_name *n = KT_CRT_SUBJECT(crt); n != NULL; n = n->next) {
        if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid) == 0) {
            int rc = add_name(c, n->val.p, n->val.len);
            if (rc != KEEL_OK)
                return rc;
        }
    }
    return KEEL_OK;
}

int kt_name_matches(const char *pattern, const char *name, size_t len)
{
    size_t plen = strlen(pattern);
    if (plen > 2 && pattern[0] == '*' && pattern[1] == '.') {
        /* "*.example.com" covers exactly one label (RFC 6125 6.4.3):
         * "a.example.com", not "example.com" nor "a.b.example.com". */
        const char *dot = memchr(name, '.', len);
        if (dot == NULL || dot == name)
            return 0;
        size_t rest = len - (size_t)(dot - name);
        if (rest != plen - 1)
            return 0;
        for (size_t i = 0; i < rest; i++)
            if (tolower((unsigned char)dot[i]) != pattern[1 + i])
                return 0;
        return 1;
    }
    if (plen != len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (tolower((unsigned char)name[i]) != pattern[i])
            return 0;
    return 1;
}

/* ---- RSA keys without MBEDTLS_THREADING_C ------------------------------------ *
 * An RSA private-key operation updates blinding values stored in the key
 * (mbedtls_rsa_private); mbedTLS guards them with the key's mutex only
 * when built with MBEDTLS_THREADING_C. Without it, a key shared by several
 * workers goes behind an RSA_ALT wrapper that takes our lock. (EC keys
 * keep no such state once their generator table is built: warm_ec_key.) */

#if !defined(MBEDTLS_THREADING_C) && defined(MBEDTLS_PK_RSA_ALT_SUPPORT) && defined(MBEDTLS_RSA_C)
#define KT_KEYLOCK 1
struct kt_keylock {
    mbedtls_pk_context real;
    kt_lock *lock;
    kt_rng rng; /* for decryption's blinding, under lock */
};

#if KT_MBEDTLS3
static int keylock_decrypt(void *ctx, size_t *olen, const unsigned char *in, unsigned char *out,
                           size_t max)
#else
static int keylock_decrypt(void *ctx, int mode, size_t *olen, const unsigned char *in,
                           unsigned char *out, size_t max)
#endif
{
    struct kt_keylock *k = ctx;
#if !KT_MBEDTLS3
    if (mode != MBEDTLS_RSA_PRIVATE)
        return MBEDTLS_ERR_RSA_BAD_INPUT_DATA;
#endif
    kt_lock_acquire(k->lock);
    int rc = mbedtls_pk_decrypt(&k->real, in, mbedtls_pk_get_len(&k->real), out, olen, max,
                                kt_rng_random, &k->rng);
    kt_lock_release(k->lock);
    return rc;
}

#if KT_MBEDTLS3
static int keylock_sign(void *ctx, mbedtls_f_rng_t *f_rng, void *p_rng, mbedtls_md_type_t md_alg,
                        unsigned int hashlen, const unsigned char *hash, unsigned char *sig)
#else
static int keylock_sign(void *ctx, int (*f_rng)(void *, unsigned char *, size_t), void *p_rng,
                        int mode, mbedtls_md_type_t md_alg, unsigned int hashlen,
                        const unsigned char *hash, unsigned char *sig)
#endif
{
    struct kt_keylock *k = ctx;
    size_t olen = 0;
#if !KT_MBEDTLS3
    if (mode != MBEDTLS_RSA_PRIVATE)
        return MBEDTLS_ERR_RSA_BAD_INPUT_DATA;
#endif
    kt_lock_acquire(k->lock);
#if KT_MBEDTLS3
    int rc = mbedtls_pk_sign(&k->real, md_alg, hash, hashlen, sig, mbedtls_pk_get_len(&k->real),
                             &olen, f_rng, p_rng);
#else
    int rc = mbedtls_pk_sign(&k->real, md_alg, hash, hashlen, sig, &olen, f_rng, p_rng);
#endif
    kt_lock_release(k->lock);
    return rc;
}

static size_t keylock_len(void *ctx)
{
    return mbedtls_pk_get_len(&((struct kt_keylock *)ctx)->real);
}

static void keylock_free(struct kt_keylock *k)
{
    if (k == NULL)
        return;
    mbedtls_pk_free(&k->real);
    if (k->rng.ready)
        kt_rng_free(&k->rng);
    kt_lock_free(k->lock);
    free(k);
}

/* Moves an RSA key behind the lock: c->key becomes the wrapper. */
static int keylock_wrap(kt_cert *c)
{
    if (mbedtls_pk_get_type(&c->key) != MBEDTLS_PK_RSA)
        return KEEL_OK;
    struct kt_keylock *k = calloc(1, sizeof *k);
    if (k == NULL)
        return KEEL_ERR_NOMEM;
    if ((k->lock = kt_lock_new()) == NULL || kt_rng_init(&k->rng, "rsa", 0) != KEEL_OK) {
        keylock_free(k);
        return KEEL_ERR_NOMEM;
    }
    k->real = c->key; /* the struct moves; what it points to stays */
    mbedtls_pk_init(&c->key);
    if (mbedtls_pk_setup_rsa_alt(&c->key, k, keylock_decrypt, keylock_sign, keylock_len) != 0) {
        c->key = k->real;
        mbedtls_pk_init(&k->real);
        keylock_free(k);
        return KEEL_ERR_NOMEM;
    }
    c->keylock = k;
    return KEEL_OK;
}
#else
#define KT_KEYLOCK 0
struct kt_keylock {
    int unused;
};
static void keylock_free(struct kt_keylock *k)
{
    (void)k;
}
static int keylock_wrap(kt_cert *c)
{
    (void)c;
    return KEEL_OK;
}
#endif

/* ---- EC keys: the generator's table built once -------------------------------- *
 * ECDSA signing multiplies the group's generator by a fresh nonce;
 * mbedTLS's comb method keeps the generator's precomputed table in the
 * group (grp->T), built on the first multiplication (MBEDTLS_ECP_FIXED_POINT_OPTIM,
 * on by default) and reused by every later one. Two things keep a server
 * from it:
 *   - in 2.x, a key parsed as MBEDTLS_PK_ECKEY (every PEM EC key) signs
 *     through a copy of itself (pk_wrap.c's eckey_sign_wrap:
 *     mbedtls_ecdsa_from_keypair, whose group copy reloads the curve
 *     without the table): the table is rebuilt for every handshake, about
 *     as costly as the multiplication itself. The same key as an
 *     MBEDTLS_PK_ECDSA context signs in place and keeps its table;
 *   - the first signature writes grp->T, which workers signing at once
 *     would race on: one signature here, on the main thread before any
 *     worker runs, builds it; afterwards signing only reads the group. */

static int warm_ec_key(kt_cert *c, int (*rng)(void *, unsigned char *, size_t), void *rng_ctx)
{
#if defined(MBEDTLS_ECDSA_C)
    if (!mbedtls_pk_can_do(&c->key, MBEDTLS_PK_ECDSA))
        return KEEL_OK;
#if !KT_MBEDTLS3
    if (mbedtls_pk_get_type(&c->key) == MBEDTLS_PK_ECKEY) {
        mbedtls_pk_context ecdsa;
        mbedtls_pk_init(&ecdsa);
        if (mbedtls_pk_setup(&ecdsa, mbedtls_pk_info_from_type(MBEDTLS_PK_ECDSA)) != 0 ||
            mbedtls_ecdsa_from_keypair(mbedtls_pk_ec(ecdsa), mbedtls_pk_ec(c->key)) != 0) {
            mbedtls_pk_free(&ecdsa);
            return KEEL_ERR_NOMEM;
        }
        mbedtls_pk_free(&c->key); /* zeroises the parsed copy */
        c->key = ecdsa;           /* the struct moves; what it points to stays */
    }
#endif
    unsigned char hash[32] = {0}, sig[MBEDTLS_ECDSA_MAX_LEN];
    size_t len = 0;
    return kt_pk_sign(&c->key, MBEDTLS_MD_SHA256, hash, sizeof hash, sig, sizeof sig, &len, rng,
                      rng_ctx) == 0
               ? KEEL_OK
               : KEEL_ERR_CONFIG;
#else
    (void)c;
    (void)rng;
    (void)rng_ctx;
    return KEEL_OK;
#endif
}

/* ---- loading ------------------------------------------------------------------ */

static int load_one(keel_module *m, const char *value, kt_cert *c,
                    int (*rng)(void *, unsigned char *, size_t), void *rng_ctx)
{
    kt_cert_line line;
    int rc = kt_cert_line_parse(m, value, &line);
    if (rc != KEEL_OK)
        return rc;
    const char *chain_path = line.chain, *key_path = line.key, *pass = line.passphrase;
    char why[160];
    int err = 0;
    size_t len = 0;
    unsigned char *buf = read_file(chain_path, &len, &err);
    if (buf == NULL)
        return kt_cert_error(m, value, "cannot read %s: %s", chain_path, strerror(err));
    rc = mbedtls_x509_crt_parse(&c->chain, buf, len);
    free_file(buf, len);
    if (rc != 0) {
        if (rc > 0)
            return kt_cert_error(m, value, "%s: %d certificate(s) do not parse", chain_path, rc);
        return kt_cert_error(m, value, "%s: not a certificate chain (%s)", chain_path,
                             mbed_reason(rc, why, sizeof why));
    }

    buf = read_file(key_path, &len, &err);
    if (buf == NULL)
        return kt_cert_error(m, value, "cannot read %s: %s", key_path, strerror(err));
    rc = kt_pk_parse_key(&c->key, buf, len, pass, rng, rng_ctx);
    free_file(buf, len);
    if (rc != 0)
        return kt_cert_error(m, value, "%s: not a usable private key (%s)", key_path,
                             mbed_reason(rc, why, sizeof why));
    /* The leaf (the chain's first certificate) must carry this key. */
    rc = kt_pk_check_pair(&c->chain.pk, &c->key, rng, rng_ctx);
    if (rc != 0)
        return kt_cert_error(m, value, "%s does not match the key in %s", chain_path, key_path);
    if ((rc = collect_names(c)) != KEEL_OK)
        return rc;
    if (warm_ec_key(c, rng, rng_ctx) != KEEL_OK)
        return kt_cert_error(m, value, "%s: the key cannot sign", key_path);
    if (c->nnames == 0)
        keel_log(m, KEEL_LOG_WARN, "%s carries no DNS name: served only as the default",
                 chain_path);
    /* One worker shares nothing. (The wrapper signs PKCS#1 v1.5 only,
     * which TLS 1.3's RSA-PSS cannot use: TLS 1.3 needs either one worker
     * or MBEDTLS_THREADING_C, where no wrapper is needed.) */
    return keel_module_worker_count(m) > 1 ? keylock_wrap(c) : KEEL_OK;
}

int kt_certs_load(keel_module *m, const keel_config_list *lines, kt_certs *certs,
                  int (*rng)(void *, unsigned char *, size_t), void *rng_ctx)
{
    size_t n = lines->count;
    memset(certs, 0, sizeof *certs);
    if (n == 0)
        return KEEL_OK;
    certs->v = calloc(n, sizeof *certs->v);
    if (certs->v == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        kt_cert *c = &certs->v[i];
        mbedtls_x509_crt_init(&c->chain);
        mbedtls_pk_init(&c->key);
        certs->n = i + 1;
        int rc = load_one(m, lines->items[i], c, rng, rng_ctx);
        if (rc != KEEL_OK) {
            kt_certs_free(certs);
            return rc;
        }
    }
    return KEEL_OK;
}

void kt_certs_free(kt_certs *certs)
{
    for (size_t i = 0; i < certs->n; i++) {
        kt_cert *c = &certs->v[i];
        mbedtls_pk_free(&c->key); /* zeroises the key */
        keylock_free(c->keylock);
        mbedtls_x509_crt_free(&c->chain);
        for (size_t k = 0; k < c->nnames; k++)
            free(c->names[k]);
        free(c->names);
    }
    free(certs->v);
    memset(certs, 0, sizeof *certs);
}

int kt_ca_load(keel_module *m, const char *key, const char *path, mbedtls_x509_crt *ca)
{
    char full[1024], why[160];
    /* The last occurrence is the value read (a repeated key: the last wins). */
    size_t count = keel_config_count(m, key);
    if (keel_config_path(m, key, count > 0 ? count - 1 : 0, path, full, sizeof full) != KEEL_OK)
        snprintf(full, sizeof full, "%s", path); /* a built-in default, not from the config */
    int err = 0;
    size_t len = 0;
    unsigned char *buf = read_file(full, &len, &err);
    if (buf == NULL)
        return keel_config_error(m, key, "cannot read %s: %s", full, strerror(err));
    int rc = mbedtls_x509_crt_parse(ca, buf, len);
    free_file(buf, len);
    /* A system bundle may hold a few certificates mbedTLS cannot parse
     * (rc > 0 counts them): the others still serve. */
    if (rc < 0 || ca->version == 0)
        return keel_config_error(m, key, "%s: no usable CA certificate (%s)", full,
                                 rc < 0 ? mbed_reason(rc, why, sizeof why) : "none parsed");
    return KEEL_OK;
}

/* ---- SNI ------------------------------------------------------------------------- */

/* Installs the certificates of a list that carry the name (all of them
 * for name NULL): mbedTLS picks among them by the suite negotiated (an
 * RSA and an ECDSA one for the same names). How many were installed, or
 * -1. */
static int install(mbedtls_ssl_context *ssl, const kt_certs *certs, const char *name, size_t len)
{
    int n = 0;
    for (size_t i = 0; i < certs->n; i++) {
        const kt_cert *c = &certs->v[i];
        for (size_t k = 0; k < c->nnames || (name == NULL && k == 0); k++) {
            if (name == NULL || kt_name_matches(c->names[k], name, len)) {
                if (mbedtls_ssl_set_hs_own_cert(ssl, (mbedtls_x509_crt *)&c->chain,
                                                (mbedtls_pk_context *)&c->key) != 0)
                    return -1;
                n++;
                break;
            }
        }
    }
    return n;
}

int kt_certs_sni(void *p, mbedtls_ssl_context *ssl, const unsigned char *name, size_t len)
{
    const kt_certs *certs = p;
    kt_session *s = (kt_session *)((char *)ssl - offsetof(kt_session, ssl));
    s->sni_seen = 1;
    if (s->b.server_name == NULL && len > 0 && len <= 253 && memchr(name, '\0', len) == NULL)
        kt_set_server_name(&s->b, (const char *)name, len); /* for the service; none if no memory */
    /* The site the name chooses, as a Host would choose it (exact, then
     * wildcard, then the default site): its own `tls.cert` lines, all of
     * them, whatever names they carry (nginx's ssl_certificate in the
     * server block server_name chose). */
    const kt_section *site = keel_conn_site_config(s->b.conn, kt_self, (const char *)name, len);
    const kt_site_list *own = site != NULL ? kt_site_of(site) : NULL;
    if (own != NULL) {
        s->site = own;
        return install(ssl, &own->certs, NULL, 0) < 0 ? -1 : 0;
    }
    /* A site without its own: the [tls] list, each certificate that
     * carries the name; none does: [tls]'s first (RFC 6066 3 lets the
     * server continue without an unrecognized_name alert). [tls] has
     * none: the connection's default (the default site's) stays. */
    if (certs->n == 0)
        return 0;
    s->site = NULL;
    int n = install(ssl, certs, (const char *)name, len);
    if (n == 0)
        n = mbedtls_ssl_set_hs_own_cert(ssl, &certs->v[0].chain, &certs->v[0].key) == 0 ? 1 : -1;
    return n < 0 ? -1 : 0;
}

/* ---- the 421 filter's question (keys.c) ------------------------------------------ */

int kt_conn_served_certs(keel_conn *conn, const char *const **served)
{
    const kt_session *s = kt_session_of(conn);
    if (s == NULL || s->b.client)
        return 0;
    *served = s->site != NULL ? s->site->items : NULL;
    return 1;
}
