/* test_proxy.h — helpers for the test_proxy*.c integration tests: the
 * misbehaving Python upstream (proxy_upstream.py), keel's own hello as an
 * upstream, keel with the proxy module, curl with a deadline, the RSS of a
 * process. Everything listens on 127.0.0.1. Define _GNU_SOURCE first. */
#ifndef KEEL_TEST_PROXY_H
#define KEEL_TEST_PROXY_H

#include "test_http.h"

#include <libgen.h>

#define PX_CURL_TIMEOUT_MS 30000

/* The Python interpreter, or skip. */
static __attribute__((unused)) const char *px_python(void)
{
    static const char *const candidates[] = {"/usr/bin/python3", "/usr/local/bin/python3"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
        if (access(candidates[i], X_OK) == 0)
            return candidates[i];
    cr_skip_test("python3 is not installed");
    return NULL;
}

static __attribute__((unused)) void px_need_curl(void)
{
    const char *argv[] = {"curl", "--version", NULL};
    ht_run_result rr = ht_run(argv, 5000);
    int ok = rr.status == 0;
    ht_run_free(&rr);
    if (!ok)
        cr_skip_test("curl is not installed");
}

/* proxy_upstream.py, next to this file. */
static __attribute__((unused)) kh_proc *px_upstream(void)
{
    static char script[1024];
    char here[1024];
    snprintf(here, sizeof here, "%s", __FILE__);
    snprintf(script, sizeof script, "%s/proxy_upstream.py", dirname(here));
    const char *args[] = {script, NULL};
    return kh_start_program(px_python(), NULL, args, 1, 10000);
}

/* keel's own hello on one http1 listener, as an upstream. */
static __attribute__((unused)) kh_proc *px_hello(void)
{
    return ht_start_n(1, NULL, NULL);
}

/* keel with http1 + proxy (+ `modules_extra`), one worker, the [proxy]
 * section given; listener 0 is http1, listener 1 (if `connect_listener`)
 * the forward proxy. */
static __attribute__((unused)) kh_proc *px_keel_with(const char *modules, const char *proxy_section,
                                                     int connect_listener)
{
    char conf[8192];
    snprintf(conf, sizeof conf,
             "[keel]\n"
             "listen = 127.0.0.1:0 http1\n"
             "%s"
             "workers = 1\n"
             "modules = %s\n" KH_MODULE_PATH "[proxy]\n%s",
             connect_listener ? "listen = 127.0.0.1:0 proxy\n" : "", modules, proxy_section);
    kh_proc *p = kh_start(conf, NULL, connect_listener ? 2 : 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port");
    return p;
}

static __attribute__((unused)) kh_proc *px_keel(const char *proxy_section, int connect_listener)
{
    return px_keel_with("http1 proxy", proxy_section, connect_listener);
}

/* curl --silent --show-error --max-time 20 ARGS... */
static __attribute__((unused)) ht_run_result px_curl(const char *const *args)
{
    const char *argv[32] = {"curl", "--silent", "--show-error", "--max-time", "20"};
    int n = 5;
    for (; *args; args++) {
        cr_assert(n < 31, "too many curl arguments");
        argv[n++] = *args;
    }
    argv[n] = NULL;
    return ht_run(argv, PX_CURL_TIMEOUT_MS);
}

#define PX_SHOW(rr)      "\n---- curl exit %d, stderr ----\n%s---- stdout ----\n%.3000s\n---- end ----"
#define PX_SHOW_ARGS(rr) (rr).status, (rr).err, (rr).out

/* GET url, returns curl's result with "-i" (head and body). */
static __attribute__((unused)) ht_run_result px_get(const char *url)
{
    const char *args[] = {"-i", (char *)url, NULL};
    return px_curl(args);
}

/* The status code of the first line of curl -i output, or 0. */
static __attribute__((unused)) int px_status(const ht_run_result *rr)
{
    int code = 0;
    const char *p = rr->out;
    /* skip interim responses (100 Continue) */
    for (;;) {
        if (sscanf(p, "HTTP/1.%*d %d", &code) != 1)
            return 0;
        if (code >= 200)
            return code;
        const char *end = strstr(p, "\r\n\r\n");
        if (end == NULL)
            return code;
        p = end + 4;
    }
}

/* The body of curl -i output (after the last head). */
static __attribute__((unused)) const char *px_body(const ht_run_result *rr)
{
    const char *p = rr->out, *end;
    while ((end = strstr(p, "\r\n\r\n")) != NULL) {
        int code = 0;
        if (sscanf(p, "HTTP/1.%*d %d", &code) != 1)
            break;
        p = end + 4;
        if (code >= 200)
            break;
    }
    return p;
}

static __attribute__((unused)) char *px_url(char *buf, size_t size, kh_proc *p, int listener,
                                            const char *path)
{
    snprintf(buf, size, "http://127.0.0.1:%u%s", kh_port(p, listener), path);
    return buf;
}

/* VmRSS of a process in KiB, or -1. */
static __attribute__((unused)) long px_rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long kib = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* SIGTERM, and keel must exit 0: a graceful stop with pooled upstream
 * connections and tunnels open, and under ASan no leak (LSan's exit
 * status is not 0). */
static __attribute__((unused)) void px_stop(kh_proc *p)
{
    kh_signal(p, SIGTERM);
    int status = kh_wait_exit(p, 20000);
    kh_assert(p, status == 0, "keel exit status %d after SIGTERM", status);
}

#endif
