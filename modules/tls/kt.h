/* kt.h — the tls module's internal interfaces (one header for the module's
 * files; nothing here is public: include/keel/tls.h is).
 *
 * Who owns what:
 *   - load builds everything shared, read-only afterwards: the certificates
 *     and keys (kt_cert), the CA chains, the session ticket keys (the only
 *     shared state that changes, behind its own lock), the settings;
 *   - each worker owns its RNG, its mbedtls_ssl_config objects (they hold
 *     the RNG and the ALPN list, so they are per worker and per list) and
 *     a staging buffer for writes;
 *   - each connection owns one kt_session (its mbedtls_ssl_context).
 */
#ifndef KEEL_TLS_KT_H
#define KEEL_TLS_KT_H

#include "compat.h"
#include "keys.h"

#include <keel/keel.h>
#include <keel/metrics.h>

#include <stddef.h>
#include <stdint.h>

/* ---- lock.c: a mutex without libuv (modules link only their own deps) --- */

typedef struct kt_lock kt_lock;
kt_lock *kt_lock_new(void);
void kt_lock_free(kt_lock *lock);
void kt_lock_acquire(kt_lock *lock);
void kt_lock_release(kt_lock *lock);

/* ---- certs.c ------------------------------------------------------------- */

/* One `cert = CHAIN KEY` line. */
typedef struct kt_cert {
    mbedtls_x509_crt chain;
    mbedtls_pk_context key;
    char **names; /* lowercase CN and subjectAltName DNS entries ("*.a.b" kept) */
    size_t nnames;
    struct kt_keylock *keylock; /* RSA keys behind a lock where mbedTLS has none */
} kt_cert;

typedef struct kt_certs {
    kt_cert *v;
    size_t n;
} kt_certs;

/* Reads every `cert` line of a list ([tls]'s or a scope's);
 * KEEL_ERR_CONFIG (logged with the line's FILE:LINE, naming the file) on
 * any failure. rng is for mbedTLS 3.x's key checks (main thread only). */
int kt_certs_load(keel_module *m, const keel_config_list *lines, kt_certs *certs,
                  int (*rng)(void *, unsigned char *, size_t), void *rng_ctx);
void kt_certs_free(kt_certs *certs);
/* A CA bundle (PEM or DER, one file). KEEL_ERR_CONFIG naming key and file. */
int kt_ca_load(keel_module *m, const char *key, const char *path, mbedtls_x509_crt *ca);
/* 1 if `name` (from SNI) matches pattern (an exact name or "*.rest": one
 * label), case-insensitively. */
int kt_name_matches(const char *pattern, const char *name, size_t len);
/* The SNI callback (RFC 6066 3): the certificates of the site the name
 * chooses (keel_conn_site_config) when it has its own `tls.cert` lines,
 * else those of [tls] carrying the name, else [tls]'s first; [tls] has
 * none: the connection's default (kt_conf's) stays. Records the list
 * served in the session (kt_session.site). */
int kt_certs_sni(void *certs, mbedtls_ssl_context *ssl, const unsigned char *name, size_t len);

/* ---- rng.c ------------------------------------------------------------------ */

typedef struct kt_rng {
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    int ready;
} kt_rng;

/* Seeds from the system's entropy with a personalisation string naming
 * the purpose and the worker (NIST SP 800-90A 8.7.1). */
int kt_rng_init(kt_rng *rng, const char *purpose, unsigned worker);
void kt_rng_free(kt_rng *rng);
int kt_rng_random(void *rng, unsigned char *out, size_t len); /* mbedTLS f_rng */

/* ---- tickets.c -------------------------------------------------------------- */

typedef struct kt_tickets kt_tickets;
/* Ticket keys shared by every worker, rotated every lifetime_s: one set
 * for [tls]'s certificates, one per site list (kt_site_list), so that a
 * ticket resumes only under the certificates it was issued under. */
kt_tickets *kt_tickets_new(uint32_t lifetime_s);
void kt_tickets_free(kt_tickets *t);
/* Installs the ticket callbacks when any key set exists; they pick the
 * handshaking session's set (kt_handshaking). */
void kt_tickets_conf(mbedtls_ssl_config *conf);
/* Called on the handshake's thread when a ticket was accepted (session.c). */
void kt_note_ticket_accepted(void);

/* ---- settings (tls.c) ----------------------------------------------------- */

/* A scope's own `tls.cert` list, loaded once (scopes that inherit it
 * share its items pointer), and the ticket keys of the sessions its
 * certificates authenticated. */
typedef struct kt_site_list {
    const char *const *items;
    kt_certs certs;
    kt_tickets *tickets; /* NULL: session_tickets off */
} kt_site_list;

typedef struct kt_settings {
    kt_certs certs;
    int min_version, max_version; /* 2 = TLS 1.2, 3 = TLS 1.3 */
    int *ciphers;                 /* 0-terminated; NULL: kt_default_ciphers */
    /* Key-exchange groups in order of preference (RFC 8446 4.2.7, RFC 8422
     * 5.1.1): what the server picks from the client's list. */
    mbedtls_ecp_group_id curves[8]; /* MBEDTLS_ECP_DP_NONE-terminated */
    uint16_t groups[8];             /* the same as TLS ids (3.x), 0-terminated */
    uint64_t handshake_timeout_ms;
    int tickets_on;
    uint32_t ticket_lifetime_s;
    kt_tickets *tickets;
    int verify_client;
    mbedtls_x509_crt client_ca; /* verify_client != off */
    int have_client_ca;
    const char *alpn; /* [tls] alpn: the default offer, "" = none */
    /* outbound */
    mbedtls_x509_crt ca;
    int have_ca;
    int client_verify;
    const char *client_alpn;
} kt_settings;

/* ---- per worker (tls.c) ------------------------------------------------------- */

typedef struct kt_conf {
    mbedtls_ssl_config ssl;
    char *key;                /* the ALPN offer it was built for ("" = none) */
    const kt_site_list *dflt; /* whose certificates serve without SNI (NULL: [tls]'s first) */
    const char **alpn;        /* NULL-terminated ids, or NULL */
    char *alpn_storage;       /* the ids' characters */
    struct kt_conf *next;
} kt_conf;

typedef struct kt_worker {
    keel_worker *worker;
    unsigned id;
    kt_rng rng;
    kt_conf *server_confs, *client_confs;
    unsigned char *stage; /* KT_STAGE_SIZE: writes gathered into full records; a
                           * handshake step's flight on its way to the core */
    unsigned char *plain; /* KT_STAGE_SIZE: decrypted bytes on their way up */
} kt_worker;

/* The certificate list a scope's struct carries of its own (a site's or
 * a listener's), or NULL when it inherits [tls]'s (any thread, read-only
 * after load): kt_site_find's, kept by keys.c. */
const kt_site_list *kt_site_of(const kt_section *scope);
extern kt_settings kt_cfg;
/* The cipher suites configured, 0-terminated (the defaults if none). */
const int *kt_ciphers(void);

kt_worker *kt_worker_of(keel_conn *conn);

/* ---- alpn.c --------------------------------------------------------------------- */

/* The mbedtls_ssl_config for this worker, ALPN offer and default
 * certificates (built on first use; the offer is a listener's `alpn=`
 * option, [tls] alpn or client_alpn; dflt the default site's own list, a
 * handshake without SNI's, NULL for [tls]'s). NULL if out of memory. */
kt_conf *kt_conf_get(kt_worker *w, int client, const char *offer, const kt_site_list *dflt);
void kt_confs_free(kt_conf **list);
/* Builds the shared part of a config (versions, suites, certs, tickets,
 * client verification). Used in load to check everything once. */
int kt_conf_setup(mbedtls_ssl_config *conf, int client, kt_rng *rng, const kt_site_list *dflt);

/* ---- session.c: the kt_be_* functions of transport.c (keys.h) ---------------- */

typedef struct kt_session {
    kt_base b; /* first: the transport's data is both */
    mbedtls_ssl_context ssl;
    kt_worker *w;
    unsigned char in_dirty, out_dirty; /* record buffers touched past a page (trim.c) */
    unsigned char sni_seen;            /* the ClientHello's server_name was read */
    unsigned char gathering;           /* in a handshake step: bio_send appends to w->stage */
    size_t gathered;                   /* bytes of the flight in w->stage */
    const kt_site_list *site;          /* whose certificates the handshake served (NULL: [tls]'s) */
} kt_session;

/* The server session whose handshake step runs on this thread, or NULL
 * (for the ticket callbacks, which mbedTLS gives no context). */
kt_session *kt_handshaking(void);
/* Releases the idle record buffers' pages (trim.c). */
void kt_trim(kt_session *s, int in, int out);
/* NULL if not ours. */
static inline kt_session *kt_session_of(keel_conn *conn)
{
    return (kt_session *)kt_base_of(conn);
}

/* ---- client.c ---------------------------------------------------------------- */

/* Outbound: server name, verification against [tls] ca. */
int kt_client_setup(kt_session *s, const char *host);
int kt_client_conf(mbedtls_ssl_config *conf);
/* The depth-0 subject, captured during verification. */
int kt_verify_cb(void *session, mbedtls_x509_crt *crt, int depth, uint32_t *flags);

#endif
