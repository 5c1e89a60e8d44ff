/* tls_helpers.h — what test_tls*.c share: a private directory with
 * certificates made by keel-cert (built beside the keel binary), keel
 * started on a config that names them, and openssl / curl run with a
 * deadline (ht_run) or through sh -c with input piped in. Define
 * _GNU_SOURCE and include test_http.h first. */
#ifndef KEEL_TEST_TLS_HELPERS_H
#define KEEL_TEST_TLS_HELPERS_H

#include <libgen.h>
#include <sys/stat.h>

static char tt_dir[256];

HT_FN void tt_cleanup(void)
{
    kh_cleanup_all();
    if (tt_dir[0]) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tt_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tt_dir);
    }
    tt_dir[0] = '\0';
}

HT_FN const char *tt_mkdir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(tt_dir, sizeof tt_dir, "%s/keel-tls-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert(mkdtemp(tt_dir), "mkdtemp: %s", strerror(errno));
    return tt_dir;
}

/* Skips a test that needs mod_tls_openssl where it was not built. */
HT_FN void tt_need_openssl_backend(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/mod_tls_openssl.so", KEEL_MODULE_DIR);
    if (access(path, R_OK) != 0)
        cr_skip_test("mod_tls_openssl not built (OpenSSL 3 not found)");
}

/* DIR/NAME */
HT_FN const char *tt_path(const char *name)
{
    static char paths[8][400];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", tt_dir, name);
    return p;
}

HT_FN const char *tt_keel_cert(void)
{
    static char path[512];
    char bin[512];
    snprintf(bin, sizeof bin, "%s", KEEL_BIN);
    snprintf(path, sizeof path, "%s/keel-cert", dirname(bin));
    return path;
}

/* keel-cert DIR/BASE.pem DIR/BASE.key NAME... (NULL-terminated). */
HT_FN void tt_make_cert(const char *base, ...)
{
    const char *argv[16];
    int n = 0;
    char cert[400], key[400];
    snprintf(cert, sizeof cert, "%s/%s.pem", tt_dir, base);
    snprintf(key, sizeof key, "%s/%s.key", tt_dir, base);
    argv[n++] = tt_keel_cert();
    argv[n++] = cert;
    argv[n++] = key;
    va_list ap;
    va_start(ap, base);
    const char *name;
    while ((name = va_arg(ap, const char *)) != NULL && n < 14)
        argv[n++] = name;
    va_end(ap);
    argv[n] = NULL;
    ht_run_result rr = ht_run(argv, 20000);
    cr_assert(rr.status == 0, "keel-cert failed (%d): %s%s", rr.status, rr.out, rr.err);
    ht_run_free(&rr);
}

/* An RSA 2048 certificate DIR/BASE.pem and key DIR/BASE.key with this
 * CN and one DNS name, by openssl (keel-cert writes ECDSA only). */
HT_FN void tt_make_rsa_cert(const char *base, const char *cn, const char *dns)
{
    char cert[400], key[400], subj[300], san[300];
    snprintf(cert, sizeof cert, "%s/%s.pem", tt_dir, base);
    snprintf(key, sizeof key, "%s/%s.key", tt_dir, base);
    snprintf(subj, sizeof subj, "/CN=%s", cn);
    snprintf(san, sizeof san, "subjectAltName=DNS:%s", dns);
    const char *argv[] = {"openssl", "req", "-x509",   "-newkey", "rsa:2048", "-nodes",
                          "-keyout", key,   "-out",    cert,      "-days",    "2",
                          "-subj",   subj,  "-addext", san,       NULL};
    ht_run_result rr = ht_run(argv, 30000);
    cr_assert(rr.status == 0, "openssl req: %s%s", rr.out, rr.err);
    ht_run_free(&rr);
}

/* Runs `sh -c cmd`, collecting stdout and stderr together. */
HT_FN ht_run_result tt_sh(int timeout_ms, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
HT_FN ht_run_result tt_sh(int timeout_ms, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[4200];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    const char *argv[] = {"sh", "-c", full, NULL};
    return ht_run(argv, timeout_ms);
}

/* keel with `body` after "[keel]\n" + module path; nlisteners listeners. */
HT_FN kh_proc *tt_start(int nlisteners, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
HT_FN kh_proc *tt_start(int nlisteners, const char *fmt, ...)
{
    char body[4096], conf[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    snprintf(conf, sizeof conf, "[keel]\n" KH_MODULE_PATH "%s", body);
    return kh_start(conf, NULL, nlisteners, 10000);
}

/* The subject's CN served on listener `index` for this SNI ("" = none
 * sent), with openssl s_client's options (a suite, a version) added. */
HT_FN char *tt_served_cn(kh_proc *p, int index, const char *sni, const char *extra)
{
    static char cn[256];
    ht_run_result rr =
        tt_sh(20000, "openssl s_client -connect 127.0.0.1:%u %s%s %s </dev/null", kh_port(p, index),
              *sni ? "-servername " : "-noservername", sni, extra);
    const char *s = strstr(rr.out, "subject=");
    kh_assert(p, s != NULL, "no certificate for '%s': %s", sni, rr.out);
    s = strstr(s, "CN");
    kh_assert(p, s != NULL, "no CN for '%s': %s", sni, rr.out);
    s += strspn(s, "CN =");
    snprintf(cn, sizeof cn, "%.*s", (int)strcspn(s, "\n,/"), s);
    ht_run_free(&rr);
    return cn;
}

/* Stops keel gracefully: it must exit 0 (sanitizer builds: leaks make it
 * fail) and have reported no sanitizer finding. */
HT_FN void tt_finish(kh_proc *p)
{
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 15000) == 0, "clean exit");
    const char *err = kh_stderr(p);
    kh_assert(p, strstr(err, "Sanitizer") == NULL && strstr(err, "runtime error") == NULL,
              "no sanitizer report");
}

/* The resident set of a process, in KiB (Linux /proc). */
HT_FN long tt_rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

#endif
