/* keys.h — what both TLS backends (mod_tls on mbedTLS, mod_tls_openssl on
 * OpenSSL 3) share: the [tls] key table, so that both accept the same
 * config and docs/reference/tls.md is generated once, the values whose
 * meaning does not depend on the library, a `cert` line's words, the
 * metrics, the `tls` service's table, the per-worker buffers, the 421
 * filter for another site's Host, the plain-HTTP check of a server
 * connection's first bytes, and the transport itself (transport.c) with
 * the kt_be_* functions each backend fills it in with. No library type
 * appears here: keys.c and transport.c are compiled into both modules. */
#ifndef KEEL_TLS_KEYS_H
#define KEEL_TLS_KEYS_H

#include <keel/keel.h>
#include <keel/metrics.h>

#include <stddef.h>
#include <stdint.h>

/* The [tls] section and each scope's merged struct (keel/config.h). */
typedef struct kt_section {
    keel_config_list cert;
    const char *min_version, *max_version, *ciphers, *curves, *client_ca;
    const char *alpn, *client_alpn, *ca, *backend;
    uint64_t handshake_timeout_ms, ticket_lifetime_ms, ocsp_refresh_ms;
    int session_tickets, client_verify, ocsp_stapling;
    int verify_client; /* KT_VERIFY_* */
    int ktls;          /* 0 off, 1 auto */
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
 * transport.c answers from the session's kt_base. */
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
/* The lists themselves (each backend's type: certificates, their ticket
 * keys), kept here by their items pointer, sorted, so that a handshake's
 * SNI finds its site's by a binary search (any thread, read-only after
 * load). kt_sites_read, from load, asks for the scopes
 * (keel_module_config_scopes, whose calls come once every module has
 * loaded) and has load called once for each list of a scope's own, with
 * the first scope that writes it, so that its errors are reported with
 * the line that wrote them: the list (allocated), or NULL with *rc set. The first one
 * also adds the 421 filter (kt_misdirected_filter_add). kt_sites_free
 * frees each list with free_list, then the registry. */
typedef void *(*kt_site_load_fn)(keel_module *m, const kt_section *scope, int *rc);
int kt_sites_read(keel_module *m, kt_site_load_fn load);
void kt_sites_free(void (*free_list)(void *list));
/* The list a scope serves of its own, or NULL when it inherits [tls]'s. */
void *kt_site_find(const kt_section *scope);
/* How many scopes' lists there are (0: [tls]'s certificates only). */
size_t kt_site_count(void);
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

/* ---- the transport (transport.c) ------------------------------------------------- *
 * The `tls` transport both backends register: a connection's life (open,
 * the plain-HTTP check of its first bytes, the handshake's end or failure
 * with their metrics and log lines, records in and out, close_notify,
 * close), the protocol opened after the handshake and the `tls` service's
 * answers, written once. What a library does its own way each backend
 * does in the kt_be_* functions (its session.c), linked statically. */

#define KT_STAGE_SIZE 16384 /* one full record of plaintext (RFC 8446 5.1) */

enum { KT_HANDSHAKE = 0, KT_OPEN = 1, KT_FAILED = 2, KT_CLOSED = 3 };

/* What every backend's session starts with (its first member, so that
 * the transport's data is both). */
typedef struct kt_base {
    keel_conn *conn;
    unsigned char *plain;    /* the worker's KT_STAGE_SIZE buffer for decrypted bytes */
    const unsigned char *in; /* raw bytes being fed during on_read */
    size_t in_len;
    unsigned char state; /* KT_HANDSHAKE... */
    unsigned char client;
    unsigned char deferred;        /* the core waits for kt_open_protocol */
    unsigned char peer_done;       /* close_notify received */
    unsigned char first_read_seen; /* a server connection's first bytes were looked at */
    unsigned char resumed;
    char *pending; /* plaintext written before the handshake ended */
    size_t pending_len, pending_cap;
    char *server_name;  /* outbound: the name sent; mbedTLS server: SNI as received */
    char *peer_subject; /* the peer's verified subject */
    /* Set by kt_be_opened at the handshake's end (the library's storage). */
    const char *version, *cipher, *alpn, *sni;
} kt_base;

/* The module (set in load) and the metrics transport.c counts. */
extern keel_module *kt_self;
extern kt_metrics kt_mx;
extern const keel_transport kt_transport;

/* The session of a connection of this transport, or NULL. */
kt_base *kt_base_of(keel_conn *conn);
/* Copies up to len of the raw bytes being fed (the BIO's read): 0 when
 * they are used up. */
size_t kt_take_input(kt_base *b, void *buf, size_t len);
/* Sets server_name to a copy of name[0..len). KEEL_ERR_NOMEM. */
int kt_set_server_name(kt_base *b, const char *name, size_t len);
/* Frees a session (kt_be_free, then what the base holds). */
void kt_session_free(kt_base *b);
/* The handshake is over: opens the protocol the ALPN id names (RFC 7301
 * 3.2), or the connection's own. */
int kt_open_protocol(keel_conn *conn, const char *alpn_id);
/* The protocol an ALPN id maps to ("http/1.1" -> "http1"). */
const char *kt_alpn_protocol(const char *id);

/* ---- what each backend defines for transport.c ---- */

/* kt_be_handshake's and kt_be_read's answers. */
enum { KT_HS_DONE = 1, KT_HS_AGAIN = 0, KT_HS_FAILED = -1, KT_HS_CERT_REJECTED = -2 };
enum { KT_READ_AGAIN = 0, KT_READ_END = -1, KT_READ_ERROR = -2 };

/* A new session for conn (host: outbound, else NULL), ready for its
 * handshake, its deadline set; NULL with *rc set when it cannot be. */
kt_base *kt_be_new(keel_conn *conn, const char *host, int *rc);
/* One step of the handshake on the input there is. A failure puts its
 * reason in why (KT_HS_CERT_REJECTED: the server's certificate, outbound). */
int kt_be_handshake(kt_base *b, char *why, size_t size);
/* The handshake ended: sets version, cipher, alpn, sni and resumed, and
 * keeps peer_subject only if the peer's chain verified. */
void kt_be_opened(kt_base *b);
/* Decrypts into buf: bytes, or KT_READ_* (KT_READ_ERROR: why says). */
int kt_be_read(kt_base *b, unsigned char *buf, size_t size, char *why, size_t why_size);
/* 1 if the library holds bytes it has read but not yet decrypted, or
 * plaintext not yet read: another kt_be_read may return bytes without
 * more input. */
int kt_be_pending(kt_base *b);
/* After each read of len raw bytes (rc its result). */
void kt_be_read_done(kt_base *b, size_t len, int handshaking, int rc);
/* Encrypts the buffers into records and hands them to the core. */
int kt_be_write(kt_base *b, const keel_buf *bufs, size_t nbufs);
void kt_be_close_notify(kt_base *b);
void kt_be_free(kt_base *b); /* the library's part of the session */
void kt_be_wipe(void *p, size_t len);
/* The versions offered, for a listener's start-up line (describe). */
void kt_be_describe(char *buf, size_t size);

#endif
