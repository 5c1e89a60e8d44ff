/* The tls module as a client (keel_conn_connect with transport "tls") and
 * the "tls" service (keel/tls.h), through tests/modules/mod_tlsclient.c:
 * an outbound connection to keel's own TLS echo listener verifies the
 * certificate and the name (ok), a wrong name or an untrusted chain is
 * refused before the protocol opens (the connect's on_error), and a
 * client certificate checked against client_ca is what handlers see. */
#define _GNU_SOURCE
#include "test_http.h"
#include "tls_helpers.h"

/* Sends a command line on a ctl connection and returns the answer line. */
static const char *ask(kh_proc *p, int fd, const char *command)
{
    static char line[1024];
    char out[512];
    snprintf(out, sizeof out, "%s\n", command);
    kh_assert(p, kh_send_str(fd, out) == 0, "send '%s'", command);
    kh_recv_line(fd, line, sizeof line, 15000);
    line[strcspn(line, "\n")] = '\0';
    return line;
}

/* Two certificates: "other.test" (the default) and "localhost"; ca is
 * both, or what ca_file names. Listeners: echo over tls (0), ctl (1). */
static kh_proc *start_pair(const char *ca_file)
{
    ht_run_result rr = tt_sh(10000, "cat %s %s > %s", tt_path("other.pem"), tt_path("lh.pem"),
                             tt_path("bundle.pem"));
    cr_assert(rr.status == 0, "bundle: %s", rr.out);
    ht_run_free(&rr);
    return tt_start(2,
                    "listen = 127.0.0.1:0 echo tls\nlisten = 127.0.0.1:0 tlsclient_ctl\n"
                    "workers = 1\nmodules = tls echo tlsclient\n"
                    "[tls]\ncert = %s %s\ncert = %s %s\nca = %s\n",
                    tt_path("other.pem"), tt_path("other.key"), tt_path("lh.pem"),
                    tt_path("lh.key"), ca_file ? ca_file : tt_path("bundle.pem"));
}

static void make_certs(void)
{
    tt_mkdir();
    tt_make_cert("other", "other.test", NULL);
    tt_make_cert("lh", "localhost", NULL);
    tt_make_cert("stranger", "localhost", NULL); /* same name, not in the bundle */
}

Test(tls_client, verified_connection_reports_its_peer, .timeout = 60, .fini = tt_cleanup)
{
    make_certs();
    kh_proc *p = start_pair(NULL);
    int fd = kh_connect("127.0.0.1", kh_port(p, 1));
    kh_assert(p, fd >= 0, "connect ctl");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "CONNECT localhost %u", kh_port(p, 0));
    const char *got = ask(p, fd, cmd);
    kh_assert(p,
              strncmp(got, "OK tls=1 version=TLSv1.", 23) == 0 &&
                  strstr(got, " name=localhost subject=CN=localhost, O=keel development echo=ping"),
              "got '%s'", got);
    /* The ctl connection is plain TCP: the service says so. */
    got = ask(p, fd, "SELF");
    kh_assert(p, strcmp(got, "SELF tls=0 version=- alpn=- sni=- subject=-") == 0, "got '%s'", got);
    close(fd);
    tt_finish(p);
}

Test(tls_client, wrong_name_is_refused_before_the_protocol, .timeout = 60, .fini = tt_cleanup)
{
    make_certs();
    kh_proc *p = start_pair(NULL);
    int fd = kh_connect("127.0.0.1", kh_port(p, 1));
    kh_assert(p, fd >= 0, "connect ctl");
    /* "127.0.0.1" is in no certificate: the default (other.test) is served
     * and does not carry the name. */
    char cmd[128];
    snprintf(cmd, sizeof cmd, "CONNECT 127.0.0.1 %u", kh_port(p, 0));
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, "ERR IO") == 0, "got '%s'", got);
    kh_assert(p, kh_wait_log(p, "127.0.0.1: certificate not accepted", 5000), "logged");
    /* The server side saw a failed handshake, the echo protocol nothing. */
    snprintf(cmd, sizeof cmd, "CONNECT localhost %u", kh_port(p, 0));
    got = ask(p, fd, cmd);
    kh_assert(p, strncmp(got, "OK tls=1", 8) == 0, "then a good one: '%s'", got);
    close(fd);
    tt_finish(p);
}

Test(tls_client, untrusted_chain_is_refused, .timeout = 60, .fini = tt_cleanup)
{
    make_certs();
    kh_proc *p = start_pair(tt_path("stranger.pem"));
    int fd = kh_connect("127.0.0.1", kh_port(p, 1));
    kh_assert(p, fd >= 0, "connect ctl");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "CONNECT localhost %u", kh_port(p, 0));
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, "ERR IO") == 0, "got '%s'", got);
    kh_assert(p, kh_wait_log(p, "localhost: certificate not accepted", 5000), "logged");
    close(fd);
    tt_finish(p);
}

/* tlsclient_ctl over tls with client certificates checked against
 * alice.pem; SELF shows what a handler would see. */
static kh_proc *start_client_auth(const char *mode)
{
    return tt_start(1,
                    "listen = 127.0.0.1:0 tlsclient_ctl tls\nworkers = 1\n"
                    "modules = tls tlsclient\n"
                    "[tls]\ncert = %s %s\nclient_ca = %s\nverify_client = %s\nca = none\n",
                    tt_path("lh.pem"), tt_path("lh.key"), tt_path("alice.pem"), mode);
}

static ht_run_result self_over_tls(kh_proc *p, const char *cert)
{
    char opts[600] = "";
    if (cert != NULL)
        snprintf(opts, sizeof opts, "-cert %s.pem -key %s.key", tt_path(cert), tt_path(cert));
    return tt_sh(20000,
                 "(printf 'SELF\\n'; sleep 1) | openssl s_client -connect 127.0.0.1:%u "
                 "-servername localhost -quiet -no_ign_eof %s",
                 kh_port(p, 0), opts);
}

Test(tls_client, client_certificate_subject_reaches_handlers, .timeout = 60, .fini = tt_cleanup)
{
    make_certs();
    tt_make_cert("alice", "alice", NULL);
    tt_make_cert("mallory", "alice", NULL); /* the same name, another key */
    kh_proc *p = start_client_auth("optional");
    ht_run_result rr = self_over_tls(p, "alice");
    kh_assert(p,
              strstr(rr.out, "SELF tls=1 version=TLSv1.") &&
                  strstr(rr.out, " sni=localhost subject=CN=alice, O=keel development"),
              "alice: %s", rr.out);
    ht_run_free(&rr);
    rr = self_over_tls(p, NULL);
    kh_assert(p, strstr(rr.out, " sni=localhost subject=-"), "no certificate: %s", rr.out);
    ht_run_free(&rr);
    rr = self_over_tls(p, "mallory");
    kh_assert(p, strstr(rr.out, " sni=localhost subject=-"), "unverified: %s", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

Test(tls_client, required_client_certificate, .timeout = 60, .fini = tt_cleanup)
{
    make_certs();
    tt_make_cert("alice", "alice", NULL);
    kh_proc *p = start_client_auth("required");
    ht_run_result rr = self_over_tls(p, NULL);
    kh_assert(p, strstr(rr.out, "SELF") == NULL, "served without a certificate: %s", rr.out);
    ht_run_free(&rr);
    rr = self_over_tls(p, "alice");
    kh_assert(p, strstr(rr.out, "subject=CN=alice"), "alice: %s", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}
