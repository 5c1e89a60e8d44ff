/* keel-cert — writes an ECDSA P-256 key and a self-signed certificate for
 * local development, so that the HTTPS quick start needs no other tool:
 *
 *     keel-cert cert.pem key.pem                 localhost, 127.0.0.1, ::1
 *     keel-cert cert.pem key.pem a.test *.b.test [--days N]
 *
 * The names go into subjectAltName (dNSName, or iPAddress for literals:
 * RFC 5280 4.2.1.6; clients check only SANs, RFC 6125 6.4.4) and the first
 * into the subject's CN. The certificate is its own issuer; give it to
 * clients as the CA to trust (curl --cacert cert.pem). Not for production.
 * The key file is created readable by its owner only. */
#include "compat.h"

#include <mbedtls/asn1write.h>
#include <mbedtls/oid.h>
#include <mbedtls/x509_crt.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _WIN32
#include <io.h>
#else
#include <sys/stat.h>
#include <unistd.h>
#endif

#if !defined(MBEDTLS_X509_CRT_WRITE_C) || !defined(MBEDTLS_PK_WRITE_C) || !defined(MBEDTLS_ECP_C)
#error "keel-cert needs mbedTLS with X509_CRT_WRITE_C, PK_WRITE_C and ECP_C"
#endif

#define MAX_NAMES 32

static int parse_ipv4(const char *s, unsigned char out[4])
{
    unsigned v[4];
    char tail;
    if (sscanf(s, "%3u.%3u.%3u.%3u%c", &v[0], &v[1], &v[2], &v[3], &tail) != 4)
        return 0;
    for (int i = 0; i < 4; i++) {
        if (v[i] > 255)
            return 0;
        out[i] = (unsigned char)v[i];
    }
    return 1;
}

/* RFC 4291 2.2 text forms, "::" included (no embedded IPv4). */
static int parse_ipv6(const char *s, unsigned char out[16])
{
    unsigned short head[8], tail[8];
    int nh = 0, nt = 0, gap = 0;
    const char *p = s;
    if (p[0] == ':' && p[1] == ':') {
        gap = 1;
        p += 2;
    }
    while (*p) {
        char *end;
        unsigned long v = strtoul(p, &end, 16);
        if (end == p || end - p > 4 || v > 0xffff)
            return 0;
        if (gap ? nt == 8 : nh == 8)
            return 0;
        if (gap)
            tail[nt++] = (unsigned short)v;
        else
            head[nh++] = (unsigned short)v;
        p = end;
        if (*p == '\0')
            break;
        if (*p != ':')
            return 0;
        p++;
        if (*p == ':') {
            if (gap)
                return 0;
            gap = 1;
            p++;
        } else if (*p == '\0') {
            return 0;
        }
    }
    if (strchr(s, ':') == NULL || (gap ? nh + nt > 7 : nh != 8))
        return 0;
    memset(out, 0, 16);
    for (int i = 0; i < nh; i++) {
        out[2 * i] = (unsigned char)(head[i] >> 8);
        out[2 * i + 1] = (unsigned char)head[i];
    }
    for (int i = 0; i < nt; i++) {
        int k = 8 - nt + i;
        out[2 * k] = (unsigned char)(tail[i] >> 8);
        out[2 * k + 1] = (unsigned char)tail[i];
    }
    return 1;
}

/* The subjectAltName extension's value, DER, written backwards as
 * mbedTLS's asn1write does: SEQUENCE OF GeneralName. */
static int write_san(unsigned char *buf, size_t size, char **names, int n, size_t *len_out)
{
    unsigned char *p = buf + size;
    size_t len = 0;
    int ret; /* MBEDTLS_ASN1_CHK_ADD's */
    for (int i = n - 1; i >= 0; i--) {
        unsigned char ip[16];
        size_t iplen = parse_ipv4(names[i], ip) ? 4 : parse_ipv6(names[i], ip) ? 16 : 0;
        size_t one = 0;
        if (iplen > 0) {
            /* iPAddress [7] OCTET STRING */
            MBEDTLS_ASN1_CHK_ADD(one, mbedtls_asn1_write_raw_buffer(&p, buf, ip, iplen));
            MBEDTLS_ASN1_CHK_ADD(one, mbedtls_asn1_write_len(&p, buf, iplen));
            MBEDTLS_ASN1_CHK_ADD(
                one, mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7));
        } else {
            /* dNSName [2] IA5String */
            size_t dl = strlen(names[i]);
            MBEDTLS_ASN1_CHK_ADD(
                one, mbedtls_asn1_write_raw_buffer(&p, buf, (const unsigned char *)names[i], dl));
            MBEDTLS_ASN1_CHK_ADD(one, mbedtls_asn1_write_len(&p, buf, dl));
            MBEDTLS_ASN1_CHK_ADD(
                one, mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2));
        }
        len += one;
    }
    MBEDTLS_ASN1_CHK_ADD(len, mbedtls_asn1_write_len(&p, buf, len));
    MBEDTLS_ASN1_CHK_ADD(
        len, mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
    memmove(buf, p, len);
    *len_out = len;
    return 0;
}

static int write_file(const char *path, const unsigned char *data, size_t len, int secret)
{
#ifdef _WIN32
    (void)secret;
    FILE *f = fopen(path, "wb");
#else
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, secret ? 0600 : 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && f == NULL)
        close(fd);
#endif
    if (f == NULL) {
        fprintf(stderr, "keel-cert: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    int bad = fwrite(data, 1, len, f) != len;
    bad |= fclose(f) != 0;
    if (bad)
        fprintf(stderr, "keel-cert: cannot write %s: %s\n", path, strerror(errno));
    return bad;
}

static void when(char out[15], time_t t)
{
    struct tm tm;
#ifdef _WIN32
    gmtime_s(&tm, &t);
#else
    gmtime_r(&t, &tm);
#endif
    strftime(out, 15, "%Y%m%d%H%M%S", &tm);
}

static int usage(void)
{
    fprintf(stderr, "usage: keel-cert CERT.pem KEY.pem [NAME...] [--days N]\n"
                    "  writes an ECDSA P-256 key and a self-signed certificate for NAME...\n"
                    "  (default: localhost 127.0.0.1 ::1), valid for N days (default 365)\n");
    return 2;
}

int main(int argc, char **argv)
{
    char *names[MAX_NAMES];
    int nnames = 0;
    long days = 365;
    const char *cert_path = NULL, *key_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--days") == 0 && i + 1 < argc) {
            days = strtol(argv[++i], NULL, 10);
            if (days < 1 || days > 36500)
                return usage();
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            return usage();
        } else if (cert_path == NULL) {
            cert_path = argv[i];
        } else if (key_path == NULL) {
            key_path = argv[i];
        } else if (nnames < MAX_NAMES) {
            names[nnames++] = argv[i];
        } else {
            return usage();
        }
    }
    if (key_path == NULL)
        return usage();
    if (nnames == 0) {
        names[nnames++] = "localhost";
        names[nnames++] = "127.0.0.1";
        names[nnames++] = "::1";
    }
    for (int i = 0; i < nnames; i++)
        if (strlen(names[i]) > 253 || strpbrk(names[i], ",=+\"\\<>;") != NULL) {
            fprintf(stderr, "keel-cert: bad name '%s'\n", names[i]);
            return 2;
        }

    int rc, status = 1;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_pk_context key;
    mbedtls_x509write_cert crt;
    mbedtls_mpi serial;
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
    mbedtls_pk_init(&key);
    mbedtls_x509write_crt_init(&crt);
    mbedtls_mpi_init(&serial);
    static unsigned char pem[8192], san[2048];
    const char *step = "seeding";
#if KT_MBEDTLS3 && defined(MBEDTLS_PSA_CRYPTO_C)
    if (psa_crypto_init() != PSA_SUCCESS)
        goto out;
#endif
    static const char pers[] = "keel-cert";
    if ((rc = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy,
                                    (const unsigned char *)pers, sizeof pers - 1)) != 0)
        goto fail;
    step = "generating the key";
    if ((rc = mbedtls_pk_setup(&key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY))) != 0 ||
        (rc = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(key),
                                  mbedtls_ctr_drbg_random, &drbg)) != 0)
        goto fail;

    step = "building the certificate";
    char subject[300];
    snprintf(subject, sizeof subject, "CN=%s,O=keel development", names[0]);
    char from[15], to[15];
    time_t now = time(NULL);
    when(from, now - 86400); /* a day back: clocks differ */
    when(to, now + (time_t)days * 86400);
    unsigned char sn[16];
    if ((rc = mbedtls_ctr_drbg_random(&drbg, sn, sizeof sn)) != 0)
        goto fail;
    sn[0] &= 0x7f; /* positive (RFC 5280 4.1.2.2) */
    sn[0] |= 0x01;
    size_t sanlen = 0;
    mbedtls_x509write_crt_set_version(&crt, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&crt, MBEDTLS_MD_SHA256);
    mbedtls_x509write_crt_set_subject_key(&crt, &key);
    mbedtls_x509write_crt_set_issuer_key(&crt, &key);
#if MBEDTLS_VERSION_NUMBER >= 0x03040000
    if ((rc = mbedtls_x509write_crt_set_serial_raw(&crt, sn, sizeof sn)) != 0)
        goto fail;
#else
    if ((rc = mbedtls_mpi_read_binary(&serial, sn, sizeof sn)) != 0 ||
        (rc = mbedtls_x509write_crt_set_serial(&crt, &serial)) != 0)
        goto fail;
#endif
    if ((rc = mbedtls_x509write_crt_set_subject_name(&crt, subject)) != 0 ||
        (rc = mbedtls_x509write_crt_set_issuer_name(&crt, subject)) != 0 ||
        (rc = mbedtls_x509write_crt_set_validity(&crt, from, to)) != 0 ||
        /* Its own trust anchor: CA so that every client accepts it as one. */
        (rc = mbedtls_x509write_crt_set_basic_constraints(&crt, 1, 0)) != 0 ||
        (rc = mbedtls_x509write_crt_set_subject_key_identifier(&crt)) != 0 ||
        (rc = mbedtls_x509write_crt_set_key_usage(&crt, MBEDTLS_X509_KU_DIGITAL_SIGNATURE |
                                                            MBEDTLS_X509_KU_KEY_CERT_SIGN)) != 0 ||
        (rc = write_san(san, sizeof san, names, nnames, &sanlen)) != 0 ||
        (rc = mbedtls_x509write_crt_set_extension(&crt, MBEDTLS_OID_SUBJECT_ALT_NAME,
                                                  MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME), 0,
                                                  san, sanlen)) != 0)
        goto fail;

    step = "writing the key";
    if ((rc = mbedtls_pk_write_key_pem(&key, pem, sizeof pem)) != 0)
        goto fail;
    if (write_file(key_path, pem, strlen((char *)pem), 1) != 0)
        goto out;
    step = "signing the certificate";
    if ((rc = mbedtls_x509write_crt_pem(&crt, pem, sizeof pem, mbedtls_ctr_drbg_random, &drbg)) !=
        0)
        goto fail;
    if (write_file(cert_path, pem, strlen((char *)pem), 0) != 0)
        goto out;
    printf("keel-cert: wrote %s and %s (", cert_path, key_path);
    for (int i = 0; i < nnames; i++)
        printf("%s%s", i ? ", " : "", names[i]);
    printf("; %ld days)\n", days);
    status = 0;
    goto out;
fail : {
    char why[160];
    mbedtls_strerror(rc, why, sizeof why);
    fprintf(stderr, "keel-cert: %s: %s\n", step, why);
}
out:
    mbedtls_platform_zeroize(pem, sizeof pem);
    mbedtls_mpi_free(&serial);
    mbedtls_x509write_crt_free(&crt);
    mbedtls_pk_free(&key);
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
    return status;
}
