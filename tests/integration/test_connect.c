/* Outbound connections (keel_conn_connect, keel_connect_cancel,
 * keel_conn_remote_host), keel_worker_offload and keel_timer_restart,
 * through the real binary: tests/modules/mod_connect.c takes commands on
 * a "connect_ctl" listener and opens connections to keel's own echo
 * listener in the same process. Every byte stays on 127.0.0.1 or ::1. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>

/* ---- helpers ------------------------------------------------------------- */

/* keel with the echo listener first (kh_port 0) and the ctl listener
 * second (kh_port 1), one worker, plus `extra` lines for [keel]. */
static kh_proc *start(const char *modules, const char *extra)
{
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "workers = 1\nmodules = %s\n"
             "listen = 127.0.0.1:0 echo\nlisten = 127.0.0.1:0 connect_ctl\n%s",
             modules, extra ? extra : "");
    return kh_start(conf, NULL, 2, 10000);
}

static int open_ctl(kh_proc *p)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 1));
    kh_assert(p, fd >= 0, "connect to the ctl listener: %s", strerror(errno));
    return fd;
}

/* Sends a command line and returns its answer without the line break. */
static const char *ask(kh_proc *p, int fd, const char *command)
{
    static char line[512];
    char out[512];
    snprintf(out, sizeof out, "%s\n", command);
    kh_assert(p, kh_send_str(fd, out) == 0, "send '%s'", command);
    kh_recv_line(fd, line, sizeof line, 10000);
    line[strcspn(line, "\n")] = '\0';
    return line;
}

/* The next answer line, without the line break ("" on timeout). */
static const char *next_line(int fd)
{
    static char line[512];
    kh_recv_line(fd, line, sizeof line, 10000);
    line[strcspn(line, "\n")] = '\0';
    return line;
}

static int listener_on_loopback(int backlog, unsigned *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
              listen(fd, backlog) == 0 && getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* A listener on 127.0.0.1 that never accepts and whose accept queue is
 * full, so that a connect to it neither succeeds nor fails: Linux drops a
 * SYN for a listener whose accept queue is full (tcp_conn_request's
 * sk_acceptq_is_full check), and the client keeps retransmitting it.
 * Deterministic and local, unlike a non-routable address (whose packets
 * would leave the machine). With backlog 0 one connection fills the
 * queue; we connect until one does not complete within 300 ms, which is
 * the proof that the queue is full. fillers[] keeps the queued ones. */
struct full_listener {
    int fd;
    unsigned port;
    int fillers[8];
    int nfillers;
};

static void fill_listener(struct full_listener *fl)
{
    fl->fd = listener_on_loopback(0, &fl->port);
    fl->nfillers = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)fl->port)};
    for (;;) {
        cr_assert(fl->nfillers < 8, "the listener's accept queue never filled up");
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        cr_assert(fd >= 0);
        int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
        cr_assert(rc == 0 || errno == EINPROGRESS, "connect: %s", strerror(errno));
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t elen = sizeof err;
        if (rc != 0 && poll(&pfd, 1, 300) == 0) {
            close(fd); /* left in SYN-SENT: the queue is full */
            return;
        }
        cr_assert(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0,
                  "filling connect failed: %s", strerror(err));
        fl->fillers[fl->nfillers++] = fd;
    }
}

static void close_full_listener(struct full_listener *fl)
{
    for (int i = 0; i < fl->nfillers; i++)
        close(fl->fillers[i]);
    close(fl->fd);
}

/* Where needle starts in keel's stderr, or -1. */
static long log_at(kh_proc *p, const char *needle)
{
    const char *all = kh_stderr(p);
    const char *at = strstr(all, needle);
    return at ? (long)(at - all) : -1;
}

static void stop_keel(kh_proc *p)
{
    kh_signal(p, SIGTERM);
    int status = kh_wait_exit(p, 15000);
    kh_assert(p, status == 0, "exit status %d after SIGTERM", status);
}

/* SIGTERM while the ctl connection is still open, so that its
 * on_shutdown runs; then the test closes its side, which ends keel's
 * lingering close of it (which would otherwise wait up to 2 s for EOF). */
static void stop_keel_with_ctl(kh_proc *p, int fd)
{
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_log(p, "ctl on_shutdown", 10000), "the ctl connection's on_shutdown");
    close(fd);
    int status = kh_wait_exit(p, 15000);
    kh_assert(p, status == 0, "exit status %d after SIGTERM", status);
}

static int have_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* ---- connecting ----------------------------------------------------------- */

/* Starts keel with echo and the connect module, asks one question on the
 * control connection, expects `want` as the answer, and stops keel
 * cleanly. */
static void expect_answer(const char *cmd, const char *want)
{
    kh_proc *p = start("echo connect", NULL);
    int fd = open_ctl(p);
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, want) == 0, "%s: got '%s'", cmd, got);
    close(fd);
    stop_keel(p);
    kh_stop(p);
}

Test(connect, by_ip_literal, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("echo connect", NULL);
    unsigned echo = kh_port(p, 0);
    int fd = open_ctl(p);
    char cmd[128], want[256];

    snprintf(cmd, sizeof cmd, "CONNECT 127.0.0.1 %u", echo);
    snprintf(want, sizeof want, "OK host=127.0.0.1 peer=127.0.0.1:%u echo=ping 1", echo);
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, want) == 0, "got '%s', want '%s'", got, want);
    /* A second one on the same worker: attempts do not share state. */
    snprintf(want, sizeof want, "OK host=127.0.0.1 peer=127.0.0.1:%u echo=ping 2", echo);
    got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, want) == 0, "got '%s', want '%s'", got, want);

    /* keel_conn_remote_host tells an accepted connection apart. */
    got = ask(p, fd, "ACCEPTED_HOST");
    kh_assert(p, strcmp(got, "ACCEPTED_HOST null") == 0, "got '%s'", got);

    close(fd);
    stop_keel(p);
    kh_assert(p, log_at(p, "probe 1 closed: OK") >= 0, "the first probe closed in order");
    kh_stop(p);
}

Test(connect, by_name, .timeout = 30, .fini = kh_cleanup_all)
{
    /* "localhost" comes from /etc/hosts (nss "files"), not from DNS. It may
     * also name ::1, which nothing listens on here: then that address is
     * refused and 127.0.0.1, tried next, is the one that answers. */
    kh_proc *p = start("echo connect", NULL);
    unsigned echo = kh_port(p, 0);
    int fd = open_ctl(p);
    char cmd[128], want[256];
    snprintf(cmd, sizeof cmd, "CONNECT localhost %u", echo);
    snprintf(want, sizeof want, "OK host=localhost peer=127.0.0.1:%u echo=ping 1", echo);
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, want) == 0, "got '%s', want '%s'", got, want);
    close(fd);
    stop_keel(p);
    kh_stop(p);
}

Test(connect, by_ipv6_literal, .timeout = 30, .fini = kh_cleanup_all)
{
    if (!have_ipv6_loopback())
        cr_skip_test("this machine has no IPv6 loopback (::1)");
    char conf[1024];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "workers = 1\nmodules = echo connect\n"
             "listen = [::1]:0 echo\nlisten = 127.0.0.1:0 connect_ctl\n");
    kh_proc *p = kh_start(conf, NULL, 2, 10000);
    unsigned echo = kh_port(p, 0);
    int fd = open_ctl(p);
    char cmd[128], want[256];
    snprintf(cmd, sizeof cmd, "CONNECT ::1 %u", echo);
    snprintf(want, sizeof want, "OK host=::1 peer=[::1]:%u echo=ping 1", echo);
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, want) == 0, "got '%s', want '%s'", got, want);
    close(fd);
    stop_keel(p);
    kh_stop(p);
}

Test(connect, through_a_transport, .timeout = 30, .fini = kh_cleanup_all)
{
    /* The echo listener speaks rot13 (tests/modules/mod_rot13.c): the
     * probe's "ping 1" only comes back as such if the outbound side
     * encodes and decodes through the same transport. */
    kh_proc *p = start("echo rot13 connect", "listen = 127.0.0.1:0 echo rot13\n");
    unsigned rot13_echo = kh_port(p, 2);
    int fd = open_ctl(p);
    char cmd[128], want[256];
    snprintf(cmd, sizeof cmd, "CONNECT 127.0.0.1 %u 0 rot13", rot13_echo);
    snprintf(want, sizeof want, "OK host=127.0.0.1 peer=127.0.0.1:%u echo=ping 1", rot13_echo);
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, want) == 0, "got '%s', want '%s'", got, want);
    close(fd);
    stop_keel(p);
    kh_stop(p);
}

Test(connect, refused_by_the_transport, .timeout = 30, .fini = kh_cleanup_all)
{
    /* mod_connect's "refuser" transport fails its on_open: the protocol's
     * on_open never runs, so on_error must, once. */
    kh_proc *p = start("echo connect", NULL);
    int fd = open_ctl(p);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "CONNECT 127.0.0.1 %u 0 refuser", kh_port(p, 0));
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, "ERR IO") == 0, "got '%s'", got);
    got = ask(p, fd, "PING");
    kh_assert(p, strcmp(got, "PONG") == 0, "a second answer came: '%s'", got);
    close(fd);
    stop_keel(p);
    kh_stop(p);
}

Test(connect, refused, .timeout = 30, .fini = kh_cleanup_all)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "CONNECT 127.0.0.1 %u", kh_free_port());
    expect_answer(cmd, "ERR REFUSED");
}

Test(connect, unreachable_is_reported_later, .timeout = 30, .fini = kh_cleanup_all)
{
    /* TCP to the limited broadcast address is refused by the kernel inside
     * connect(2) itself (ENETUNREACH; no packet is made): libuv returns
     * that from uv_tcp_connect, inside keel_conn_connect, and the answer
     * must still come later, from the loop (else " REENTERED"). */
    expect_answer("CONNECT 255.255.255.255 80", "ERR IO");
}

Test(connect, name_that_does_not_resolve, .timeout = 30, .fini = kh_cleanup_all)
{
    /* Under .invalid (RFC 6761), but that alone would not keep the query
     * local: glibc's stub resolver has no special case for .invalid and
     * would ask the configured name server, which may be off this
     * machine. A 64-octet label is longer than DNS allows (RFC 1035 2.3.4),
     * so the resolver gives up while building the query, before any
     * packet: getaddrinfo fails locally whatever the name servers. */
    char label[65];
    memset(label, 'a', 64);
    label[64] = '\0';
    char cmd[160];
    snprintf(cmd, sizeof cmd, "CONNECT %s.invalid 80", label);
    expect_answer(cmd, "ERR NOTFOUND");
}

/* keel_connect_error_detail (ABI 1.8): on_error learns the resolver's
 * reason and the address that refused, not only the status. */
static void expect_detail(const char *cmd, const char *want_answer, const char *want_detail)
{
    kh_proc *p = start("echo connect", NULL);
    int fd = open_ctl(p);
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, want_answer) == 0, "%s: got '%s'", cmd, got);
    kh_assert(p, kh_wait_log(p, want_detail, 10000), "%s: no '%s'", cmd, want_detail);
    close(fd);
    stop_keel(p);
    kh_stop(p);
}

Test(connect, error_detail_names_the_resolver_reason, .timeout = 30, .fini = kh_cleanup_all)
{
    /* The 64-octet label of name_that_does_not_resolve: no packet leaves. */
    char label[65], cmd[160], want[200];
    memset(label, 'a', 64);
    label[64] = '\0';
    snprintf(cmd, sizeof cmd, "CONNECT %s.invalid 80", label);
    snprintf(want, sizeof want, "probe 1 detail: resolving %s.invalid: ", label);
    expect_detail(cmd, "ERR NOTFOUND", want);
}

Test(connect, error_detail_names_the_refusing_address, .timeout = 30, .fini = kh_cleanup_all)
{
    unsigned port = kh_free_port();
    char cmd[64], want[160];
    snprintf(cmd, sizeof cmd, "CONNECT 127.0.0.1 %u", port);
    snprintf(want, sizeof want,
             "probe 1 detail: connecting to 127.0.0.1:%u: connection refused (ECONNREFUSED)\n",
             port);
    expect_detail(cmd, "ERR REFUSED", want);
}

Test(connect, timeout, .timeout = 60, .fini = kh_cleanup_all)
{
    struct full_listener fl;
    fill_listener(&fl);
    /* The server's connect_timeout applies when the options give none. */
    kh_proc *p = start("echo connect", "connect_timeout = 400ms\n");
    int fd = open_ctl(p);
    char cmd[128];

    snprintf(cmd, sizeof cmd, "CONNECT 127.0.0.1 %u 200", fl.port);
    long long t0 = kh_now_ms();
    const char *got = ask(p, fd, cmd);
    long long took = kh_now_ms() - t0;
    kh_assert(p, strcmp(got, "ERR TIMEOUT") == 0, "got '%s'", got);
    kh_assert(p, took >= 190 && took < 5000, "timed out after %lld ms for 200 ms", took);

    snprintf(cmd, sizeof cmd, "CONNECT 127.0.0.1 %u", fl.port);
    t0 = kh_now_ms();
    got = ask(p, fd, cmd);
    took = kh_now_ms() - t0;
    kh_assert(p, strcmp(got, "ERR TIMEOUT") == 0, "got '%s'", got);
    kh_assert(p, took >= 390 && took < 5000, "timed out after %lld ms for connect_timeout 400 ms",
              took);

    close(fd);
    stop_keel(p);
    close_full_listener(&fl);
    kh_stop(p);
}

Test(connect, invalid_arguments, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("echo connect", NULL);
    int fd = open_ctl(p);
    const char *got = ask(p, fd, "INVALID");
    kh_assert(p, strcmp(got, "INVALID ok") == 0, "got '%s'", got);
    close(fd);
    stop_keel(p);
    kh_assert(p, log_at(p, "callback ran") < 0, "a refused call called back");
    kh_stop(p);
}

Test(connect, cancel, .timeout = 60, .fini = kh_cleanup_all)
{
    /* Each CANCEL starts an attempt, cancels it at once, and starts a
     * sentinel to the same place: by the sentinel's answer the cancelled
     * one would have had its callback. Cancelled while connecting (an IP
     * literal), while resolving (a name), and while the connect hangs. */
    struct full_listener fl;
    fill_listener(&fl);
    kh_proc *p = start("echo connect", "connect_timeout = 300ms\n");
    unsigned echo = kh_port(p, 0);
    int fd = open_ctl(p);
    char cmd[128], want[256];
    const char *hosts[] = {"127.0.0.1", "localhost"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "CANCEL %s %u", hosts[i], echo);
        const char *got = ask(p, fd, cmd);
        kh_assert(p, strcmp(got, "CANCELLED") == 0, "%s: got '%s'", cmd, got);
        snprintf(want, sizeof want, "SENTINEL OK host=%s peer=127.0.0.1:%u echo=ping", hosts[i],
                 echo);
        got = next_line(fd);
        kh_assert(p, strncmp(got, want, strlen(want)) == 0, "%s: got '%s', want '%s...'", cmd, got,
                  want);
    }
    snprintf(cmd, sizeof cmd, "CANCEL 127.0.0.1 %u", fl.port);
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, "CANCELLED") == 0, "got '%s'", got);
    got = next_line(fd);
    kh_assert(p, strcmp(got, "SENTINEL ERR TIMEOUT") == 0, "got '%s'", got);

    close(fd);
    stop_keel(p);
    close_full_listener(&fl);
    kh_assert(p, log_at(p, "after cancel") < 0, "a cancelled attempt called back");
    kh_assert(p, log_at(p, "late_callbacks=0") >= 0, "no stop line with late_callbacks=0");
    kh_stop(p);
}

/* ---- stopping ---------------------------------------------------------------- */

Test(connect, shutdown_ends_an_attempt_in_flight, .timeout = 60, .fini = kh_cleanup_all)
{
    struct full_listener fl;
    fill_listener(&fl);
    kh_proc *p = start("echo connect", NULL);
    int fd = open_ctl(p);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "PENDING 127.0.0.1 %u 30000", fl.port);
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, "STARTED") == 0, "got '%s'", got);

    long long t0 = kh_now_ms();
    stop_keel_with_ctl(p, fd);
    long long took = kh_now_ms() - t0;
    kh_assert(p, took < 3000, "the stop waited %lld ms for a 30 s attempt", took);
    long error = log_at(p, "probe 1 error: SHUTDOWN\n");
    long stop = log_at(p, "connect: stop: ");
    kh_assert(p, error >= 0, "the attempt did not end with SHUTDOWN");
    kh_assert(p, stop > error, "the module stopped before the attempt ended");
    /* Once stopping, new attempts, offloads and timer restarts are refused
     * (the latter two only once the modules stop). */
    kh_assert(p, log_at(p, "ctl on_shutdown: connect=SHUTDOWN") >= 0,
              "a connect while stopping was not refused");
    kh_assert(p,
              log_at(p, "stop: offload=SHUTDOWN timer_restart=SHUTDOWN connect=SHUTDOWN "
                        "late_callbacks=0") >= 0,
              "calls from stop() were not refused");
    close_full_listener(&fl);
    kh_stop(p);
}

Test(connect, outbound_connections_join_the_graceful_shutdown, .timeout = 60,
     .fini = kh_cleanup_all)
{
    /* probe 1 (to the echo listener) closes when on_shutdown asks; probe 2
     * (to a socket of the test's own, which never answers) ignores it and
     * is aborted at the shutdown deadline. The module stops only after
     * both: outbound connections count in the worker's connections. */
    unsigned silent_port;
    int silent = listener_on_loopback(8, &silent_port);
    kh_proc *p = start("echo connect", "shutdown_timeout = 500ms\n");
    unsigned echo = kh_port(p, 0);
    int fd = open_ctl(p);
    char cmd[128], want[256];
    snprintf(cmd, sizeof cmd, "HOLD 127.0.0.1 %u", echo);
    snprintf(want, sizeof want, "OK host=127.0.0.1 peer=127.0.0.1:%u echo=ping 1", echo);
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, want) == 0, "got '%s', want '%s'", got, want);
    snprintf(cmd, sizeof cmd, "STUBBORN 127.0.0.1 %u", silent_port);
    got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, "HELD") == 0, "got '%s'", got);
    close(fd); /* only the outbound connections are left to wait for */

    long long t0 = kh_now_ms();
    stop_keel(p);
    long long took = kh_now_ms() - t0;
    kh_assert(p, took >= 450, "keel stopped after %lld ms, before the 500 ms deadline", took);
    long stop = log_at(p, "connect: stop: ");
    long shut1 = log_at(p, "probe 1 on_shutdown"), closed1 = log_at(p, "probe 1 closed: OK");
    long shut2 = log_at(p, "probe 2 on_shutdown"), closed2 = log_at(p, "probe 2 closed: SHUTDOWN");
    kh_assert(p, shut1 >= 0 && shut2 >= 0, "on_shutdown was not called for both");
    kh_assert(p, closed1 > shut1, "probe 1 did not close in order after on_shutdown");
    kh_assert(p, closed2 > shut2, "probe 2 was not aborted at the deadline");
    kh_assert(p, stop > closed1 && stop > closed2, "the module stopped before its connections");
    close(silent);
    kh_stop(p);
}

/* ---- offload ----------------------------------------------------------------- */

Test(offload, done_runs_on_the_worker_thread, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("echo connect", NULL);
    int fd = open_ctl(p);
    const char *got = ask(p, fd, "OFFLOAD 20");
    kh_assert(p, strcmp(got, "OFFLOADED status=OK worker_thread=yes pool_thread=yes") == 0,
              "got '%s'", got);
    close(fd);
    stop_keel(p);
    kh_stop(p);
}

Test(offload, running_work_finishes_before_the_module_stops, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start("echo connect", NULL);
    int fd = open_ctl(p);
    const char *got = ask(p, fd, "OFFLOAD_BG 1000");
    kh_assert(p, strcmp(got, "QUEUED") == 0, "got '%s'", got);
    kh_assert(p, kh_wait_log(p, "offload work started", 10000), "the work never started");
    close(fd); /* no connection left: only the offload holds the stop */
    stop_keel(p);
    long finished = log_at(p, "offload work finished");
    long done = log_at(p, "offload done: SHUTDOWN on the worker thread: yes");
    long stop = log_at(p, "connect: stop: offload=SHUTDOWN");
    kh_assert(p, finished >= 0 && done > finished, "done did not follow the work");
    kh_assert(p, stop > done, "the module stopped before done ran");
    kh_stop(p);
}

/* ---- timer restart ------------------------------------------------------------ */

Test(timer, restart_inside_its_callback, .timeout = 30, .fini = kh_cleanup_all)
{
    expect_answer("TIMER_IN_CB", "TIMER fired=2");
}

Test(timer, restart_a_fired_one_shot, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("echo connect", NULL);
    int fd = open_ctl(p);
    const char *got = ask(p, fd, "TIMER_ONESHOT");
    kh_assert(p, strcmp(got, "TIMER fired=1") == 0, "got '%s'", got);
    got = ask(p, fd, "TIMER_AGAIN");
    kh_assert(p, strcmp(got, "TIMER fired=2") == 0, "got '%s'", got);
    /* Nothing else came: a one-shot fires once per (re)start. */
    got = ask(p, fd, "PING");
    kh_assert(p, strcmp(got, "PONG") == 0, "got '%s'", got);
    close(fd);
    stop_keel(p);
    kh_stop(p);
}

Test(timer, restart_pushes_a_pending_deadline_back, .timeout = 30, .fini = kh_cleanup_all)
{
    expect_answer("TIMER_PUSHBACK", "TIMER order=BA");
}

/* A transport that opens the protocol itself (ABI 1.4): the probe opens
 * once the peer's first line says so (the echo listener's greeting is that
 * line), and a connection that ends before then still answers, once, with
 * on_error. tests/modules/mod_rot13.c has the "gate" transport. */
Test(connect, through_a_transport_that_defers, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("echo rot13 frozen connect",
                       "listen = 127.0.0.1:0 frozen gate\n[echo]\ngreeting = open -\n");
    int fd = open_ctl(p);
    char cmd[128], want[256];
    snprintf(cmd, sizeof cmd, "CONNECT 127.0.0.1 %u 0 gate", kh_port(p, 0));
    snprintf(want, sizeof want, "OK host=127.0.0.1 peer=127.0.0.1:%u echo=ping 1", kh_port(p, 0));
    const char *got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, want) == 0, "got '%s', want '%s'", got, want);
    /* Both ends wait for a line that never comes: the listener's side
     * times out after 1 s and closes, and the outbound side, never
     * opened, reports it. */
    snprintf(cmd, sizeof cmd, "CONNECT 127.0.0.1 %u 0 gate", kh_port(p, 2));
    got = ask(p, fd, cmd);
    kh_assert(p, strcmp(got, "ERR IO") == 0, "got '%s'", got);
    got = ask(p, fd, "PING");
    kh_assert(p, strcmp(got, "PONG") == 0, "a second answer came: '%s'", got);
    close(fd);
    stop_keel(p);
    kh_stop(p);
}
