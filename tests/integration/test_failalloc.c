/* test_failalloc.c — allocation failures, one at a time, across a whole
 * keel run (issue 13, "Fault injection"; SQLite's approach).
 *
 * keel runs with tests/failalloc (an LD_PRELOAD'd interposer, see its
 * header and docs/security.md) failing the Nth allocation made by keel's
 * own code: the executable, libkeel or a module. The scenario of every run
 * is the same: start-up and module load (http1, deflate, websocket,
 * hello, static, one worker), a GET answered by hello, a file from static,
 * a WebSocket upgrade with permessage-deflate and a compressed message
 * echoed, a second GET (the failure was transient: keel must serve again),
 * and a graceful shutdown (SIGTERM). A first run that fails nothing counts
 * the allocations; then N is swept over that range.
 *
 * Expected for every N: either keel refuses to start (a non-zero exit
 * with a message, no crash), or every exchange ends in a proper answer,
 * a 500/503, or a closed connection, the request after it is answered,
 * and keel exits on SIGTERM; never a signal, a hang, a sanitizer report
 * or (under ASan) a leak.
 *
 *   (default)                  every N if the runs fit in about 35 s (they
 *                              do: ~400 allocations, tens of ms a run), else
 *                              as many as fit, spread over the range
 *   KEEL_FAILALLOC_SWEEP=all   every N, however long it takes
 *   KEEL_FAILALLOC_SWEEP=K     K values of N spread over the range
 *   KEEL_FAILALLOC_SEED=S      where in each stretch the sample falls
 *                              (default: the time; printed)
 *   KEEL_FAILALLOC_ONLY=N      this N alone (to reproduce a failure, with
 *                              KEEL_FAILALLOC_TRACE=1 for the stack)
 */
#include "harness.h"
#include "ws_client.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

#ifdef KEEL_FAILALLOC_SO

/* ---- A tolerant client: every failure of keel's is an outcome ----------- */

enum outcome { OK = 0, ERR_5XX, CLOSED, HANG, WRONG };
static const char *const outcome_name[] = {"ok", "5xx", "closed", "HANG", "WRONG"};

static int wait_readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) > 0;
}

/* Reads until the head and Content-Length body are in, EOF or timeout. */
static size_t read_response(int fd, char *buf, size_t cap, int ms, int *eof)
{
    size_t n = 0;
    long long end = kh_now_ms() + ms;
    *eof = 0;
    while (n + 1 < cap && kh_now_ms() < end) {
        if (!wait_readable(fd, (int)(end - kh_now_ms())))
            break;
        ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
        if (r <= 0) {
            *eof = 1;
            break;
        }
        n += (size_t)r;
        buf[n] = '\0';
        char *h = strstr(buf, "\r\n\r\n");
        if (h != NULL) {
            const char *cl = strstr(buf, "Content-Length: ");
            size_t want = cl ? strtoul(cl + 16, NULL, 10) : 0;
            if (cl == NULL || (size_t)(buf + n - (h + 4)) >= want)
                break;
        }
    }
    buf[n] = '\0';
    return n;
}

static int classify(const char *resp, size_t n, int eof, const char *want_body)
{
    if (n == 0)
        return eof ? CLOSED : HANG;
    if (strncmp(resp, "HTTP/1.1 5", 10) == 0)
        return ERR_5XX;
    if ((strncmp(resp, "HTTP/1.1 200 ", 13) == 0 || strncmp(resp, "HTTP/1.1 206 ", 13) == 0) &&
        strstr(resp, want_body) != NULL)
        return OK;
    if (!strstr(resp, "\r\n\r\n") && eof)
        return CLOSED; /* cut short: the connection was dropped */
    return WRONG;
}

/* Sends req (a whole request) on a new connection and classifies the answer. */
static int exchange(unsigned port, const char *req, const char *want_body, char *resp, size_t cap)
{
    int fd = kh_connect("127.0.0.1", port);
    if (fd < 0)
        return CLOSED;
    int eof = 0;
    size_t n = 0;
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) < 0)
        eof = 1;
    else
        n = read_response(fd, resp, cap, 5000, &eof);
    close(fd);
    return classify(resp, n, eof, want_body);
}

static int get(unsigned port, const char *path, const char *want_body, char *resp, size_t cap)
{
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    return exchange(port, req, want_body, resp, cap);
}

/* More of the request path: a body echoed and gzipped by deflate's filter,
 * a range of a file, a streamed response, work on the thread pool. */
static int more(unsigned port, char *resp, size_t cap, const char **what)
{
    static char post[4096];
    if (post[0] == '\0') {
        int at = snprintf(post, sizeof post,
                          "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                          "Accept-Encoding: gzip\r\nContent-Length: 2000\r\n\r\n");
        memset(post + at, 'z', 2000);
        post[at + 2000] = '\0';
    }
    static const struct {
        const char *what, *req, *body;
    } steps[] = {
        {"POST /echo (gzipped)", post, ""},
        {"GET /files/a.txt (a range)",
         "GET /files/a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-3\r\n\r\n", "file"},
        {"GET /stream", "GET /stream?n=3 HTTP/1.1\r\nHost: x\r\n\r\n", ""},
        {"GET /offload", "GET /offload?n=1 HTTP/1.1\r\nHost: x\r\n\r\n", ""},
    };
    int worst = OK;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int rc = exchange(port, steps[i].req, steps[i].body, resp, cap);
        if (rc > worst) {
            worst = rc;
            *what = steps[i].what;
        }
        if (rc > CLOSED)
            break;
    }
    return worst;
}

/* Raw deflate, SYNC-flushed, without the 00 00 ff ff tail (RFC 7692). */
static size_t deflate_msg(const char *in, size_t len, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    cr_assert(deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    deflate(&z, Z_SYNC_FLUSH);
    size_t n = cap - z.avail_out;
    deflateEnd(&z);
    return n >= 4 ? n - 4 : n;
}

/* The upgrade, a compressed text message, its echo and a close. */
static int websocket(unsigned port, char *resp, size_t cap)
{
    int fd = kh_connect("127.0.0.1", port);
    if (fd < 0)
        return CLOSED;
    const char *req = "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                      "Sec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n";
    int eof = 0, rc;
    size_t n = 0;
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) < 0)
        eof = 1;
    else
        n = read_response(fd, resp, cap, 5000, &eof);
    if (n == 0 || strncmp(resp, "HTTP/1.1 101 ", 13) != 0) {
        close(fd);
        return classify(resp, n, eof, "\x01never");
    }
    /* A message worth compressing, sent compressed. */
    static const char text[] = "hello hello hello hello hello hello hello hello hello hello";
    uint8_t z[256], frame[300];
    size_t zn = deflate_msg(text, sizeof text - 1, z, sizeof z);
    size_t fl = wsc_build(frame, 1, 4, 1, z, zn, 1, 0);
    if (send(fd, frame, fl, MSG_NOSIGNAL) < 0) {
        close(fd);
        return CLOSED;
    }
    /* What comes back: a text frame (compressed or not), or a close, or EOF. */
    uint8_t in[512];
    size_t got = 0;
    long long end = kh_now_ms() + 5000;
    rc = HANG;
    while (kh_now_ms() < end && got < sizeof in) {
        if (!wait_readable(fd, (int)(end - kh_now_ms())))
            break;
        ssize_t r = recv(fd, in + got, sizeof in - got, 0);
        if (r <= 0) {
            rc = CLOSED;
            break;
        }
        got += (size_t)r;
        if (got >= 2 && got >= 2u + (in[1] & 127u)) {
            int op = in[0] & 15;
            rc = op == 1 ? OK : op == 8 ? CLOSED : WRONG;
            break;
        }
    }
    if (rc == OK) {
        size_t cl = wsc_build(frame, 1, 0, 8, "\x03\xe8", 2, 1, 0);
        if (send(fd, frame, cl, MSG_NOSIGNAL) > 0) {
            /* The close answered, then EOF (or EOF at once). */
            end = kh_now_ms() + 5000;
            while (kh_now_ms() < end && wait_readable(fd, (int)(end - kh_now_ms())))
                if (recv(fd, in, sizeof in, 0) <= 0)
                    break;
        }
    }
    close(fd);
    return rc;
}

/* ---- One run ------------------------------------------------------------------ */

static char docroot[256], tmpdir[256];

static const char *config(void)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
             "workers = 1\n"
             "modules = http1 deflate websocket hello static\n"
             "log_level = info\n"
             "crash_report = off\n"
             "shutdown_timeout = 3s\n"
             "[static]\n"
             "mount = /files %s\n",
             docroot);
    return buf;
}

static int sanitizer_report(const char *err)
{
    return strstr(err, "AddressSanitizer") || strstr(err, "LeakSanitizer") ||
           strstr(err, "runtime error:") || strstr(err, "UndefinedBehaviorSanitizer");
}

typedef struct result {
    int started; /* 0: start-up refused */
    int exit_status;
    int steps[5]; /* hello, file, websocket, hello again, the others */
    long long count;
} result;

static void env_for(long long n, int repeat, const char *report)
{
    char v[32];
    snprintf(v, sizeof v, "%lld", n);
    setenv("LD_PRELOAD", KEEL_FAILALLOC_SO, 1);
    setenv("KEEL_FAILALLOC_N", v, 1);
    setenv("KEEL_FAILALLOC_REPEAT", repeat ? "1" : "0", 1);
    setenv("KEEL_FAILALLOC_REPORT", report, 1);
    /* Under ASan the interposer comes before libasan in the load order. */
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    if (!asan || !strstr(asan, "verify_asan_link_order"))
        setenv("ASAN_OPTIONS", opts, 1);
}

static void env_clear(void)
{
    unsetenv("LD_PRELOAD");
    unsetenv("KEEL_FAILALLOC_N");
    unsetenv("KEEL_FAILALLOC_REPORT");
}

/* Runs the scenario with allocation n failing (0: none). Fails the test
 * on a crash, a hang, a sanitizer report or a wrong answer. */
static result run(long long n, int repeat)
{
    result r = {0};
    char report[300];
    snprintf(report, sizeof report, "%s/failalloc-report", tmpdir);
    unlink(report);
    env_for(n, repeat, report);
    kh_proc *p = kh_spawn(config(), NULL);
    env_clear();
    long long end = kh_now_ms() + 20000;
    unsigned port = 0;
    while (kh_now_ms() < end && !kh_exited(p) && (port = kh_port(p, 0)) == 0)
        kh_sleep_ms(10);
    if (port == 0) {
        int st = kh_wait_exit(p, 5000);
        kh_assert(p, st > 0, "N=%lld: keel neither started nor exited with an error (status %d)", n,
                  st);
        kh_assert(p, !sanitizer_report(kh_stderr(p)), "N=%lld: a sanitizer report at start-up", n);
        r.exit_status = st;
    } else {
        r.started = 1;
        char resp[8192];
        r.steps[0] = get(port, "/hello/fi", "Hello, fi!", resp, sizeof resp);
        kh_assert(p, r.steps[0] <= CLOSED, "N=%lld: GET /hello/fi: %s: '%.200s'", n,
                  outcome_name[r.steps[0]], resp);
        r.steps[1] = get(port, "/files/a.txt", "file a", resp, sizeof resp);
        kh_assert(p, r.steps[1] <= CLOSED, "N=%lld: GET /files/a.txt: %s: '%.200s'", n,
                  outcome_name[r.steps[1]], resp);
        r.steps[2] = websocket(port, resp, sizeof resp);
        kh_assert(p, r.steps[2] <= CLOSED, "N=%lld: the WebSocket exchange: %s: '%.200s'", n,
                  outcome_name[r.steps[2]], resp);
        const char *what = "";
        r.steps[4] = more(port, resp, sizeof resp, &what);
        kh_assert(p, r.steps[4] <= CLOSED, "N=%lld: %s: %s: '%.200s'", n, what,
                  outcome_name[r.steps[4]], resp);
        if (!repeat) {
            /* The failure was transient: keel serves again (the first
             * try may be where the failure lands; the second may not). */
            r.steps[3] = get(port, "/hello/again", "Hello, again!", resp, sizeof resp);
            if (r.steps[3] == ERR_5XX || r.steps[3] == CLOSED)
                r.steps[3] = get(port, "/hello/again", "Hello, again!", resp, sizeof resp);
            kh_assert(p, r.steps[3] == OK,
                      "N=%lld: after the failure, GET /hello/again: %s: '%.200s'", n,
                      outcome_name[r.steps[3]], resp);
        }
        kh_signal(p, SIGTERM);
        int st = kh_wait_exit(p, 15000);
        kh_assert(p, st >= 0, "N=%lld: keel did not exit cleanly on SIGTERM (%d)", n, st);
        kh_assert(p, !sanitizer_report(kh_stderr(p)), "N=%lld: a sanitizer report", n);
        if (!repeat)
            kh_assert(p, st == 0, "N=%lld: exit status %d after SIGTERM", n, st);
        r.exit_status = st;
    }
    FILE *f = fopen(report, "r");
    if (f != NULL) {
        long long failed = 0;
        if (fscanf(f, "count %lld failed %lld", &r.count, &failed) != 2)
            r.count = 0;
        fclose(f);
        unlink(report);
        if (n > 0)
            kh_assert(p, r.count < n || failed >= 1, "N=%lld: nothing failed", n);
    }
    kh_stop(p);
    return r;
}

static void make_docroot(void)
{
    char tmpl[] = "/tmp/keel-failalloc-XXXXXX";
    cr_assert(mkdtemp(tmpl) != NULL);
    snprintf(tmpdir, sizeof tmpdir, "%s", tmpl);
    char dir[256];
    snprintf(dir, sizeof dir, "%s/www", tmpl);
    cr_assert(mkdir(dir, 0755) == 0);
    snprintf(docroot, sizeof docroot, "%s", dir);
    char path[300];
    snprintf(path, sizeof path, "%s/a.txt", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL);
    fputs("file a\n", f);
    fclose(f);
}

static void remove_docroot(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
}

/* clang links its sanitizer runtime into the executable, whose malloc then
 * comes before any preloaded one: the interposer sees nothing there. */
static void skip_if_blind(long long count)
{
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer)
    if (count == 0)
        cr_skip_test("clang's ASan runtime is linked into keel: the interposer cannot see its "
                     "allocations (gcc's shared runtime allows it)");
#endif
#endif
    (void)count;
}

static long long env_ll(const char *name, long long dflt)
{
    const char *s = getenv(name);
    return s && *s ? atoll(s) : dflt;
}

Test(failalloc, sweep, .timeout = 110)
{
    make_docroot();
    long long only = env_ll("KEEL_FAILALLOC_ONLY", 0);
    if (only > 0) {
        run(only, 0);
        remove_docroot();
        return;
    }
    long long t0 = kh_now_ms();
    result base = run(0, 0);
    long long run_ms = kh_now_ms() - t0;
    cr_assert(base.started && base.steps[0] == OK && base.steps[1] == OK && base.steps[2] == OK,
              "the scenario does not pass without failures (%d %d %d)", base.steps[0],
              base.steps[1], base.steps[2]);
    skip_if_blind(base.count);
    cr_assert(base.count > 100, "only %lld allocations counted: is the interposer working?",
              base.count);
    long long total = base.count;

    /* By default every N that fits in about 35 s (all of them, as a run
     * takes tens of milliseconds); otherwise that many spread evenly. */
    const char *sweep = getenv("KEEL_FAILALLOC_SWEEP");
    int forever = sweep && strcmp(sweep, "all") == 0;
    long long fit = 35000 / (run_ms > 0 ? run_ms * 3 / 2 + 1 : 1);
    long long k = forever ? total : env_ll("KEEL_FAILALLOC_SWEEP", fit < total ? fit : total);
    int all = k >= total;
    if (all)
        k = total;
    unsigned seed = (unsigned)env_ll("KEEL_FAILALLOC_SEED", (long long)time(NULL));
    srand(seed);
    fprintf(stderr, "failalloc: %lld allocations in the scenario; %s%lld runs (seed %u)\n", total,
            all ? "every N: " : "", k, seed);
    int started = 0, refused = 0, outcomes[5][5] = {{0}};
    long long budget_end = kh_now_ms() + (forever ? 86400000LL : 45000);
    long long done = 0;
    for (long long i = 0; i < k && kh_now_ms() < budget_end; i++) {
        /* all: every N; else one N in each of k equal stretches. */
        long long n = all ? i + 1 : 1 + (i * total) / k + rand() % (total / k > 0 ? total / k : 1);
        if (n > total)
            n = total;
        result r = run(n, 0);
        done++;
        if (r.started) {
            started++;
            for (int s = 0; s < 5; s++)
                outcomes[s][r.steps[s]]++;
        } else {
            refused++;
        }
    }
    fprintf(stderr,
            "failalloc: %lld runs: %d refused to start cleanly, %d started; "
            "GET: %d ok %d 5xx %d closed; file: %d ok %d 5xx %d closed; "
            "websocket: %d ok %d closed/5xx; post/range/stream/offload: %d ok %d 5xx/closed; "
            "recovered: %d\n",
            done, refused, started, outcomes[0][OK], outcomes[0][ERR_5XX], outcomes[0][CLOSED],
            outcomes[1][OK], outcomes[1][ERR_5XX], outcomes[1][CLOSED], outcomes[2][OK],
            outcomes[2][ERR_5XX] + outcomes[2][CLOSED], outcomes[4][OK],
            outcomes[4][ERR_5XX] + outcomes[4][CLOSED], outcomes[3][OK]);
    cr_assert(done >= (k < 8 ? k : 8), "only %lld runs in the time budget", done);
    remove_docroot();
}

/* A lasting shortage: every allocation from the Nth on fails. keel may
 * refuse everything, but must not crash, hang or leak, and must exit. */
Test(failalloc, persistent, .timeout = 100)
{
    make_docroot();
    result base = run(0, 0);
    long long total = base.count;
    skip_if_blind(total);
    cr_assert(total > 100);
    long long points[] = {1, total / 20, total / 5, total / 2, total * 3 / 4, total - total / 10};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++)
        run(points[i] > 0 ? points[i] : 1, 1);
    remove_docroot();
}

#else

Test(failalloc, sweep)
{
    cr_skip_test("the allocation-failure interposer is built on Linux only");
}

#endif
