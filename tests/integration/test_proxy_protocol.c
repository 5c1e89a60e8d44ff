/* The PROXY protocol preamble (listen ... proxy_protocol=on): headers of
 * both versions written by hand, whole and byte by byte; the address keel
 * reports (tests/modules/mod_peer.c says it: "peer ADDRESS\n", then echoes)
 * and the access log's; what is refused (malformed, oversized, missing,
 * late, from a source not in proxy_from); a transport (rot13) behind the
 * header; and HAProxy itself in front with send-proxy and send-proxy-v2. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Listeners, in order: 0 PROXY from loopback, 1 PROXY from 10/8 and
 * 192.168/16 only, 2 PROXY then rot13, 3 plain. */
#define CONF                                                                                       \
    "[keel]\n" KH_MODULE_PATH "workers = 1\nmodules = peer rot13\n"                                \
    "proxy_from = 127.0.0.0/8 ::1\nproxy_timeout = 400ms\n"                                        \
    "listen = 127.0.0.1:0 peer proxy_protocol=on\n"                                                \
    "listen = 127.0.0.1:0 peer proxy_protocol=on proxy_from=10.0.0.0/8,192.168.0.0/16\n"           \
    "listen = 127.0.0.1:0 peer rot13 proxy_protocol=on\n"                                          \
    "listen = 127.0.0.1:0 peer\n"

static const char v2_sig[12] = "\r\n\r\n\0\r\nQUIT\n";

static size_t v2(char *out, uint8_t ver_cmd, uint8_t fam, const void *body, size_t len)
{
    memcpy(out, v2_sig, 12);
    out[12] = (char)ver_cmd;
    out[13] = (char)fam;
    out[14] = (char)(len >> 8);
    out[15] = (char)(len & 0xff);
    if (len)
        memcpy(out + 16, body, len);
    return 16 + len;
}

static unsigned local_port(int fd)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    cr_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    return ntohs(sa.sin_port);
}

/* Sends the header and "ping\n" (in one write, or byte by byte), then
 * expects "peer WANT\n" and the echo. want NULL: the socket's own. */
static void expect_peer(kh_proc *p, unsigned port, const char *hdr, size_t n, const char *want,
                        int split)
{
    int fd = kh_connect("127.0.0.1", port);
    kh_assert(p, fd >= 0, "connect");
    char msg[8192];
    cr_assert(n + 5 <= sizeof msg);
    memcpy(msg, hdr, n);
    memcpy(msg + n, "ping\n", 5);
    if (split) {
        /* A write a byte, paced rather than waited on: the header has 400 ms
         * in all (proxy_timeout), and a wait for each read (a look at the
         * kernel's socket table) took longer than that on a busy machine. */
        for (size_t i = 0; i < n + 5; i++) {
            kh_assert(p, kh_send(fd, msg + i, 1) == 0, "send byte %zu", i);
            kh_sleep_ms(1);
        }
    } else {
        kh_assert(p, kh_send(fd, msg, n + 5) == 0, "send");
    }
    char expected[160], buf[512];
    if (want != NULL)
        snprintf(expected, sizeof expected, "peer %s\n", want);
    else
        snprintf(expected, sizeof expected, "peer 127.0.0.1:%u\n", local_port(fd));
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, expected) == 0, "expected '%s', got '%s'", expected, buf);
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "ping\n") == 0, "the bytes after the header: '%s'", buf);
    close(fd);
}

/* Sends data and expects the connection closed without a byte back. */
static void expect_refused(kh_proc *p, unsigned port, const char *data, size_t n, const char *what)
{
    int fd = kh_connect("127.0.0.1", port);
    kh_assert(p, fd >= 0, "connect");
    kh_send(fd, data, n); /* may fail: keel may have closed already */
    char buf[256] = "";
    int eof = kh_expect_eof(fd, buf, sizeof buf, 5000);
    kh_assert(p, eof == 1, "%s: expected a close without data, got %d '%s'", what, eof, buf);
    close(fd);
}

Test(proxy_protocol, v1_headers, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(CONF, NULL, 4, 10000);
    unsigned port = kh_port(p, 0);
    const char *h4 = "PROXY TCP4 192.0.2.7 10.0.0.1 56324 443\r\n";
    expect_peer(p, port, h4, strlen(h4), "192.0.2.7:56324", 0);
    expect_peer(p, port, h4, strlen(h4), "192.0.2.7:56324", 1);
    const char *h6 = "PROXY TCP6 2001:db8::17 2001:db8::1 4000 80\r\n";
    expect_peer(p, port, h6, strlen(h6), "[2001:db8::17]:4000", 0);
    expect_peer(p, port, h6, strlen(h6), "[2001:db8::17]:4000", 1);
    const char *hu = "PROXY UNKNOWN\r\n";
    expect_peer(p, port, hu, strlen(hu), NULL, 0);
    const char *hu2 = "PROXY UNKNOWN ignored up to the CRLF\r\n";
    expect_peer(p, port, hu2, strlen(hu2), NULL, 1);
    /* Without PROXY on the line, no header is expected or read. */
    int fd = kh_connect("127.0.0.1", kh_port(p, 3));
    char buf[256], expected[64];
    kh_recv_line(fd, buf, sizeof buf, 5000);
    snprintf(expected, sizeof expected, "peer 127.0.0.1:%u\n", local_port(fd));
    kh_assert(p, strcmp(buf, expected) == 0, "plain listener: '%s'", buf);
    close(fd);
    kh_stop(p);
}

Test(proxy_protocol, v2_headers, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(CONF, NULL, 4, 10000);
    unsigned port = kh_port(p, 0);
    char h[512];
    /* TCP over IPv4, with TLVs after the addresses (skipped). */
    uint8_t b4[] = {198,  51,   100,  20,   127,  0,    0,   1,   0xc3,
                    0x50, 0,    80,   0x01, 0x00, 0x02, 'h', '2', /* PP2_TYPE_ALPN */
                    0x04, 0x00, 0x03, 0,    0,    0};             /* PP2_TYPE_NOOP */
    size_t n = v2(h, 0x21, 0x11, b4, sizeof b4);
    expect_peer(p, port, h, n, "198.51.100.20:50000", 0);
    expect_peer(p, port, h, n, "198.51.100.20:50000", 1);
    uint8_t b6[36] = {0x20, 0x01, 0x0d, 0xb8};
    b6[15] = 0x42;
    b6[32] = 0x01;
    b6[33] = 0x02;
    n = v2(h, 0x21, 0x21, b6, sizeof b6);
    expect_peer(p, port, h, n, "[2001:db8::42]:258", 0);
    expect_peer(p, port, h, n, "[2001:db8::42]:258", 1);
    /* LOCAL (a balancer's health check): the socket's own address, even
     * with an address block present. */
    n = v2(h, 0x20, 0x00, NULL, 0);
    expect_peer(p, port, h, n, NULL, 0);
    n = v2(h, 0x20, 0x11, b4, 12);
    expect_peer(p, port, h, n, NULL, 1);
    /* PROXY with AF_UNSPEC: also the socket's own. */
    n = v2(h, 0x21, 0x00, NULL, 0);
    expect_peer(p, port, h, n, NULL, 0);
    kh_stop(p);
}

Test(proxy_protocol, refused, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(CONF "log_level = debug\n", NULL, 4, 10000);
    unsigned port = kh_port(p, 0);
    const char *get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    expect_refused(p, port, get, strlen(get), "no header");
    const char *lf = "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n";
    expect_refused(p, port, lf, strlen(lf), "LF without CR");
    const char *fields = "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n";
    expect_refused(p, port, fields, strlen(fields), "a field missing");
    const char *fam = "PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n";
    expect_refused(p, port, fam, strlen(fam), "family mismatch");
    char longline[200];
    memset(longline, 'x', sizeof longline);
    memcpy(longline, "PROXY UNKNOWN ", 14);
    expect_refused(p, port, longline, sizeof longline, "v1 line past 107 bytes");
    char h[8192];
    uint8_t body[8000] = {0};
    size_t n = v2(h, 0x31, 0x11, body, 12);
    expect_refused(p, port, h, n, "v2 version 3");
    n = v2(h, 0x22, 0x11, body, 12);
    expect_refused(p, port, h, n, "v2 command 2");
    n = v2(h, 0x21, 0x11, body, 8);
    expect_refused(p, port, h, n, "v2 short address block");
    n = v2(h, 0x21, 0x11, body, 5000);
    expect_refused(p, port, h, n, "v2 over 4 KiB");
    /* From a source outside proxy_from: closed before reading anything,
     * even with a valid header. */
    const char *ok = "PROXY TCP4 10.1.1.1 10.0.0.1 1000 80\r\n";
    expect_refused(p, kh_port(p, 1), ok, strlen(ok), "source not allowed");
    kh_assert(p, kh_wait_log(p, "is not in proxy_from: closed", 5000), "the refusal is logged");
    kh_assert(p, kh_count_log(p, "invalid PROXY protocol header") >= 7, "invalid headers logged");
    kh_assert(p, kh_count_log(p, "oversized PROXY protocol header") == 1, "oversized logged");

    /* Too slow: the header's budget is proxy_timeout (400ms) in total,
     * not renewed by bytes that trickle in. */
    int fd = kh_connect("127.0.0.1", port);
    long long start = kh_now_ms();
    const char *slow = "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r";
    int closed = 0;
    for (size_t i = 0; i < strlen(slow) && !closed; i++) {
        if (kh_send(fd, slow + i, 1) != 0)
            closed = 1;
        kh_sleep_ms(40); /* the trickle's pace: past the 400 ms budget in 10 bytes */
    }
    if (!closed)
        kh_assert(p, kh_expect_eof(fd, NULL, 0, 5000) == 1, "slow header closed");
    long long took = kh_now_ms() - start;
    kh_assert(p, took < 3000, "closed after %lld ms", took);
    close(fd);
    fd = kh_connect("127.0.0.1", port);
    start = kh_now_ms();
    kh_assert(p, kh_expect_eof(fd, NULL, 0, 5000) == 1, "silent client closed");
    took = kh_now_ms() - start;
    kh_assert(p, took >= 300 && took < 3000, "silent client closed after %lld ms", took);
    close(fd);

    /* Still serving. */
    expect_peer(p, port, ok, strlen(ok), "10.1.1.1:1000", 0);
    kh_stop(p);
}

static void rot13(char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if ((c >= 'a' && c <= 'm') || (c >= 'A' && c <= 'M'))
            s[i] = (char)(c + 13);
        else if ((c >= 'n' && c <= 'z') || (c >= 'N' && c <= 'Z'))
            s[i] = (char)(c - 13);
    }
}

/* The header is below the transport: the bytes after it in the same
 * packet are the transport's, decoded before the protocol sees them. */
Test(proxy_protocol, transport_behind_header, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(CONF, NULL, 4, 10000);
    for (int split = 0; split < 2; split++) {
        int fd = kh_connect("127.0.0.1", kh_port(p, 2));
        char msg[128];
        int n = snprintf(msg, sizeof msg, "PROXY TCP4 192.0.2.99 10.0.0.1 1234 80\r\nhello\n");
        rot13(msg + n - 6, 6);
        if (split)
            for (int i = 0; i < n; i++)
                kh_send(fd, msg + i, 1);
        else
            kh_send(fd, msg, (size_t)n);
        char buf[256];
        kh_recv_line(fd, buf, sizeof buf, 5000);
        rot13(buf, strlen(buf));
        kh_assert(p, strcmp(buf, "peer 192.0.2.99:1234\n") == 0, "got '%s'", buf);
        kh_recv_line(fd, buf, sizeof buf, 5000);
        rot13(buf, strlen(buf));
        kh_assert(p, strcmp(buf, "hello\n") == 0, "got '%s'", buf);
        close(fd);
    }
    kh_stop(p);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* HTTP behind the header: the access log names the client of the header. */
Test(proxy_protocol, access_log_has_the_client, .timeout = 60, .fini = kh_cleanup_all)
{
    char dir[] = "/tmp/keel-pp-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char log[256], conf[1024];
    snprintf(log, sizeof log, "%s/access.log", dir);
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "workers = 1\nmodules = http1 hello accesslog\n"
             "listen = 127.0.0.1:0 http1 proxy_protocol=on proxy_from=127.0.0.1\n"
             "[accesslog]\npath = %s\n",
             log);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    const char *req = "PROXY TCP6 2001:db8::beef ::1 40000 80\r\n"
                      "GET /hello/pp HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    kh_assert(p, kh_send_str(fd, req) == 0, "send");
    char buf[4096];
    kh_assert(p, kh_expect_eof(fd, buf, sizeof buf, 5000) != 0, "response then close");
    kh_assert(p, strstr(buf, "HTTP/1.1 200") != NULL, "a 200: %s", buf);
    close(fd);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    char *text = slurp(log);
    kh_assert(p, text != NULL && strncmp(text, "2001:db8::beef - - [", 20) == 0,
              "the log names the header's client:\n%s", text ? text : "(none)");
    kh_stop(p);
    unlink(log);
    rmdir(dir);
}

static void expect_config_error(const char *listen_and_more, const char *needle)
{
    char conf[1024];
    snprintf(conf, sizeof conf, "[keel]\n" KH_MODULE_PATH "modules = peer\n%s", listen_and_more);
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn(conf, args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "keel -t exit status %d for:\n%s", status, listen_and_more);
    kh_assert(p, strstr(kh_stderr(p), needle) != NULL, "no '%s'", needle);
    kh_stop(p);
}

Test(proxy_protocol, config_errors, .timeout = 60, .fini = kh_cleanup_all)
{
    expect_config_error("listen = 127.0.0.1:0 peer proxy_protocol=on\n",
                        "keel.conf:4: [keel] listen: proxy_protocol=on needs the balancers'");
    expect_config_error("listen = 127.0.0.1:0 peer proxy_from=10.0.0.1\n",
                        "proxy_from without proxy_protocol=on");
    expect_config_error("listen = 127.0.0.1:0 peer proxy_protocol=maybe proxy_from=10.0.0.1\n",
                        "listen:");
    expect_config_error("proxy_from = 10.0.0.0/40\nlisten = 127.0.0.1:0 peer proxy_protocol=on\n",
                        "proxy_from: prefix length in '10.0.0.0/40' exceeds 32");
    expect_config_error("listen = 127.0.0.1:0 peer proxy_protocol=on proxy_from=10.0.0.1,nowhere\n",
                        "'nowhere' is not an IPv4 or IPv6 address");
    expect_config_error("proxy_timeout = 0\n", "proxy_timeout: must be more than 0");
}

/* ---- HAProxy in front -------------------------------------------------------- */

/* HAProxy relays to keel's listener 0 with send-proxy-v2 on port v2port
 * and with send-proxy (v1) on v1port; keel must see the test's own
 * socket (its port) as the client, not HAProxy's. */
Test(proxy_protocol, haproxy_in_front, .timeout = 90, .fini = kh_cleanup_all)
{
    const char *haproxy = "/usr/sbin/haproxy";
    if (access(haproxy, X_OK) != 0)
        cr_skip_test("haproxy is not installed");
    kh_proc *p = kh_start(CONF, NULL, 4, 10000);
    unsigned keel_port = kh_port(p, 0);
    unsigned v2port = kh_free_port(), v1port = kh_free_port();
    char dir[] = "/tmp/keel-haproxy-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cfg[1024], path[300];
    snprintf(cfg, sizeof cfg,
             "global\n  maxconn 100\n"
             "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 30s\n"
             "  timeout server 30s\n"
             "frontend v2\n  bind 127.0.0.1:%u\n  default_backend keel_v2\n"
             "frontend v1\n  bind 127.0.0.1:%u\n  default_backend keel_v1\n"
             "backend keel_v2\n  server k 127.0.0.1:%u send-proxy-v2\n"
             "backend keel_v1\n  server k 127.0.0.1:%u send-proxy\n",
             v2port, v1port, keel_port, keel_port);
    snprintf(path, sizeof path, "%s/haproxy.cfg", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f && fputs(cfg, f) >= 0 && fclose(f) == 0);
    const char *args[] = {"-db", "-f", path, NULL};
    kh_proc *h = kh_spawn_program(haproxy, NULL, args);
    kh_assert(h, kh_wait_accepts(v2port, 5000) && kh_wait_accepts(v1port, 5000),
              "haproxy did not start");
    unsigned ports[2] = {v2port, v1port};
    for (int round = 0; round < 4; round++) {
        int fd = kh_connect("127.0.0.1", ports[round % 2]);
        kh_assert(p, fd >= 0, "connect through haproxy");
        char buf[256], expected[64];
        snprintf(expected, sizeof expected, "peer 127.0.0.1:%u\n", local_port(fd));
        kh_recv_line(fd, buf, sizeof buf, 5000);
        kh_assert(p, strcmp(buf, expected) == 0, "%s: expected '%s', got '%s'",
                  round % 2 ? "send-proxy" : "send-proxy-v2", expected, buf);
        kh_assert(p, kh_send_str(fd, "through\n") == 0, "send");
        kh_recv_line(fd, buf, sizeof buf, 5000);
        kh_assert(p, strcmp(buf, "through\n") == 0, "echo through haproxy: '%s'", buf);
        close(fd);
    }
    kh_stop(h);
    kh_stop(p);
    unlink(path);
    rmdir(dir);
}
