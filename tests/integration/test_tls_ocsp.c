/* OCSP stapling (RFC 6066 8) on the OpenSSL backend, and the kTLS line
 * of its start-up log. A test CA and leaves whose Authority Information
 * Access names a responder on 127.0.0.1 are made with `openssl req` and
 * `openssl ca`; the responder is ocsp_responder.py, which answers each
 * request with `openssl ocsp -index ... -rsigner ... -CA ...` (OpenSSL's
 * own responder, run offline per request: `openssl ocsp -port` would
 * listen on every interface). `openssl s_client -status` shows what was
 * stapled. Every byte stays on 127.0.0.1. */
#define _GNU_SOURCE
#include "test_http.h"
#include "tls_helpers.h"

/* In tt_dir: ca.key, ca.pem, an empty index.txt and serial. */
static void make_ca(void)
{
    tt_need_openssl_backend();
    tt_mkdir();
    ht_run_result rr = tt_sh(
        30000,
        "cd '%s' && : >index.txt && echo 01 >serial && "
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key "
        "-out ca.pem -days 2 -subj '/CN=keel test CA' "
        "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign",
        tt_dir);
    cr_assert(rr.status == 0, "test CA: %s", rr.out);
    ht_run_free(&rr);
}

/* BASE.key, BASE.crt (CN=localhost, signed by the CA, its AIA naming
 * the responder http://127.0.0.1:PORT/) and BASE.chain (the leaf, then
 * the CA: the issuer keel verifies responses against). */
static void make_leaf(const char *base, unsigned port)
{
    char cnf[400];
    snprintf(cnf, sizeof cnf, "%s/%s.cnf", tt_dir, base);
    FILE *f = fopen(cnf, "w");
    cr_assert(f != NULL, "%s: %s", cnf, strerror(errno));
    fprintf(f,
            "[ca]\ndefault_ca = d\n[d]\ndir = %s\ndatabase = $dir/index.txt\n"
            "new_certs_dir = $dir\nserial = $dir/serial\nprivate_key = $dir/ca.key\n"
            "certificate = $dir/ca.pem\ndefault_md = sha256\npolicy = p\nx509_extensions = leaf\n"
            "default_days = 2\nunique_subject = no\n[p]\ncommonName = supplied\n"
            "[leaf]\nbasicConstraints = CA:FALSE\nsubjectAltName = DNS:localhost\n"
            "authorityInfoAccess = OCSP;URI:http://127.0.0.1:%u/\n",
            tt_dir, port);
    fclose(f);
    ht_run_result rr =
        tt_sh(30000,
              "cd '%s' && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
              "-keyout %s.key -out %s.csr -subj /CN=localhost && "
              "openssl ca -batch -config %s.cnf -in %s.csr -out %s.crt -notext && "
              "cat %s.crt ca.pem >%s.chain",
              tt_dir, base, base, base, base, base, base, base);
    cr_assert(rr.status == 0, "leaf %s: %s", base, rr.out);
    ht_run_free(&rr);
}

static void revoke_leaf(const char *base)
{
    ht_run_result rr =
        tt_sh(30000, "cd '%s' && openssl ca -config %s.cnf -revoke %s.crt", tt_dir, base, base);
    cr_assert(rr.status == 0, "revoke %s: %s", base, rr.out);
    ht_run_free(&rr);
}

/* The responder's answer for BASE, written to OUT (DER), as a file for
 * `ocsp=`, signed by SIGNER.pem with SIGNER.key (the CA: "ca"). */
static void response_file(const char *base, const char *signer, const char *out)
{
    ht_run_result rr = tt_sh(30000,
                             "cd '%s' && openssl ocsp -issuer ca.pem -cert %s.crt -no_nonce "
                             "-reqout %s.req && openssl ocsp -index index.txt -CA ca.pem "
                             "-rsigner %s.pem -rkey %s.key -reqin %s.req -respout %s -nmin 60",
                             tt_dir, base, base, signer, signer, base, out);
    cr_assert(rr.status == 0, "response for %s: %s", base, rr.out);
    ht_run_free(&rr);
}

static kh_proc *responder(void)
{
    const char *python = "/usr/bin/python3";
    if (access(python, X_OK) != 0 && access(python = "/usr/local/bin/python3", X_OK) != 0)
        cr_skip_test("python3 is not installed");
    static char script[600];
    snprintf(script, sizeof script, "%s/tests/integration/ocsp_responder.py", KEEL_SOURCE_DIR);
    const char *args[] = {script, tt_dir, NULL};
    return kh_start_program(python, NULL, args, 1, 10000);
}

/* keel on the OpenSSL backend serving BASE.chain, with more [keel]
 * lines and more [tls] lines. */
static kh_proc *start_keel_with(const char *keel_extra, const char *base, const char *cert_extra,
                                const char *tls_extra)
{
    char chain[64], key[64];
    snprintf(chain, sizeof chain, "%s.chain", base);
    snprintf(key, sizeof key, "%s.key", base);
    return tt_start(1,
                    "listen = 127.0.0.1:0 http1 tls\nworkers = 2\nmodules = tls http1 hello\n%s"
                    "[tls]\nbackend = openssl\ncert = %s %s%s\n%s",
                    keel_extra, tt_path(chain), tt_path(key), cert_extra, tls_extra);
}

static kh_proc *start_keel(const char *base, const char *cert_extra, const char *tls_extra)
{
    return start_keel_with("", base, cert_extra, tls_extra);
}

/* What `openssl s_client -status` shows of a handshake (its options added). */
static ht_run_result handshake(kh_proc *p, const char *extra)
{
    ht_run_result rr = tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u -status %s </dev/null",
                             kh_port(p, 0), extra);
    kh_assert(p, strstr(rr.out, "Cipher is") != NULL && strstr(rr.out, "Cipher is (NONE)") == NULL,
              "the handshake failed: %s", rr.out);
    return rr;
}

static void expect_stapled_good(kh_proc *p, const char *extra)
{
    ht_run_result rr = handshake(p, extra);
    kh_assert(p, strstr(rr.out, "OCSP Response Status: successful") != NULL,
              "%s: no OCSP response stapled: %s", extra, rr.out);
    kh_assert(p, strstr(rr.out, "Cert Status: good") != NULL, "%s: not good: %s", extra, rr.out);
    ht_run_free(&rr);
}

static void expect_nothing_stapled(kh_proc *p)
{
    ht_run_result rr = handshake(p, "");
    kh_assert(p, strstr(rr.out, "OCSP response: no response sent") != NULL, "stapled: %s", rr.out);
    ht_run_free(&rr);
}

/* Whether the log line holding needle is of this level ("[error]"). */
static int log_level_of(const char *log, const char *needle, const char *level)
{
    const char *at = strstr(log, needle);
    if (at == NULL)
        return 0;
    const char *line = at;
    while (line > log && line[-1] != '\n')
        line--;
    const char *found = strstr(line, level);
    return found != NULL && found < at;
}

/* A CA, its responder, a leaf naming it, and keel serving the leaf with
 * these [tls] lines; *responder_out (may be NULL) is the responder. */
static kh_proc *keel_and_responder(const char *tls_extra, kh_proc **responder_out)
{
    make_ca();
    kh_proc *r = responder();
    make_leaf("leaf", kh_port(r, 0));
    if (responder_out != NULL)
        *responder_out = r;
    return start_keel("leaf", "", tls_extra);
}

Test(tls_ocsp, fetched_response_is_stapled, .timeout = 90, .fini = tt_cleanup)
{
    kh_proc *r;
    kh_proc *p = keel_and_responder("ocsp_stapling = on\n", &r);
    kh_assert(p, kh_wait_log(p, "stapling the response of http://127.0.0.1:", 20000),
              "no response fetched");
    kh_assert(p, strstr(kh_stderr(r), "ocsp request 1") != NULL, "the responder was not asked");
    /* TLS 1.3 carries it in the Certificate message, TLS 1.2 in
     * CertificateStatus (RFC 8446 4.4.2.1, RFC 6066 8). */
    expect_stapled_good(p, "-tls1_3");
    expect_stapled_good(p, "-tls1_2");
    /* A client that does not ask gets none. */
    ht_run_result rr =
        tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u </dev/null", kh_port(p, 0));
    kh_assert(p, strstr(rr.out, "OCSP response") == NULL, "unasked: %s", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

Test(tls_ocsp, revoked_certificate_is_not_stapled, .timeout = 90, .fini = tt_cleanup)
{
    make_ca();
    kh_proc *r = responder();
    make_leaf("leaf", kh_port(r, 0));
    revoke_leaf("leaf");
    kh_proc *p = start_keel("leaf", "", "ocsp_stapling = on\n");
    kh_assert(p, kh_wait_log(p, "the certificate is REVOKED", 20000), "revocation not logged");
    kh_assert(p, log_level_of(kh_stderr(p), "the certificate is REVOKED", "[error]"),
              "not logged as an error: %s", kh_stderr(p));
    expect_nothing_stapled(p);
    tt_finish(p);
}

Test(tls_ocsp, responder_down_handshakes_go_on, .timeout = 90, .fini = tt_cleanup)
{
    make_ca();
    make_leaf("leaf", kh_free_port()); /* nobody listens there */
    kh_proc *p = start_keel("leaf", "", "ocsp_stapling = on\n");
    kh_assert(p, kh_wait_log(p, "cannot connect", 20000), "the failure is not logged");
    kh_assert(p, strstr(kh_stderr(p), "asking again in 5s") != NULL, "no back-off: %s",
              kh_stderr(p));
    expect_nothing_stapled(p);
    ht_run_result rr = tt_sh(20000, "curl -sS --max-time 10 --cacert %s https://localhost:%u/",
                             tt_path("ca.pem"), kh_port(p, 0));
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "Hello, World!") == 0, "curl %d '%s'", rr.status,
              rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

/* ocsp_refresh = 1s: asked again every second; the staple follows the
 * responder, down to a revocation that withdraws it. */
Test(tls_ocsp, refreshed_staple_follows_the_responder, .timeout = 90, .fini = tt_cleanup)
{
    kh_proc *p = keel_and_responder("ocsp_stapling = on\nocsp_refresh = 1s\n", NULL);
    kh_assert(p, kh_wait_log_count(p, "stapling the response of", 2, 20000), "not refreshed");
    expect_stapled_good(p, "");
    revoke_leaf("leaf");
    kh_assert(p, kh_wait_log(p, "the certificate is REVOKED", 20000), "revocation not seen");
    expect_nothing_stapled(p);
    tt_finish(p);
}

Test(tls_ocsp, response_file_is_stapled, .timeout = 90, .fini = tt_cleanup)
{
    make_ca();
    make_leaf("leaf", kh_free_port());
    make_leaf("other", kh_free_port());
    response_file("leaf", "ca", "leaf.ocsp");
    response_file("other", "ca", "other.ocsp");
    /* Another CA's key signing for this certificate. */
    ht_run_result rr = tt_sh(30000,
                             "cd '%s' && openssl req -x509 -newkey ec -pkeyopt "
                             "ec_paramgen_curve:P-256 -nodes -keyout forger.key -out forger.pem "
                             "-days 2 -subj '/CN=keel test CA'",
                             tt_dir);
    cr_assert(rr.status == 0, "forger: %s", rr.out);
    ht_run_free(&rr);
    response_file("leaf", "forger", "forged.ocsp");
    /* Responder certificates the CA issued (RFC 6960 4.2.2.2): one for
     * OCSP signing (delegated), one without that purpose. */
    rr = tt_sh(
        30000,
        "cd '%s' && printf 'extendedKeyUsage = OCSPSigning\n' >delegated.ext && "
        "printf 'extendedKeyUsage = serverAuth\n' >undelegated.ext && "
        "for r in delegated undelegated; do "
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $r.key "
        "-out $r.csr -subj /CN=$r && openssl x509 -req -in $r.csr -CA ca.pem -CAkey ca.key "
        "-set_serial 0x$(openssl rand -hex 8) -days 2 -extfile $r.ext -out $r.pem || exit 1; done",
        tt_dir);
    cr_assert(rr.status == 0, "responder certificates: %s", rr.out);
    ht_run_free(&rr);
    response_file("leaf", "delegated", "delegated.ocsp");
    response_file("leaf", "undelegated", "undelegated.ocsp");
    /* No fetching: the file alone. */
    char extra[600];
    snprintf(extra, sizeof extra, " ocsp=%s", tt_path("leaf.ocsp"));
    kh_proc *p = start_keel("leaf", extra, "");
    kh_assert(p, strstr(kh_stderr(p), "leaf.ocsp") != NULL, "not said: %s", kh_stderr(p));
    expect_stapled_good(p, "");
    tt_finish(p);
    kh_stop(p);

    /* Another certificate's response is not stapled, and said. */
    snprintf(extra, sizeof extra, " ocsp=%s", tt_path("other.ocsp"));
    p = start_keel("leaf", extra, "");
    kh_assert(p, strstr(kh_stderr(p), "it is not for this certificate") != NULL, "not said: %s",
              kh_stderr(p));
    expect_nothing_stapled(p);
    tt_finish(p);
    kh_stop(p);

    /* Signed by the CA's delegated responder: stapled. */
    snprintf(extra, sizeof extra, " ocsp=%s", tt_path("delegated.ocsp"));
    p = start_keel("leaf", extra, "");
    expect_stapled_good(p, "");
    tt_finish(p);
    kh_stop(p);

    /* A response whose signature does not verify against the issuer
     * (another key under the same CA name; a certificate of the CA's not
     * issued for OCSP signing) is not stapled, and said. */
    const char *unfit[] = {"forged.ocsp", "undelegated.ocsp"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(extra, sizeof extra, " ocsp=%s", tt_path(unfit[i]));
        p = start_keel("leaf", extra, "");
        kh_assert(
            p, strstr(kh_stderr(p), "it is not signed by the issuer or its OCSP responder") != NULL,
            "%s: not said: %s", unfit[i], kh_stderr(p));
        expect_nothing_stapled(p);
        tt_finish(p);
        kh_stop(p);
    }

    /* A file that is not an OCSP response stops start-up at its line. */
    char conf[2000];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1 tls\nmodules = tls http1 hello\n"
             "[tls]\nbackend = openssl\ncert = %s %s ocsp=%s\n",
             tt_path("leaf.chain"), tt_path("leaf.key"), tt_path("leaf.key"));
    kh_expect_refused(conf, 7, "not a DER OCSP response", "ocsp= a key file");
}

/* The process a reload started (killed at the end). */
static pid_t successor;

static void reload_fini(void)
{
    if (successor > 0)
        kill(successor, SIGKILL);
    successor = 0;
    tt_cleanup();
}

/* A reload (SIGHUP: a new process reads the config anew) reads the
 * ocsp= file again: here it now says revoked, and nothing is stapled. */
Test(tls_ocsp, a_reload_reads_the_response_file_again, .timeout = 90, .fini = reload_fini)
{
    make_ca();
    make_leaf("leaf", kh_free_port());
    response_file("leaf", "ca", "leaf.ocsp");
    char extra[600];
    snprintf(extra, sizeof extra, " ocsp=%s", tt_path("leaf.ocsp"));
    kh_proc *p = start_keel_with("pid_file = keel.pid\n", "leaf", extra, "");
    expect_stapled_good(p, "");
    revoke_leaf("leaf");
    response_file("leaf", "ca", "leaf.ocsp");

    kh_signal(p, SIGHUP);
    kh_assert(p, kh_wait_log(p, "reload: new process", 10000), "no hand-over logged");
    char pid_path[400];
    snprintf(pid_path, sizeof pid_path, "%s/keel.pid", p->dir);
    kh_assert(p,
              KH_WAIT_UNTIL((successor = kh_read_pid(pid_path)) > 0 && successor != p->pid, 10000),
              "no new process");
    kh_assert(p, kh_wait_exit(p, 15000) == 0, "the old process did not drain");
    kh_assert(p, log_level_of(kh_stderr(p), "the certificate is REVOKED", "[error]"),
              "the new process did not read the file: %s", kh_stderr(p));
    expect_nothing_stapled(p);
}

/* mbedTLS cannot staple: asking for it is said at start-up. */
Test(tls_ocsp, mbedtls_says_it_cannot_staple, .timeout = 60, .fini = tt_cleanup)
{
    tt_mkdir();
    tt_make_cert("lh", "localhost", NULL);
    kh_proc *p = tt_start(1,
                          "listen = 127.0.0.1:0 http1 tls\nmodules = tls http1 hello\n"
                          "[tls]\nbackend = mbedtls\ncert = %s %s\nocsp_stapling = on\n",
                          tt_path("lh.pem"), tt_path("lh.key"));
    kh_assert(p, strstr(kh_stderr(p), "has no server-side OCSP stapling") != NULL, "no warning: %s",
              kh_stderr(p));
    tt_finish(p);
}

/* Kernel TLS: the start-up line says whether it is used and why not. */
Test(tls_ocsp, ktls_detection_is_logged, .timeout = 60, .fini = tt_cleanup)
{
    tt_need_openssl_backend();
    tt_mkdir();
    tt_make_cert("lh", "localhost", NULL);
    const char *expected = "kTLS: not available on this system";
#ifdef __linux__
    char *ulps = kh_read_file("/proc/sys/net/ipv4/tcp_available_ulp");
    if (ulps != NULL && strstr(ulps, "tls") == NULL)
        expected = "kTLS: not used: the kernel has no tls module (modprobe tls)";
    else if (ulps != NULL)
        expected = "kTLS: not used: the kernel has the tls module";
    free(ulps);
#endif
    const char *fmt = "listen = 127.0.0.1:0 http1 tls\nmodules = tls http1 hello\n"
                      "[tls]\nbackend = openssl\ncert = %s %s\n%s";
    kh_proc *p = tt_start(1, fmt, tt_path("lh.pem"), tt_path("lh.key"), "");
    kh_assert(p, strstr(kh_stderr(p), expected) != NULL, "no '%s': %s", expected, kh_stderr(p));
    tt_finish(p);
    kh_stop(p);
    p = tt_start(1, fmt, tt_path("lh.pem"), tt_path("lh.key"), "ktls = off\n");
    kh_assert(p, strstr(kh_stderr(p), "kTLS: off ([tls] ktls = off)") != NULL, "off: %s",
              kh_stderr(p));
    tt_finish(p);
    kh_stop(p);
    char conf[1200];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1 tls\nmodules = tls http1 hello\n"
             "[tls]\nbackend = openssl\ncert = %s %s\nktls = on\n",
             tt_path("lh.pem"), tt_path("lh.key"));
    kh_expect_refused(conf, 8, "[tls] ktls: expected one of off auto", "ktls = on");
}
