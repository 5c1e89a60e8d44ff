/* Files over real sockets: keel_response_send_file behind http1 (sendfile
 * on plain TCP), and keel_conn_write_file under the raw "filecat" protocol,
 * both from tests/modules/mod_files.c serving a 4 MiB file of every byte
 * value. Byte-exact bodies and ranges, order behind pipelined requests and
 * between writes, a reader that stalls (the socket fills: the wait for
 * writability), one that leaves mid-file (no crash, no descriptor kept),
 * the write timeout, HEAD and 304, a short file, and the read-and-write
 * fallbacks (a transport, a body filter) giving the same bytes. */
#define _GNU_SOURCE
#include "test_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>

/* The pacing tests want a file larger than a socket's buffers can hide. */
static unsigned g_file_size = 4u * 1024 * 1024;
#define FILE_SIZE g_file_size

static char g_dir[256];
static char g_path[300];
static char *g_data;

static void cleanup(void)
{
    kh_cleanup_all();
    if (g_path[0])
        unlink(g_path);
    if (g_dir[0])
        rmdir(g_dir);
    g_path[0] = g_dir[0] = '\0';
    free(g_data);
    g_data = NULL;
}

/* Every byte value, in an order no off-by-some error can reproduce. */
static char *make_data(size_t n)
{
    char *b = malloc(n);
    cr_assert(b, "out of memory");
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (char)(x >> 7);
    }
    return b;
}

static void make_file(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/keel-sendfile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert(mkdtemp(g_dir), "mkdtemp: %s", strerror(errno));
    snprintf(g_path, sizeof g_path, "%s/data.bin", g_dir);
    g_data = make_data(FILE_SIZE);
    FILE *f = fopen(g_path, "wb");
    cr_assert(f, "create %s: %s", g_path, strerror(errno));
    cr_assert(fwrite(g_data, 1, FILE_SIZE, f) == FILE_SIZE && fclose(f) == 0, "write %s", g_path);
}

/* keel with http1 and files on listener 0, filecat on listener 1; `http`
 * and `raw` are what follows the protocol on each listen line (a
 * transport); `keel` and `files` (may be NULL) are added to those
 * sections. */
static kh_proc *start(const char *http, const char *raw, const char *keel, const char *files)
{
    make_file();
    int rot13 = strstr(http, "rot13") || strstr(raw, "rot13");
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\n"
             "listen = 127.0.0.1:0 http1 %s\n"
             "listen = 127.0.0.1:0 filecat %s\n"
             "workers = 2\n"
             "modules = http1 files%s\n" KH_MODULE_PATH "%s"
             "[files]\n"
             "path = %s\n"
             "%s",
             http, raw, rot13 ? " rot13" : "", keel ? keel : "", g_path, files ? files : "");
    return kh_start(conf, NULL, 2, 10000);
}

#define GET(path) "GET " path " HTTP/1.1\r\nHost: localhost\r\n\r\n"

/* Reads a response with a body of FILE_SIZE-ish bytes: more time than the
 * helpers' default on a loaded machine under ASan. */
static void expect_response(kh_proc *p, ht_conn *c, ht_resp *r, int no_body)
{
    int rc = ht_read_response(c, r, no_body, 30000);
    kh_assert(p, rc == 0, "reading the response: %s\nhead:\n%s", r->err,
              r->head ? r->head : "(none)");
}

static void expect_file(kh_proc *p, const ht_resp *r, size_t offset, size_t length)
{
    kh_assert(p, r->content_length == (int64_t)length && !r->chunked,
              "not framed by Content-Length: %zu:\n%s", length, r->head);
    kh_assert(p, r->body_len == length, "body of %zu bytes, expected %zu", r->body_len, length);
    size_t i = 0;
    while (i < length && r->body[i] == g_data[offset + i])
        i++;
    kh_assert(p, i == length, "body differs from the file at byte %zu (file offset %zu)", i,
              offset + i);
}

/* Waits until keel has no more descriptors open than `baseline`. */
static void expect_fds_back(kh_proc *p, int baseline)
{
    if (baseline < 0)
        return;
    kh_assert(p, kh_wait_fds_at_most(p, baseline, 10000), "keel holds %d descriptors, %d before",
              kh_count_fds(p), baseline);
}

/* With a reader that reads nothing for 2 s, keel reads only what the
 * socket's buffers take (a few MiB on loopback); unpaced, it read the whole
 * 32 MiB file in that time here. `before`: ht_bytes_read() at the start. */
static void expect_reading_stalls(kh_proc *p, long long before)
{
    kh_sleep_ms(2000); /* time passing is the test: what keel reads meanwhile */
    long long during = ht_bytes_read(p);
    kh_assert(p, before < 0 || during - before < 12 * 1024 * 1024,
              "keel read %lld bytes while the reader stalled (file: %u)", during - before,
              FILE_SIZE);
}

static void expect_clean_exit(kh_proc *p)
{
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 20000) == 0, "no clean exit (a leak under ASan?)");
    kh_stop(p);
}

/* A blocking connection with a small receive buffer (set before connect,
 * so that the window is small from the start): the server's socket fills
 * long before 4 MiB are out. */
static int connect_small_window(unsigned port)
{
#ifdef SOCK_CLOEXEC
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
#else
    int fd = socket(AF_INET, SOCK_STREAM, 0); /* macOS: no SOCK_CLOEXEC */
    if (fd >= 0)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
#endif
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    int size = 8192;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s", strerror(errno));
    return fd;
}

static ht_conn *wrap(int fd)
{
    ht_conn *c = calloc(1, sizeof *c);
    cr_assert(c, "out of memory");
    c->fd = fd;
    c->cap = 1 << 16;
    c->buf = malloc(c->cap);
    cr_assert(c->buf, "out of memory");
    return c;
}

/* ---- HTTP: sendfile ----------------------------------------------------------- */

Test(sendfile, whole_file_then_pipelined_requests_in_order, .timeout = 120, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    /* One write: the second and third requests wait in keel's buffer while
     * the file goes out, and must be answered after it, in order. */
    ht_send_str(c, GET("/file") GET("/small") GET("/range?offset=1&length=3"));
    ht_resp r;
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200, "status %d", r.status);
    expect_file(p, &r, 0, FILE_SIZE);
    kh_assert(p, !ht_header_has_token(&r, "Connection", "close"), "closes:\n%s", r.head);
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && strcmp(r.body, "small\n") == 0, "second: %d '%s'", r.status,
              r.body);
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 206, "third: status %d", r.status);
    expect_file(p, &r, 1, 3);
    ht_resp_free(&r);
    /* And the connection is still good for another file. */
    ht_send_str(c, GET("/file"));
    expect_response(p, c, &r, 0);
    expect_file(p, &r, 0, FILE_SIZE);
    ht_resp_free(&r);
    kh_assert(p, ht_silent(c, 200), "bytes or a close after the last response");
    ht_close(c);
    expect_clean_exit(p);
}

Test(sendfile, slow_reader_gets_every_byte, .timeout = 120, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, NULL);
    ht_conn *c = wrap(connect_small_window(kh_port(p, 0)));
    ht_send_str(c, GET("/file") GET("/small"));
    /* A slow reader, in time (the pace is the test): the server's socket
     * fills up and the transfer has to wait for room, more than once. */
    kh_sleep_ms(1500);
    ht_resp r;
    for (int i = 0; i < 8; i++) {
        kh_assert(p, ht_fill(c, 10000) > 0, "nothing arrives after the pause");
        kh_sleep_ms(100);
    }
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200, "status %d", r.status);
    expect_file(p, &r, 0, FILE_SIZE);
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    kh_assert(p, strcmp(r.body, "small\n") == 0, "second: '%s'", r.body);
    ht_resp_free(&r);
    ht_close(c);
    expect_clean_exit(p);
}

Test(sendfile, client_leaving_mid_file_costs_nothing, .timeout = 120, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, NULL);
    /* A first exchange warms the pools up; then count descriptors, once
     * keel has closed that exchange's connection. */
    ht_resp r;
    ht_conn *warm = ht_connect(kh_port(p, 0));
    ht_send_str(warm, GET("/small"));
    expect_response(p, warm, &r, 0);
    ht_resp_free(&r);
    kh_assert(p, kh_close_both(warm->fd, 5000), "keel did not close the warm-up connection");
    warm->fd = -1;
    ht_close(warm);
    int baseline = kh_count_fds(p);
    for (int round = 0; round < 6; round++) {
        int fd = connect_small_window(kh_port(p, 0));
        kh_assert(p, kh_send_str(fd, GET("/file")) == 0, "send");
        char buf[4096];
        kh_assert(p, kh_recv_n(fd, buf, sizeof buf, sizeof buf - 1, 10000) == sizeof buf - 1,
                  "the file does not start");
        if (round % 2 == 0) {
            /* Reset at once, with most of the file still to come. */
            struct linger lg = {1, 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        close(fd);
    }
    /* The same through the raw protocol: its callback must report it. */
    int fd = connect_small_window(kh_port(p, 1));
    kh_assert(p, kh_send_str(fd, "twice\n") == 0, "send");
    char buf[4096];
    kh_recv_n(fd, buf, sizeof buf, sizeof buf - 1, 10000);
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    /* The reset may come while the first file is still inside its first
     * call (the second is then refused) or later (both are queued): one
     * callback per accepted file either way, none of them "ok"; every file
     * closed from its callback shows in the descriptor count below. */
    kh_assert(p, kh_wait_log(p, "transfer done:", 10000), "no callback for the first file");
    expect_fds_back(p, baseline); /* every callback has run: each closes its file */
    int n = kh_count_log(p, "transfer done:");
    kh_assert(p, n == 1 || n == 2, "%d callbacks for at most two files", n);
    kh_assert(p, kh_count_log(p, "transfer done: ok") == 0, "a failed transfer reported ok");
    /* Still serving, and nothing kept: no socket duplicate, no file. */
    ht_roundtrip(p, GET("/range?offset=100&length=100"), &r);
    kh_assert(p, r.status == 206, "status %d after the resets", r.status);
    expect_file(p, &r, 100, 100);
    ht_resp_free(&r);
    expect_fds_back(p, baseline);
    expect_clean_exit(p);
}

Test(sendfile, stalled_reader_hits_the_write_timeout, .timeout = 120, .fini = cleanup)
{
    kh_proc *p = start("", "", "write_timeout = 1s\n", NULL);
    int baseline = kh_count_fds(p);
    int fd = connect_small_window(kh_port(p, 0));
    kh_assert(p, kh_send_str(fd, GET("/file")) == 0, "send");
    /* Never read: the server gives up after write_timeout and closes
     * (the connection, its socket's duplicate and the file). */
    long long t0 = kh_now_ms();
    kh_assert(p, baseline < 0 || KH_WAIT_UNTIL(kh_count_fds(p) > baseline, 5000),
              "the transfer does not start");
    expect_fds_back(p, baseline);
    long long took = kh_now_ms() - t0;
    kh_assert(p, took >= 900, "closed after %lld ms, before the write timeout", took);
    /* What the socket holds arrives, then the end (EOF or a reset). */
    size_t len;
    free(ht_read_to_eof(fd, FILE_SIZE + 65536, &len, 10000));
    kh_assert(p, len < FILE_SIZE, "the whole file arrived (%zu bytes)", len);
    close(fd);
    ht_resp r;
    ht_roundtrip(p, GET("/small"), &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    ht_resp_free(&r);
    expect_clean_exit(p);
}

Test(sendfile, head_and_304_send_no_body, .timeout = 60, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "HEAD /file HTTP/1.1\r\nHost: h\r\n\r\n" GET("/notmodified") GET("/small"));
    ht_resp r;
    expect_response(p, c, &r, 1);
    kh_assert(p, r.status == 200, "HEAD: status %d", r.status);
    kh_assert(p, r.content_length == FILE_SIZE, "HEAD: Content-Length %lld:\n%s",
              (long long)r.content_length, r.head);
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 304, "status %d", r.status);
    ht_resp_free(&r);
    /* Had either sent a body, this would read file bytes as a response. */
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && strcmp(r.body, "small\n") == 0, "then: %d '%.40s'", r.status,
              r.body);
    ht_resp_free(&r);
    kh_assert(p, ht_silent(c, 200), "bytes after the last response");
    ht_close(c);
    expect_clean_exit(p);
}

Test(sendfile, ranges_are_exact, .timeout = 60, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, NULL);
    const struct {
        size_t offset, length;
    } cases[] = {
        {0, 1}, {12345, 1000000}, {FILE_SIZE - 1, 1}, {65535, 65537}, {1, FILE_SIZE - 1},
    };
    ht_conn *c = ht_connect(kh_port(p, 0));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ht_send_str(c, ht_fmt("GET /range?offset=%zu&length=%zu HTTP/1.1\r\nHost: h\r\n\r\n",
                              cases[i].offset, cases[i].length));
        ht_resp r;
        expect_response(p, c, &r, 0);
        kh_assert(p, r.status == 206, "range %zu+%zu: status %d", cases[i].offset, cases[i].length,
                  r.status);
        expect_file(p, &r, cases[i].offset, cases[i].length);
        ht_resp_free(&r);
    }
    ht_close(c);
    expect_clean_exit(p);
}

Test(sendfile, short_file_closes_the_connection, .timeout = 60, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, GET("/short") GET("/small"));
    ht_resp r;
    kh_assert(p, ht_read_head(c, &r, 10000) == 0, "head: %s", r.err);
    kh_assert(p, r.content_length == FILE_SIZE + 1000, "Content-Length %lld",
              (long long)r.content_length);
    /* The file's bytes, then the connection ends: no second response. */
    ht_wait_bytes(c, FILE_SIZE + 1, 20000);
    kh_assert(p, ht_avail(c) == FILE_SIZE && c->eof, "%zu body bytes%s", ht_avail(c),
              c->eof ? ", then closed" : ", not closed");
    kh_assert(p, memcmp(c->buf + c->pos, g_data, FILE_SIZE) == 0, "body differs from the file");
    ht_resp_free(&r);
    ht_close(c);
    expect_clean_exit(p);
}

Test(sendfile, curl_downloads_the_file, .timeout = 60, .fini = cleanup)
{
    const char *version[] = {"curl", "--version", NULL};
    ht_run_result rr = ht_run(version, 5000);
    int have_curl = rr.status == 0;
    ht_run_free(&rr);
    if (!have_curl)
        cr_skip_test("curl is not installed");
    kh_proc *p = start("", "", NULL, NULL);
    char url[64], out[320];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/file", kh_port(p, 0));
    snprintf(out, sizeof out, "%s/download.bin", g_dir);
    const char *argv[] = {"curl", "--silent", "--show-error", "--max-time", "30", "-o", out,
                          url,    NULL};
    rr = ht_run(argv, 40000);
    kh_assert(p, rr.status == 0, "curl exit %d: %s", rr.status, rr.err);
    ht_run_free(&rr);
    FILE *f = fopen(out, "rb");
    kh_assert(p, f != NULL, "no download");
    char *got = malloc(FILE_SIZE + 1);
    size_t n = fread(got, 1, FILE_SIZE + 1, f);
    fclose(f);
    unlink(out);
    kh_assert(p, n == FILE_SIZE && memcmp(got, g_data, FILE_SIZE) == 0,
              "curl's file differs (%zu bytes)", n);
    free(got);
    expect_clean_exit(p);
}

/* ---- HTTP: the fallbacks --------------------------------------------------------- */

Test(sendfile, body_filter_reads_the_file_instead, .timeout = 60, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, "body_filter = on\n");
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, GET("/file") GET("/range?offset=777&length=70000") GET("/small"));
    ht_resp r;
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p,
              r.body_len == FILE_SIZE && (r.content_length == FILE_SIZE || r.chunked) &&
                  memcmp(r.body, g_data, FILE_SIZE) == 0,
              "body of %zu bytes differs from the file", r.body_len);
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 206 && r.body_len == 70000 && memcmp(r.body, g_data + 777, 70000) == 0,
              "range: %d, %zu bytes", r.status, r.body_len);
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    kh_assert(p, strcmp(r.body, "small\n") == 0, "then '%.40s'", r.body);
    ht_resp_free(&r);
    ht_close(c);
    expect_clean_exit(p);
}

/* A body filter that skips the response (ABI 1.4) leaves it as if there were
 * none: its body hook never runs, and the file keeps its Content-Length
 * framing and the protocol's send_file. */
Test(sendfile, body_filter_that_skips_leaves_the_file_alone, .timeout = 60, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, "body_filter = skip\n");
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, GET("/file") GET("/small"));
    ht_resp r;
    expect_response(p, c, &r, 0);
    kh_assert(p,
              r.status == 200 && !r.chunked && r.content_length == FILE_SIZE &&
                  r.body_len == FILE_SIZE && memcmp(r.body, g_data, FILE_SIZE) == 0,
              "status %d, chunked %d, %zu bytes", r.status, r.chunked, r.body_len);
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    kh_assert(p, strcmp(r.body, "small\n") == 0, "then '%.40s'", r.body);
    ht_resp_free(&r);
    ht_close(c);
    kh_assert(p, kh_count_log(p, "files: filter saw a body") == 0, "the skipped filter ran");
    kh_assert(p, kh_count_log(p, "skip_body refused") == 0, "skip_body was refused");
    expect_clean_exit(p);
}

static void expect_wrapped(kh_proc *p, const ht_resp *r, const char *inner_head, size_t offset,
                           size_t length, const char *inner_tail);

/* The client reads nothing: the filter's copies (or the ranges a pieces
 * filter passed on) must wait for the socket, not pull the whole file
 * into keel's memory. */
static void filter_at_the_peers_pace(const char *files_section, int wrapped)
{
    g_file_size = 32u * 1024 * 1024;
    kh_proc *p = start("", "", NULL, files_section);
    ht_resp r;
    ht_roundtrip(p, GET("/small"), &r);
    ht_resp_free(&r);
    long long before = ht_bytes_read(p);
    ht_conn *c = wrap(connect_small_window(kh_port(p, 0)));
    ht_send_str(c, GET("/file"));
    expect_reading_stalls(p, before);
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200, "status %d", r.status);
    if (wrapped)
        expect_wrapped(p, &r, "", 0, FILE_SIZE, "");
    else
        kh_assert(p, r.body_len == FILE_SIZE && memcmp(r.body, g_data, FILE_SIZE) == 0,
                  "%zu bytes, or they differ from the file", r.body_len);
    ht_resp_free(&r);
    ht_close(c);
    expect_clean_exit(p);
}

Test(sendfile, body_filter_reads_at_the_peers_pace, .timeout = 120, .fini = cleanup)
{
    filter_at_the_peers_pace("body_filter = on\n", 0);
}

/* The ranges a pieces filter passed on wait for the socket like any file
 * body. */
Test(sendfile, pieces_filter_sends_at_the_peers_pace, .timeout = 120, .fini = cleanup)
{
    filter_at_the_peers_pace("body_filter = wrap\n", 1);
}

/* Chunked framing (a trailer asks for it) no longer makes the core read
 * the file: HTTP/1.1 puts the size line before the range and the chunk's
 * end after it, as nginx's chunked filter frames in-file buffers. */
Test(sendfile, chunked_response_frames_the_file, .timeout = 60, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, GET("/trailer") GET("/small"));
    ht_resp r;
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && r.chunked, "status %d, not chunked:\n%s", r.status, r.head);
    kh_assert(p, r.body_len == FILE_SIZE && memcmp(r.body, g_data, FILE_SIZE) == 0,
              "body of %zu bytes differs from the file", r.body_len);
    const char *done = ht_trailer(&r, "X-Done");
    kh_assert(p, done && strcmp(done, "yes") == 0, "trailer X-Done '%s'", done ? done : "");
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    kh_assert(p, strcmp(r.body, "small\n") == 0, "then '%.40s'", r.body);
    ht_resp_free(&r);
    ht_close(c);
    expect_clean_exit(p);
}

/* ---- body filters that take pieces (ABI 1.9) ---------------------------------- */

/* The body of r is "<<" + the file's [offset, offset + length) + ">>",
 * with `inner_head`/`inner_tail` around the file's bytes. */
static void expect_wrapped(kh_proc *p, const ht_resp *r, const char *inner_head, size_t offset,
                           size_t length, const char *inner_tail)
{
    size_t h = 2 + strlen(inner_head), t = strlen(inner_tail) + 2;
    kh_assert(p, r->body_len == h + length + t, "body of %zu bytes, expected %zu", r->body_len,
              h + length + t);
    kh_assert(p,
              memcmp(r->body, "<<", 2) == 0 && memcmp(r->body + 2, inner_head, h - 2) == 0 &&
                  memcmp(r->body + h + length, inner_tail, t - 2) == 0 &&
                  memcmp(r->body + h + length + t - 2, ">>", 2) == 0,
              "not wrapped: '%.8s' ... '%.8s'", r->body, r->body + r->body_len - 8);
    kh_assert(p, memcmp(r->body + h, g_data + offset, length) == 0,
              "the file's bytes differ inside the wrapping");
}

static void expect_wrap_log(kh_proc *p, unsigned long long file_bytes, unsigned long long bytes)
{
    char line[128];
    snprintf(line, sizeof line, "files: wrap passed %llu file bytes and %llu bytes", file_bytes,
             bytes);
    kh_assert(p, kh_wait_log(p, line, 10000), "no '%s' in the log", line);
}

/* Every body filter takes pieces: the file ranges of send_file, a 206 and
 * send_pieces reach the filter unread and leave framed in chunks (the
 * length changed), in order with the filter's own bytes; a trailer
 * follows; bytes from memory arrive as bytes pieces. */
Test(sendfile, pieces_filter_passes_file_ranges_unread, .timeout = 120, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, "body_filter = wrap\n");
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, GET("/file") GET("/range?offset=777&length=70000") GET("/pieces") GET("/trailer")
                       GET("/small"));
    ht_resp r;
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && r.chunked, "status %d, not chunked:\n%s", r.status, r.head);
    expect_wrapped(p, &r, "", 0, FILE_SIZE, "");
    expect_wrap_log(p, FILE_SIZE, 0);
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 206, "range: status %d", r.status);
    expect_wrapped(p, &r, "", 777, 70000, "");
    expect_wrap_log(p, 70000, 0);
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    expect_wrapped(p, &r, "A\n", 0, FILE_SIZE, "B\n");
    expect_wrap_log(p, FILE_SIZE, 4);
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    expect_wrapped(p, &r, "", 0, FILE_SIZE, "");
    const char *done = ht_trailer(&r, "X-Done");
    kh_assert(p, done && strcmp(done, "yes") == 0, "trailer X-Done '%s'", done ? done : "");
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    kh_assert(p, r.body_len == 10 && memcmp(r.body, "<<small\n>>", 10) == 0, "then '%.40s'",
              r.body);
    expect_wrap_log(p, 0, 6);
    ht_resp_free(&r);
    ht_close(c);
    expect_clean_exit(p);
}

/* With a bytes filter after it, the pieces filter gets the file's bytes
 * (the core reads them first), and the body is the same. */
Test(sendfile, pieces_filter_gets_bytes_when_a_filter_needs_them, .timeout = 120, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, "body_filter = wrap+bytes\n");
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, GET("/file") GET("/pieces"));
    ht_resp r;
    expect_response(p, c, &r, 0);
    expect_wrapped(p, &r, "", 0, FILE_SIZE, "");
    expect_wrap_log(p, 0, FILE_SIZE);
    ht_resp_free(&r);
    expect_response(p, c, &r, 0);
    expect_wrapped(p, &r, "A\n", 0, FILE_SIZE, "B\n");
    expect_wrap_log(p, 0, FILE_SIZE + 4);
    ht_resp_free(&r);
    ht_close(c);
    expect_clean_exit(p);
}

Test(sendfile, transport_gets_the_same_bytes, .timeout = 60, .fini = cleanup)
{
    kh_proc *p = start("rot13", "", NULL, NULL);
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    char req[] =
        "GET /file HTTP/1.1\r\nHost: h\r\n\r\n"
        "GET /range?offset=5&length=100000 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    ht_rot13(req, sizeof req - 1);
    kh_assert(p, kh_send(fd, req, sizeof req - 1) == 0, "send");
    size_t len;
    char *got = ht_read_to_eof(fd, FILE_SIZE + 65536, &len, 30000);
    close(fd);
    ht_rot13(got, len);
    /* Two responses, then the transport's closing record. */
    const char *at = got, *end = got + len;
    for (int i = 0; i < 2; i++) {
        const char *head_end = memmem(at, (size_t)(end - at), "\r\n\r\n", 4);
        kh_assert(p, head_end != NULL, "response %d: no head in %zu bytes", i, len);
        const char *cl = memmem(at, (size_t)(head_end - at), "Content-Length: ", 16);
        kh_assert(p, cl != NULL, "response %d: no Content-Length", i);
        size_t n = (size_t)strtoull(cl + 16, NULL, 10);
        size_t offset = i == 0 ? 0 : 5;
        kh_assert(p, n == (i == 0 ? FILE_SIZE : 100000), "response %d: Content-Length %zu", i, n);
        at = head_end + 4;
        kh_assert(p, (size_t)(end - at) >= n, "response %d: %zu of %zu body bytes", i,
                  (size_t)(end - at), n);
        kh_assert(p, memcmp(at, g_data + offset, n) == 0, "response %d: body differs", i);
        at += n;
    }
    kh_assert(p, (size_t)(end - at) == 8 && memcmp(at, "#closed\n", 8) == 0,
              "after the responses: %zu bytes", (size_t)(end - at));
    free(got);
    expect_clean_exit(p);
}

/* ---- keel_conn_write_file under a raw protocol ------------------------------------ */

/* "BEGIN\n" file ["MID\n" file] "END\n", as filecat answers. */
static void expect_framed(kh_proc *p, const char *got, size_t len, int files)
{
    size_t want = 6 + (size_t)files * FILE_SIZE + (files == 2 ? 4 : 0) + 4;
    kh_assert(p, len == want, "%zu bytes, expected %zu", len, want);
    kh_assert(p, memcmp(got, "BEGIN\n", 6) == 0, "no BEGIN first");
    kh_assert(p, memcmp(got + 6, g_data, FILE_SIZE) == 0, "the first file differs");
    const char *at = got + 6 + FILE_SIZE;
    if (files == 2) {
        kh_assert(p, memcmp(at, "MID\n", 4) == 0, "no MID between the files");
        kh_assert(p, memcmp(at + 4, g_data, FILE_SIZE) == 0, "the second file differs");
        at += 4 + FILE_SIZE;
    }
    kh_assert(p, memcmp(at, "END\n", 4) == 0, "no END last");
}

Test(sendfile, writes_after_a_file_wait_for_it, .timeout = 120, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, NULL);
    int fd = kh_connect("127.0.0.1", kh_port(p, 1));
    kh_assert(p, fd >= 0, "connect");
    kh_assert(p, kh_send_str(fd, "file\n") == 0, "send");
    char *got = malloc(FILE_SIZE + 64);
    size_t n = kh_recv_n(fd, got, FILE_SIZE + 64, 6 + FILE_SIZE + 4, 30000);
    expect_framed(p, got, n, 1);
    /* The same with BEGIN as the file's prefix (sent with MSG_MORE). */
    kh_assert(p, kh_send_str(fd, "after\n") == 0, "send");
    n = kh_recv_n(fd, got, FILE_SIZE + 64, 6 + FILE_SIZE + 4, 30000);
    expect_framed(p, got, n, 1);
    free(got);
    /* Two files with a write between them; then EOF from us: the close
     * waits until everything has gone out. */
    kh_assert(p, kh_send_str(fd, "twice\n") == 0, "send");
    shutdown(fd, SHUT_WR);
    size_t len;
    got = ht_read_to_eof(fd, FILE_SIZE + 65536, &len, 30000);
    close(fd);
    expect_framed(p, got, len, 2);
    free(got);
    kh_assert(p, kh_count_log(p, "transfer done: ok") == 4, "%d ok callbacks for 4 files",
              kh_count_log(p, "transfer done: ok"));
    expect_clean_exit(p);
}

Test(sendfile, transport_reads_at_the_peers_pace, .timeout = 120, .fini = cleanup)
{
    g_file_size = 32u * 1024 * 1024;
    kh_proc *p = start("", "rot13", NULL, NULL);
    long long before = ht_bytes_read(p);
    int fd = connect_small_window(kh_port(p, 1));
    char cmd[] = "file\n";
    ht_rot13(cmd, sizeof cmd - 1);
    kh_assert(p, kh_send_str(fd, cmd) == 0, "send");
    /* The transport takes each piece at once; the next read must still
     * wait until the socket has taken it. */
    expect_reading_stalls(p, before);
    kh_assert(p, kh_count_log(p, "transfer done") == 0,
              "the file was read whole while the peer read nothing");
    shutdown(fd, SHUT_WR);
    size_t len;
    char *got = ht_read_to_eof(fd, FILE_SIZE + 65536, &len, 30000);
    close(fd);
    ht_rot13(got, len);
    kh_assert(p, len >= 8 && memcmp(got + len - 8, "#closed\n", 8) == 0,
              "no closing record last (%zu bytes)", len);
    expect_framed(p, got, len - 8, 1);
    free(got);
    kh_assert(p, kh_count_log(p, "transfer done: ok") == 1, "no 'transfer done: ok'");
    expect_clean_exit(p);
}

Test(sendfile, writes_after_a_file_through_a_transport, .timeout = 120, .fini = cleanup)
{
    kh_proc *p = start("", "rot13", NULL, NULL);
    int fd = kh_connect("127.0.0.1", kh_port(p, 1));
    kh_assert(p, fd >= 0, "connect");
    char cmd[] = "after\ntwice\n";
    ht_rot13(cmd, sizeof cmd - 1);
    kh_assert(p, kh_send_str(fd, cmd) == 0, "send");
    shutdown(fd, SHUT_WR);
    size_t len;
    char *got = ht_read_to_eof(fd, FILE_SIZE + 65536, &len, 30000);
    close(fd);
    ht_rot13(got, len);
    /* The transport's closing record comes after everything. */
    kh_assert(p, len >= 8 && memcmp(got + len - 8, "#closed\n", 8) == 0,
              "no closing record last (%zu bytes)", len);
    /* "after" (its prefix written through the transport), then "twice". */
    size_t first = 6 + FILE_SIZE + 4;
    kh_assert(p, len - 8 > first, "%zu bytes", len);
    expect_framed(p, got, first, 1);
    expect_framed(p, got + first, len - 8 - first, 2);
    free(got);
    expect_clean_exit(p);
}

/* ---- keel_response_abort (ABI 1.4) ------------------------------------------------ */

/* A response cut short must not pass for a whole one: chunked, no last
 * chunk; with a Content-Length, fewer bytes; either way the connection
 * closes and the request behind it is not answered. */
Test(sendfile, aborted_response_cannot_pass_for_whole, .timeout = 60, .fini = cleanup)
{
    kh_proc *p = start("", "", NULL, NULL);
    for (int framed = 0; framed < 2; framed++) {
        ht_conn *c = ht_connect(kh_port(p, 0));
        ht_send_str(c, framed ? GET("/cut?length=1000") GET("/small") : GET("/cut") GET("/small"));
        ht_resp r;
        kh_assert(p, ht_read_head(c, &r, 10000) == 0, "head: %s", r.err);
        kh_assert(p, ht_read_body(c, &r, 0, 10000) != 0, "the cut body read as complete (%s)",
                  framed ? "Content-Length" : "chunked");
        kh_assert(p, c->eof, "the connection stayed open");
        kh_assert(p, strstr(c->buf, "small\n") == NULL, "the next request was answered");
        ht_resp_free(&r);
        ht_close(c);
    }
    expect_clean_exit(p);
}
