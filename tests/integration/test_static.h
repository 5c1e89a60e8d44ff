/* test_static.h — helpers shared by the test_static*.c integration tests:
 * a private docroot (and a directory beside it, "outside", holding a file
 * no request may ever read), keel started with http1 + static over it, and
 * one-request round trips. Define _GNU_SOURCE before including it. */
#ifndef KEEL_TEST_STATIC_H
#define KEEL_TEST_STATIC_H

#include "test_http.h"

#include <ftw.h>
#include <sys/stat.h>
#include <sys/time.h>

#define ST_SECRET "TOP-SECRET-OUTSIDE-THE-ROOT"

static char st_base[256]; /* the temporary directory */
static char st_root[300]; /* st_base/www: the mount's root */

static int st_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void st_cleanup(void)
{
    kh_cleanup_all();
    if (st_base[0])
        nftw(st_base, st_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    st_base[0] = '\0';
}

/* Writes a file below the base directory (path relative to st_base). */
HT_FN void st_write(const char *rel, const void *data, size_t len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", st_base, rel);
    FILE *f = fopen(path, "wb");
    cr_assert(f, "create %s: %s", path, strerror(errno));
    cr_assert(fwrite(data, 1, len, f) == len && fclose(f) == 0, "write %s", path);
}

HT_FN void st_write_str(const char *rel, const char *s)
{
    st_write(rel, s, strlen(s));
}

HT_FN void st_mkdir(const char *rel)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", st_base, rel);
    cr_assert(mkdir(path, 0755) == 0, "mkdir %s: %s", path, strerror(errno));
}

HT_FN void st_symlink(const char *target, const char *rel)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", st_base, rel);
    cr_assert(symlink(target, path) == 0, "symlink %s: %s", path, strerror(errno));
}

HT_FN const char *st_path(const char *rel)
{
    return ht_fmt("%s/%s", st_base, rel);
}

/* The base directory with www/ (the root) and outside/secret.txt. */
HT_FN void st_make_tree(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(st_base, sizeof st_base, "%s/keel-static-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert(mkdtemp(st_base), "mkdtemp: %s", strerror(errno));
    snprintf(st_root, sizeof st_root, "%s/www", st_base);
    st_mkdir("www");
    st_mkdir("outside");
    st_write_str("outside/secret.txt", ST_SECRET "\n");
}

/* keel with http1 + static on one worker; `section` is the [static]
 * section's body (the mount lines), with %R standing for st_root. */
HT_FN kh_proc *st_start(const char *section)
{
    char body[4096];
    size_t n = 0;
    for (const char *s = section; *s && n + 300 < sizeof body; s++) {
        if (s[0] == '%' && s[1] == 'R') {
            n += (size_t)snprintf(body + n, sizeof body - n, "%s", st_root);
            s++;
        } else {
            body[n++] = *s;
        }
    }
    body[n] = '\0';
    char conf[8192];
    snprintf(conf, sizeof conf,
             "[keel]\n"
             "listen = 127.0.0.1:0 http1\n"
             "workers = 1\n"
             "modules = http1 static\n" KH_MODULE_PATH "[static]\n%s",
             body);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port in the 'listening on' line");
    return p;
}

/* One request on a fresh connection: METHOD target, extra header lines
 * (each ending in \r\n, may be ""). */
HT_FN void st_req(kh_proc *p, const char *method, const char *target, const char *extra, ht_resp *r)
{
    memset(r, 0, sizeof *r);
    ht_roundtrip(p,
                 ht_fmt("%s %s HTTP/1.1\r\nHost: t\r\n%sConnection: close\r\n\r\n", method, target,
                        extra ? extra : ""),
                 r);
}

HT_FN void st_get(kh_proc *p, const char *target, const char *extra, ht_resp *r)
{
    st_req(p, "GET", target, extra, r);
}

/* A response must not carry a byte of the outside file. */
#define st_assert_no_secret(p, r)                                                                  \
    kh_assert((p),                                                                                 \
              (r)->body == NULL ||                                                                 \
                  memmem((r)->body, (r)->body_len, ST_SECRET, strlen(ST_SECRET)) == NULL,          \
              "the outside file leaked")

/* A status, with the head shown on failure. */
#define st_assert_status(p, r, code)                                                               \
    kh_assert((p), (r)->status == (code), "expected %d, got %d\n%s", (code), (r)->status,          \
              (r)->head ? (r)->head : "")

#endif
