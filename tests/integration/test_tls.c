/* The tls module as a server, through the real binary and real clients
 * (curl and openssl s_client, with deadlines): HTTPS, certificates chosen
 * by SNI, ALPN choosing the protocol, refused versions and renegotiation,
 * the handshake timeout, garbage instead of a ClientHello, a large body to
 * a slow reader with bounded memory, resumption across workers,
 * close_notify, a raw protocol (echo) over TLS, and start-up refusing bad
 * certificates and keys with one line naming the file. Every byte stays
 * on 127.0.0.1. */
#define _GNU_SOURCE
#include "test_http.h"
#include "tls_helpers.h"

static void setup_certs(void)
{
    tt_mkdir();
    tt_make_cert("lh", "localhost", "127.0.0.1", NULL);
}

/* http1 + hello over tls on one port. */
static kh_proc *start_https(int workers, const char *listen_extra, const char *tls_extra)
{
    return tt_start(1,
                    "listen = 127.0.0.1:0 http1 tls %s\nworkers = %d\nmodules = tls http1 hello\n"
                    "[tls]\ncert = %s %s\n%s",
                    listen_extra, workers, tt_path("lh.pem"), tt_path("lh.key"), tls_extra);
}

Test(tls, curl_gets_a_page_over_https, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = start_https(2, "", "");
    kh_assert(p, strstr(kh_stderr(p), "(http1, tls: TLS 1.") != NULL,
              "listener names its transport and its versions");
    for (int i = 0; i < 2; i++) {
        const char *host = i == 0 ? "localhost" : "127.0.0.1";
        ht_run_result rr = tt_sh(20000, "curl -sS --max-time 10 --cacert %s https://%s:%u/",
                                 tt_path("lh.pem"), host, kh_port(p, 0));
        kh_assert(p, rr.status == 0 && strcmp(rr.out, "Hello, World!") == 0, "curl to %s: %d '%s'",
                  host, rr.status, rr.out);
        ht_run_free(&rr);
    }
    /* Plain HTTP to the TLS port is told so, in HTTP, as nginx does. */
    ht_run_result rr = tt_sh(
        20000, "curl -sS --max-time 5 -w ' %%{http_code}' http://127.0.0.1:%u/", kh_port(p, 0));
    kh_assert(p,
              rr.status == 0 &&
                  strcmp(rr.out, "The plain HTTP request was sent to HTTPS port\n 400") == 0,
              "plain HTTP: %d '%s'", rr.status, rr.out);
    ht_run_free(&rr);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
}

/* Each listener's start-up line says which versions it offers; a config
 * that asks for TLS 1.3 from an mbedTLS without it (2.28) starts with a
 * warning naming the library, offers 1.2, and a TLS-1.3-only client
 * fails; min_version = 1.3 there stops start-up. With an mbedTLS that has
 * 1.3 (3.x, one worker), the line says 1.2-1.3 and the client succeeds. */
Test(tls, versions_in_the_start_up_line, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = start_https(1, "", "max_version = 1.3\n");
    const char *err = kh_stderr(p);
    int has13 = strstr(err, "(http1, tls: TLS 1.2-1.3)") != NULL;
    kh_assert(p,
              has13 || (strstr(err, "(http1, tls: TLS 1.2, no 1.3 in mbedTLS ") != NULL &&
                        strstr(err, "[tls] max_version = 1.3: this mbedTLS ") != NULL),
              "versions offered, or the warning: %s", err);
    ht_run_result rr = tt_sh(
        20000, "openssl s_client -connect 127.0.0.1:%u -tls1_3 -brief </dev/null", kh_port(p, 0));
    int ok = strstr(rr.out, "Protocol version: TLSv1.3") != NULL;
    kh_assert(p, ok == has13, "a TLS-1.3-only client %s: %s", has13 ? "connects" : "fails", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
    if (!has13) {
        char conf[300];
        snprintf(conf, sizeof conf, "%s/min13.conf", tt_dir);
        FILE *f = fopen(conf, "w");
        cr_assert(f != NULL &&
                  fprintf(f,
                          "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1 tls\n"
                          "modules = tls http1 hello\n[tls]\ncert = %s %s\n"
                          "min_version = 1.3\n",
                          tt_path("lh.pem"), tt_path("lh.key")) > 0 &&
                  fclose(f) == 0);
        rr = tt_sh(20000, "%s -t -c %s", KEEL_BIN, conf);
        cr_assert(rr.status == 1 && strstr(rr.out, "min_version: this mbedTLS") != NULL,
                  "min_version = 1.3 refused: %d %s", rr.status, rr.out);
        ht_run_free(&rr);
    }
}

/* The subject of the certificate served for this SNI ("" = none sent). */
static char *served_subject(kh_proc *p, const char *sni)
{
    static char subject[256];
    ht_run_result rr = tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u %s%s </dev/null",
                             kh_port(p, 0), *sni ? "-servername " : "-noservername", sni);
    const char *s = strstr(rr.out, "subject=");
    kh_assert(p, s != NULL, "no certificate for '%s': %s", sni, rr.out);
    size_t n = strcspn(s + 8, "\n");
    snprintf(subject, sizeof subject, "%.*s", (int)n, s + 8);
    ht_run_free(&rr);
    return subject;
}

Test(tls, sni_chooses_the_certificate, .timeout = 90, .fini = tt_cleanup)
{
    tt_mkdir();
    tt_make_cert("a", "a.test", NULL);
    tt_make_cert("b", "b.test", "*.wild.test", NULL);
    kh_proc *p = tt_start(1,
                          "listen = 127.0.0.1:0 echo tls\nworkers = 1\nmodules = tls echo\n"
                          "[tls]\ncert = %s %s\ncert = %s %s\n",
                          tt_path("a.pem"), tt_path("a.key"), tt_path("b.pem"), tt_path("b.key"));
    static const struct {
        const char *sni, *cn;
    } cases[] = {
        {"b.test", "CN = b.test"},       {"B.TEST", "CN = b.test"},
        {"x.wild.test", "CN = b.test"},  {"y.x.wild.test", "CN = a.test"}, /* one label only */
        {"wild.test", "CN = a.test"},    {"a.test", "CN = a.test"},
        {"unknown.test", "CN = a.test"}, {"", "CN = a.test"}, /* no SNI: the first */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *got = served_subject(p, cases[i].sni);
        kh_assert(p, strncmp(got, cases[i].cn, strlen(cases[i].cn)) == 0, "SNI '%s': got '%s'",
                  cases[i].sni, got);
    }
    tt_finish(p);
}

/* An RSA and an ECDSA certificate for one name: the suite decides which
 * is served (and RSA keys sign under their lock where mbedTLS has none). */
Test(tls, rsa_and_ecdsa_certificates_for_one_name, .timeout = 90, .fini = tt_cleanup)
{
    setup_certs();
    tt_make_rsa_cert("rsa", "localhost", "localhost");
    kh_proc *p =
        tt_start(1,
                 "listen = 127.0.0.1:0 http1 tls\nworkers = 2\nmodules = tls http1 hello\n"
                 "[tls]\ncert = %s %s\ncert = %s %s\n",
                 tt_path("lh.pem"), tt_path("lh.key"), tt_path("rsa.pem"), tt_path("rsa.key"));
    static const struct {
        const char *suite, *key;
    } cases[] = {
        {"ECDHE-RSA-AES128-GCM-SHA256", "Server public key is 2048 bit"},
        {"ECDHE-ECDSA-AES128-GCM-SHA256", "Server public key is 256 bit"},
    };
    for (int i = 0; i < 2; i++) {
        ht_run_result rr =
            tt_sh(20000,
                  "openssl s_client -connect 127.0.0.1:%u -servername localhost -tls1_2 "
                  "-cipher %s </dev/null",
                  kh_port(p, 0), cases[i].suite);
        kh_assert(p, strstr(rr.out, cases[i].key) && strstr(rr.out, cases[i].suite), "%s: %s",
                  cases[i].suite, rr.out);
        ht_run_free(&rr);
    }
    /* Many RSA handshakes at once on both workers. */
    ht_run_result rr =
        tt_sh(60000,
              "for i in $(seq 1 24); do curl -sS --max-time 20 --cacert %s --ciphers "
              "ECDHE-RSA-AES128-GCM-SHA256 --tls-max 1.2 https://localhost:%u/ -o /dev/null "
              "-w '%%{http_code}\\n' & done; wait",
              tt_path("rsa.pem"), kh_port(p, 0));
    int ok = 0;
    for (const char *q = rr.out; (q = strstr(q, "200")) != NULL; q += 3)
        ok++;
    kh_assert(p, ok == 24, "%d of 24: %s", ok, rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

Test(tls, alpn_chooses_the_protocol, .timeout = 90, .fini = tt_cleanup)
{
    setup_certs();
    /* fakeh2 registers "h2"; it answers "bad preface" to anything but the
     * HTTP/2 preface, where http1 would answer 400. */
    kh_proc *p = tt_start(1,
                          "listen = 127.0.0.1:0 http1 tls alpn=h2:http/1.1\nworkers = 1\n"
                          "modules = tls http1 hello fakeh2\n[tls]\ncert = %s %s\n",
                          tt_path("lh.pem"), tt_path("lh.key"));
    ht_run_result rr = tt_sh(20000,
                             "(printf 'hello\\n'; sleep 1) | openssl s_client -connect "
                             "127.0.0.1:%u -alpn h2 -ign_eof",
                             kh_port(p, 0));
    kh_assert(p, strstr(rr.out, "ALPN protocol: h2") && strstr(rr.out, "bad preface"),
              "h2 chosen and opened: %s", rr.out);
    ht_run_free(&rr);
    rr = tt_sh(20000,
               "(printf 'GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n'; sleep 1) "
               "| openssl s_client -connect 127.0.0.1:%u -alpn http/1.1 -ign_eof",
               kh_port(p, 0));
    kh_assert(p, strstr(rr.out, "ALPN protocol: http/1.1") && strstr(rr.out, "HTTP/1.1 200"),
              "http/1.1 chosen: %s", rr.out);
    ht_run_free(&rr);
    /* No ALPN from the client: the listener's protocol. */
    rr = tt_sh(20000, "curl -sS --max-time 10 --no-alpn --cacert %s https://localhost:%u/",
               tt_path("lh.pem"), kh_port(p, 0));
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "Hello, World!") == 0, "no ALPN: %s", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

Test(tls, alpn_offers_only_loaded_protocols, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = start_https(1, "alpn=h2,http/1.1", ""); /* commas, as the docs write it */
    /* No h2 module: a client that wants only h2 is refused
     * (no_application_protocol, RFC 7301 3.2), never handed to http1. */
    ht_run_result rr =
        tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u -alpn h2 </dev/null", kh_port(p, 0));
    kh_assert(p, strstr(rr.out, "ALPN protocol: h2") == NULL && strstr(rr.out, "alert"),
              "h2 refused: %s", rr.out);
    ht_run_free(&rr);
    rr = tt_sh(20000, "curl -sS --max-time 10 --cacert %s https://localhost:%u/ -v",
               tt_path("lh.pem"), kh_port(p, 0));
    kh_assert(p,
              strstr(rr.out, "ALPN: server accepted http/1.1") && strstr(rr.out, "Hello, World!"),
              "curl gets http/1.1: %s", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

/* Nothing configured: an http1 listener offers h2 (once loaded) and
 * http/1.1, as browsers expect; an echo listener negotiates nothing. */
Test(tls, http1_listener_offers_alpn_by_default, .timeout = 90, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p =
        tt_start(2,
                 "listen = 127.0.0.1:0 http1 tls\nlisten = 127.0.0.1:0 echo tls\n"
                 "workers = 1\nmodules = tls http1 hello echo fakeh2\n[tls]\ncert = %s %s\n",
                 tt_path("lh.pem"), tt_path("lh.key"));
    ht_run_result rr =
        tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u -alpn h2,http/1.1 </dev/null",
              kh_port(p, 0));
    kh_assert(p, strstr(rr.out, "ALPN protocol: h2") != NULL, "http1 listener: %s", rr.out);
    ht_run_free(&rr);
    rr = tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u -alpn http/1.1 </dev/null",
               kh_port(p, 1));
    kh_assert(p, strstr(rr.out, "No ALPN negotiated") != NULL, "echo listener: %s", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

Test(tls, old_versions_and_renegotiation_are_refused, .timeout = 90, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = start_https(1, "", "");
    /* The client is allowed to try them (SECLEVEL=0): the refusal is ours. */
    static const char *const old[] = {"-tls1", "-tls1_1"};
    for (int i = 0; i < 2; i++) {
        ht_run_result rr =
            tt_sh(20000,
                  "openssl s_client -connect 127.0.0.1:%u %s -cipher DEFAULT@SECLEVEL=0 "
                  "</dev/null",
                  kh_port(p, 0), old[i]);
        kh_assert(p, strstr(rr.out, "alert protocol version") != NULL, "%s: %s", old[i], rr.out);
        ht_run_free(&rr);
    }
    ht_run_result rr =
        tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u -tls1_2 </dev/null", kh_port(p, 0));
    kh_assert(p, strstr(rr.out, "Protocol  : TLSv1.2") != NULL, "TLS 1.2 works: %s", rr.out);
    ht_run_free(&rr);
    /* 'R' asks s_client to renegotiate (TLS 1.2; 1.3 has none). */
    rr = tt_sh(20000, "(printf 'R\\n'; sleep 2) | openssl s_client -connect 127.0.0.1:%u -tls1_2",
               kh_port(p, 0));
    kh_assert(p, strstr(rr.out, "RENEGOTIATING") && strstr(rr.out, "no renegotiation"),
              "renegotiation refused: %s", rr.out);
    ht_run_free(&rr);
    rr = tt_sh(20000, "curl -sS --max-time 10 --cacert %s https://localhost:%u/", tt_path("lh.pem"),
               kh_port(p, 0));
    kh_assert(p, rr.status == 0, "still serving: %s", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

/* Waits for the server to close: 1 on EOF/reset, 0 on timeout. Anything
 * it sends first (an alert) is read and dropped. */
static int closed_within(int fd, int ms)
{
    long long end = kh_now_ms() + ms;
    char buf[4096];
    while (kh_now_ms() < end) {
        int r = kh_expect_eof(fd, buf, sizeof buf, (int)(end - kh_now_ms()));
        if (r == 1)
            return 1;
        if (r == 0)
            return 0;
    }
    return 0;
}

Test(tls, stalled_handshake_is_cut_at_the_timeout, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = start_https(1, "", "handshake_timeout = 600ms\n");
    /* Silent, then a ClientHello record header that never gets its body. */
    for (int i = 0; i < 2; i++) {
        int fd = kh_connect("127.0.0.1", kh_port(p, 0));
        kh_assert(p, fd >= 0, "connect");
        if (i == 1)
            kh_assert(p, kh_send(fd, "\x16\x03\x01\x02\x00", 5) == 0, "send");
        long long t0 = kh_now_ms();
        kh_assert(p, closed_within(fd, 5000), "closed");
        long long took = kh_now_ms() - t0;
        kh_assert(p, took >= 450 && took < 3000, "closed after %lld ms", took);
        close(fd);
    }
    tt_finish(p);
}

/* Issue 23: the handshake's limit is a deadline, which bytes do not
 * renew. A ClientHello trickled a byte at a time used to keep the
 * connection as long as the trickle lasted. */
Test(tls, trickled_handshake_is_cut_at_the_deadline, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = start_https(1, "", "handshake_timeout = 1s\n");
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    long long t0 = kh_now_ms();
    kh_assert(p, kh_send(fd, "\x16\x03\x01\x02\x00\x01", 6) == 0, "send");
    int closed = 0;
    for (int i = 0; i < 60 && !closed; i++) {
        if (send(fd, "\x00", 1, MSG_NOSIGNAL) != 1 || closed_within(fd, 100))
            closed = 1;
    }
    long long took = kh_now_ms() - t0;
    kh_assert(p, closed, "still open after a %lld ms trickle", took);
    kh_assert(p, took >= 900 && took < 2500, "closed after %lld ms (the deadline is 1 s)", took);
    close(fd);
    tt_finish(p);
}

/* At max_connections, connections still in their handshake are closed,
 * oldest first, to admit new clients: fifty peers that open connections
 * and never finish a handshake cannot keep everyone else out. */
Test(tls, unfinished_handshakes_make_room, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p =
        tt_start(1,
                 "listen = 127.0.0.1:0 http1 tls\nworkers = 1\nmax_connections = 5\n"
                 "modules = tls http1 hello\n[tls]\ncert = %s %s\nhandshake_timeout = 30s\n",
                 tt_path("lh.pem"), tt_path("lh.key"));
    int fds[5];
    for (int i = 0; i < 5; i++) {
        fds[i] = kh_connect("127.0.0.1", kh_port(p, 0));
        kh_assert(p, fds[i] >= 0, "connect %d", i);
        kh_assert(p, kh_send(fds[i], "\x16\x03\x01\x02\x00\x01", 6) == 0, "send");
        /* read before the next one comes: fds[0] is the oldest */
        kh_assert(p, kh_wait_peer_read(fds[i], 5000), "keel did not read handshake %d", i);
    }
    for (int round = 0; round < 3; round++) {
        ht_run_result rr = tt_sh(20000, "curl -sS --max-time 10 --cacert %s https://localhost:%u/",
                                 tt_path("lh.pem"), kh_port(p, 0));
        kh_assert(p, rr.status == 0 && strcmp(rr.out, "Hello, World!") == 0,
                  "round %d over max_connections: %d '%s' %s", round, rr.status, rr.out, rr.err);
        ht_run_free(&rr);
    }
    /* The oldest unfinished handshakes made the room. */
    kh_assert(p, closed_within(fds[0], 3000), "the oldest unfinished handshake is still open");
    kh_assert(p, !closed_within(fds[4], 200), "the newest unfinished handshake was closed");
    for (int i = 0; i < 5; i++)
        close(fds[i]);
    tt_finish(p);
}

Test(tls, garbage_instead_of_a_client_hello_closes, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = start_https(1, "", "");
    static const char *const junk[] = {
        "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "\x16\x03\x03\x00\x05\x01\x00\x00\x01\xff",   /* a ClientHello too short to parse */
        "\x17\x03\x03\x00\x10xxxxxxxxxxxxxxxx",       /* application data before any handshake */
        "\x16\x03\x03\xff\xffxxxxxxxxxxxxxxxxxxxxxx", /* a record longer than allowed */
    };
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
        int fd = kh_connect("127.0.0.1", kh_port(p, 0));
        kh_assert(p, fd >= 0, "connect");
        size_t len = i == 0 ? strlen(junk[i]) : i == 1 ? 10 : i == 2 ? 21 : 27;
        kh_assert(p, kh_send(fd, junk[i], len) == 0, "send");
        kh_assert(p, closed_within(fd, 5000), "case %zu: closed", i);
        close(fd);
    }
    /* 256 KiB of noise in one go. */
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    char *noise = malloc(256 * 1024);
    for (size_t i = 0; i < 256 * 1024; i++)
        noise[i] = (char)(i * 131 + 7);
    (void)!send(fd, noise, 256 * 1024, MSG_NOSIGNAL);
    free(noise);
    kh_assert(p, closed_within(fd, 5000), "noise: closed");
    close(fd);
    ht_run_result rr = tt_sh(20000, "curl -sS --max-time 10 --cacert %s https://localhost:%u/",
                             tt_path("lh.pem"), kh_port(p, 0));
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "Hello, World!") == 0, "still serving: %s",
              rr.out);
    ht_run_free(&rr);
    kh_assert(p, !kh_exited(p) && strstr(kh_stderr(p), "crash") == NULL, "no crash");
    tt_finish(p);
}

/* The answer to a plain HTTP request on a TLS port, whole, then the
 * close; and a TLS client on the same port is unaffected. */
Test(tls, plain_http_on_the_tls_port_gets_400, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = start_https(1, "", "");
    static const char *const requests[] = {
        "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "POST /form HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc",
        "OPTIONS * HTTP/1.1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof requests / sizeof *requests; i++) {
        int fd = kh_connect("127.0.0.1", kh_port(p, 0));
        kh_assert(p, fd >= 0, "connect");
        kh_assert(p, kh_send_str(fd, requests[i]) == 0, "send");
        char buf[1024];
        /* Up to EOF: the whole answer, then the close. */
        size_t n = kh_recv_n(fd, buf, sizeof buf, sizeof buf - 1, 5000);
        int closed = kh_expect_eof(fd, NULL, 0, 1000) == 1;
        close(fd);
        kh_assert(p, n > 0 && closed, "case %zu: no answer then close (%zu bytes)", i, n);
        kh_assert(p, strncmp(buf, "HTTP/1.1 400 Bad Request\r\n", 26) == 0,
                  "case %zu: not a 400: %s", i, buf);
        kh_assert(p, strstr(buf, "\r\nConnection: close\r\n") != NULL, "no Connection: close");
        const char *body = strstr(buf, "\r\n\r\n");
        kh_assert(p,
                  body && strcmp(body + 4, "The plain HTTP request was sent to HTTPS port\n") == 0,
                  "case %zu: body '%s'", i, body ? body + 4 : "");
    }
    ht_run_result rr = tt_sh(20000, "curl -sS --max-time 10 --cacert %s https://localhost:%u/",
                             tt_path("lh.pem"), kh_port(p, 0));
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "Hello, World!") == 0, "HTTPS: %s", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

/* A 64 MiB file over TLS (mod_files: the core reads it in pieces). */
static kh_proc *start_files(const char *file)
{
    return tt_start(1,
                    "listen = 127.0.0.1:0 http1 tls\nworkers = 1\nmodules = tls http1 files\n"
                    "[files]\npath = %s\n[tls]\ncert = %s %s\n",
                    file, tt_path("lh.pem"), tt_path("lh.key"));
}

Test(tls, large_body_to_a_slow_reader_keeps_memory_bounded, .timeout = 120, .fini = tt_cleanup)
{
    setup_certs();
    const char *file = tt_path("big.bin");
    ht_run_result mk = tt_sh(30000, "head -c %d /dev/urandom > %s", 64 << 20, file);
    cr_assert(mk.status == 0, "make the file: %s", mk.out);
    ht_run_free(&mk);
    kh_proc *p = start_files(file);
    /* Whole and exact at full speed. */
    ht_run_result rr =
        tt_sh(60000,
              "curl -sS --max-time 50 --cacert %s https://localhost:%u/file -o %s "
              "&& cmp %s %s && echo SAME",
              tt_path("lh.pem"), kh_port(p, 0), tt_path("got.bin"), file, tt_path("got.bin"));
    kh_assert(p, strstr(rr.out, "SAME") != NULL, "download: %s", rr.out);
    ht_run_free(&rr);
    /* A reader at 1 MiB/s for 4 s: keel must not read the file ahead. */
    long base = tt_rss_kib(p->pid);
    rr = tt_sh(30000,
               "curl -sS --max-time 4 --limit-rate 1M --cacert %s https://localhost:%u/file "
               "-o /dev/null & c=$!; peak=0; for i in 1 2 3 4 5 6 7; do sleep 0.5; "
               "r=$(awk '/VmRSS/{print $2}' /proc/%d/status); [ \"$r\" -gt \"$peak\" ] && "
               "peak=$r; done; wait $c; echo PEAK=$peak",
               tt_path("lh.pem"), kh_port(p, 0), (int)p->pid);
    const char *pk = strstr(rr.out, "PEAK=");
    kh_assert(p, pk != NULL, "sampling: %s", rr.out);
    long peak = atol(pk + 5);
    kh_assert(p, peak > 0 && peak - base < 16 * 1024,
              "RSS grew from %ld to %ld KiB for a 64 MiB file to a slow reader", base, peak);
    ht_run_free(&rr);
    tt_finish(p);
}

Test(tls, large_upload_and_echo_are_exact, .timeout = 120, .fini = tt_cleanup)
{
    setup_certs();
    const char *file = tt_path("up.bin");
    ht_run_result mk = tt_sh(30000, "head -c %d /dev/urandom > %s", 6 << 20, file);
    cr_assert(mk.status == 0, "make the file: %s", mk.out);
    ht_run_free(&mk);
    kh_proc *p = tt_start(1,
                          "listen = 127.0.0.1:0 http1 tls\nworkers = 1\nmodules = tls http1 hello\n"
                          "[http1]\nmax_body = 8m\n[tls]\ncert = %s %s\n",
                          tt_path("lh.pem"), tt_path("lh.key"));
    /* Records in both directions, many full ones, on one connection, twice
     * (the second after the buffers were given back between bursts). */
    ht_run_result rr =
        tt_sh(60000,
              "curl -sS --max-time 50 --cacert %s --data-binary @%s "
              "-H 'Content-Type: application/octet-stream' "
              "https://localhost:%u/echo -o %s --next --cacert %s --data-binary @%s "
              "-H 'Content-Type: application/octet-stream' "
              "https://localhost:%u/echo -o %s && cmp %s %s && cmp %s %s && echo SAME",
              tt_path("lh.pem"), file, kh_port(p, 0), tt_path("back1.bin"), tt_path("lh.pem"), file,
              kh_port(p, 0), tt_path("back2.bin"), file, tt_path("back1.bin"), file,
              tt_path("back2.bin"));
    kh_assert(p, strstr(rr.out, "SAME") != NULL, "echo: %s", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

Test(tls, sessions_resume_on_any_worker, .timeout = 120, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = start_https(2, "", "");
    const char *sess = tt_path("session.pem");
    /* A pause before s_client leaves: a TLS 1.3 ticket follows the handshake. */
    ht_run_result rr = tt_sh(20000, "sleep 1 | openssl s_client -connect 127.0.0.1:%u -sess_out %s",
                             kh_port(p, 0), sess);
    kh_assert(p, strstr(rr.out, "New, TLSv1."), "first handshake is new: %s", rr.out);
    ht_run_free(&rr);
    /* Each connection comes from a new port: SO_REUSEPORT spreads them
     * over both workers; every one must resume (tickets shared). */
    for (int i = 0; i < 8; i++) {
        rr = tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u -sess_in %s </dev/null",
                   kh_port(p, 0), sess);
        kh_assert(p, strstr(rr.out, "Reused, TLSv1."), "attempt %d resumed: %s", i, rr.out);
        ht_run_free(&rr);
    }
    tt_finish(p);
}

/* One worker: the newest version the library has (TLS 1.3 with 3.x: a
 * ticket from NewSessionTicket, RFC 8446 4.6.1, and a PSK handshake). */
Test(tls, sessions_resume_with_the_newest_version, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = start_https(1, "", "");
    const char *sess = tt_path("session.pem");
    /* A pause before s_client leaves: a TLS 1.3 ticket follows the handshake. */
    ht_run_result rr = tt_sh(20000, "sleep 1 | openssl s_client -connect 127.0.0.1:%u -sess_out %s",
                             kh_port(p, 0), sess);
    kh_assert(p, strstr(rr.out, "New, TLSv1."), "first handshake is new: %s", rr.out);
    ht_run_free(&rr);
    for (int i = 0; i < 3; i++) {
        rr = tt_sh(20000, "sleep 1 | openssl s_client -connect 127.0.0.1:%u -sess_in %s",
                   kh_port(p, 0), sess);
        kh_assert(p, strstr(rr.out, "Reused, TLSv1."), "attempt %d resumed: %s", i, rr.out);
        ht_run_free(&rr);
    }
    tt_finish(p);
}

Test(tls, no_resumption_without_tickets, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = start_https(1, "", "session_tickets = off\n");
    const char *sess = tt_path("session.pem");
    /* TLS 1.2: the client keeps a session (its id) even without a ticket;
     * with no ticket and no server-side cache it cannot resume. (TLS 1.3
     * has sessions only through tickets: nothing to keep.) */
    ht_run_result rr =
        tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u -tls1_2 -sess_out %s </dev/null",
              kh_port(p, 0), sess);
    kh_assert(p, strstr(rr.out, "New, TLSv1.2"), "first handshake: %s", rr.out);
    ht_run_free(&rr);
    /* A server that sends no session id either (OpenSSL's, without a
     * cache) leaves the client nothing to keep, nor to resume. */
    if (access(sess, R_OK) != 0) {
        tt_finish(p);
        return;
    }
    rr = tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u -tls1_2 -sess_in %s </dev/null",
               kh_port(p, 0), sess);
    kh_assert(p, strstr(rr.out, "New, TLSv1.2") && !strstr(rr.out, "Reused"), "not resumed: %s",
              rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}

Test(tls, echo_over_tls_and_close_notify, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    kh_proc *p = tt_start(1,
                          "listen = 127.0.0.1:0 echo tls\nworkers = 1\nmodules = tls echo\n"
                          "[tls]\ncert = %s %s\n",
                          tt_path("lh.pem"), tt_path("lh.key"));
    /* The raw protocol works unchanged; a graceful stop closes with
     * close_notify before the FIN (RFC 8446 6.1). */
    ht_run_result rr =
        tt_sh(30000,
              "( (printf 'over tls\\n'; sleep 4) | openssl s_client -connect 127.0.0.1:%u -msg "
              "-CAfile %s -verify_hostname localhost ) & c=$!; sleep 1.5; kill -TERM %d; wait $c",
              kh_port(p, 0), tt_path("lh.pem"), (int)p->pid);
    kh_assert(p, strstr(rr.out, "Verify return code: 0 (ok)"), "verified: %s", rr.out);
    kh_assert(p, strstr(rr.out, "\nover tls\n"), "echoed: %s", rr.out);
    kh_assert(p,
              strstr(rr.out, "<<< TLS 1.2, Alert [length 0002], warning close_notify") ||
                  strstr(rr.out, "<<< TLS 1.3, Alert [length 0002], warning close_notify"),
              "close_notify received: %s", rr.out);
    ht_run_free(&rr);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
}

/* ---- start-up refuses what it cannot serve -------------------------------- */

static void expect_refused(const char *tls, const char *needle)
{
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 echo tls\nmodules = tls echo\n"
             "[tls]\n%s\n",
             tls);
    for (int check = 0; check < 2; check++) {
        const char *args[] = {"-t", NULL};
        kh_proc *p = kh_spawn(conf, check ? args : NULL);
        kh_assert(p, kh_wait_exit(p, 10000) == 1, "exit 1");
        const char *err = kh_stderr(p);
        const char *hit = strstr(err, needle);
        kh_assert(p, hit != NULL, "message names '%s'", needle);
        /* One line says it (the core may add its own summary line). */
        const char *bol = hit;
        while (bol > err && bol[-1] != '\n')
            bol--;
        kh_assert(p, strstr(bol, "[tls] cert") != NULL, "names the key: %.*s",
                  (int)strcspn(bol, "\n"), bol);
        kh_stop(p);
    }
}

Test(tls, bad_certificates_stop_start_up, .timeout = 90, .fini = tt_cleanup)
{
    tt_mkdir();
    tt_make_cert("a", "a.test", NULL);
    tt_make_cert("b", "b.test", NULL);
    char tls[1024];
    snprintf(tls, sizeof tls, "cert = %s %s", tt_path("missing.pem"), tt_path("a.key"));
    expect_refused(tls, "cannot read " /* ... */);
    expect_refused(tls, "missing.pem");
    snprintf(tls, sizeof tls, "cert = %s %s", tt_path("a.pem"), tt_path("nokey.key"));
    expect_refused(tls, "nokey.key");
    snprintf(tls, sizeof tls, "cert = %s %s", tt_path("a.pem"), tt_path("b.key"));
    expect_refused(tls, "does not match the key in");
    snprintf(tls, sizeof tls, "cert = %s %s", tt_path("a.key"), tt_path("a.key"));
    expect_refused(tls, "not a certificate chain");
    snprintf(tls, sizeof tls, "cert = %s %s", tt_path("a.pem"), tt_path("a.pem"));
    expect_refused(tls, "not a usable private key");
    snprintf(tls, sizeof tls, "cert = %s", tt_path("a.pem"));
    expect_refused(tls, "expected CHAIN.pem KEY.pem");
}

Test(tls, encrypted_key_with_its_passphrase, .timeout = 60, .fini = tt_cleanup)
{
    setup_certs();
    /* The traditional PEM encryption (DEK-Info): every mbedTLS reads it;
     * 2.28 lacks PKCS#8's PBKDF2 with HMAC-SHA256, OpenSSL 3's default. */
    ht_run_result rr =
        tt_sh(20000, "openssl pkey -in %s -aes256 -traditional -passout pass:s3cret -out %s",
              tt_path("lh.key"), tt_path("enc.key"));
    cr_assert(rr.status == 0, "openssl pkey: %s", rr.out);
    ht_run_free(&rr);
    char tls[1024];
    snprintf(tls, sizeof tls, "cert = %s %s passphrase=wrong", tt_path("lh.pem"),
             tt_path("enc.key"));
    expect_refused(tls, "enc.key: not a usable private key");
    kh_proc *p = tt_start(1,
                          "listen = 127.0.0.1:0 http1 tls\nworkers = 1\nmodules = tls http1 hello\n"
                          "[tls]\ncert = %s %s passphrase=s3cret\n",
                          tt_path("lh.pem"), tt_path("enc.key"));
    rr = tt_sh(20000, "curl -sS --max-time 10 --cacert %s https://localhost:%u/", tt_path("lh.pem"),
               kh_port(p, 0));
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "Hello, World!") == 0, "served: %s", rr.out);
    ht_run_free(&rr);
    tt_finish(p);
}
