/* Unix domain sockets: `listen = unix:PATH` and `unix:@NAME` (curl
 * --unix-socket), the stale-file rule (a dead socket replaced, a live one
 * or any other file refused and left alone), mode/owner/group, the
 * peer's credentials (keel_request_peer_cred through tests/modules'
 * facts, and accesslog's $peer_uid/$peer_gid/$peer_pid), the file kept
 * across a reload under load and removed on a clean stop, and outbound:
 * the proxy to a Python upstream on a Unix socket, pubsub_redis to
 * redis-server on one (docs/configuration.md, "Unix domain sockets"). */
#define _GNU_SOURCE
#include "test_http.h"

#include "tls_helpers.h" /* tt_mkdir, tt_path: a private folder for the socket files */

#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

static pid_t successors[8];
static int nsuccessors;

static void unix_init(void)
{
    /* Room left in sun_path (108 bytes) for the file names below. */
    cr_assert(strlen(tt_mkdir()) < 80, "TMPDIR is too long for socket paths: %s", tt_dir);
}

static void unix_fini(void)
{
    for (int i = 0; i < nsuccessors; i++)
        kill(successors[i], SIGKILL);
    nsuccessors = 0;
    tt_cleanup();
}

#define in_dir tt_path

static int is_socket(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* ---- clients ------------------------------------------------------------------- */

static int unix_connect(const char *path, int abstract)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t len = strlen(path);
    memcpy(a.sun_path + (abstract ? 1 : 0), path, len);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, alen) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Sends a GET over the Unix socket at path and reads the whole answer
 * (the request says Connection: close) into buf. The bytes read. */
static size_t unix_get(const char *path, int abstract, const char *target, char *buf, size_t size)
{
    buf[0] = '\0';
    int fd = unix_connect(path, abstract);
    if (fd < 0)
        return 0;
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", target);
    size_t n = 0;
    if (kh_send_str(fd, req) == 0)
        n = kh_recv_n(fd, buf, size - 1, size - 1, 5000);
    buf[n] = '\0';
    close(fd);
    return n;
}

/* curl's answer (body, then "|CODE|HTTP-VERSION") over a Unix socket, or "" if curl
 * could not run. */
static char *curl_unix(const char *option, const char *path, const char *target)
{
    static char out[4096];
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "curl -s -m 5 %s '%s' -w '|%%{http_code}|%%{http_version}' 'http://localhost%s'",
             option, path, target);
    FILE *f = popen(cmd, "r");
    out[0] = '\0';
    if (f == NULL)
        return out;
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    pclose(f);
    return out;
}

static int have_curl(void)
{
    return system("curl --version >/dev/null 2>&1") == 0;
}

#define CONFIG_HEAD "[keel]\nworkers = 2\n" KH_MODULE_PATH

static char *config(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *config(const char *fmt, ...)
{
    static char text[4096];
    int n = snprintf(text, sizeof text, "%s", CONFIG_HEAD);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text + n, sizeof text - (size_t)n, fmt, ap);
    va_end(ap);
    return text;
}

/* ---- listening ------------------------------------------------------------------ */

Test(unix, curl_over_a_unix_socket_and_the_file_removed_on_stop, .timeout = 30, .init = unix_init,
     .fini = unix_fini)
{
    if (!have_curl())
        cr_skip_test("curl is not installed");
    const char *path = in_dir("http.sock");
    kh_proc *p =
        kh_start(config("listen = unix:%s http1\nmodules = http1 hello\n", path), NULL, 1, 10000);
    kh_assert(p, kh_count_log(p, "listening on unix:") == 1, "no 'listening on unix:' line");
    kh_assert(p, is_socket(path), "no socket at %s", path);
    for (int i = 0; i < 4; i++) {
        const char *got = curl_unix("--unix-socket", path, "/");
        kh_assert(p, strstr(got, "|200") != NULL && strstr(got, "Hello") != NULL,
                  "curl %d over the socket got: %s", i, got);
    }
    kh_signal(p, SIGTERM);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "keel exited with %d", status);
    kh_assert(p, access(path, F_OK) != 0, "the socket file outlived a clean stop");
}

Test(unix, h2_with_prior_knowledge_over_a_unix_socket, .timeout = 30, .init = unix_init,
     .fini = unix_fini)
{
    char mod[512];
    snprintf(mod, sizeof mod, "%s/mod_h2.so", KEEL_MODULE_DIR);
    if (!have_curl() || access(mod, R_OK) != 0)
        cr_skip_test("curl or the h2 module is missing");
    const char *path = in_dir("h2.sock");
    kh_proc *p =
        kh_start(config("listen = unix:%s h2\nmodules = http1 h2 hello\n", path), NULL, 1, 10000);
    const char *got = curl_unix("--http2-prior-knowledge --unix-socket", path, "/");
    kh_assert(p, strstr(got, "|200|2") != NULL && strstr(got, "Hello") != NULL,
              "curl over h2 got: %s", got);
}

Test(unix, an_abstract_name, .timeout = 30, .init = unix_init, .fini = unix_fini)
{
    char name[64];
    snprintf(name, sizeof name, "keel-test-%d", (int)getpid());
    kh_proc *p =
        kh_start(config("listen = unix:@%s http1\nmodules = http1 hello\n", name), NULL, 1, 10000);
    char line[128];
    snprintf(line, sizeof line, "listening on unix:@%s (http1)", name);
    kh_assert(p, kh_count_log(p, line) == 1, "no '%s' line", line);
    char buf[2048];
    unix_get(name, 1, "/", buf, sizeof buf);
    kh_assert(p, strncmp(buf, "HTTP/1.1 200", 12) == 0, "over @%s: %.80s", name, buf);
    if (have_curl()) {
        const char *got = curl_unix("--abstract-unix-socket", name, "/");
        kh_assert(p, strstr(got, "|200") != NULL, "curl over @%s got: %s", name, got);
    }
    /* An abstract name has no file: mode= is refused for it. */
    kh_expect_refused(config("listen = unix:@%s http1 mode=0600\nmodules = http1\n", name), 4,
                      "applies to a unix:PATH listener's socket file only", "mode on @name");
}

/* A socket bound to path, listening or not (a socket file nobody listens
 * on is what a keel that was killed leaves). */
static int bound_socket(const char *path, int listening)
{
    /* Not close-on-exec: the activation test passes it to keel. */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                  (!listening || listen(fd, 16) == 0),
              "socket at %s: %s", path, strerror(errno));
    return fd;
}

Test(unix, a_stale_socket_file_is_replaced, .timeout = 30, .init = unix_init, .fini = unix_fini)
{
    const char *path = in_dir("stale.sock");
    close(bound_socket(path, 0));
    cr_assert(unix_connect(path, 0) < 0 && errno == ECONNREFUSED, "the stale socket is not dead");
    kh_proc *p =
        kh_start(config("listen = unix:%s http1\nmodules = http1 hello\n", path), NULL, 1, 10000);
    kh_assert(p, is_socket(path), "no socket at %s", path);
    char buf[2048];
    unix_get(path, 0, "/", buf, sizeof buf);
    kh_assert(p, strncmp(buf, "HTTP/1.1 200", 12) == 0, "over the socket: %.80s", buf);
}

Test(unix, a_socket_in_use_is_refused_and_left_alone, .timeout = 30, .init = unix_init,
     .fini = unix_fini)
{
    const char *path = in_dir("busy.sock");
    int fd = bound_socket(path, 1);
    kh_proc *p = kh_spawn(config("listen = unix:%s http1\nmodules = http1 hello\n", path), NULL);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "keel exited with %d", status);
    kh_assert(p, strstr(kh_stderr(p), "is in use: another process listens on it") != NULL,
              "no reason given");
    /* Still ours: a client reaches this test's socket. */
    int c = unix_connect(path, 0);
    kh_assert(p, c >= 0, "the socket in use was taken away: %s", strerror(errno));
    close(c);
    close(fd);
}

Test(unix, a_regular_file_at_the_path_is_refused_untouched, .timeout = 30, .init = unix_init,
     .fini = unix_fini)
{
    const char *path = in_dir("precious");
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL);
    fputs("keep me\n", f);
    fclose(f);
    kh_proc *p = kh_spawn(config("listen = unix:%s http1\nmodules = http1 hello\n", path), NULL);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "keel exited with %d", status);
    kh_assert(p, strstr(kh_stderr(p), "exists and is not a socket: refusing to replace it") != NULL,
              "no reason given");
    char *text = kh_read_file(path);
    kh_assert(p, text != NULL && strcmp(text, "keep me\n") == 0, "the file changed: %s",
              text ? text : "(gone)");
    free(text);
}

Test(unix, mode_owner_and_group_are_applied, .timeout = 30, .init = unix_init, .fini = unix_fini)
{
    const char *path = in_dir("perm.sock");
    /* As root a socket can be given away; otherwise only to ourselves. */
    uid_t uid = getuid();
    gid_t gid = getgid();
    char owner[64], group[32];
    struct passwd *nobody = getuid() == 0 ? getpwnam("nobody") : NULL;
    if (nobody != NULL) {
        uid = nobody->pw_uid;
        snprintf(owner, sizeof owner, "nobody");
    } else {
        snprintf(owner, sizeof owner, "%u", (unsigned)uid);
    }
    snprintf(group, sizeof group, "%u", (unsigned)gid);
    kh_proc *p = kh_start(config("listen = unix:%s http1 mode=0660 owner=%s group=%s\n"
                                 "modules = http1 hello\n",
                                 path, owner, group),
                          NULL, 1, 10000);
    struct stat st;
    kh_assert(p, lstat(path, &st) == 0 && S_ISSOCK(st.st_mode), "no socket at %s", path);
    kh_assert(p, (st.st_mode & 07777) == 0660, "mode %04o, not 0660", st.st_mode & 07777);
    kh_assert(p, st.st_uid == uid && st.st_gid == gid, "owner %u:%u, not %u:%u",
              (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)uid, (unsigned)gid);

    /* The options are a unix:PATH listener's only, and checked. */
    kh_expect_refused(config("listen = 127.0.0.1:0 http1 mode=0600\nmodules = http1\n"), 4,
                      "mode= applies to a unix:PATH listener's socket file only", "mode on TCP");
    kh_expect_refused(config("listen = unix:%s http1 mode=rw\nmodules = http1\n", path), 4,
                      "expected octal permissions", "mode=rw");
}

/* ---- the peer's credentials -------------------------------------------------------- */

Test(unix, peer_credentials_in_a_handler_and_the_access_log, .timeout = 30, .init = unix_init,
     .fini = unix_fini)
{
    const char *path = in_dir("cred.sock");
    const char *log = in_dir("access.log");
    kh_proc *p =
        kh_start(config("listen = unix:%s http1\nlisten = 127.0.0.1:0 http1\n"
                        "modules = http1 accesslog facts\n"
                        "[accesslog]\npath = %s\nflush = 10ms\n"
                        "format = \"$remote_addr uid=$peer_uid gid=$peer_gid pid=$peer_pid\"\n",
                        path, log),
                 NULL, 2, 10000);
    char buf[2048], want[128];
    unix_get(path, 0, "/facts/cred", buf, sizeof buf);
    snprintf(want, sizeof want, "uid=%u gid=%u pid=%d peer=unix: ip=unix:", (unsigned)getuid(),
             (unsigned)getgid(), (int)getpid());
    kh_assert(p, strstr(buf, want) != NULL, "wanted '%s', got: %s", want, buf);

    /* Over TCP there are none to give. */
    int fd = kh_connect("127.0.0.1", kh_port(p, 1));
    kh_send_str(fd, "GET /facts/cred HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    size_t n = kh_recv_n(fd, buf, sizeof buf - 1, sizeof buf - 1, 5000);
    buf[n] = '\0';
    close(fd);
    kh_assert(p, strstr(buf, "cred=not found peer=127.0.0.1:") != NULL, "over TCP: %s", buf);

    snprintf(want, sizeof want, "unix: uid=%u gid=%u pid=%d", (unsigned)getuid(),
             (unsigned)getgid(), (int)getpid());
    kh_assert(
        p, KH_WAIT_UNTIL(kh_file_has(log, want) && kh_file_has(log, "127.0.0.1 uid=- gid=-"), 5000),
        "the access log lacks '%s' or the TCP line", want);
}

/* A balancer in front on the same host (HAProxy's `server ... send-proxy`
 * to a unix@ address): the PROXY header is trusted from whoever may
 * connect, which the file's mode decides; no proxy_from applies. */
Test(unix, proxy_protocol_on_a_unix_listener, .timeout = 30, .init = unix_init, .fini = unix_fini)
{
    const char *path = in_dir("lb.sock");
    kh_proc *p = kh_start(config("listen = unix:%s http1 proxy_protocol=on mode=0600\n"
                                 "modules = http1 facts\n",
                                 path),
                          NULL, 1, 10000);
    int fd = unix_connect(path, 0);
    kh_assert(p, fd >= 0, "connect: %s", strerror(errno));
    kh_send_str(fd, "PROXY TCP4 192.0.2.1 192.0.2.2 5555 80\r\n"
                    "GET /facts/cred HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    char buf[2048];
    size_t n = kh_recv_n(fd, buf, sizeof buf - 1, sizeof buf - 1, 5000);
    buf[n] = '\0';
    close(fd);
    kh_assert(p, strstr(buf, "cred=not found peer=192.0.2.1:5555 ip=192.0.2.1") != NULL,
              "behind the balancer: %s", buf);
    kh_expect_refused(config("listen = unix:%s http1 proxy_protocol=on proxy_from=127.0.0.1\n"
                             "modules = http1\n",
                             path),
                      4, "proxy_from does not apply to a unix: listener", "proxy_from on unix:");
}

/* ---- reloads ------------------------------------------------------------------------- */

typedef struct load {
    const char *path;
    volatile int stop;
    long ok, failed;
    char last_error[160];
} load;

static void *load_run(void *arg)
{
    load *l = arg;
    char buf[2048];
    while (!l->stop) {
        unix_get(l->path, 0, "/", buf, sizeof buf);
        if (strncmp(buf, "HTTP/1.1 200", 12) == 0) {
            __atomic_fetch_add(&l->ok, 1, __ATOMIC_RELAXED);
        } else {
            l->failed++;
            snprintf(l->last_error, sizeof l->last_error, "%s: %.60s", strerror(errno), buf);
        }
    }
    return NULL;
}

static pid_t wait_new_pid(const char *pid_path, pid_t old)
{
    pid_t pid = 0;
    if (!KH_WAIT_UNTIL((pid = kh_read_pid(pid_path)) > 0 && pid != old, 10000))
        return 0;
    if (nsuccessors < 8)
        successors[nsuccessors++] = pid;
    return pid;
}

Test(unix, reloads_keep_the_socket_with_no_connection_refused, .timeout = 60, .init = unix_init,
     .fini = unix_fini)
{
    const char *path = in_dir("reload.sock");
    const char *pid_path = in_dir("keel.pid");
    kh_proc *p = kh_start(
        config("listen = unix:%s http1\nmodules = http1 hello\npid_file = %s\n", path, pid_path),
        NULL, 1, 10000);
    kh_assert(p, KH_WAIT_UNTIL(kh_read_pid(pid_path) == p->pid, 5000), "no pid file");
    struct stat first;
    lstat(path, &first);
    load loads[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        loads[i] = (load){.path = path};
        pthread_create(&threads[i], NULL, load_run, &loads[i]);
    }
    pid_t current = p->pid;
    for (int r = 0; r < 3; r++) {
        long seen = loads[0].ok + loads[1].ok;
        kh_assert(p, KH_WAIT_UNTIL(loads[0].ok + loads[1].ok >= seen + 20, 10000),
                  "no answers before reload %d", r + 1);
        kill(current, SIGHUP);
        pid_t next = wait_new_pid(pid_path, current);
        kh_assert(p, next > 0, "reload %d did not hand over", r + 1);
        kh_assert(
            p, KH_WAIT_UNTIL(kill(current, 0) != 0 || (current == p->pid && kh_exited(p)), 10000),
            "the old process %d did not exit", (int)current);
        current = next;
    }
    long seen = loads[0].ok + loads[1].ok;
    kh_assert(p, KH_WAIT_UNTIL(loads[0].ok + loads[1].ok >= seen + 20, 10000),
              "no answers after the reloads");
    for (int i = 0; i < 2; i++) {
        loads[i].stop = 1;
        pthread_join(threads[i], NULL);
    }
    for (int i = 0; i < 2; i++)
        kh_assert(p, loads[i].failed == 0, "client %d: %ld of %ld failed; last: %s", i,
                  loads[i].failed, loads[i].ok + loads[i].failed, loads[i].last_error);
    /* The same socket file all along: handed down, never bound again. */
    struct stat now;
    kh_assert(p, lstat(path, &now) == 0 && now.st_ino == first.st_ino,
              "the socket file was replaced or removed by a reload");
    /* The last one, stopped for good, removes it (it was handed down as
     * keel's own). */
    kill(current, SIGTERM);
    kh_assert(p, KH_WAIT_UNTIL(kill(current, 0) != 0, 10000), "SIGTERM did not stop keel");
    kh_assert(p, access(path, F_OK) != 0, "the socket file outlived the last process");
}

/* systemd's socket activation (sd_listen_fds(3)) of a unix: listener, by
 * hand as test_reload.c does for TCP: the socket at descriptor 3,
 * LISTEN_FDS=1 and LISTEN_PID naming keel (exec from bash). keel serves it
 * without binding, and leaves the file when it stops: it is the service
 * manager's, which keeps listening on it for the next start. */
Test(unix, adopts_a_unix_socket_from_a_service_manager, .timeout = 30, .init = unix_init,
     .fini = unix_fini)
{
    const char *path = in_dir("activated.sock");
    int fd = bound_socket(path, 1);
    const char *conf = in_dir("keel.conf");
    FILE *f = fopen(conf, "w");
    cr_assert(f != NULL);
    fputs(config("listen = unix:%s http1\nmodules = http1 hello\n", path), f);
    fclose(f);
    char script[256];
    snprintf(script, sizeof script,
             "exec 3<&%d %d<&-; LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" \"$@\"", fd, fd);
    const char *args[] = {"-c", script, KEEL_BIN, "-c", conf, NULL};
    kh_proc *p = kh_start_program("/bin/bash", NULL, args, 1, 10000);
    struct stat before;
    lstat(path, &before);
    char buf[2048];
    unix_get(path, 0, "/", buf, sizeof buf);
    kh_assert(p, strncmp(buf, "HTTP/1.1 200", 12) == 0, "on the inherited socket: %.80s", buf);
    kh_assert(p, kh_count_log(p, "matches no listen line") == 0, "the socket was not adopted");
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "keel did not exit 0");
    struct stat after;
    kh_assert(p, lstat(path, &after) == 0 && after.st_ino == before.st_ino,
              "keel removed the service manager's socket file");
    close(fd);
}

/* ---- outbound ------------------------------------------------------------------------ */

/* An HTTP/1.1 server on a Unix socket that answers every request with the
 * Host it was sent. */
static const char upstream_py[] =
    "import socketserver, sys, os\n"
    "from http.server import BaseHTTPRequestHandler\n"
    "class H(BaseHTTPRequestHandler):\n"
    "    protocol_version = 'HTTP/1.1'\n"
    "    def address_string(self): return 'unix'\n"
    "    def log_message(self, *a): pass\n"
    "    checks = 0\n"
    "    def do_GET(self):\n"
    "        if self.path == '/health': H.checks += 1\n"
    "        body = ('host=%s path=%s checks=%d' % (self.headers.get('Host'), self.path,\n"
    "                H.checks)).encode()\n"
    "        self.send_response(200)\n"
    "        self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers()\n"
    "        self.wfile.write(body)\n"
    "class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):\n"
    "    daemon_threads = True\n"
    "S(sys.argv[1], H).serve_forever()\n";

Test(unix, the_proxy_passes_to_a_unix_upstream, .timeout = 30, .init = unix_init, .fini = unix_fini)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        cr_skip_test("/usr/bin/python3 is not installed");
    const char *up = in_dir("app.sock");
    const char *const args[] = {"-c", upstream_py, up, NULL};
    kh_proc *py = kh_spawn_program("/usr/bin/python3", NULL, args);
    cr_assert(KH_WAIT_UNTIL(is_socket(up), 10000), "the Python upstream did not start: %s",
              kh_stderr(py));
    kh_proc *p =
        kh_start(config("listen = 127.0.0.1:0 http1\nmodules = http1 proxy\n"
                        "[proxy]\nupstream = app unix:%s check=/health check_interval=200ms\n"
                        "pass = / app\n"
                        "pass = /upstream-host/ app host=upstream\n",
                        up),
                 NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    char buf[4096];
    for (int i = 0; i < 3; i++) {
        int fd = kh_connect("127.0.0.1", port);
        kh_send_str(fd, "GET /x HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n");
        size_t n = kh_recv_n(fd, buf, sizeof buf - 1, sizeof buf - 1, 5000);
        buf[n] = '\0';
        close(fd);
        kh_assert(p, strstr(buf, "HTTP/1.1 200") && strstr(buf, "host=example.test path=/x"),
                  "request %d through the proxy: %s", i, buf);
    }
    /* host=upstream: a unix: server is "localhost", as nginx's $proxy_host. */
    int fd = kh_connect("127.0.0.1", port);
    kh_send_str(fd,
                "GET /upstream-host/ HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n");
    size_t n = kh_recv_n(fd, buf, sizeof buf - 1, sizeof buf - 1, 5000);
    buf[n] = '\0';
    close(fd);
    kh_assert(p, strstr(buf, "host=localhost path=/upstream-host/") != NULL, "host=upstream: %s",
              buf);

    /* The active health check reaches it too (and finds it up). */
    kh_assert(
        p,
        KH_WAIT_UNTIL(unix_get(up, 0, "/x", buf, sizeof buf) > 0 && strstr(buf, "checks=0") == NULL,
                      5000),
        "no health check reached the upstream: %s", buf);
    kh_assert(p, kh_count_log(p, "health check of") == 0, "a health check failed");

    /* The upstream gone (its file too): a 502, not a hang. */
    kh_stop(py);
    unlink(up);
    fd = kh_connect("127.0.0.1", port);
    kh_send_str(fd, "GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    n = kh_recv_n(fd, buf, sizeof buf - 1, sizeof buf - 1, 5000);
    buf[n] = '\0';
    close(fd);
    kh_assert(p, strncmp(buf, "HTTP/1.1 502", 12) == 0, "with the upstream gone: %.80s", buf);
    /* ... and the health check sees it go. */
    char line[200];
    snprintf(line, sizeof line, "health check of unix:%s: down", up);
    kh_assert(p, kh_wait_log(p, line, 5000), "no '%s'", line);
}

Test(unix, pubsub_redis_over_a_unix_socket, .timeout = 30, .init = unix_init, .fini = unix_fini)
{
    char mod[512];
    snprintf(mod, sizeof mod, "%s/mod_pubsub_redis.so", KEEL_MODULE_DIR);
    if (access("/usr/bin/redis-server", X_OK) != 0)
        cr_skip_test("redis-server is not installed");
    if (access(mod, R_OK) != 0)
        cr_skip_test("the pubsub_redis module is not built (hiredis missing)");
    const char *sock = in_dir("redis.sock");
    const char *const args[] = {"--port",       "0",  "--unixsocket", sock, "--save", "",
                                "--appendonly", "no", "--daemonize",  "no", NULL};
    kh_proc *r = kh_spawn_program("/usr/bin/redis-server", NULL, args);
    cr_assert(KH_WAIT_UNTIL(is_socket(sock), 10000), "redis-server did not start: %s",
              kh_stdout(r));
    kh_proc *p = kh_start(config("listen = 127.0.0.1:0 http1\nmodules = http1 websocket "
                                 "pubsub_redis\n[pubsub_redis]\naddress = unix:%s\n",
                                 sock),
                          NULL, 1, 10000);
    char line[200];
    snprintf(line, sizeof line, "redis unix:%s (subscribe): connected", sock);
    kh_assert(p, kh_wait_log(p, line, 10000), "no '%s'", line);
    snprintf(line, sizeof line, "redis unix:%s (publish): connected", sock);
    kh_assert(p, kh_wait_log(p, line, 10000), "no '%s'", line);
}
