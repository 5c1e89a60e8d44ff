/* `[tls] backend = mbedtls | openssl`: the loader loads mod_tls_openssl
 * for openssl and mod_tls otherwise (core/server/loader.c, find_file);
 * mod_tls named for a backend that is not installed stops start-up saying
 * so; the OpenSSL backend negotiates TLS 1.3 and serves an RSA and an
 * ECDSA certificate for one name by the client's signature algorithms.
 * The other TLS tests run against both backends (NAME.openssl in ctest).
 * Every byte stays on 127.0.0.1. */
#define _GNU_SOURCE
#include "test_http.h"
#include "tls_helpers.h"

static kh_proc *start_backend(const char *backend, const char *certs)
{
    return tt_start(1,
                    "listen = 127.0.0.1:0 http1 tls\nworkers = 2\nmodules = tls http1 hello\n"
                    "[tls]\nbackend = %s\n%s",
                    backend, certs);
}

/* A localhost certificate; returns its `cert` line. */
static const char *localhost_cert(void)
{
    static char line[1000];
    tt_need_openssl_backend();
    tt_mkdir();
    tt_make_cert("lh", "localhost", NULL);
    snprintf(line, sizeof line, "cert = %s %s\n", tt_path("lh.pem"), tt_path("lh.key"));
    return line;
}

Test(tls_backend, the_backend_line_chooses_the_module, .timeout = 60, .fini = tt_cleanup)
{
    const char *certs = localhost_cert();
    static const struct {
        const char *backend, *says;
    } cases[] = {{"mbedtls", "(mbedTLS "}, {"openssl", "(OpenSSL 3"}};
    for (size_t i = 0; i < 2; i++) {
        kh_proc *p = start_backend(cases[i].backend, certs);
        kh_assert(p, strstr(kh_stderr(p), cases[i].says) != NULL, "%s: start-up line",
                  cases[i].backend);
        ht_run_result rr = tt_sh(20000, "curl -sS --max-time 10 --cacert %s https://localhost:%u/",
                                 tt_path("lh.pem"), kh_port(p, 0));
        kh_assert(p, rr.status == 0 && strcmp(rr.out, "Hello, World!") == 0, "%s: curl %d '%s'",
                  cases[i].backend, rr.status, rr.out);
        ht_run_free(&rr);
        tt_finish(p);
        kh_stop(p);
    }
}

/* keel -t with a copy of keel whose only module is mod_tls (modules/
 * beside the executable, the default module path): backend = X refused
 * at the key's line, saying `says`. */
static void expect_refused(const char *keel, const char *backend, const char *says)
{
    char conf[200];
    snprintf(conf, sizeof conf, "[keel]\nmodules = tls\n[tls]\nbackend = %s\n", backend);
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn_program(keel, conf, args);
    kh_assert(p, kh_wait_exit(p, 10000) == 1, "%s: keel -t must fail", backend);
    char where[600];
    snprintf(where, sizeof where, "%s:4:", p->conf);
    kh_assert(p, strstr(kh_stderr(p), where) != NULL, "%s: no '%s'", backend, where);
    kh_assert(p, strstr(kh_stderr(p), says) != NULL, "%s: no '%s'", backend, says);
    kh_stop(p);
}

Test(tls_backend, missing_backend_stops_start_up, .timeout = 60, .fini = tt_cleanup)
{
    tt_mkdir();
    char cmd[1600];
    snprintf(cmd, sizeof cmd,
             "cp '%s' '%s/keel' && mkdir '%s/modules' && ln -s '%s/mod_tls.so' '%s/modules/'",
             KEEL_BIN, tt_dir, tt_dir, KEEL_MODULE_DIR, tt_dir);
    cr_assert(system(cmd) == 0, "%s", cmd);
    const char *keel = tt_path("keel");
    expect_refused(keel, "openssl",
                   "the OpenSSL backend is not installed (mod_tls_openssl, package "
                   "keel-tls-openssl)");
    expect_refused(keel, "gnutls", "expected mbedtls or openssl, got 'gnutls'");
}

Test(tls_backend, openssl_negotiates_tls13, .timeout = 60, .fini = tt_cleanup)
{
    const char *certs = localhost_cert();
    kh_proc *p = start_backend("openssl", certs);
    /* The versions offered are said at start-up. */
    kh_assert(p, strstr(kh_stderr(p), "tls listeners offer TLS 1.2-1.3") != NULL, "start-up line");
    ht_run_result rr = tt_sh(20000,
                             "openssl s_client -connect 127.0.0.1:%u -tls1_3 -servername "
                             "localhost </dev/null",
                             kh_port(p, 0));
    kh_assert(p, strstr(rr.out, "New, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256") != NULL,
              "TLS 1.3: %s", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

Test(tls_backend, rsa_and_ecdsa_for_one_name_by_signature_algorithms, .timeout = 90,
     .fini = tt_cleanup)
{
    tt_need_openssl_backend();
    tt_mkdir();
    tt_make_cert("ec", "both.test", NULL);
    tt_make_rsa_cert("rsa", "rsa.both.test", "both.test");
    tt_make_cert("other", "other.test", NULL);
    char certs[1400];
    snprintf(certs, sizeof certs, "cert = %s %s\ncert = %s %s\ncert = %s %s\n",
             tt_path("other.pem"), tt_path("other.key"), tt_path("ec.pem"), tt_path("ec.key"),
             tt_path("rsa.pem"), tt_path("rsa.key"));
    kh_proc *p = start_backend("openssl", certs);
    /* TLS 1.3: the certificate is chosen by signature_algorithms alone
     * (RFC 8446 4.4.2.2). */
    const char *got = tt_served_cn(p, 0, "both.test", "-tls1_3 -sigalgs rsa_pss_rsae_sha256");
    kh_assert(p, strcmp(got, "rsa.both.test") == 0, "RSA-PSS: %s", got);
    got = tt_served_cn(p, 0, "both.test", "-tls1_3 -sigalgs ecdsa_secp256r1_sha256");
    kh_assert(p, strcmp(got, "both.test") == 0, "ECDSA: %s", got);
    tt_finish(p);
}
