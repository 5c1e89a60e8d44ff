/* The pubsub_redis module over TLS (`tls = on`): redis-server listens on
 * a TLS port only (Debian's build has TLS: --tls-port), with a throwaway
 * certificate for "localhost" made by keel-cert; keel's links go through
 * the tls module's transport, verified against [tls] ca with the address's
 * host as the server name, as the proxy's upstreams are.
 *
 * - Two instances publish and subscribe across Redis over TLS, with AUTH
 *   (a password never crosses in clear).
 * - Trusting another CA, or reaching the right certificate under a name it
 *   does not carry (127.0.0.1 instead of localhost): the link never comes
 *   up, the failures are logged and counted, local delivery goes on.
 * - tls = on without the tls module: keel refuses to start, naming the
 *   key.
 * Skipped where redis-server, the module or the tls module is missing. */
#define _GNU_SOURCE
#include "test_http.h"
#include "ws_test.h"

#include "test_pubsub_redis.h"
#include "tls_helpers.h"

#define TLS_MODULES "http1 tls websocket wstest stats pubsub_redis"

static void require_tls(void)
{
    PR_REQUIRE();
    char mod[512];
    snprintf(mod, sizeof mod, "%s/mod_tls.so", KEEL_MODULE_DIR);
    if (access(mod, R_OK) != 0)
        cr_skip_test("the tls module is not built (mbedTLS missing)");
    ht_run_result rr = tt_sh(10000, "%s --version", pr_redis_bin);
    int ok = rr.status == 0;
    ht_run_free(&rr);
    cr_assert(ok, "redis-server --version");
}

/* redis-server on a TLS port only, with cert/key, and AUTH. */
static kh_proc *start_tls_redis(unsigned port)
{
    char p[16];
    snprintf(p, sizeof p, "%u", port);
    const char *args[] = {"--port",
                          "0",
                          "--tls-port",
                          p,
                          "--tls-cert-file",
                          tt_path("lh.pem"),
                          "--tls-key-file",
                          tt_path("lh.key"),
                          "--tls-ca-cert-file",
                          tt_path("lh.pem"),
                          "--tls-auth-clients",
                          "no",
                          "--requirepass",
                          "pw",
                          NULL};
    return pr_start_redis_args(port, args);
}

static kh_proc *start_keel(const char *host, unsigned port, const char *ca)
{
    return pr_start_keel(TLS_MODULES, "", host, port, "tls = on\npassword = pw\n[tls]\nca = %s\n",
                         ca);
}

Test(pubsub_redis_tls, across_instances_over_tls, .timeout = 120, .fini = tt_cleanup)
{
    require_tls();
    tt_mkdir();
    tt_make_cert("lh", "localhost", NULL);
    tt_make_cert("other", "localhost", NULL); /* same name, another key: not trusted */
    unsigned rport = kh_free_port();
    kh_proc *redis = start_tls_redis(rport);

    /* This Redis has no plain port: a link up here went through TLS. */
    kh_proc *k1 = start_keel("localhost", rport, tt_path("lh.pem"));
    kh_proc *k2 = start_keel("localhost", rport, tt_path("lh.pem"));
    kh_assert(k1, kh_wait_log(k1, "(subscribe): connected (tls)", 10000), "k1 up over TLS");
    kh_assert(k2, kh_wait_log(k2, "(publish): connected (tls)", 10000), "k2 up over TLS");
    wsc *a = pr_subscriber(k1, "room"), *b = pr_subscriber(k2, "room");
    wsc *pub1 = wsc_open(kh_port(k1, 0), "/t/app", NULL);
    wsc *pub2 = wsc_open(kh_port(k2, 0), "/t/app", NULL);
    kh_assert(k2, pr_publish_until_received(pub1, b, "room", "k1-to-k2-tls", 10000),
              "k1 reaches k2 through Redis over TLS");
    kh_assert(k1, pr_publish_until_received(pub2, a, "room", "k2-to-k1-tls", 10000),
              "k2 reaches k1");
    kh_assert(k1, pr_metric(k1, "pubsub_redis_links_up") == 2, "both links up");

    /* Another CA: the handshake fails, the link never comes up. */
    kh_proc *k3 = start_keel("localhost", rport, tt_path("other.pem"));
    kh_assert(k3, kh_wait_log(k3, "cannot connect (tls)", 10000), "the failure is logged");
    kh_assert(k3, strstr(kh_stderr(k3), "certificate not accepted") != NULL,
              "because of the certificate (the tls module says so)");
    kh_assert(k3, pr_wait_metric(k3, "pubsub_redis_connect_failures_total", 3, 10000) >= 3,
              "and counted, attempt after attempt");
    kh_assert(k3, pr_metric(k3, "pubsub_redis_links_up") == 0, "never up");
    kh_assert(k3, pr_metric(k3, "pubsub_redis_auth_failures_total") == 0,
              "the password was never sent");
    wsc *c = pr_subscriber(k3, "room");
    wsc *pub3 = wsc_open(kh_port(k3, 0), "/t/app", NULL);
    wsc_send_text(pub3, "pub room k3-local");
    kh_assert(k3, pr_receives(c, "k3-local", 5000), "local delivery goes on");
    kh_assert(k1, !pr_receives(a, "k3-local", 300), "nothing crossed");

    /* The right CA, but the address names 127.0.0.1, which the
     * certificate (localhost only) does not carry (RFC 6125 6). */
    kh_proc *k4 = start_keel("127.0.0.1", rport, tt_path("lh.pem"));
    kh_assert(k4, kh_wait_log(k4, "cannot connect (tls)", 10000), "a name mismatch is refused");
    kh_assert(k4, pr_metric(k4, "pubsub_redis_links_up") == 0, "never up");

    wsc_close(a);
    wsc_close(b);
    wsc_close(c);
    wsc_close(pub1);
    wsc_close(pub2);
    wsc_close(pub3);
    tt_finish(k1);
    tt_finish(k3);
    kh_stop(k2);
    kh_stop(k4);
    kh_stop(redis);
}

Test(pubsub_redis_tls, tls_on_needs_the_tls_module, .timeout = 30, .fini = kh_cleanup_all)
{
    PR_REQUIRE();
    kh_proc *p = kh_spawn("[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n"
                          "modules = http1 websocket pubsub_redis\n" KH_MODULE_PATH
                          "[pubsub_redis]\naddress = localhost:6379\ntls = on\n",
                          NULL);
    kh_assert(p, kh_wait_exit(p, 10000) != 0, "keel refuses to start");
    kh_assert(p,
              strstr(kh_stderr(p), "[pubsub_redis] tls") != NULL &&
                  strstr(kh_stderr(p), "needs the tls module") != NULL,
              "and says why");
}
