/* keys.h — what both TLS backends (mod_tls on mbedTLS, mod_tls_openssl on
 * OpenSSL 3) share: the [tls] key table, so that both accept the same
 * config and docs/reference/tls.md is generated once, the values whose
 * meaning does not depend on the library, a `cert` line's words, the
 * metrics, the `tls` service's table, the per-worker buffers, the 421
 * filter for another site's Host and the plain-HTTP check of a server
 * connection's first bytes. No library type
 * appears here: keys.c is compiled into both modules. */
#ifndef KEEL_TLS_KEYS_H
#define KEEL_TLS_KEYS_H

#include <keel/keel.h>
#include <keel/metrics.h>

#include <stddef.h>
#include <stdint.h>

/* The [tls] section and each scope's merged struct (keel/config.h). */
typedef struct kt_section {
    keel_config_list cert;
    const char *min_version, *max_version, *ciphers, *curves, *verify_client, *client_ca;
    const char *alpn, *client_alpn, *ca, *backend, *ktls;
    uint64_t handshake_timeout_ms, ticket_lifetime_ms, ocsp_refresh_ms;
    int session_tickets, client_verify, ocsp_stapling;
} kt_section;

extern const keel_config_schema kt_schema;

enum { KT_VERIFY_OFF = 0, KT_VERIFY_OPTIONAL = 1, KT_VERIFY_REQUIRED = 2 };

/* The values every backend reads the same way. */
typedef struct kt_common {
    int min_version, max_version; /* 2 = TLS 1.2, 3 = TLS 1.3 */
    uint64_t handshake_timeout_ms;
    int tickets_on;
    uint32_t ticket_lifetime_s;
    int verify_client; /* KT_VERIFY_* */
    int client_verify;
    const char *alpn, *client_alpn, *client_ca, *ca; /* "" = none */
    int ocsp_stapling;        /* fetch responses from each certificate's responder */
    uint64_t ocsp_refresh_ms; /* the longest a fetched response is served before asking again */
    int ktls;                 /* 1: auto (use kernel TLS where it can be), 0: off */
} kt_common;

/* The backend this module is ("mbedtls", "openssl"), the highest version
 * its library speaks (2 or 3) and the library's name and version for
 * messages. Checks `backend` names this module (the loader chose it:
 * core/server/loader.c), then reads the rest; KEEL_ERR_CONFIG, reported
 * with the key's FILE:LINE, on any bad value. */
int kt_keys_read(keel_module *m, const char *backend, int max_tls, const char *library,
                 kt_common *out);

/* A `cert = CHAIN KEY [passphrase=...] [ocsp=FILE]` line: the two paths
 * (relative to the config file holding the line, in a scope as in
 * [tls]), the passphrase (in buf) or NULL, and the OCSP response file to
 * staple ("" = none; the backend without stapling warns). KEEL_ERR_CONFIG
 * reported with the line. */
typedef struct kt_cert_line {
    char chain[1024], key[1024], ocsp[1024];
    const char *passphrase;
    char buf[4096];
} kt_cert_line;
int kt_cert_line_parse(keel_module *m, const char *value, kt_cert_line *out);
/* Reports a bad `cert` value with the FILE:LINE that wrote it. */
int kt_cert_error(keel_module *m, const char *value, const char *fmt, ...) KEEL_PRINTF(3, 4);

/* The same metric families on both backends. */
typedef struct kt_metrics {
    keel_metric *hs_ok, *hs_failed, *hs_client_ok, *hs_client_failed, *resumed;
} kt_metrics;
int kt_metrics_register(keel_module *m, kt_metrics *out);

/* The `tls` service (include/keel/tls.h): keys.c publishes the table,
 * each backend answers through these (its service.c). */
int kt_svc_is_tls(keel_conn *conn);
const char *kt_svc_version(keel_conn *conn);

/* The versions a listener offers, for its start-up line (keel_transport
 * describe, ABI 1.9): "TLS 1.2-1.3", or "TLS 1.2, no 1.3 in LIBRARY"
 * when the library lacks it, so that a TLS-1.3-only client's failure has
 * its reason in the log. */
/* For a connection's on_open, in both backends: KEEL_ERR_CONFIG (logged)
 * for an accepted connection when no certificate is configured anywhere;
 * and the ALPN list to offer (the listener's `alpn` option, else [tls]
 * alpn, client_alpn outbound; "h2,http/1.1" on an http1 listener with
 * nothing configured). */
int kt_open_check(keel_module *m, int client, size_t ncerts, size_t nsites);
const char *kt_alpn_offer(keel_conn *conn, int client, const char *alpn, const char *client_alpn);

void kt_describe_versions(char *buf, size_t size, int min, int max, int max_tls,
                          const char *library);
const char *kt_svc_cipher(keel_conn *conn);
const char *kt_svc_alpn(keel_conn *conn);
const char *kt_svc_server_name(keel_conn *conn);
const char *kt_svc_peer_subject(keel_conn *conn); /* verified, or NULL */
int kt_svc_resumed(keel_conn *conn);
int kt_service_publish(keel_module *m);

/* A worker's two staging buffers of size bytes (writes gathered, reads
 * decrypted); freed wiped (plaintext passed through them). */
int kt_buffers_alloc(unsigned char **a, unsigned char **b, size_t size);
void kt_buffers_free(unsigned char **a, unsigned char **b, size_t size);

/* ---- sites with certificates of their own ---------------------------------------- *
 * A scope (a [site] or a [listener]) writing `tls.cert` serves a list of
 * its own; scopes inheriting it share its items pointer, which is what
 * both backends key their loaded lists by, and what names a list here. */

/* The `tls.cert` items a scope serves of its own, or NULL when it
 * inherits global's ([tls]'s). */
const char *const *kt_scope_certs(const kt_section *global, const kt_section *scope);
/* Each backend's answer for the 421 filter: 1 and the list the handshake
 * of a server connection of this module served (kt_scope_certs' items;
 * NULL: [tls]'s), 0 for any other connection. */
int kt_conn_served_certs(keel_conn *conn, const char *const **served);
/* Adds the request filter (once some scope has its own list) that
 * answers 421 Misdirected Request (RFC 9110 15.5.20, RFC 9113 9.1.1) to
 * a request whose Host chooses a site with certificates of its own other
 * than those its connection's handshake served. */
int kt_misdirected_filter_add(keel_module *m);

/* Whether a server connection's first bytes are an HTTP request line
 * rather than a TLS record, and the 400 a TLS port answers it with. */
int kt_looks_like_http(const char *data, size_t len);
extern const char kt_plain_http_answer[];
extern const size_t kt_plain_http_answer_len;

#endif
