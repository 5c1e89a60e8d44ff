/* nginx as the upstream: a small page and a 1 MiB file through keel, and
 * the keep-alive pool seen from nginx's side ($connection in its access
 * log: every request on one upstream connection). nginx runs with a
 * generated config on a free port (as tests/bench/run.sh starts it).
 * Skipped where nginx is not installed. */
#define _GNU_SOURCE
#include "test_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>

/* 1 if the file at path contains needle. */
static int file_has(const char *path, const char *needle)
{
    char buf[16384];
    FILE *f = fopen(path, "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* nginx serving dir/www on 127.0.0.1:port; the access log says which
 * connection carried each request. */
static kh_proc *start_nginx(const char *dir, unsigned port)
{
    char path[512], conf[2048];
    snprintf(path, sizeof path, "%s/www", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/logs", dir);
    mkdir(path, 0755);
    snprintf(conf, sizeof conf,
             "worker_processes 1;\ndaemon off;\npid %s/nginx.pid;\nerror_log %s/logs/error.log "
             "warn;\nevents { worker_connections 1024; }\nhttp {\n"
             "  log_format conn '$connection $request';\n"
             "  access_log %s/logs/access.log conn;\n"
             "  client_body_temp_path %s/body;\n"
             "  keepalive_requests 100000;\n"
             "  server { listen 127.0.0.1:%u; root %s/www; }\n}\n",
             dir, dir, dir, dir, port, dir);
    snprintf(path, sizeof path, "%s/nginx.conf", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f && fputs(conf, f) >= 0 && fclose(f) == 0);
    const char *args[] = {"-p", dir, "-e", "/dev/stderr", "-c", path, NULL};
    kh_proc *n = kh_spawn_program(ht_nginx_bin(), NULL, args);
    if (!kh_wait_accepts(port, 5000))
        cr_assert_fail("nginx did not start: %s", kh_stderr(n));
    return n;
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(data, 1, len, f) == len && fclose(f) == 0);
}

Test(proxy_nginx, pages_files_and_pooled_connection, .timeout = 90, .fini = kh_cleanup_all)
{
    px_need_curl();
    const char *bin = ht_nginx_bin();
    (void)bin;
    char dir[] = "/tmp/keel-proxy-nginx-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    chmod(dir, 0755); /* nginx's worker runs as an unprivileged user when started as root */
    char path[600];
    snprintf(path, sizeof path, "%s/www", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/www/index.html", dir);
    write_file(path, "nginx here\n", 11);
    size_t big = 1 << 20;
    char *data = malloc(big);
    cr_assert(data);
    for (size_t i = 0; i < big; i++)
        data[i] = (char)('a' + i % 26);
    snprintf(path, sizeof path, "%s/www/big.bin", dir);
    write_file(path, data, big);

    unsigned port = kh_free_port();
    start_nginx(dir, port);
    char section[256], url[160];
    snprintf(section, sizeof section, "upstream = nginx 127.0.0.1:%u\npass = / nginx\n", port);
    kh_proc *p = px_keel(section, 0);

    for (int i = 0; i < 3; i++) {
        ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/index.html"));
        kh_assert(p, px_status(&rr) == 200 && strcmp(px_body(&rr), "nginx here\n") == 0,
                  "page" PX_SHOW(rr), PX_SHOW_ARGS(rr));
        ht_run_free(&rr);
    }
    snprintf(path, sizeof path, "%s/got.bin", dir);
    const char *args[] = {"-o", path, px_url(url, sizeof url, p, 0, "/big.bin"), NULL};
    ht_run_result rr = px_curl(args);
    kh_assert(p, rr.status == 0, "big" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    char *got = malloc(big + 1);
    size_t n = fread(got, 1, big + 1, f);
    fclose(f);
    kh_assert(p, n == big && memcmp(got, data, big) == 0, "1 MiB file: %zu bytes", n);
    /* 404 passes through as nginx's own page */
    rr = px_get(px_url(url, sizeof url, p, 0, "/missing"));
    kh_assert(p, px_status(&rr) == 404, "404" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);

    /* every request on one upstream connection */
    snprintf(path, sizeof path, "%s/logs/access.log", dir);
    /* nginx logs a request after answering it: the last one, then all */
    kh_assert(p, KH_WAIT_UNTIL(file_has(path, "GET /missing "), 5000),
              "nginx did not log the last request");
    f = fopen(path, "r");
    cr_assert(f);
    char line[512];
    long first = -1;
    int lines = 0, same = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        long c = strtol(line, NULL, 10);
        if (first < 0)
            first = c;
        same += c == first;
        lines++;
    }
    fclose(f);
    kh_assert(p, lines == 5 && same == 5, "%d of %d requests on nginx's connection %ld", same,
              lines, first);
    px_stop(p);
    free(got);
    free(data);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    kh_cleanup_all();
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", dir);
}
