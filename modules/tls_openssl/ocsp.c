/* ocsp.c — OCSP stapling (RFC 6066 8; RFC 6960 for the responses, RFC
 * 5019's lightweight profile for the requests): a handshake whose
 * ClientHello carries status_request gets, with the certificate OpenSSL
 * chose for it, a response saying that certificate is good, so that the
 * client need not ask the CA's responder itself (a round trip, and the
 * CA learning which sites it visits).
 *
 * Two sources per certificate, as nginx's ssl_stapling_file and
 * ssl_stapling:
 *   - a DER file named on the `cert` line (`ocsp=FILE`), read in load
 *     (a reload reads it again);
 *   - with `[tls] ocsp_stapling = on`, the responder named in the
 *     certificate's Authority Information Access (http:// only), asked by
 *     one fetcher on worker 0 over keel's own outbound connections
 *     (keel_conn_connect), never on a handshake's path: at start, then
 *     again halfway to the response's nextUpdate (at most every
 *     `ocsp_refresh`), and after a failure with back-off (5 s doubling
 *     to 5 min), keeping the response it has while that one is valid.
 *
 * A response is stapled only if it parses, its status is successful, it
 * is signed by the certificate's issuer or a responder the issuer
 * delegated to (OCSP_basic_verify with the issuer as the trust anchor),
 * it answers for this certificate (its CertID), it is within its
 * validity (thisUpdate/nextUpdate, 5 minutes of clock skew), and it says
 * good. A revoked certificate is logged as an error and its earlier
 * response withdrawn. A responder that is down only delays the next
 * staple: handshakes go on without one.
 *
 * Each certificate's current response is published under its own lock:
 * the fetcher (worker 0) writes it, every worker's status callback copies
 * it (OpenSSL takes ownership of what it sends). */
#include "ko.h"
#include "ocsp_http.h"

#include <openssl/ocsp.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KO_OCSP_TIMEOUT_MS   10000  /* a fetch, connecting included */
#define KO_OCSP_BACKOFF_MIN  5000   /* the first retry after a failure */
#define KO_OCSP_BACKOFF_MAX  300000 /* as nginx's 5 minutes */
#define KO_OCSP_SKEW_SECONDS 300    /* clock skew allowed on thisUpdate/nextUpdate */

typedef struct ko_staple {
    X509 *leaf, *issuer;
    STACK_OF(X509) *
        chain;          /* the chain file's other certificates: a delegated responder's issuer */
    X509_STORE *anchor; /* the issuer alone, trusted (partial chain) */
    OCSP_CERTID *id;
    char *label; /* the chain file, for messages */
    /* fetched: the responder (NULL: a file's response only) */
    char *url, *host, *port, *path;
    unsigned char *request; /* "POST" head and DER body, built in load */
    size_t request_len;
    /* the fetcher's, worker 0 only */
    uint64_t next_ms;
    uint64_t backoff_ms;
    int in_flight;
    /* published */
    CRYPTO_RWLOCK *lock;
    unsigned char *der;
    int der_len;
    time_t expires; /* 0: no nextUpdate, stapled until replaced */
} ko_staple;

static ko_staple **staples;
static size_t nstaples, nfetched;
/* Each stapled leaf carries its ko_staple (X509 ex_data): the status
 * callback finds it without a search. Allocated once per process. */
static int staple_index = -1;

static struct {
    keel_worker *worker;
    keel_timer *timer;
    int stopping;
} fetcher;

/* ---- checking a response ---------------------------------------------------------- */

enum { KO_RESP_GOOD = 0, KO_RESP_REVOKED = 1, KO_RESP_UNFIT = 2, KO_RESP_NOT_OCSP = 3 };

/* Whether der is a response fit to staple for st (KO_RESP_GOOD, with
 * *expires: its nextUpdate, 0 if none), else why not. */
static int check_response(const ko_staple *st, const unsigned char *der, size_t len,
                          time_t *expires, char *why, size_t size)
{
    const unsigned char *p = der;
    OCSP_RESPONSE *resp =
        len <= (size_t)KO_OCSP_HTTP_BODY_MAX ? d2i_OCSP_RESPONSE(NULL, &p, (long)len) : NULL;
    OCSP_BASICRESP *basic = NULL;
    int rc = KO_RESP_UNFIT;
    int status, reason;
    ASN1_GENERALIZEDTIME *revoked_at, *this_update, *next_update;
    char reason_buf[200];
    if (resp == NULL || p != der + len) {
        snprintf(why, size, "not a DER OCSP response");
        rc = KO_RESP_NOT_OCSP;
    } else if ((status = OCSP_response_status(resp)) != OCSP_RESPONSE_STATUS_SUCCESSFUL) {
        snprintf(why, size, "the responder answered %s", OCSP_response_status_str(status));
    } else if ((basic = OCSP_response_get1_basic(resp)) == NULL) {
        snprintf(why, size, "not a basic OCSP response");
    } else if (OCSP_basic_verify(basic, st->chain, st->anchor, 0) <= 0) {
        /* Signed by the issuer, or by a responder certificate the issuer
         * issued for OCSPSigning (RFC 6960 4.2.2.2). */
        snprintf(why, size, "it is not signed by the issuer or its OCSP responder (%s)",
                 ko_reason(reason_buf, sizeof reason_buf));
    } else if (OCSP_resp_find_status(basic, st->id, &status, &reason, &revoked_at, &this_update,
                                     &next_update) != 1) {
        snprintf(why, size, "it is not for this certificate");
    } else if (OCSP_check_validity(this_update, next_update, KO_OCSP_SKEW_SECONDS, -1) != 1) {
        snprintf(why, size, "it is outside its validity period");
    } else if (status == V_OCSP_CERTSTATUS_REVOKED) {
        snprintf(why, size, "the certificate is REVOKED (reason: %s)",
                 reason >= 0 ? OCSP_crl_reason_str(reason) : "none given");
        rc = KO_RESP_REVOKED;
    } else if (status != V_OCSP_CERTSTATUS_GOOD) {
        snprintf(why, size, "its status is %s", OCSP_cert_status_str(status));
    } else {
        int days = 0, seconds = 0;
        *expires = 0;
        if (next_update != NULL && ASN1_TIME_diff(&days, &seconds, NULL, next_update) == 1)
            *expires = time(NULL) + (time_t)days * 86400 + seconds;
        rc = KO_RESP_GOOD;
    }
    ERR_clear_error();
    OCSP_BASICRESP_free(basic);
    OCSP_RESPONSE_free(resp);
    return rc;
}

/* Replaces the response stapled (NULL: none from now on). */
static void publish(ko_staple *st, const unsigned char *der, size_t len, time_t expires)
{
    unsigned char *copy = der != NULL ? OPENSSL_memdup(der, len) : NULL;
    if (der != NULL && copy == NULL)
        return; /* keep the one there: still valid, or dropped at its expiry */
    CRYPTO_THREAD_write_lock(st->lock);
    unsigned char *old = st->der;
    st->der = copy;
    st->der_len = copy != NULL ? (int)len : 0;
    st->expires = expires;
    CRYPTO_THREAD_unlock(st->lock);
    OPENSSL_free(old);
}

/* ---- the handshake's side ------------------------------------------------------------ */

/* SSL_CTX_set_tlsext_status_cb: OpenSSL calls it when the ClientHello
 * asked for status (RFC 6066 8), after it chose the certificate
 * (SSL_get_certificate is that one), on the context SNI chose. NOACK
 * sends no status: the handshake goes on. */
static int status_cb(SSL *ssl, void *arg)
{
    (void)arg;
    X509 *cert = SSL_get_certificate(ssl);
    ko_staple *st = cert != NULL ? X509_get_ex_data(cert, staple_index) : NULL;
    if (st == NULL)
        return SSL_TLSEXT_ERR_NOACK;
    unsigned char *copy = NULL;
    int len = 0;
    CRYPTO_THREAD_read_lock(st->lock);
    if (st->der != NULL && (st->expires == 0 || time(NULL) < st->expires)) {
        copy = OPENSSL_memdup(st->der, (size_t)st->der_len);
        len = st->der_len;
    }
    CRYPTO_THREAD_unlock(st->lock);
    if (copy == NULL)
        return SSL_TLSEXT_ERR_NOACK;
    if (SSL_set_tlsext_status_ocsp_resp(ssl, copy, len) != 1) {
        OPENSSL_free(copy);
        return SSL_TLSEXT_ERR_NOACK;
    }
    return SSL_TLSEXT_ERR_OK;
}

/* ---- certificates registered in load ------------------------------------------------ */

static void staple_free(ko_staple *st)
{
    if (st == NULL)
        return;
    if (st->leaf != NULL && staple_index >= 0)
        X509_set_ex_data(st->leaf, staple_index, NULL);
    X509_free(st->leaf);
    X509_free(st->issuer);
    sk_X509_pop_free(st->chain, X509_free);
    X509_STORE_free(st->anchor);
    OCSP_CERTID_free(st->id);
    free(st->label);
    OPENSSL_free(st->url);
    OPENSSL_free(st->host);
    OPENSSL_free(st->port);
    OPENSSL_free(st->path);
    free(st->request);
    OPENSSL_free(st->der);
    CRYPTO_THREAD_lock_free(st->lock);
    free(st);
}

/* The certificate in extra that issued leaf, or NULL. */
static X509 *issuer_of(X509 *leaf, STACK_OF(X509) * extra)
{
    for (int i = 0; i < sk_X509_num(extra); i++)
        if (X509_check_issued(sk_X509_value(extra, i), leaf) == X509_V_OK)
            return sk_X509_value(extra, i);
    return NULL;
}

/* The request a fetch sends (RFC 6960 A.1, POST): one CertID, no nonce
 * (RFC 5019 4: responders answer from a cache). HTTP/1.0, so that the
 * answer ends with the connection and is never chunked. */
static int build_request(ko_staple *st)
{
    OCSP_REQUEST *req = OCSP_REQUEST_new();
    OCSP_CERTID *id = OCSP_CERTID_dup(st->id);
    unsigned char *der = NULL;
    int der_len = -1;
    if (req != NULL && id != NULL && OCSP_request_add0_id(req, id) != NULL)
        der_len = i2d_OCSP_REQUEST(req, &der);
    else
        OCSP_CERTID_free(id);
    OCSP_REQUEST_free(req);
    if (der_len <= 0)
        return KEEL_ERR_NOMEM;
    int v6 = strchr(st->host, ':') != NULL;
    char head[1400];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.0\r\nHost: %s%s%s%s%s\r\nUser-Agent: keel\r\n"
                     "Content-Type: application/ocsp-request\r\nContent-Length: %d\r\n\r\n",
                     st->path, v6 ? "[" : "", st->host, v6 ? "]" : "",
                     strcmp(st->port, "80") != 0 ? ":" : "",
                     strcmp(st->port, "80") != 0 ? st->port : "", der_len);
    if (n <= 0 || (size_t)n >= sizeof head ||
        (st->request = malloc((size_t)n + (size_t)der_len)) == NULL) {
        OPENSSL_free(der);
        return n > 0 && (size_t)n >= sizeof head ? KEEL_ERR_INVAL : KEEL_ERR_NOMEM;
    }
    memcpy(st->request, head, (size_t)n);
    memcpy(st->request + n, der, (size_t)der_len);
    st->request_len = (size_t)n + (size_t)der_len;
    OPENSSL_free(der);
    return KEEL_OK;
}

/* The certificate's first http:// OCSP responder (RFC 5280 4.2.2.1).
 * 0 if it names none keel can ask (logged). */
static int find_responder(keel_module *m, ko_staple *st)
{
    STACK_OF(OPENSSL_STRING) *urls = X509_get1_ocsp(st->leaf);
    int found = 0, https = 0;
    for (int i = 0; !found && i < sk_OPENSSL_STRING_num(urls); i++) {
        const char *url = sk_OPENSSL_STRING_value(urls, i);
        int ssl = 0;
        if (OCSP_parse_url(url, &st->host, &st->port, &st->path, &ssl) != 1) {
            ERR_clear_error();
            continue;
        }
        if (ssl) { /* fetching over TLS would ask the CA about itself: RFC 5019 5 */
            https = 1;
            OPENSSL_free(st->host), OPENSSL_free(st->port), OPENSSL_free(st->path);
            st->host = st->port = st->path = NULL;
            continue;
        }
        st->url = OPENSSL_strdup(url);
        found = st->url != NULL;
    }
    X509_email_free(urls);
    if (!found)
        keel_log(m, KEEL_LOG_WARN, "ocsp: %s: %s: not stapled", st->label,
                 https ? "its OCSP responder is https:// only (keel fetches http://)"
                       : "the certificate names no OCSP responder (Authority Information Access)");
    return found;
}

/* Reads an ocsp= file (at most KO_OCSP_HTTP_BODY_MAX bytes) and stapling
 * it if fit. KEEL_ERR_CONFIG with the line when it cannot be read or is
 * not an OCSP response; a response unfit to staple is logged and left
 * out, so that a file gone stale does not stop a reload. */
static int load_file(keel_module *m, const char *value, ko_staple *st, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return kt_cert_error(m, value, "cannot read %s: %s", path, strerror(errno));
    static unsigned char buf[KO_OCSP_HTTP_BODY_MAX + 1];
    size_t len = fread(buf, 1, sizeof buf, f);
    int err = ferror(f);
    fclose(f);
    if (err)
        return kt_cert_error(m, value, "cannot read %s", path);
    if (len > KO_OCSP_HTTP_BODY_MAX)
        return kt_cert_error(m, value, "%s: larger than %d bytes: not an OCSP response", path,
                             KO_OCSP_HTTP_BODY_MAX);
    char why[400];
    time_t expires = 0;
    int rc = check_response(st, buf, len, &expires, why, sizeof why);
    if (rc == KO_RESP_NOT_OCSP)
        return kt_cert_error(m, value, "%s: %s", path, why);
    if (rc == KO_RESP_GOOD) {
        publish(st, buf, len, expires);
        keel_log(m, KEEL_LOG_INFO, "ocsp: %s: stapling %s", st->label, path);
    } else {
        keel_log(m, KEEL_LOG_ERROR, "ocsp: %s: %s: %s; not stapled", st->label, path, why);
    }
    return KEEL_OK;
}

int ko_ocsp_add(keel_module *m, const char *value, SSL_CTX *ctx, X509 *leaf, STACK_OF(X509) * extra,
                const char *chain_path, const char *file)
{
    if (*file == '\0' && !ko_cfg.c.ocsp_stapling)
        return KEEL_OK;
    if (staple_index < 0 && (staple_index = X509_get_ex_new_index(0, NULL, NULL, NULL, NULL)) < 0)
        return KEEL_ERR_NOMEM;
    X509 *issuer = issuer_of(leaf, extra);
    if (issuer == NULL) {
        keel_log(m, KEEL_LOG_WARN,
                 "ocsp: %s: the chain holds no issuer of the certificate (put it after the "
                 "leaf): not stapled",
                 chain_path);
        return KEEL_OK;
    }
    ko_staple *st = calloc(1, sizeof *st);
    ko_staple **grown = st != NULL ? realloc(staples, (nstaples + 1) * sizeof *grown) : NULL;
    if (grown == NULL) {
        free(st);
        return KEEL_ERR_NOMEM;
    }
    staples = grown;
    int rc = KEEL_ERR_NOMEM;
    X509_up_ref(leaf);
    st->leaf = leaf;
    X509_up_ref(issuer);
    st->issuer = issuer;
    if ((st->lock = CRYPTO_THREAD_lock_new()) == NULL || (st->label = strdup(chain_path)) == NULL ||
        (st->chain = X509_chain_up_ref(extra)) == NULL || (st->anchor = X509_STORE_new()) == NULL ||
        X509_STORE_add_cert(st->anchor, issuer) != 1 ||
        /* The issuer is the anchor whatever issued it (an intermediate):
         * the response must come from it or its delegate. */
        X509_STORE_set_flags(st->anchor, X509_V_FLAG_PARTIAL_CHAIN) != 1 ||
        (st->id = OCSP_cert_to_id(NULL, leaf, issuer)) == NULL)
        goto fail;
    if (*file != '\0') {
        if ((rc = load_file(m, value, st, file)) != KEEL_OK)
            goto fail;
    } else if (!find_responder(m, st)) {
        staple_free(st);
        return KEEL_OK;
    } else if ((rc = build_request(st)) != KEEL_OK) {
        goto fail;
    }
    if (X509_set_ex_data(leaf, staple_index, st) != 1) {
        rc = KEEL_ERR_NOMEM;
        goto fail;
    }
    nfetched += st->url != NULL;
    staples[nstaples++] = st;
    SSL_CTX_set_tlsext_status_cb(ctx, status_cb);
    return KEEL_OK;
fail:
    ERR_clear_error();
    staple_free(st);
    return rc;
}

void ko_ocsp_free(void)
{
    for (size_t i = 0; i < nstaples; i++)
        staple_free(staples[i]);
    free(staples);
    staples = NULL;
    nstaples = nfetched = 0;
    memset(&fetcher, 0, sizeof fetcher);
}

/* ---- the fetcher (worker 0) ----------------------------------------------------------- */

typedef struct ko_fetch {
    ko_staple *st;
    int done;
    size_t len; /* bytes of the answer read */
    ko_ocsp_http http;
} ko_fetch;

static void arm(void);

static void retry_later(ko_staple *st, uint64_t now, const char *why)
{
    uint64_t refresh = ko_cfg.c.ocsp_refresh_ms;
    st->backoff_ms = st->backoff_ms == 0 ? KO_OCSP_BACKOFF_MIN : st->backoff_ms * 2;
    if (st->backoff_ms > KO_OCSP_BACKOFF_MAX)
        st->backoff_ms = KO_OCSP_BACKOFF_MAX;
    uint64_t delay = st->backoff_ms < refresh ? st->backoff_ms : refresh;
    st->next_ms = now + delay;
    keel_log(kt_self, KEEL_LOG_WARN, "ocsp: %s: responder %s: %s; asking again in %llus", st->label,
             st->url, why, (unsigned long long)(delay / 1000));
}

/* A fetch ended: body (NULL on failure, with why) is the responder's. */
static void fetched(ko_fetch *f, int status, const unsigned char *body, size_t len, const char *why)
{
    ko_staple *st = f->st;
    f->done = 1;
    st->in_flight = 0;
    if (fetcher.stopping)
        return;
    uint64_t now = keel_worker_now_ms(fetcher.worker);
    char text[400];
    time_t expires = 0;
    if (body == NULL) {
        retry_later(st, now, why);
    } else if (status != 200) {
        snprintf(text, sizeof text, "answered HTTP %d", status);
        retry_later(st, now, text);
    } else {
        int rc = check_response(st, body, len, &expires, text, sizeof text);
        if (rc == KO_RESP_GOOD) {
            publish(st, body, len, expires);
            st->backoff_ms = 0;
            /* Again halfway to nextUpdate (a response stays stapled while
             * the next fetches fail), at most every ocsp_refresh. */
            uint64_t delay = ko_cfg.c.ocsp_refresh_ms;
            time_t left = expires - time(NULL);
            if (expires != 0 && (uint64_t)(left > 2 ? left / 2 : 1) * 1000 < delay)
                delay = (uint64_t)(left > 2 ? left / 2 : 1) * 1000;
            st->next_ms = now + delay;
            keel_log(kt_self, KEEL_LOG_INFO,
                     "ocsp: %s: stapling the response of %s (good; asking again in %llus)",
                     st->label, st->url, (unsigned long long)(delay / 1000));
        } else if (rc == KO_RESP_REVOKED) {
            /* Withdrawn at once: an earlier "good" must not outlive it. */
            publish(st, NULL, 0, 0);
            st->backoff_ms = 0;
            st->next_ms = now + ko_cfg.c.ocsp_refresh_ms;
            keel_log(kt_self, KEEL_LOG_ERROR, "ocsp: %s: responder %s: %s; nothing stapled",
                     st->label, st->url, text);
        } else {
            retry_later(st, now, text);
        }
    }
    arm();
}

static int fetch_open(keel_conn *conn, void *arg)
{
    ko_fetch *f = arg;
    keel_conn_set_data(conn, f);
    keel_conn_set_deadline(conn, KO_OCSP_TIMEOUT_MS);
    int rc = keel_conn_write_copy(conn, f->st->request, f->st->request_len);
    if (rc != KEEL_OK) {
        /* a refused on_open gets no on_close */
        fetched(f, 0, NULL, 0, "cannot send the request");
        free(f);
    }
    return rc;
}

static int fetch_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    ko_fetch *f = keel_conn_data(conn);
    *consumed = len;
    if (f->done)
        return KEEL_OK;
    f->len += len;
    int rc = ko_ocsp_http_feed(&f->http, data, len);
    if (rc == KO_OCSP_HTTP_DONE) {
        fetched(f, f->http.status, f->http.body, f->http.body_len, NULL);
        keel_conn_close(conn);
    } else if (rc == KO_OCSP_HTTP_BAD) {
        fetched(f, 0, NULL, 0, f->http.why);
        keel_conn_abort(conn);
    }
    return KEEL_OK;
}

static void fetch_timeout(keel_conn *conn)
{
    ko_fetch *f = keel_conn_data(conn);
    if (!f->done)
        fetched(f, 0, NULL, 0, "no answer within 10s");
    keel_conn_abort(conn);
}

static void fetch_shutdown(keel_conn *conn)
{
    ko_fetch *f = keel_conn_data(conn);
    f->done = 1;
    f->st->in_flight = 0;
    keel_conn_abort(conn);
}

static void fetch_close(keel_conn *conn, int status)
{
    (void)status;
    ko_fetch *f = keel_conn_data(conn);
    if (!f->done) {
        if (ko_ocsp_http_end(&f->http) == KO_OCSP_HTTP_DONE)
            fetched(f, f->http.status, f->http.body, f->http.body_len, NULL);
        else
            fetched(f, 0, NULL, 0,
                    f->len > 0 ? f->http.why : "connection closed without an answer");
    }
    free(f);
}

static void fetch_error(keel_worker *w, int status, void *arg)
{
    ko_fetch *f = arg;
    (void)w;
    char why[160];
    snprintf(why, sizeof why, "cannot connect (%s)", keel_strerror(status));
    fetched(f, 0, NULL, 0, why);
    free(f);
}

const keel_protocol ko_ocsp_protocol = {
    .size = sizeof(keel_protocol),
    .name = "tls_ocsp_fetch",
    .on_open = fetch_open,
    .on_data = fetch_data,
    .on_timeout = fetch_timeout,
    .on_shutdown = fetch_shutdown,
    .on_close = fetch_close,
};

static void fetch(ko_staple *st)
{
    ko_fetch *f = malloc(sizeof *f);
    if (f == NULL) {
        retry_later(st, keel_worker_now_ms(fetcher.worker), "out of memory");
        return;
    }
    f->st = st;
    f->done = 0;
    f->len = 0;
    ko_ocsp_http_init(&f->http);
    st->in_flight = 1;
    keel_connect_options o = {
        .size = sizeof o,
        .host = st->host,
        .port = (unsigned)atoi(st->port),
        .protocol = ko_ocsp_protocol.name,
        .arg = f,
        .timeout_ms = KO_OCSP_TIMEOUT_MS,
        .on_error = fetch_error,
    };
    int rc = keel_conn_connect(fetcher.worker, &o, NULL);
    if (rc != KEEL_OK) {
        st->in_flight = 0;
        free(f);
        char why[160];
        snprintf(why, sizeof why, "cannot connect (%s)", keel_strerror(rc));
        retry_later(st, keel_worker_now_ms(fetcher.worker), why);
    }
}

/* Every response due is fetched, then the timer set for the next one. */
static void on_timer(keel_timer *t, void *userdata)
{
    (void)t, (void)userdata;
    if (fetcher.stopping)
        return;
    uint64_t now = keel_worker_now_ms(fetcher.worker);
    for (size_t i = 0; i < nstaples; i++)
        if (staples[i]->url != NULL && !staples[i]->in_flight && staples[i]->next_ms <= now)
            fetch(staples[i]);
    arm();
}

static void arm(void)
{
    if (fetcher.timer == NULL || fetcher.stopping)
        return;
    uint64_t now = keel_worker_now_ms(fetcher.worker), next = UINT64_MAX;
    for (size_t i = 0; i < nstaples; i++)
        if (staples[i]->url != NULL && !staples[i]->in_flight && staples[i]->next_ms < next)
            next = staples[i]->next_ms;
    if (next != UINT64_MAX)
        keel_timer_restart(fetcher.timer, next > now ? next - now : 0, 0);
}

int ko_ocsp_register(keel_module *m)
{
    return nfetched > 0 ? keel_protocol_register(m, &ko_ocsp_protocol) : KEEL_OK;
}

void ko_ocsp_start(keel_worker *worker)
{
    if (nfetched == 0 || keel_worker_id(worker) != 0)
        return;
    fetcher.worker = worker;
    fetcher.stopping = 0;
    /* Every certificate at once: a staple as soon as the responders answer. */
    fetcher.timer = keel_timer_start(worker, 0, 0, on_timer, NULL);
    if (fetcher.timer == NULL)
        keel_log(kt_self, KEEL_LOG_ERROR, "ocsp: out of memory: no response will be fetched");
}

void ko_ocsp_stopping(keel_worker *worker)
{
    if (worker != fetcher.worker)
        return;
    fetcher.stopping = 1;
    if (fetcher.timer != NULL)
        keel_timer_stop(fetcher.timer);
    fetcher.timer = NULL;
}
