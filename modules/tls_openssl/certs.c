/* certs.c — the server's certificates on OpenSSL: `cert = CHAIN KEY
 * [passphrase=...]` lines read in load, checked (they parse, the key
 * matches), grouped by the names they carry, one SSL_CTX per group, and
 * chosen per handshake by the name the client asks for (SNI, RFC 6066 3).
 *
 * Several certificates for the same names (an RSA and an ECDSA one) go
 * into the same SSL_CTX, which holds one per key type and serves the one
 * the client's signature_algorithms accept (RFC 8446 4.2.3), as nginx's
 * several ssl_certificate lines do. The first line's group is the
 * default, for clients that send no name or one no group carries.
 *
 * Everything here is built on the main thread; an SSL_CTX is read-only
 * and thread-safe afterwards, shared by every worker. */
#include "ko.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ko_reason(char *buf, size_t size)
{
    unsigned long e = ERR_peek_last_error();
    if (e == 0)
        snprintf(buf, size, "unknown error");
    else
        ERR_error_string_n(e, buf, size);
    ERR_clear_error();
    return buf;
}

/* ---- the server context ---------------------------------------------------------- */

/* Client certificates: required fails the handshake on a chain that does
 * not verify; optional goes on, and the service reports no subject
 * (session.c asks SSL_get_verify_result), as mod_tls's optional mode. */
static int verify_client_cb(int ok, X509_STORE_CTX *store)
{
    (void)store;
    return ko_cfg.c.verify_client == KT_VERIFY_REQUIRED ? ok : 1;
}

/* The ClientHello's host_name (RFC 6066 3: the first entry of the
 * server_name list; OpenSSL, too, reads only the first), NUL-terminated
 * into name[256]; 0 when there is none or it is malformed (OpenSSL then
 * refuses the extension itself). */
static int client_hello_name(SSL *ssl, char name[256])
{
    const unsigned char *p;
    size_t len;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &len) != 1 || len < 5)
        return 0;
    size_t list = (size_t)p[0] << 8 | p[1];
    size_t n = (size_t)p[3] << 8 | p[4];
    if (list != len - 2 || p[2] != TLSEXT_NAMETYPE_host_name || n == 0 || n > list - 3 || n > 255 ||
        memchr(p + 5, '\0', n) != NULL)
        return 0;
    memcpy(name, p + 5, n);
    name[n] = '\0';
    return 1;
}

/* SNI (RFC 6066 3): the site the name chooses, as a Host would choose it,
 * with its own `tls.cert` list, else [tls]'s; within the list the group
 * carrying the name, else the list's first; [tls] has none: the
 * connection's default (the default site's, session.c) stays. The
 * ClientHello callback runs before OpenSSL opens a ticket (TLS 1.2 looks
 * for the session before the servername callback runs), so the ticket
 * keys (tickets.c) are already the chosen list's. It runs on the
 * SSL's current context: every one carries it. */
static int on_client_hello(SSL *ssl, int *alert, void *arg)
{
    (void)arg;
    ko_session *s = SSL_get_app_data(ssl);
    char name[256];
    if (s == NULL || !client_hello_name(ssl, name))
        return SSL_CLIENT_HELLO_SUCCESS;
    const ko_list *list = &ko_cfg.certs;
    if (kt_site_count() > 0) {
        const kt_section *site = keel_conn_site_config(s->b.conn, kt_self, name, strlen(name));
        const ko_list *own = site != NULL ? ko_site_list(site) : NULL;
        if (own != NULL)
            list = own;
    }
    const ko_group *g = ko_list_pick(list, name);
    if (g == NULL)
        return SSL_CLIENT_HELLO_SUCCESS;
    s->served = list;
    if (g->ctx != SSL_get_SSL_CTX(ssl) && SSL_set_SSL_CTX(ssl, g->ctx) == NULL) {
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    return SSL_CLIENT_HELLO_SUCCESS;
}

/* The 421 filter's question (keys.c): which list the handshake served. */
int kt_conn_served_certs(keel_conn *conn, const char *const **served)
{
    const ko_session *s = ko_session_of(conn);
    if (s == NULL || s->b.client || s->served == NULL)
        return 0;
    *served = s->served->items;
    return 1;
}

SSL_CTX *ko_server_ctx(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL)
        return NULL;
    int min = ko_cfg.c.min_version == 3 ? TLS1_3_VERSION : TLS1_2_VERSION;
    int max = ko_cfg.c.max_version == 3 ? TLS1_3_VERSION : TLS1_2_VERSION;
    /* Renegotiation off (RFC 5746's attacks, a cheap way to make a server
     * compute handshakes; TLS 1.3 removed it), compression off (CRIME),
     * the server's suite order. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_SINGLE_ECDH_USE);
    /* An idle connection keeps no record buffers (nginx does the same). */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    /* Stateless resumption only (tickets shared by the workers): no
     * server-side cache, as mod_tls. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    static const unsigned char sid_ctx[] = "keel";
    if (SSL_CTX_set_min_proto_version(ctx, min) != 1 ||
        SSL_CTX_set_max_proto_version(ctx, max) != 1 ||
        SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof sid_ctx - 1) != 1 ||
        (ko_cfg.ciphers12[0] != '\0' && SSL_CTX_set_cipher_list(ctx, ko_cfg.ciphers12) != 1) ||
        SSL_CTX_set_ciphersuites(ctx, ko_cfg.ciphers13) != 1 ||
        SSL_CTX_set1_groups_list(ctx, ko_cfg.groups) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (ko_cfg.c.tickets_on) {
        ko_tickets_conf(ctx);
        /* One ticket per handshake, as mod_tls (OpenSSL's default is two). */
        SSL_CTX_set_num_tickets(ctx, 1);
        SSL_CTX_set_timeout(ctx, (long)ko_cfg.c.ticket_lifetime_s);
    } else {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
    }
    if (ko_cfg.c.verify_client != KT_VERIFY_OFF) {
        int mode = SSL_VERIFY_PEER;
        if (ko_cfg.c.verify_client == KT_VERIFY_REQUIRED)
            mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
        SSL_CTX_set_verify(ctx, mode, verify_client_cb);
        STACK_OF(X509_NAME) *names = SSL_dup_CA_list(ko_cfg.client_ca_names);
        if (names != NULL)
            SSL_CTX_set_client_CA_list(ctx, names);
        if (SSL_CTX_set1_verify_cert_store(ctx, ko_cfg.client_ca) != 1) {
            SSL_CTX_free(ctx);
            return NULL;
        }
    }
    SSL_CTX_set_alpn_select_cb(ctx, ko_alpn_select, NULL);
    SSL_CTX_set_client_hello_cb(ctx, on_client_hello, NULL);
    return ctx;
}

/* ---- names ----------------------------------------------------------------------- */

/* The names a client may ask for (subjectAltName dNSName entries and the
 * subject's CN), lowercase, space-separated. */
static char *names_of(X509 *leaf, size_t *count)
{
    char *names[64];
    size_t n = 0;
    GENERAL_NAMES *sans = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
    for (int i = 0; i < sk_GENERAL_NAME_num(sans) && n < 63; i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
        if (g->type == GEN_DNS)
            names[n++] = OPENSSL_strndup((const char *)ASN1_STRING_get0_data(g->d.dNSName),
                                         (size_t)ASN1_STRING_length(g->d.dNSName));
    }
    GENERAL_NAMES_free(sans);
    X509_NAME *subject = X509_get_subject_name(leaf);
    int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (at >= 0 && n < 64) {
        ASN1_STRING *cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
        unsigned char *utf8 = NULL;
        int len = ASN1_STRING_to_UTF8(&utf8, cn);
        if (len > 0)
            names[n++] = OPENSSL_strndup((const char *)utf8, (size_t)len);
        OPENSSL_free(utf8);
    }
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        if (names[i] == NULL)
            names[i] = OPENSSL_strdup("");
        for (char *c = names[i]; c != NULL && *c; c++)
            *c = (char)tolower((unsigned char)*c);
        total += (names[i] ? strlen(names[i]) : 0) + 1;
    }
    char *joined = malloc(total);
    if (joined != NULL) {
        joined[0] = '\0';
        for (size_t i = 0; i < n; i++) {
            if (i > 0)
                strcat(joined, " ");
            strcat(joined, names[i] ? names[i] : "");
        }
    }
    for (size_t i = 0; i < n; i++)
        OPENSSL_free(names[i]);
    *count = n;
    return joined;
}

const ko_group *ko_list_pick(const ko_list *list, const char *name)
{
    if (list->n == 0)
        return NULL;
    if (name != NULL && list->n > 1)
        for (size_t i = 0; i < list->n; i++)
            for (size_t k = 0; k < KO_GROUP_MAX && list->v[i].leaf[k] != NULL; k++)
                /* RFC 6125 6.4.3: "*.example.com" covers one label. */
                if (X509_check_host(list->v[i].leaf[k], name, 0,
                                    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL) == 1)
                    return &list->v[i];
    return &list->v[0];
}

/* ---- loading ---------------------------------------------------------------------- */

/* A passphrase given on the line, never a terminal prompt. */
static int passphrase_cb(char *buf, int size, int rwflag, void *u)
{
    (void)rwflag;
    const char *pass = u;
    if (pass == NULL)
        return -1;
    size_t len = strlen(pass);
    if (len > (size_t)size)
        return -1;
    memcpy(buf, pass, len);
    return (int)len;
}

/* PEM (a chain: the leaf first) or one DER certificate. */
static X509 *read_chain(const char *path, STACK_OF(X509) * *extra, int *err)
{
    BIO *bio = BIO_new_file(path, "rb");
    if (bio == NULL) {
        *err = errno ? errno : ENOENT;
        return NULL;
    }
    X509 *leaf = PEM_read_bio_X509_AUX(bio, NULL, NULL, NULL);
    if (leaf == NULL) {
        (void)BIO_reset(bio);
        leaf = d2i_X509_bio(bio, NULL);
    } else if ((*extra = sk_X509_new_null()) != NULL) {
        X509 *ca;
        while ((ca = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL)
            if (!sk_X509_push(*extra, ca))
                X509_free(ca);
        ERR_clear_error(); /* the end of the file */
    }
    BIO_free(bio);
    return leaf;
}

static EVP_PKEY *read_key(const char *path, const char *pass, int *err)
{
    BIO *bio = BIO_new_file(path, "rb");
    if (bio == NULL) {
        *err = errno ? errno : ENOENT;
        return NULL;
    }
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, passphrase_cb, (void *)pass);
    if (key == NULL) {
        (void)BIO_reset(bio);
        key = d2i_PrivateKey_bio(bio, NULL);
    }
    BIO_free(bio);
    return key;
}

/* Whether two space-separated name lists share a name. */
static int share_a_name(const char *a, const char *b)
{
    size_t blen = strlen(b);
    for (const char *p = a; *p;) {
        size_t n = strcspn(p, " ");
        for (const char *q = b; q < b + blen;) {
            size_t m = strcspn(q, " ");
            if (m == n && n > 0 && memcmp(p, q, n) == 0)
                return 1;
            q += m + (q[m] == ' ');
        }
        p += n + (p[n] == ' ');
    }
    return 0;
}

/* The group a certificate joins: the first without a key of its type
 * that shares a name with it (a site's list: whatever its names, as
 * mod_tls installs all of a site's certificates), else a new one. */
static ko_group *group_for(ko_list *list, const char *names, int any_names, int type)
{
    for (size_t i = 0; i < list->n; i++) {
        ko_group *g = &list->v[i];
        size_t k = 0;
        while (k < KO_GROUP_MAX && g->leaf[k] != NULL && g->key_types[k] != type)
            k++;
        if (k == KO_GROUP_MAX || g->leaf[k] != NULL)
            continue; /* full, or has this type */
        if (!any_names && !share_a_name(names, g->names))
            continue;
        char *merged = malloc(strlen(g->names) + strlen(names) + 2);
        if (merged == NULL)
            return NULL;
        snprintf(merged, strlen(g->names) + strlen(names) + 2, "%s %s", g->names, names);
        free(g->names);
        g->names = merged;
        return g;
    }
    ko_group *grown = realloc(list->v, (list->n + 1) * sizeof *grown);
    if (grown == NULL)
        return NULL;
    list->v = grown;
    ko_group *g = &list->v[list->n];
    memset(g, 0, sizeof *g);
    if ((g->names = malloc(strlen(names) + 1)) == NULL || (g->ctx = ko_server_ctx()) == NULL) {
        free(g->names);
        return NULL;
    }
    memcpy(g->names, names, strlen(names) + 1);
    list->n++;
    return g;
}

/* Records the certificate in its group (after the context took it). */
static void group_add(ko_group *g, X509 *leaf, int type)
{
    for (size_t k = 0; k < KO_GROUP_MAX; k++)
        if (g->leaf[k] == NULL) {
            X509_up_ref(leaf);
            g->leaf[k] = leaf;
            g->key_types[k] = type;
            return;
        }
}

static int load_one(keel_module *m, const char *value, ko_list *list, int any_names)
{
    kt_cert_line line;
    int rc = kt_cert_line_parse(m, value, &line);
    if (rc != KEEL_OK)
        return rc;
    const char *chain_path = line.chain, *key_path = line.key, *pass = line.passphrase;
    char why[200];
    int err = 0;
    STACK_OF(X509) *extra = NULL;
    EVP_PKEY *key = NULL;
    X509 *leaf = read_chain(chain_path, &extra, &err);
    if (leaf == NULL) {
        rc = err ? kt_cert_error(m, value, "cannot read %s: %s", chain_path, strerror(err))
                 : kt_cert_error(m, value, "%s: not a certificate chain (%s)", chain_path,
                                 ko_reason(why, sizeof why));
        goto out;
    }
    err = 0;
    if ((key = read_key(key_path, pass, &err)) == NULL) {
        rc = err ? kt_cert_error(m, value, "cannot read %s: %s", key_path, strerror(err))
                 : kt_cert_error(m, value, "%s: not a usable private key (%s)", key_path,
                                 ko_reason(why, sizeof why));
        goto out;
    }
    /* The leaf (the chain's first certificate) must carry this key. */
    if (X509_check_private_key(leaf, key) != 1) {
        rc = kt_cert_error(m, value, "%s does not match the key in %s", chain_path, key_path);
        goto out;
    }
    size_t nnames = 0;
    char *names = names_of(leaf, &nnames);
    if (names == NULL) {
        rc = KEEL_ERR_NOMEM;
        goto out;
    }
    if (nnames == 0)
        keel_log(m, KEEL_LOG_WARN, "%s carries no DNS name: served only as the default",
                 chain_path);
    int type = EVP_PKEY_get_base_id(key);
    ko_group *g = group_for(list, names, any_names, type);
    free(names);
    if (g == NULL)
        rc = KEEL_ERR_NOMEM;
    else if (SSL_CTX_use_cert_and_key(g->ctx, leaf, key, extra, 1) != 1)
        rc = kt_cert_error(m, value, "%s: OpenSSL refused the certificate (%s)", chain_path,
                           ko_reason(why, sizeof why));
    else {
        group_add(g, leaf, type);
        rc = ko_ocsp_add(m, value, g->ctx, leaf, extra, chain_path, line.ocsp);
    }
out:
    ERR_clear_error();
    OPENSSL_cleanse(&line, sizeof line); /* the passphrase */
    X509_free(leaf);
    EVP_PKEY_free(key); /* the context holds its own reference */
    sk_X509_pop_free(extra, X509_free);
    return rc;
}

int ko_list_load(keel_module *m, const keel_config_list *lines, ko_list *list, int site)
{
    memset(list, 0, sizeof *list);
    for (size_t i = 0; i < lines->count; i++) {
        int rc = load_one(m, lines->items[i], list, site);
        if (rc != KEEL_OK) {
            ko_list_free(list);
            return rc;
        }
    }
    return KEEL_OK;
}

void ko_list_free(ko_list *list)
{
    for (size_t i = 0; i < list->n; i++) {
        SSL_CTX_free(list->v[i].ctx); /* frees (and wipes) the keys */
        for (size_t k = 0; k < KO_GROUP_MAX; k++)
            X509_free(list->v[i].leaf[k]);
        free(list->v[i].names);
    }
    free(list->v);
    ko_tickets_free(list->tickets);
    memset(list, 0, sizeof *list);
}

int ko_ca_load(keel_module *m, const char *key, const char *path, X509_STORE *store,
               STACK_OF(X509_NAME) * *names)
{
    char full[1024], why[200];
    /* The last occurrence is the value read (a repeated key: the last wins). */
    size_t count = keel_config_count(m, key);
    if (keel_config_path(m, key, count > 0 ? count - 1 : 0, path, full, sizeof full) != KEEL_OK)
        snprintf(full, sizeof full, "%s", path);
    FILE *f = fopen(full, "rb");
    if (f == NULL)
        return keel_config_error(m, key, "cannot read %s: %s", full, strerror(errno));
    fclose(f);
    if (X509_STORE_load_file(store, full) != 1)
        return keel_config_error(m, key, "%s: no usable CA certificate (%s)", full,
                                 ko_reason(why, sizeof why));
    if (names != NULL && (*names = SSL_load_client_CA_file(full)) == NULL)
        return keel_config_error(m, key, "%s: no usable CA certificate (%s)", full,
                                 ko_reason(why, sizeof why));
    return KEEL_OK;
}
