/* ko.h — the tls_openssl module's internal interfaces (nothing here is
 * public: include/keel/tls.h is).
 *
 * Who owns what:
 *   - load builds everything shared, read-only afterwards: one SSL_CTX per
 *     group of certificates that carry the same names (an RSA and an ECDSA
 *     one share it: OpenSSL picks by the client's signature algorithms),
 *     the outbound SSL_CTX, the suite names; SSL_CTX is thread-safe once
 *     set up, so every worker uses the same ones;
 *   - the session-ticket keys change, rotated under a lock (tickets.c):
 *     one set per certificate list ([tls]'s, each scope's own), so a
 *     ticket resumes only under the certificates it was issued under;
 *   - each stapled certificate's OCSP response changes (ocsp.c): written
 *     by the fetcher on worker 0, copied by handshakes, under its lock;
 *   - each worker owns its ALPN offers (parsed on first use), two
 *     16 KiB buffers (writes gathered, reads decrypted) and one for the
 *     records of a write of several (session.c, write_plain);
 *   - each connection owns one ko_session (its SSL and BIO).
 */
#ifndef KEEL_TLS_OPENSSL_KO_H
#define KEEL_TLS_OPENSSL_KO_H

#include "keys.h"

#include <keel/keel.h>
#include <keel/metrics.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <stddef.h>
#include <stdint.h>

#if OPENSSL_VERSION_NUMBER < 0x30000000L
#error "the tls_openssl module needs OpenSSL 3.0 or newer"
#endif
#ifndef KEEL_TRANSPORT_DEFER
#error "the tls_openssl module needs a keel whose transports may defer the protocol (ABI 1.4)"
#endif

/* ---- certs.c -------------------------------------------------------------------- */

/* Certificates served together, one SSL_CTX for them all: at most one
 * per key type (RSA, ECDSA, Ed25519...), OpenSSL choosing among them by
 * the client's signature algorithms. */
#define KO_GROUP_MAX 4
typedef struct ko_group {
    SSL_CTX *ctx;
    X509 *leaf[KO_GROUP_MAX]; /* SNI is matched against each */
    int key_types[KO_GROUP_MAX];
    char *names; /* all their names, lowercase, space-separated */
} ko_group;

typedef struct ko_tickets ko_tickets;

/* One `cert` list: [tls]'s, or a scope's own `tls.cert`, and the ticket
 * keys of the sessions its certificates authenticated. */
typedef struct ko_list {
    const char *const *items; /* the config's list (scopes that inherit share it); [tls]'s: NULL */
    ko_group *v;
    size_t n;
    ko_tickets *tickets; /* NULL: session_tickets off */
} ko_list;

/* A server SSL_CTX with everything but certificates (versions, suites,
 * groups, tickets, ALPN, SNI, client verification). NULL if refused.
 * SNI is read by the ClientHello callback, before OpenSSL looks at a
 * ticket: it switches the SSL to the chosen group's SSL_CTX and records
 * the list served (ko_session.served). */
SSL_CTX *ko_server_ctx(void);
/* Reads every `cert` line of a list; KEEL_ERR_CONFIG logged with the
 * line's FILE:LINE on any failure. In [tls]'s list a certificate joins
 * a group it shares a name with; in a site's (site = 1), any group: the
 * site's certificates are all served to the names choosing it. */
int ko_list_load(keel_module *m, const keel_config_list *lines, ko_list *list, int site);
void ko_list_free(ko_list *list); /* and its ticket keys */
/* The group of a list serving `name` (NULL: no SNI): the first whose
 * certificate carries it, else the first (RFC 6066 3). */
const ko_group *ko_list_pick(const ko_list *list, const char *name);
/* Loads a CA file (relative to the config file) into store; KEEL_ERR_CONFIG
 * naming key and file. */
int ko_ca_load(keel_module *m, const char *key, const char *path, X509_STORE *store,
               STACK_OF(X509_NAME) * *names);
/* The last OpenSSL error as text (for messages). */
const char *ko_reason(char *buf, size_t size);

/* ---- tickets.c ------------------------------------------------------------------ */

/* Ticket keys shared by every worker, rotated every lifetime_s (one set
 * per ko_list). */
ko_tickets *ko_tickets_new(uint32_t lifetime_s);
void ko_tickets_free(ko_tickets *t); /* wipes the keys */
/* Installs the ticket key callback: it seals and opens tickets with the
 * keys of the list the handshaking session serves (ko_session.served).
 * OpenSSL calls the callback of the SSL_CTX the SSL was created with
 * (session_ctx), not of the one SNI switched to. */
void ko_tickets_conf(SSL_CTX *ctx);

/* ---- ocsp.c --------------------------------------------------------------------- */

/* A certificate just installed in ctx, for OCSP stapling: its `ocsp=`
 * file (file != "": read and checked now; KEEL_ERR_CONFIG with the cert
 * line when unreadable or not an OCSP response), else, with
 * ocsp_stapling on, its AIA responder (fetched by worker 0). A
 * certificate whose chain lacks its issuer, or that names no http://
 * responder, is left out with a warning. */
int ko_ocsp_add(keel_module *m, const char *value, SSL_CTX *ctx, X509 *leaf, STACK_OF(X509) * extra,
                const char *chain_path, const char *file);
int ko_ocsp_register(keel_module *m);       /* load: the fetch protocol, if anything is fetched */
void ko_ocsp_start(keel_worker *worker);    /* worker 0: the fetcher's first round at once */
void ko_ocsp_stopping(keel_worker *worker); /* the fetcher stops asking */
void ko_ocsp_free(void);                    /* unload */

/* ---- settings (tls.c) -------------------------------------------------------------- */

typedef struct ko_settings {
    kt_common c;
    ko_list certs;   /* [tls] cert, and [tls]'s ticket keys */
    SSL_CTX *bare;   /* no certificate: the default when only sites have some */
    SSL_CTX *client; /* outbound */
    X509_STORE *client_ca;
    STACK_OF(X509_NAME) * client_ca_names;
    char *ciphers12, *ciphers13, *groups; /* OpenSSL's spellings */
} ko_settings;

extern ko_settings ko_cfg;

/* The list a scope's struct carries of its own, or NULL (kt_site_find's,
 * kept by ../tls/keys.c). */
const ko_list *ko_site_list(const kt_section *scope);
/* A suite's name in the spelling keel/tls.h documents (mbedTLS's:
 * "TLS-ECDHE-ECDSA-WITH-AES-128-GCM-SHA256"). */
const char *ko_cipher_name(const SSL_CIPHER *cipher);

/* ---- per worker ------------------------------------------------------------------- */

/* An ALPN offer: RFC 7301 3.1's wire form and the ids, NUL-terminated. */
typedef struct ko_offer {
    char *key;
    unsigned char *wire;
    unsigned wire_len;
    char *ids; /* id\0id\0...\0 */
    struct ko_offer *next;
} ko_offer;

/* Records of one write of several, gathered for one system call: up to
 * four full records, each with the most a suite adds (header, explicit
 * IV, MAC or tag, padding). */
#define KO_GATHER_RECORDS 4
#define KO_GATHER_SIZE                                                                             \
    (KO_GATHER_RECORDS * (KT_STAGE_SIZE + SSL3_RT_HEADER_LENGTH + SSL3_RT_MAX_ENCRYPTED_OVERHEAD))

typedef struct ko_worker {
    keel_worker *worker;
    ko_offer *server_offers, *client_offers;
    unsigned char *stage;
    unsigned char *plain;
    unsigned char *gather; /* KO_GATHER_SIZE: ciphertext on its way to the core */
    size_t gathered;
} ko_worker;

ko_worker *ko_worker_of(keel_conn *conn);

/* ---- alpn.c ---------------------------------------------------------------------- */

/* This worker's parsed offer (server: only the ids whose protocol is
 * loaded). NULL if out of memory. */
const ko_offer *ko_offer_get(ko_worker *w, int client, const char *offer);
void ko_offers_free(ko_offer **list);
/* The NUL-terminated id of the offer matching (p, len), or NULL. */
const char *ko_offer_id(const ko_offer *o, const unsigned char *p, size_t len);
/* SSL_CTX_set_alpn_select_cb's callback. */
int ko_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg);

/* ---- session.c: the kt_be_* functions of transport.c (keys.h) ------------------------ */

typedef struct ko_session {
    kt_base b; /* first: the transport's data is both; b.alpn is in offer's storage */
    SSL *ssl;
    ko_worker *w;
    const ko_offer *offer;
    const ko_list *served;   /* server: whose certificates the handshake serves */
    unsigned char gathering; /* the BIO appends records to w->gather */
} ko_session;

/* NULL if not ours. */
static inline ko_session *ko_session_of(keel_conn *conn)
{
    return (ko_session *)kt_base_of(conn);
}
int ko_bio_init(void);
void ko_bio_free(void);

/* ---- client.c --------------------------------------------------------------------- */

/* The outbound SSL_CTX ([tls] ca, client_verify). */
int ko_client_ctx(keel_module *m);
/* SNI and the name the certificate must carry (RFC 6125 6). */
int ko_client_setup(ko_session *s, const char *host);
/* The verified peer's subject ("CN=alice, O=Example"), or NULL. */
char *ko_peer_subject(SSL *ssl);

#endif
