/* keel (http1 + hello) with curl as a real client: connection reuse for two
 * URLs, POST bodies by Content-Length (with curl's own Expect: 100-continue)
 * and chunked, HTTP/1.0, HEAD, streaming. curl runs with a deadline
 * (--max-time, and a kill after it). Skipped where curl is missing. */
#define _GNU_SOURCE
#include "test_http.h"

#define CURL_TIMEOUT_MS 20000

static void need_curl(void)
{
    const char *argv[] = {"curl", "--version", NULL};
    ht_run_result rr = ht_run(argv, 5000);
    int ok = rr.status == 0;
    ht_run_free(&rr);
    if (!ok)
        cr_skip_test("curl is not installed");
}

/* Runs curl with --silent --show-error --max-time 15 and the given
 * arguments (at most 16, NULL-terminated). */
static ht_run_result curl(const char *const *args)
{
    const char *argv[24] = {"curl", "--silent", "--show-error", "--max-time", "15"};
    int n = 5;
    for (; *args; args++) {
        cr_assert(n < 23, "too many curl arguments");
        argv[n++] = *args;
    }
    argv[n] = NULL;
    return ht_run(argv, CURL_TIMEOUT_MS);
}

#define CURL_SHOW(rr) "\n---- curl exit %d, stderr ----\n%s---- stdout ----\n%.2000s\n---- end ----"

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "create %s: %s", path, strerror(errno));
    cr_assert(fwrite(data, 1, len, f) == len && fclose(f) == 0, "write %s", path);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "open %s: %s", path, strerror(errno));
    char *buf = NULL;
    *len = 0;
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        ht_append(&buf, len, tmp, n);
    fclose(f);
    if (!buf)
        ht_append(&buf, len, "", 0);
    return buf;
}

/* A random-looking body of n bytes (every byte value). */
static char *make_body(size_t n)
{
    char *b = malloc(n);
    cr_assert(b);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (char)x;
    }
    return b;
}

Test(http_curl, keep_alive_reuses_one_connection, .timeout = 60, .fini = kh_cleanup_all)
{
    need_curl();
    kh_proc *p = ht_start(NULL, NULL);
    char u1[64], u2[64];
    snprintf(u1, sizeof u1, "http://127.0.0.1:%u/", kh_port(p, 0));
    snprintf(u2, sizeof u2, "http://127.0.0.1:%u/hello/curl", kh_port(p, 0));
    const char *args[] = {"-v", u1, u2, NULL};
    ht_run_result rr = curl(args);
    kh_assert(p, rr.status == 0, "curl failed" CURL_SHOW(rr), rr.status, rr.err, rr.out);
    kh_assert(p, strcmp(rr.out, "Hello, World!Hello, curl!") == 0, "bodies" CURL_SHOW(rr),
              rr.status, rr.err, rr.out);
    kh_assert(p, strstr(rr.err, "Re-using existing connection") != NULL,
              "curl did not reuse the connection" CURL_SHOW(rr), rr.status, rr.err, rr.out);
    kh_assert(p, strstr(rr.err, "< Date: ") != NULL, "no Date" CURL_SHOW(rr), rr.status, rr.err,
              rr.out);
    ht_run_free(&rr);
    kh_stop(p);
}

Test(http_curl, post_data_binary_is_echoed, .timeout = 60, .fini = kh_cleanup_all)
{
    need_curl();
    /* 1.5 MiB: above the size where curl sends Expect: 100-continue. */
    const char *set[] = {"--set", HT_MAX_BODY "=4m", NULL};
    kh_proc *p = ht_start(NULL, set);
    size_t n = 3 << 19;
    char *body = make_body(n);
    char in[400], out[400], url[64];
    snprintf(in, sizeof in, "%s/body.in", p->dir);
    snprintf(out, sizeof out, "%s/body.out", p->dir);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/echo", kh_port(p, 0));
    write_file(in, body, n);
    char data[420];
    snprintf(data, sizeof data, "@%s", in);

    const char *args[] = {"-v",
                          "--data-binary",
                          data,
                          "-H",
                          "Content-Type: application/x-keel-test",
                          "-o",
                          out,
                          "-w",
                          "%{http_code} %{content_type}",
                          url,
                          NULL};
    ht_run_result rr = curl(args);
    kh_assert(p, rr.status == 0, "curl failed" CURL_SHOW(rr), rr.status, rr.err, rr.out);
    kh_assert(p, strcmp(rr.out, "200 application/x-keel-test") == 0,
              "status and type" CURL_SHOW(rr), rr.status, rr.err, rr.out);
    if (strstr(rr.err, "> Expect: 100-continue"))
        kh_assert(p, strstr(rr.err, "< HTTP/1.1 100 Continue") != NULL,
                  "curl asked for 100-continue and got none" CURL_SHOW(rr), rr.status, rr.err,
                  rr.out);
    size_t got_len;
    char *got = read_file(out, &got_len);
    kh_assert(p, got_len == n && memcmp(got, body, n) == 0, "echo of %zu bytes: got %zu, differs",
              n, got_len);
    free(got);
    ht_run_free(&rr);

    /* The same, chunked. */
    const char *chunked[] = {
        "--data-binary", data, "-H", "Transfer-Encoding: chunked", "-o", out, "-w",
        "%{http_code}",  url,  NULL};
    rr = curl(chunked);
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "200") == 0, "chunked upload" CURL_SHOW(rr),
              rr.status, rr.err, rr.out);
    got = read_file(out, &got_len);
    kh_assert(p, got_len == n && memcmp(got, body, n) == 0,
              "chunked echo of %zu bytes: got %zu, differs", n, got_len);
    free(got);
    ht_run_free(&rr);
    unlink(in);
    unlink(out);
    free(body);
    kh_stop(p);
}

Test(http_curl, http_1_0, .timeout = 60, .fini = kh_cleanup_all)
{
    need_curl();
    kh_proc *p = ht_start(NULL, NULL);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/hello/ten", kh_port(p, 0));
    const char *args[] = {"-v", "--http1.0", url, NULL};
    ht_run_result rr = curl(args);
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "Hello, ten!") == 0, "--http1.0" CURL_SHOW(rr),
              rr.status, rr.err, rr.out);
    kh_assert(p, strstr(rr.err, "> GET /hello/ten HTTP/1.0") != NULL,
              "curl did not speak 1.0" CURL_SHOW(rr), rr.status, rr.err, rr.out);
    ht_run_free(&rr);

    /* A streamed (unknown-length) body to a 1.0 client. */
    snprintf(url, sizeof url, "http://127.0.0.1:%u/stream?n=2", kh_port(p, 0));
    const char *stream[] = {"--http1.0", url, NULL};
    rr = curl(stream);
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "chunk 1 of 2\nchunk 2 of 2\n") == 0,
              "1.0 stream" CURL_SHOW(rr), rr.status, rr.err, rr.out);
    ht_run_free(&rr);
    kh_stop(p);
}

Test(http_curl, head_and_errors, .timeout = 60, .fini = kh_cleanup_all)
{
    need_curl();
    kh_proc *p = ht_start(NULL, NULL);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", kh_port(p, 0));
    const char *head[] = {"-I", url, NULL};
    ht_run_result rr = curl(head);
    kh_assert(p, rr.status == 0 && strncmp(rr.out, "HTTP/1.1 200", 12) == 0,
              "curl -I" CURL_SHOW(rr), rr.status, rr.err, rr.out);
    kh_assert(p, strcasestr(rr.out, "\r\nContent-Length: 13\r\n") != NULL,
              "HEAD without Content-Length: 13" CURL_SHOW(rr), rr.status, rr.err, rr.out);
    ht_run_free(&rr);

    snprintf(url, sizeof url, "http://127.0.0.1:%u/missing", kh_port(p, 0));
    const char *missing[] = {"-o", "/dev/null", "-w", "%{http_code}", url, NULL};
    rr = curl(missing);
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "404") == 0, "404" CURL_SHOW(rr), rr.status,
              rr.err, rr.out);
    ht_run_free(&rr);

    snprintf(url, sizeof url, "http://127.0.0.1:%u/echo", kh_port(p, 0));
    const char *wrong[] = {"-o", "/dev/null", "-D", "-", url, NULL};
    rr = curl(wrong);
    kh_assert(p, rr.status == 0 && strncmp(rr.out, "HTTP/1.1 405", 12) == 0,
              "GET /echo" CURL_SHOW(rr), rr.status, rr.err, rr.out);
    kh_assert(p, strcasestr(rr.out, "\r\nAllow: ") != NULL, "405 without Allow" CURL_SHOW(rr),
              rr.status, rr.err, rr.out);
    ht_run_free(&rr);
    kh_stop(p);
}

Test(http_curl, stream_with_trailer, .timeout = 60, .fini = kh_cleanup_all)
{
    need_curl();
    kh_proc *p = ht_start(NULL, NULL);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/stream?n=4", kh_port(p, 0));
    const char *args[] = {url, NULL};
    ht_run_result rr = curl(args);
    kh_assert(p,
              rr.status == 0 &&
                  strcmp(rr.out, "chunk 1 of 4\nchunk 2 of 4\nchunk 3 of 4\nchunk 4 of 4\n") == 0,
              "stream" CURL_SHOW(rr), rr.status, rr.err, rr.out);
    ht_run_free(&rr);

    /* --raw: the chunked framing as sent, trailer included. */
    const char *raw[] = {"--raw", "-H", "TE: trailers", url, NULL};
    rr = curl(raw);
    kh_assert(p,
              rr.status == 0 && strstr(rr.out, "\r\n0\r\n") &&
                  strcasestr(rr.out, "\r\nX-Stream-Chunks: 4\r\n\r\n"),
              "raw chunked stream without the trailer" CURL_SHOW(rr), rr.status, rr.err, rr.out);
    ht_run_free(&rr);
    kh_stop(p);
}
