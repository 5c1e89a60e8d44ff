/* A site's own certificate (`tls.cert` in [site NAMES]): a handshake
 * whose SNI names the site gets it, by the rules that choose a request's
 * site (exact, then the longest wildcard, then [site default]); a
 * handshake without SNI gets the default site's when it has its own; a
 * site without one gets [tls]'s list chosen by the names its certificates
 * carry, as before. A request whose Host chooses a site with other
 * certificates of its own than the handshake served is answered 421, and
 * a session ticket resumes only under the certificates it was issued
 * under. Checked with openssl
 * s_client's subject and curl --resolve (HTTP/1.1 and h2 by ALPN); keel -t names the scope's line
 * for a bad file and reads a relative one beside the config. Every byte stays on 127.0.0.1. */
#define _GNU_SOURCE
#include "test_http.h"
#include "tls_helpers.h"

static void make_certs(void)
{
    tt_mkdir();
    tt_make_cert("g", "global.test", NULL);
    tt_make_cert("a", "a.test", "b.test", NULL);
    tt_make_cert("w", "*.w.test", NULL);
    tt_make_cert("d", "default.test", NULL);
    tt_make_cert("other", "plain.test", NULL);
}

Test(tls_sites, sni_chooses_the_sites_certificate, .timeout = 120, .fini = tt_cleanup)
{
    make_certs();
    kh_proc *p =
        tt_start(1,
                 "listen = 127.0.0.1:0 http1 tls\nworkers = 1\n"
                 "modules = tls http1 h2 hello\n"
                 "[tls]\ncert = %s/g.pem %s/g.key\ncert = %s/other.pem %s/other.key\n"
                 "[site a.test b.test]\ntls.cert = %s/a.pem %s/a.key\n"
                 "[site *.w.test]\ntls.cert = %s/w.pem %s/w.key\n"
                 "[site plain.test]\n"
                 "[site default]\ntls.cert = %s/d.pem %s/d.key\n",
                 tt_dir, tt_dir, tt_dir, tt_dir, tt_dir, tt_dir, tt_dir, tt_dir, tt_dir, tt_dir);
    static const struct {
        const char *sni, *cn;
    } cases[] = {
        {"a.test", "a.test"},         {"B.TEST", "a.test"},       /* the site's other name */
        {"x.w.test", "*.w.test"},     {"y.x.w.test", "*.w.test"}, /* the site's wildcard rule */
        {"w.test", "default.test"},   {"unknown.test", "default.test"},
        {"plain.test", "plain.test"}, /* a site of its own, [tls]'s list by name */
        {"", "default.test"},         /* no SNI: the default site's own */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *got = tt_served_cn(p, 0, cases[i].sni, "");
        kh_assert(p, strcmp(got, cases[i].cn) == 0, "SNI '%s': got '%s', want '%s'", cases[i].sni,
                  got, cases[i].cn);
    }
    /* curl verifies against the site's certificate, over h2 (ALPN) and
     * HTTP/1.1. */
    static const char *const versions[] = {"--http2", "--http1.1"};
    static const char *const expect[] = {"2 200", "1.1 200"};
    for (int v = 0; v < 2; v++) {
        ht_run_result rr =
            tt_sh(20000,
                  "curl -sS --max-time 10 %s --cacert %s --resolve b.test:%u:127.0.0.1 "
                  "-o /dev/null -w '%%{http_version} %%{http_code}' https://b.test:%u/",
                  versions[v], tt_path("a.pem"), kh_port(p, 0), kh_port(p, 0));
        kh_assert(p, rr.status == 0 && strcmp(rr.out, expect[v]) == 0, "curl %s: %d '%s'",
                  versions[v], rr.status, rr.out);
        ht_run_free(&rr);
    }
    tt_finish(p);
}

/* Two certificates in one site (RSA and ECDSA): the suite decides, as
 * with [tls]'s list; a listener's own certificate serves its sites that
 * have none; with unknown_host = 421 and no default site, an unknown name
 * gets [tls]'s default. */
Test(tls_sites, rsa_and_ecdsa_in_a_site_and_a_listeners_own, .timeout = 120, .fini = tt_cleanup)
{
    make_certs();
    tt_make_rsa_cert("rsa", "rsa.a.test", "a.test");
    kh_proc *p =
        tt_start(2,
                 "listen = 127.0.0.1:0 http1 tls\n"
                 "listen = 127.0.0.1:0 http1 tls name=inner\n"
                 "unknown_host = 421\nworkers = 2\nmodules = tls http1 hello\n"
                 "[tls]\ncert = %s/g.pem %s/g.key\n"
                 "[listener inner]\ntls.cert = %s/d.pem %s/d.key\n"
                 "[site a.test]\ntls.cert = %s/a.pem %s/a.key\ntls.cert = %s/rsa.pem %s/rsa.key\n"
                 "[site plain.test]\n",
                 tt_dir, tt_dir, tt_dir, tt_dir, tt_dir, tt_dir, tt_dir, tt_dir);
    const char *got = tt_served_cn(p, 0, "a.test", "-tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256");
    kh_assert(p, strcmp(got, "rsa.a.test") == 0, "RSA suite: %s", got);
    got = tt_served_cn(p, 0, "a.test", "-tls1_2 -cipher ECDHE-ECDSA-AES128-GCM-SHA256");
    kh_assert(p, strcmp(got, "a.test") == 0, "ECDSA suite: %s", got);
    got = tt_served_cn(p, 0, "unknown.test", "");
    kh_assert(p, strcmp(got, "global.test") == 0, "unknown name, no default site: %s", got);
    got = tt_served_cn(p, 0, "", "");
    kh_assert(p, strcmp(got, "global.test") == 0, "no SNI, no default site: %s", got);
    /* The second listener: its sites without a certificate of their own
     * inherit the listener's. */
    static const struct {
        const char *sni, *cn;
    } inner[] = {{"plain.test", "default.test"}, {"a.test", "a.test"}};
    for (size_t i = 0; i < 2; i++) {
        ht_run_result rr =
            tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u -servername %s </dev/null",
                  kh_port(p, 1), inner[i].sni);
        kh_assert(p, strstr(rr.out, inner[i].cn) != NULL, "inner listener, %s: %s", inner[i].sni,
                  rr.out);
        ht_run_free(&rr);
    }
    tt_finish(p);
}

/* keel -t: a scope's line that names a missing file is reported with its
 * file:line and scope; a relative file is read beside the config. */
Test(tls_sites, keel_t_checks_a_sites_certificate, .timeout = 60, .fini = tt_cleanup)
{
    make_certs();
    char conf[300];
    snprintf(conf, sizeof conf, "%s/keel.conf", tt_dir);
    for (int bad = 0; bad < 2; bad++) {
        char body[1400];
        snprintf(body, sizeof body,
                 "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1 tls\n"
                 "modules = tls http1 hello\n"
                 "[site a.test]\n"
                 "tls.cert = %s a.key\n",
                 bad ? "missing.pem" : "a.pem");
        FILE *f = fopen(conf, "w");
        cr_assert(f != NULL && fputs(body, f) >= 0 && fclose(f) == 0, "write %s", conf);
        /* From another directory: relative names are the config's. */
        ht_run_result rr = tt_sh(20000, "cd / && %s -t -c %s", KEEL_BIN, conf);
        if (bad) {
            char want[1200];
            snprintf(want, sizeof want, "%s:6: [site a.test] tls.cert: cannot read %s/missing.pem",
                     conf, tt_dir);
            cr_assert(rr.status == 1 && strstr(rr.out, want) != NULL, "want '%s': %d %s", want,
                      rr.status, rr.out);
        } else {
            cr_assert(rr.status == 0, "relative files beside the config: %d %s", rr.status, rr.out);
        }
        ht_run_free(&rr);
    }
}

/* Sites a.test and *.w.test with certificates of their own, plain.test
 * and global.test with [tls]'s, and (with_default) a default site with
 * its own. */
static kh_proc *start_sites(int workers, const char *modules, int with_default)
{
    make_certs();
    char dflt[700] = "";
    if (with_default)
        snprintf(dflt, sizeof dflt, "[site default]\ntls.cert = %s/d.pem %s/d.key\n", tt_dir,
                 tt_dir);
    return tt_start(1,
                    "listen = 127.0.0.1:0 http1 tls\nworkers = %d\nmodules = %s\n"
                    "[tls]\ncert = %s/g.pem %s/g.key\n"
                    "[site a.test]\ntls.cert = %s/a.pem %s/a.key\n"
                    "[site *.w.test]\ntls.cert = %s/w.pem %s/w.key\n"
                    "[site plain.test global.test]\n%s",
                    workers, modules, tt_dir, tt_dir, tt_dir, tt_dir, tt_dir, tt_dir, dflt);
}

/* The status and HTTP version curl gets for Host `host` on a connection
 * whose SNI is `sni` ("" = none: the address itself is the URL). */
static char *status_for(kh_proc *p, const char *version, const char *sni, const char *host)
{
    static char got[64];
    char url[300];
    if (*sni)
        snprintf(url, sizeof url, "--resolve %s:%u:127.0.0.1 https://%s:%u/", sni, kh_port(p, 0),
                 sni, kh_port(p, 0));
    else
        snprintf(url, sizeof url, "https://127.0.0.1:%u/", kh_port(p, 0));
    ht_run_result rr = tt_sh(20000,
                             "curl -sS -k --max-time 10 %s -H 'Host: %s' -o /dev/null "
                             "-w '%%{http_version} %%{http_code}' %s",
                             version, host, url);
    kh_assert(p, rr.status == 0, "curl %s sni=%s host=%s: %d %s", version, sni, host, rr.status,
              rr.out);
    snprintf(got, sizeof got, "%s", rr.out);
    ht_run_free(&rr);
    return got;
}

/* RFC 9110 15.5.20, RFC 9113 9.1.1: a request for a site whose own
 * certificate the connection's handshake did not serve is 421 (the
 * client retries on a connection of its own), over HTTP/1.1 and h2; sites
 * that share [tls]'s certificates answer one another's Host as before. */
Test(tls_sites, another_sites_host_is_misdirected, .timeout = 120, .fini = tt_cleanup)
{
    kh_proc *p = start_sites(1, "tls http1 h2 hello", 1);
    static const struct {
        const char *sni, *host, *status;
    } cases[] = {
        {"a.test", "a.test", "200"},
        {"a.test", "x.w.test", "421"},
        {"x.w.test", "y.w.test", "200"},      /* the same site */
        {"a.test", "unknown.test", "421"},    /* the default site's own */
        {"plain.test", "global.test", "200"}, /* [tls]'s, shared */
        {"plain.test", "a.test", "421"},
        {"", "unknown.test", "200"}, /* no SNI: default */
        {"", "a.test", "421"},
    };
    static const char *const versions[] = {"--http1.1", "--http2"};
    static const char *const prefix[] = {"1.1 ", "2 "};
    for (int v = 0; v < 2; v++) {
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            char want[32];
            snprintf(want, sizeof want, "%s%s", prefix[v], cases[i].status);
            const char *got = status_for(p, versions[v], cases[i].sni, cases[i].host);
            kh_assert(p, strcmp(got, want) == 0, "%s SNI '%s', Host %s: got '%s', want '%s'",
                      versions[v], cases[i].sni, cases[i].host, got, want);
        }
    }
    tt_finish(p);
}

/* Whether `openssl s_client -sess_in` resumed the session saved from a
 * handshake with SNI `from`, on one with SNI `to`, both of `version`
 * (-tls1_2, -tls1_3). A request with Connection: close keeps s_client
 * until the server's close: a TLS 1.3 ticket comes after the handshake
 * (RFC 8446 4.6.1) and would otherwise be missed. */
/* openssl s_client with SNI `name`, saving (-sess_out) or offering
 * (-sess_in) the session in `sess`. */
static ht_run_result s_client(kh_proc *p, const char *version, const char *name,
                              const char *sess_opt, const char *sess)
{
    return tt_sh(20000,
                 "printf 'GET / HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n' | "
                 "openssl s_client -ign_eof -connect 127.0.0.1:%u %s -servername %s %s %s",
                 name, kh_port(p, 0), version, name, sess_opt, sess);
}

static int resumes(kh_proc *p, const char *version, const char *from, const char *to)
{
    char sess[300];
    snprintf(sess, sizeof sess, "%s/sess-%s", tt_dir, from);
    ht_run_result rr = s_client(p, version, from, "-sess_out", sess);
    kh_assert(p, strstr(rr.out, "New, ") != NULL, "first handshake %s %s: %s", version, from,
              rr.out);
    ht_run_free(&rr);
    rr = s_client(p, version, to, "-sess_in", sess);
    int reused = strstr(rr.out, "Reused, ") != NULL;
    kh_assert(p, reused || strstr(rr.out, "New, ") != NULL, "second handshake %s %s: %s", version,
              to, rr.out);
    ht_run_free(&rr);
    return reused;
}

Test(tls_sites, tickets_resume_only_their_sites_certificate, .timeout = 120, .fini = tt_cleanup)
{
    kh_proc *p = start_sites(2, "tls http1 hello", 0);
    /* TLS 1.3 too when the listener offers it (its start-up line says
     * so: the OpenSSL backend, mbedTLS 3.x): its tickets are PSKs, opened
     * in another place of the handshake than TLS 1.2's. */
    static const char *const versions[] = {"-tls1_2", "-tls1_3"};
    int nversions = kh_count_log(p, "tls: TLS 1.2-1.3") > 0 ? 2 : 1;
    for (int v = 0; v < nversions; v++) {
        const char *ver = versions[v];
        kh_assert(p, resumes(p, ver, "a.test", "a.test"), "%s a.test's ticket on a.test", ver);
        kh_assert(p, !resumes(p, ver, "a.test", "x.w.test"), "%s a.test's ticket on x.w.test", ver);
        kh_assert(p, !resumes(p, ver, "x.w.test", "a.test"), "%s x.w.test's ticket on a.test", ver);
        kh_assert(p, !resumes(p, ver, "plain.test", "a.test"), "%s [tls]'s ticket on a.test", ver);
        kh_assert(p, resumes(p, ver, "x.w.test", "y.w.test"),
                  "%s a wildcard site's ticket on the same site", ver);
        kh_assert(p, resumes(p, ver, "plain.test", "global.test"), "%s [tls]'s ticket on [tls]'s",
                  ver);
    }
    tt_finish(p);
}
