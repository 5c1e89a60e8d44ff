/* Bytes and file ranges in one ordered queue (ABI 1.8): keel_conn_write_pieces
 * under the raw "piececat" protocol and keel_response_send_pieces behind
 * http1, from tests/modules/mod_pieces.c, checked byte for byte over plain
 * TCP (sendfile), through a transport that must see the bytes (rot13: the
 * core reads the ranges) and over TLS (curl); an empty range and empty
 * bytes among them, writes queued behind them, a range past the end of the
 * file (the connection is cut, the callback says KEEL_ERR_IO), a client
 * that leaves mid-file (no leak, no descriptor kept), and static's
 * multipart/byteranges, whose parts are file ranges now, over TCP, TLS and
 * HTTP/2 against the file (and on TCP with sendfile: strace shows it). */
#define _GNU_SOURCE
#include "test_http.h"
#include "tls_helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#define FILE_SIZE (4u * 1024 * 1024)

static char g_path[400];
static char *g_data;

static void cleanup(void)
{
    tt_cleanup(); /* kh_cleanup_all, and the directory with the file */
    g_path[0] = '\0';
    free(g_data);
    g_data = NULL;
}

/* Every byte value, in an order no off-by-some error can reproduce. */
static void make_file(void)
{
    tt_mkdir();
    g_data = malloc(FILE_SIZE);
    cr_assert(g_data, "out of memory");
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < FILE_SIZE; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        g_data[i] = (char)(x >> 7);
    }
    snprintf(g_path, sizeof g_path, "%s", tt_path("data.bin"));
    FILE *f = fopen(g_path, "wb");
    cr_assert(f, "create %s: %s", g_path, strerror(errno));
    cr_assert(fwrite(g_data, 1, FILE_SIZE, f) == FILE_SIZE && fclose(f) == 0, "write %s", g_path);
}

/* http1 (with `http` after it on the listen line: a transport) on listener
 * 0, piececat (with `raw`) on listener 1. */
static kh_proc *start(const char *http, const char *raw)
{
    make_file();
    int rot13 = strstr(http, "rot13") || strstr(raw, "rot13");
    return kh_start(ht_fmt("[keel]\n"
                           "listen = 127.0.0.1:0 http1 %s\n"
                           "listen = 127.0.0.1:0 piececat %s\n"
                           "workers = 1\n"
                           "modules = http1 pieces%s\n" KH_MODULE_PATH "[pieces]\n"
                           "path = %s\n",
                           http, raw, rot13 ? " rot13" : "", g_path),
                    NULL, 2, 10000);
}

/* The "mixed" body (see mod_pieces.c) into out; returns its length. */
static size_t mixed_body(char *out)
{
    size_t n = 0;
    out[n++] = '<';
    memcpy(out + n, g_data, 1000);
    n += 1000;
    out[n++] = '|';
    memcpy(out + n, g_data + 10000, 290000);
    n += 290000;
    memcpy(out + n, ">\n", 2);
    return n + 2;
}
#define MIXED_LEN (1 + 1000 + 1 + 290000 + 2)

/* A connection to piececat that has sent it the commands (encoded when
 * through rot13). */
static int piececat_send(kh_proc *p, int through_rot13, const char *commands)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 1));
    kh_assert(p, fd >= 0, "connect");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s", commands);
    if (through_rot13)
        ht_rot13(cmd, strlen(cmd));
    kh_assert(p, kh_send_str(fd, cmd) == 0, "send");
    return fd;
}

/* Sends the commands to piececat, half-closes, and reads all it answers
 * (decoded when through rot13, its closing record taken off). */
static char *piececat(kh_proc *p, int through_rot13, const char *commands, size_t *len)
{
    int fd = piececat_send(p, through_rot13, commands);
    shutdown(fd, SHUT_WR);
    char *got = ht_read_to_eof(fd, 2 * FILE_SIZE + 65536, len, 30000);
    close(fd);
    if (through_rot13) {
        ht_rot13(got, *len);
        kh_assert(p, *len >= 8 && memcmp(got + *len - 8, "#closed\n", 8) == 0,
                  "no closing record last (%zu bytes)", *len);
        *len -= 8;
    }
    return got;
}

/* "BEGIN\n" body "END\n", `times` times. */
static void expect_framed(kh_proc *p, const char *got, size_t len, const char *body,
                          size_t body_len, int times)
{
    kh_assert(p, len == (size_t)times * (10 + body_len), "%zu bytes, expected %zu", len,
              (size_t)times * (10 + body_len));
    for (int i = 0; i < times; i++, got += 10 + body_len) {
        kh_assert(p, memcmp(got, "BEGIN\n", 6) == 0, "write %d: no BEGIN first", i);
        size_t at = 0;
        while (at < body_len && got[6 + at] == body[at])
            at++;
        kh_assert(p, at == body_len, "write %d: the pieces differ at byte %zu of %zu", i, at,
                  body_len);
        kh_assert(p, memcmp(got + 6 + body_len, "END\n", 4) == 0, "write %d: no END last", i);
    }
}

static void expect_clean_exit(kh_proc *p)
{
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 20000) == 0, "no clean exit (a leak under ASan?)");
    kh_stop(p);
}

/* ---- keel_conn_write_pieces ------------------------------------------------------ */

static void raw_mixed(int through_rot13)
{
    kh_proc *p = start("", through_rot13 ? "rot13" : "");
    char *want = malloc(MIXED_LEN);
    cr_assert(want, "out of memory");
    kh_assert(p, mixed_body(want) == MIXED_LEN, "the expected body");
    size_t len;
    char *got = piececat(p, through_rot13, "mixed\nmixed\n", &len);
    expect_framed(p, got, len, want, MIXED_LEN, 2);
    free(got);
    kh_assert(p, kh_wait_log(p, "pieces done: ok", 5000), "no callback");
    kh_assert(p, kh_count_log(p, "pieces done: ok") == 2, "%d callbacks for 2 writes",
              kh_count_log(p, "pieces done:"));
    /* Bytes only: keel_conn_write's path. */
    got = piececat(p, through_rot13, "bytes\n", &len);
    expect_framed(p, got, len, "ab\n", 3, 1);
    free(got);
    free(want);
    expect_clean_exit(p);
}

Test(pieces, bytes_and_ranges_in_order_over_tcp, .timeout = 120, .fini = cleanup)
{
    raw_mixed(0);
}

Test(pieces, bytes_and_ranges_in_order_through_a_transport, .timeout = 120, .fini = cleanup)
{
    raw_mixed(1);
}

/* A range past the end of the file: what precedes it leaves, then the
 * connection is cut (the peer would take what follows for the missing
 * bytes) and the callback says KEEL_ERR_IO. */
static void raw_past_end(int through_rot13)
{
    kh_proc *p = start("", through_rot13 ? "rot13" : "");
    size_t len;
    int fd = piececat_send(p, through_rot13, "pastend\n");
    char *got = ht_read_to_eof(fd, 2 * FILE_SIZE + 65536, &len, 30000);
    close(fd);
    if (through_rot13)
        ht_rot13(got, len);
    kh_assert(p, len == 6 + 1 + 10, "%zu bytes before the cut, expected 17", len);
    kh_assert(p,
              memcmp(got, "BEGIN\nx", 7) == 0 && memcmp(got + 7, g_data + FILE_SIZE - 10, 10) == 0,
              "the bytes before the cut differ");
    free(got);
    kh_assert(p, kh_wait_log(p, "pieces done: io", 10000), "the callback did not say io");
    expect_clean_exit(p);
}

Test(pieces, range_past_the_end_cuts_the_connection, .timeout = 60, .fini = cleanup)
{
    raw_past_end(0);
}

Test(pieces, range_past_the_end_through_a_transport, .timeout = 60, .fini = cleanup)
{
    raw_past_end(1);
}

/* A client that leaves with most of the pieces still to come: one
 * callback, not "ok", and every descriptor back (the file is closed from
 * the callback). Run under ASan too: nothing may leak. */
static void raw_client_leaves(int through_rot13)
{
    kh_proc *p = start("", through_rot13 ? "rot13" : "");
    /* Warm the pools up, then count descriptors. */
    size_t len;
    free(piececat(p, through_rot13, "bytes\n", &len));
    int baseline = kh_count_fds(p);
    for (int round = 0; round < 4; round++) {
        int fd = piececat_send(p, through_rot13, "big\n");
        char buf[4096];
        kh_assert(p, kh_recv_n(fd, buf, sizeof buf, sizeof buf - 1, 10000) == sizeof buf - 1,
                  "the pieces do not start");
        if (round % 2 == 0) {
            struct linger lg = {1, 0}; /* a reset, at once */
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        close(fd);
        kh_assert(p, kh_wait_fds_at_most(p, baseline, 10000),
                  "round %d: keel holds %d fds, %d before", round, kh_count_fds(p), baseline);
    }
    kh_assert(p, kh_count_log(p, "pieces done:") == 5, "%d callbacks for 5 writes",
              kh_count_log(p, "pieces done:"));
    kh_assert(p, kh_count_log(p, "pieces done: ok") == 1, "a cut write reported ok");
    expect_clean_exit(p);
}

Test(pieces, client_leaving_mid_file_over_tcp, .timeout = 120, .fini = cleanup)
{
    raw_client_leaves(0);
}

Test(pieces, client_leaving_mid_file_through_a_transport, .timeout = 120, .fini = cleanup)
{
    raw_client_leaves(1);
}

/* ---- keel_response_send_pieces ---------------------------------------------------- */

Test(pieces, response_of_pieces_over_http, .timeout = 60, .fini = cleanup)
{
    kh_proc *p = start("", "");
    char *want = malloc(MIXED_LEN);
    cr_assert(want, "out of memory");
    mixed_body(want);
    ht_conn *c = ht_connect(kh_port(p, 0));
    /* Twice on one connection: the second follows the first's last byte. */
    ht_send_str(c, "GET /mixed HTTP/1.1\r\nHost: h\r\n\r\nGET /mixed HTTP/1.1\r\nHost: h\r\n\r\n");
    for (int i = 0; i < 2; i++) {
        ht_resp r;
        kh_assert(p, ht_read_response(c, &r, 0, 30000) == 0, "response %d: %s", i, r.err);
        kh_assert(p, r.status == 200 && r.content_length == MIXED_LEN && !r.chunked,
                  "response %d: %d, length %lld", i, r.status, (long long)r.content_length);
        kh_assert(p, r.body_len == MIXED_LEN && memcmp(r.body, want, MIXED_LEN) == 0,
                  "response %d: the body differs", i);
        ht_resp_free(&r);
    }
    ht_close(c);
    /* HEAD: the length, no body, nothing read. */
    ht_resp r;
    ht_roundtrip(p, "HEAD /mixed HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    kh_assert(p, r.status == 200 && r.content_length == MIXED_LEN && r.body_len == 0,
              "HEAD: %d, length %lld, %zu body bytes", r.status, (long long)r.content_length,
              r.body_len);
    ht_resp_free(&r);
    kh_assert(p, kh_wait_log(p, "pieces released", 5000), "no release");
    free(want);
    expect_clean_exit(p);
}

Test(pieces, response_past_the_end_is_cut, .timeout = 60, .fini = cleanup)
{
    kh_proc *p = start("", "");
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    kh_assert(p, kh_send_str(fd, "GET /pastend HTTP/1.1\r\nHost: h\r\n\r\n") == 0, "send");
    size_t len;
    char *got = ht_read_to_eof(fd, 2 * FILE_SIZE + 65536, &len, 30000);
    close(fd);
    const char *body = memmem(got, len, "\r\n\r\n", 4);
    kh_assert(p, body != NULL && memmem(got, len, "Content-Length: 22\r\n", 20) != NULL,
              "no head promising 22 bytes");
    body += 4;
    size_t n = len - (size_t)(body - got);
    kh_assert(p, n == 11 && body[0] == 'x' && memcmp(body + 1, g_data + FILE_SIZE - 10, 10) == 0,
              "%zu body bytes before the close, expected x and the file's last 10", n);
    free(got);
    kh_assert(p, kh_wait_log(p, "pieces released", 5000), "no release");
    expect_clean_exit(p);
}

/* ---- over TLS, with curl ----------------------------------------------------------- */

/* curl -o FILE with these arguments; returns what it wrote. */
static char *curl_get(kh_proc *p, const char *args, size_t *len)
{
    const char *out = tt_path("out.bin");
    unlink(out);
    ht_run_result rr = tt_sh(30000, "curl -sS --max-time 20 -o %s %s", out, args);
    kh_assert(p, rr.status == 0, "curl %s: %d %s", args, rr.status, rr.out);
    ht_run_free(&rr);
    FILE *f = fopen(out, "rb");
    kh_assert(p, f != NULL, "no output from curl");
    char *buf = malloc(FILE_SIZE + 65536);
    cr_assert(buf, "out of memory");
    *len = fread(buf, 1, FILE_SIZE + 65536, f);
    fclose(f);
    return buf;
}

/* Checks a multipart/byteranges body for the ranges want[0..n). */
static void expect_parts(kh_proc *p, const char *body, size_t len,
                         const unsigned long long (*want)[2], size_t n)
{
    const char *at = body, *end = body + len;
    for (size_t i = 0; i < n; i++) {
        char cr[96];
        snprintf(cr, sizeof cr, "Content-Range: bytes %llu-%llu/%u\r\n\r\n", want[i][0], want[i][1],
                 FILE_SIZE);
        const char *h = memmem(at, (size_t)(end - at), cr, strlen(cr));
        kh_assert(p, h != NULL, "part %zu: no %s", i, cr);
        at = h + strlen(cr);
        size_t part = (size_t)(want[i][1] - want[i][0] + 1);
        kh_assert(p, (size_t)(end - at) >= part && memcmp(at, g_data + want[i][0], part) == 0,
                  "part %zu: its bytes differ from the file's", i);
        at += part;
        kh_assert(p, (size_t)(end - at) >= 4 && memcmp(at, "\r\n--", 4) == 0,
                  "part %zu: no delimiter after it", i);
    }
    kh_assert(p, memmem(at, (size_t)(end - at), "--\r\n", 4) == end - 4,
              "the closing delimiter ends the body");
}

/* pieces and static on one keel, over `transport` ("" or "tls") and
 * `protocol` (http1, or h2 spoken from the first byte): the mixed body and
 * multipart/byteranges responses, fetched by curl. */
/* With the files module's wrap filter (a pieces filter, ABI 1.9) on every
 * response: the body is "<<" BODY ">>"; BODY is moved to the front. */
static void unwrap(kh_proc *p, char *got, size_t *len, int wrap)
{
    if (!wrap)
        return;
    kh_assert(p, *len >= 4 && memcmp(got, "<<", 2) == 0 && memcmp(got + *len - 2, ">>", 2) == 0,
              "not wrapped: %zu bytes", *len);
    memmove(got, got + 2, *len - 4);
    *len -= 4;
}

static void curl_both(const char *protocol, const char *transport, int wrap)
{
    int h2 = strcmp(protocol, "h2") == 0;
    int tls = transport[0] != '\0';
    const char *argv[] = {"curl", "--version", NULL};
    ht_run_result rr = ht_run(argv, 5000);
    int have_curl = rr.status == 0;
    ht_run_free(&rr);
    if (!have_curl)
        cr_skip_test("curl is not installed");
    char mod[512];
    snprintf(mod, sizeof mod, "%s/mod_tls.so", KEEL_MODULE_DIR);
    if (tls && access(mod, R_OK) != 0)
        cr_skip_test("the tls module is not built");
    snprintf(mod, sizeof mod, "%s/mod_h2.so", KEEL_MODULE_DIR);
    if (h2 && access(mod, R_OK) != 0)
        cr_skip_test("the h2 module is not built");
    make_file();
    if (tls)
        tt_make_cert("lh", "localhost", "127.0.0.1", NULL);
    char tls_section[1200] = "";
    if (tls)
        snprintf(tls_section, sizeof tls_section, "[tls]\ncert = %s %s\n", tt_path("lh.pem"),
                 tt_path("lh.key"));
    kh_proc *p = kh_start(
        ht_fmt("[keel]\n"
               "listen = 127.0.0.1:0 %s %s\n"
               "workers = 1\n"
               "modules = %s%shttp1 pieces static%s\n" KH_MODULE_PATH "[pieces]\npath = %s\n"
               "[static]\nmount = /s %s\n%s%s%s%s",
               protocol, transport, tls ? "tls " : "", h2 ? "h2 " : "", wrap ? " files" : "",
               g_path, tt_dir, tls_section, wrap ? "[files]\npath = " : "", wrap ? g_path : "",
               wrap ? "\nbody_filter = wrap\n" : ""),
        NULL, 1, 10000);
    const char *base = ht_fmt("%s://127.0.0.1:%u", tls ? "https" : "http", kh_port(p, 0));
    const char *ca = tls  ? ht_fmt("--cacert %s", tt_path("lh.pem"))
                     : h2 ? "--http2-prior-knowledge"
                          : "";
    char base_copy[128], ca_copy[600];
    snprintf(base_copy, sizeof base_copy, "%s", base);
    snprintf(ca_copy, sizeof ca_copy, "%s", ca);

    size_t len;
    char *got = curl_get(p, ht_fmt("%s %s/mixed", ca_copy, base_copy), &len);
    unwrap(p, got, &len, wrap);
    char *want = malloc(MIXED_LEN);
    cr_assert(want, "out of memory");
    mixed_body(want);
    kh_assert(p, len == MIXED_LEN && memcmp(got, want, MIXED_LEN) == 0,
              "mixed: %zu bytes, expected %u, or they differ", len, MIXED_LEN);
    free(got);
    free(want);

    /* Two small parts, then parts across the file (several 64 KiB reads
     * through TLS, sendfile calls on plain TCP). */
    static const unsigned long long small[][2] = {{0, 9}, {20, 29}};
    got = curl_get(p, ht_fmt("%s -r 0-9,20-29 %s/s/data.bin", ca_copy, base_copy), &len);
    unwrap(p, got, &len, wrap);
    expect_parts(p, got, len, small, 2);
    free(got);
    static const unsigned long long large[][2] = {{3000000, 4194303}, {5, 5}, {100000, 1100000}};
    got = curl_get(p, ht_fmt("%s -r 3000000-,5-5,100000-1100000 %s/s/data.bin", ca_copy, base_copy),
                   &len);
    unwrap(p, got, &len, wrap);
    expect_parts(p, got, len, large, 3);
    free(got);
    if (wrap) {
        /* The parts' ranges reached the filter unread. */
        char line[96];
        snprintf(line, sizeof line, "files: wrap passed %u file bytes",
                 (unsigned)(4194303 - 3000000 + 1 + 1 + 1100000 - 100000 + 1));
        kh_assert(p, kh_wait_log(p, line, 10000), "no '%s' in the log", line);
    }
    expect_clean_exit(p);
}

Test(pieces, curl_over_tcp, .timeout = 120, .fini = cleanup)
{
    curl_both("http1", "", 0);
}

Test(pieces, curl_over_tls, .timeout = 120, .fini = cleanup)
{
    curl_both("http1", "tls", 0);
}

/* HTTP/2 takes the pieces as its stream's (send_pieces): bytes as DATA,
 * file ranges with sendfile or read with the turn's small files. */
Test(pieces, curl_over_h2c, .timeout = 120, .fini = cleanup)
{
    curl_both("h2", "", 0);
}

/* A body filter that takes pieces (ABI 1.9) on every response: the ranges
 * go through it unread and the bodies are the same inside its framing,
 * whether the protocol frames them in chunks (HTTP/1.1), in DATA frames
 * (HTTP/2), or a transport reads them (TLS). */
Test(pieces, pieces_filter_over_tcp, .timeout = 120, .fini = cleanup)
{
    curl_both("http1", "", 1);
}

Test(pieces, pieces_filter_over_tls, .timeout = 120, .fini = cleanup)
{
    curl_both("http1", "tls", 1);
}

Test(pieces, pieces_filter_over_h2c, .timeout = 120, .fini = cleanup)
{
    curl_both("h2", "", 1);
}

/* ---- multipart parts leave as file ranges ------------------------------------------ */

/* The lines of `path` that start a call of `name` (strace -o output). */
static int count_calls(const char *path, const char *name)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        const char *call = strstr(line, name);
        n += call != NULL && call[strlen(name)] == '(';
    }
    fclose(f);
    return n;
}

/* Whether the file at `path` holds `needle`. */
static int file_says(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[512];
    int found = 0;
    while (f != NULL && !found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, needle) != NULL;
    if (f != NULL)
        fclose(f);
    return found;
}

/* static's multipart parts go with sendfile on plain TCP: strace, attached
 * to keel, sees one sendfile per part at least and no pread of the file
 * (which the module's own reader, before ABI 1.8, did on the pool). Over
 * HTTP/2 (h2c, curl) the parts are the stream's pieces (its sink's
 * send_pieces): the large one leaves with sendfile, a DATA frame at a
 * time, and only the small ones may be read, with the turn's small files
 * (modules/h2/fileload.c), where the core read every range before. */
static void multipart_traced(const char *protocol)
{
    int h2 = strcmp(protocol, "h2") == 0;
    const char *version[] = {"strace", "-V", NULL};
    ht_run_result rr = ht_run(version, 5000);
    int have_strace = rr.status == 0;
    ht_run_free(&rr);
    if (!have_strace)
        cr_skip_test("strace is not installed");
    if (h2) {
        const char *curl[] = {"curl", "--version", NULL};
        rr = ht_run(curl, 5000);
        int have_curl = rr.status == 0 && strstr(rr.out, "HTTP2") != NULL;
        ht_run_free(&rr);
        if (!have_curl)
            cr_skip_test("curl with HTTP/2 is not installed");
        char mod[512];
        snprintf(mod, sizeof mod, "%s/mod_h2.so", KEEL_MODULE_DIR);
        if (access(mod, R_OK) != 0)
            cr_skip_test("the h2 module is not built");
    }
    make_file();
    kh_proc *p =
        kh_start(ht_fmt("[keel]\nlisten = 127.0.0.1:0 %s\nworkers = 1\n"
                        "modules = %shttp1 static\n" KH_MODULE_PATH "[static]\nmount = /s %s\n",
                        protocol, h2 ? "h2 " : "", tt_dir),
                 NULL, 1, 10000);
    char out[400], err[400], pid[16];
    snprintf(out, sizeof out, "%s", tt_path("strace.out"));
    snprintf(err, sizeof err, "%s", tt_path("strace.err"));
    snprintf(pid, sizeof pid, "%d", (int)p->pid);
    fflush(NULL);
    pid_t tracer = fork();
    cr_assert(tracer >= 0, "fork: %s", strerror(errno));
    if (tracer == 0) {
        int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        execlp("strace", "strace", "-f", "-p", pid, "-e", "trace=sendfile,pread64,preadv", "-o",
               out, (char *)NULL);
        _exit(127);
    }
    /* strace says so on stderr once every thread is attached. */
    int gone = 0;
    int attached = KH_WAIT_UNTIL(
        file_says(err, "attached") || (gone = waitpid(tracer, NULL, WNOHANG) == tracer), 10000);
    if (!attached || gone) {
        if (!gone) {
            kill(tracer, SIGKILL);
            waitpid(tracer, NULL, 0);
        }
        cr_skip_test("strace cannot attach here (ptrace not allowed?)");
    }
    static const unsigned long long parts[][2] = {{0, 9}, {20, 29}, {100000, 1100000}};
    if (h2) {
        size_t len;
        char *got = curl_get(p,
                             ht_fmt("--http2-prior-knowledge -r 0-9,20-29,100000-1100000 "
                                    "http://127.0.0.1:%u/s/data.bin",
                                    kh_port(p, 0)),
                             &len);
        expect_parts(p, got, len, parts, 3);
        free(got);
    } else {
        ht_resp r;
        ht_roundtrip(p,
                     "GET /s/data.bin HTTP/1.1\r\nHost: h\r\n"
                     "Range: bytes=0-9,20-29,100000-1100000\r\nConnection: close\r\n\r\n",
                     &r);
        kh_assert(p, r.status == 206 && r.body_len > 1000001, "status %d, %zu bytes", r.status,
                  r.body_len);
        expect_parts(p, r.body, r.body_len, parts, 3);
        ht_resp_free(&r);
    }
    kill(tracer, SIGINT);
    waitpid(tracer, NULL, 0);
    int sendfiles = count_calls(out, "sendfile"), preads = count_calls(out, "pread64");
    kh_assert(p, sendfiles >= 3, "%d sendfile calls for 3 parts", sendfiles);
    /* h2: the two 10-byte parts, at most, each one pread. */
    int preads_allowed = h2 ? 2 : 0;
    kh_assert(p, preads <= preads_allowed && count_calls(out, "preadv") == 0,
              "%d preads of the file", preads);
    expect_clean_exit(p);
}

Test(pieces, multipart_parts_leave_with_sendfile, .timeout = 60, .fini = cleanup)
{
    multipart_traced("http1");
}

Test(pieces, multipart_parts_leave_with_sendfile_over_h2c, .timeout = 60, .fini = cleanup)
{
    multipart_traced("h2");
}
