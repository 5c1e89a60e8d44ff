/* Bodies streamed through the proxy, and back-pressure both ways: a slow
 * client of a large upstream response and a slow upstream taking a large
 * upload must not make keel hold the body. The bound is checked on keel's
 * resident memory (VmRSS) sampled while the transfer runs: holding the
 * body would cost 32 MiB; the proxy's `buffer` is 64 KiB a direction. */
#define _GNU_SOURCE
#include "test_proxy.h"

#include <sys/wait.h>

#define BIG (32u << 20)

/* Runs curl with args in a child; samples keel's RSS every 50 ms until curl
 * exits. Returns curl's exit status; *max_kib the largest RSS seen. */
static int curl_sampling(kh_proc *p, const char *const *args, long *max_kib)
{
    const char *argv[32] = {"curl", "--silent", "--show-error", "--max-time", "40"};
    int n = 5;
    for (; *args; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    fflush(NULL);
    pid_t child = fork();
    cr_assert(child >= 0);
    if (child == 0) {
        execvp("curl", (char *const *)argv);
        _exit(127);
    }
    *max_kib = 0;
    long long deadline = kh_now_ms() + 45000;
    int status = -1;
    for (;;) {
        long rss = px_rss_kib(p->pid);
        if (rss > *max_kib)
            *max_kib = rss;
        pid_t r = waitpid(child, &status, WNOHANG);
        if (r == child)
            break;
        if (kh_now_ms() > deadline) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            return -2;
        }
        kh_sleep_ms(50);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* keel proxying to proxy_upstream.py, with `http1` appended to its
 * [http1] section. */
static kh_proc *proxy_to_python_with(kh_proc **up, const char *http1)
{
#if defined(__SANITIZE_ADDRESS__)
    /* ASan keeps freed blocks in quarantine (256 MiB by default), which
     * RSS would count as held: keep none, so RSS measures what keel holds. */
    const char *o = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=0:thread_local_quarantine_size_kb=0",
             o ? o : "", o && *o ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
#endif
    *up = px_upstream();
    char section[512];
    /* http1's max_body (1 MiB by default) bounds proxied uploads too, as
     * nginx's client_max_body_size does. */
    snprintf(section, sizeof section,
             "upstream = py 127.0.0.1:%u\npass = / py\n[http1]\nmax_body = 64m\n%s",
             kh_port(*up, 0), http1);
    return px_keel(section, 0);
}

static kh_proc *proxy_to_python(kh_proc **up)
{
    return proxy_to_python_with(up, "");
}

/* A file of n bytes (a multiple of 64 KiB) in p's folder: its path. */
static const char *upload_file(kh_proc *p, unsigned n, char *out, size_t size)
{
    snprintf(out, size, "%s/upload.bin", p->dir);
    FILE *f = fopen(out, "wb");
    cr_assert(f);
    char block[65536];
    memset(block, 'u', sizeof block);
    for (unsigned i = 0; i < n / sizeof block; i++)
        cr_assert(fwrite(block, 1, sizeof block, f) == sizeof block);
    fclose(f);
    return out;
}

Test(proxy_stream, large_response_whole_and_exact, .timeout = 90, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = proxy_to_python(&up);
    char url[160], path[300];
    snprintf(path, sizeof path, "%s/big.out", p->dir);
    const char *args[] = {"-o", path, px_url(url, sizeof url, p, 0, "/big?n=8388608"), NULL};
    ht_run_result rr = px_curl(args);
    kh_assert(p, rr.status == 0, "curl" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    size_t total = 0, bad = 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
        if ((unsigned char)c != (total & 255))
            bad++;
        total++;
    }
    fclose(f);
    kh_assert(p, total == 8388608 && bad == 0, "%zu bytes, %zu wrong", total, bad);
    px_stop(p);
}

Test(proxy_stream, slow_client_bounded_memory, .timeout = 90, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = proxy_to_python(&up);
    char url[160], path[64];
    /* kh_start returned once keel logged its listeners, which it does after
     * every worker started: the baseline is keel at rest. */
    long before = px_rss_kib(p->pid);
    snprintf(path, sizeof path, "/big?n=%u", BIG);
    /* 32 MiB at 8 MiB/s: four seconds in which the upstream could send it
     * all (it writes as fast as the socket takes it). */
    const char *args[] = {
        "-o", "/dev/null", "--limit-rate", "8M", px_url(url, sizeof url, p, 0, path), NULL};
    long max = 0;
    int rc = curl_sampling(p, args, &max);
    kh_assert(p, rc == 0, "curl exit %d", rc);
    kh_assert(p, before > 0 && max - before < 12 * 1024,
              "keel's RSS grew by %ld KiB for a 32 MiB response to a slow client", max - before);
    px_stop(p);
}

Test(proxy_stream, slow_upstream_bounded_memory, .timeout = 90, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = proxy_to_python(&up);
    char url[160], file[320], data[330];
    snprintf(data, sizeof data, "@%s", upload_file(p, BIG, file, sizeof file));
    long before = px_rss_kib(p->pid);
    /* The upstream reads 1 MiB per 100 ms: about 3 s for 32 MiB, while
     * curl could send it all in a fraction of that. */
    const char *args[] = {"-o",
                          "/dev/null",
                          "-H",
                          "Expect:",
                          "--data-binary",
                          data,
                          px_url(url, sizeof url, p, 0, "/upload?rate=1048576"),
                          NULL};
    long max = 0;
    int rc = curl_sampling(p, args, &max);
    kh_assert(p, rc == 0, "curl exit %d", rc);
    kh_assert(p, before > 0 && max - before < 12 * 1024,
              "keel's RSS grew by %ld KiB for a 32 MiB upload to a slow upstream", max - before);
    /* and the upstream got all of it */
    const char *plain[] = {"-H",
                           "Expect:",
                           "--data-binary",
                           data,
                           px_url(url, sizeof url, p, 0, "/upload?rate=16777216"),
                           NULL};
    ht_run_result rr = px_curl(plain);
    char want[32];
    snprintf(want, sizeof want, "%u", BIG);
    kh_assert(p, strcmp(rr.out, want) == 0, "upload length" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* A chunked upload (curl -T - sends chunked) arrives whole. */
Test(proxy_stream, chunked_upload, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = proxy_to_python(&up);
    char url[160];
    const char *args[] = {"-H",
                          "Transfer-Encoding: chunked",
                          "--data-binary",
                          "@/etc/services",
                          px_url(url, sizeof url, p, 0, "/upload?rate=16777216"),
                          NULL};
    ht_run_result rr = px_curl(args);
    FILE *f = fopen("/etc/services", "rb");
    if (f == NULL)
        cr_skip_test("no /etc/services");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    char want[32];
    snprintf(want, sizeof want, "%ld", size);
    kh_assert(p, strcmp(rr.out, want) == 0, "chunked upload of %ld bytes" PX_SHOW(rr), size,
              PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* An upstream that takes a while to read an upload (busy, or slow to
 * start) pauses the upload's body, not its client's clock: body_timeout
 * (1 s here) is a client that stops sending, and this client sends as
 * fast as keel reads. Before keel_request_body_pause the proxy paused the
 * client's connection, and http1 answered 408 a second into the
 * upstream's wait. */
Test(proxy_stream, slow_upstream_is_not_a_slow_client, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = proxy_to_python_with(&up, "body_timeout = 1s\n");
    char url[160], file[320], data[330];
    unsigned size = 16u << 20; /* past what the sockets to the upstream hold */
    snprintf(data, sizeof data, "@%s", upload_file(p, size, file, sizeof file));
    /* Nothing read for 3 s, then as fast as it comes. */
    const char *args[] = {"-H",
                          "Expect:",
                          "--data-binary",
                          data,
                          px_url(url, sizeof url, p, 0, "/upload?wait=3000&rate=16777216"),
                          NULL};
    ht_run_result rr = px_curl(args);
    char want[32];
    snprintf(want, sizeof want, "%u", size);
    kh_assert(p, rr.status == 0 && strcmp(rr.out, want) == 0,
              "an upload the upstream waited 3 s to read" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}
