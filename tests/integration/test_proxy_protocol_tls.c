/* The PROXY protocol header below TLS: HAProxy in front sends
 * send-proxy-v2, then opens TLS to keel's tls transport (its `ssl` server
 * option) and relays the test's plain TCP through it. keel must read the
 * header before the TLS handshake and report the test's own socket as the
 * client (tests/modules/mod_peer.c). Skipped without haproxy or the tls
 * module. */
#define _GNU_SOURCE
#include "test_http.h"

#include "tls_helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>

static unsigned local_port(int fd)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    cr_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    return ntohs(sa.sin_port);
}

Test(proxy_protocol_tls, haproxy_header_then_tls, .timeout = 90, .fini = tt_cleanup)
{
    const char *haproxy = "/usr/sbin/haproxy";
    if (access(haproxy, X_OK) != 0)
        cr_skip_test("haproxy is not installed");
    char mod[512];
    snprintf(mod, sizeof mod, "%s/mod_tls.so", KEEL_MODULE_DIR);
    if (access(mod, R_OK) != 0)
        cr_skip_test("the tls module is not built");
    tt_mkdir();
    tt_make_cert("lh", "localhost", "127.0.0.1", NULL);
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "workers = 1\nmodules = tls peer\n"
             "listen = 127.0.0.1:0 peer tls proxy_protocol=on proxy_from=127.0.0.1\n"
             "[tls]\ncert = %s %s\n",
             tt_path("lh.pem"), tt_path("lh.key"));
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    unsigned front = kh_free_port();
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "global\n  maxconn 100\n"
             "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 30s\n"
             "  timeout server 30s\n"
             "frontend f\n  bind 127.0.0.1:%u\n  default_backend keel\n"
             "backend keel\n  server k 127.0.0.1:%u send-proxy-v2 ssl verify none\n",
             front, kh_port(p, 0));
    const char *path = tt_path("haproxy.cfg");
    FILE *f = fopen(path, "w");
    cr_assert(f && fputs(cfg, f) >= 0 && fclose(f) == 0);
    const char *args[] = {"-db", "-f", path, NULL};
    kh_proc *h = kh_spawn_program(haproxy, NULL, args);
    kh_assert(h, kh_wait_accepts(front, 5000), "haproxy did not start");
    int fd = kh_connect("127.0.0.1", front);
    kh_assert(h, fd >= 0, "connect to haproxy");
    char buf[256], expected[64];
    snprintf(expected, sizeof expected, "peer 127.0.0.1:%u\n", local_port(fd));
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, expected) == 0, "expected '%s', got '%s'", expected, buf);
    kh_assert(p, kh_send_str(fd, "over tls\n") == 0, "send");
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "over tls\n") == 0, "echo: '%s'", buf);
    close(fd);
    kh_stop(h);
    kh_stop(p);
}
