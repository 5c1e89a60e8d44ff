/* The static module never serves a byte from outside its root: every
 * traversal shape (encoded and double-encoded dots, backslashes, NUL,
 * overlong UTF-8, absolute-form targets), symbolic links leaving the root
 * (relative, absolute, through a directory; with openat2 and with the
 * openat walk), a link swapped between check and open by a racing thread,
 * dotfiles, Windows shapes (file::$DATA, CON, C:, trailing dots and
 * spaces) and FIFOs. Each test checks the status and that the outside
 * file's content never appears. */
#define _GNU_SOURCE
#include "test_static.h"

#include <pthread.h>
#include <stdatomic.h>

#define T(name, secs) Test(static_confine, name, .timeout = secs, .fini = st_cleanup)

static void raw_refused(kh_proc *p, const char *target)
{
    ht_resp r;
    st_get(p, target, NULL, &r);
    kh_assert(p, r.status == 400 || r.status == 403 || r.status == 404, "%s: status %d", target,
              r.status);
    st_assert_no_secret(p, &r);
    ht_resp_free(&r);
}

T(traversal_shapes, 30)
{
    st_make_tree();
    st_mkdir("www/sub");
    st_write_str("www/sub/ok.txt", "ok");
    kh_proc *p = st_start("mount = / %R\nmount = /sub %R/sub\n");
    static const char *const targets[] = {
        "/../outside/secret.txt",
        "/%2e%2e/outside/secret.txt",
        "/%2E%2E/outside/secret.txt",
        "/..%2foutside/secret.txt",
        "/sub/../../outside/secret.txt",
        "/sub/%2e%2e/%2e%2e/outside/secret.txt",
        "/%252e%252e/outside/secret.txt",
        "/..%5coutside%5csecret.txt",
        "/sub/..%5c..%5coutside%5csecret.txt",
        "/%00",
        "/sub/ok.txt%00.png",
        "/%c0%ae%c0%ae/outside/secret.txt",
        "/%c0%ae%c0%ae%c0%af%c0%ae%c0%ae%c0%afoutside/secret.txt",
        "/%e0%80%ae%e0%80%ae/outside/secret.txt",
        "http://t/../outside/secret.txt",
        "http://t/%2e%2e/outside/secret.txt",
        "/.%2e/outside/secret.txt",
        "//../outside/secret.txt",
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        raw_refused(p, targets[i]);
    /* Sanity: the module does serve what it should on the same server. */
    ht_resp r;
    st_get(p, "/sub/ok.txt", NULL, &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
    /* A raw backslash in the target, if http1 lets it through at all. */
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET /sub\\..\\..\\outside\\secret.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    if (ht_read_response(c, &r, 0, 5000) == 0) {
        kh_assert(p, r.status != 200, "backslash path served");
        st_assert_no_secret(p, &r);
    }
    ht_resp_free(&r);
    ht_close(c);
}

static void links_case(const char *resolver)
{
    st_make_tree();
    st_mkdir("www/sub");
    st_write_str("www/a.txt", "inside");
    st_write_str("www/sub/b.txt", "inside b");
    st_symlink("../outside/secret.txt", "www/rel-out");
    st_symlink(st_path("outside/secret.txt"), "www/abs-out");
    st_symlink("../outside", "www/dir-out");
    st_symlink("../../outside/secret.txt", "www/sub/deep-out");
    st_symlink("sub/../../outside/secret.txt", "www/zigzag-out");
    st_symlink("a.txt", "www/in");
    st_symlink("../a.txt", "www/sub/up-in");
    st_symlink("sub", "www/dir-in");
    st_symlink("loop2", "www/loop1");
    st_symlink("loop1", "www/loop2");
    kh_proc *p = st_start(ht_fmt("mount = / %%R resolve=%s\n"
                                 "mount = /nolinks %%R symlinks=off resolve=%s\n"
                                 "mount = /trusted %%R symlinks=follow\n",
                                 resolver, resolver));
    static const char *const out[] = {"/rel-out", "/abs-out", "/dir-out/secret.txt",
                                      "/sub/deep-out", "/zigzag-out"};
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        ht_resp r;
        st_get(p, out[i], NULL, &r);
        st_assert_status(p, &r, 403);
        st_assert_no_secret(p, &r);
        ht_resp_free(&r);
    }
    static const struct {
        const char *path, *body;
    } in[] = {{"/in", "inside"}, {"/sub/up-in", "inside"}, {"/dir-in/b.txt", "inside b"}};
    for (size_t i = 0; i < 3; i++) {
        ht_resp r;
        st_get(p, in[i].path, NULL, &r);
        st_assert_status(p, &r, 200);
        kh_assert(p, strcmp(r.body, in[i].body) == 0, "%s: %s", in[i].path, r.body);
        ht_resp_free(&r);
        st_get(p, ht_fmt("/nolinks%s", in[i].path), NULL, &r); /* symlinks=off */
        st_assert_status(p, &r, 403);
        ht_resp_free(&r);
    }
    ht_resp r;
    st_get(p, "/loop1", NULL, &r);
    st_assert_status(p, &r, 403);
    ht_resp_free(&r);
    /* symlinks=follow: the operator trusts the tree, links go anywhere. */
    st_get(p, "/trusted/rel-out", NULL, &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
}

T(symlinks_openat2, 30)
{
    links_case("auto");
}

T(symlinks_walk, 30)
{
    links_case("walk");
}

/* ---- a symlink swapped while requests run ------------------------------------------------ */

static atomic_int g_stop;

/* Flips www/race (a file link) and www/racedir (a directory link) between
 * inside and outside targets, atomically (rename over), as fast as it can. */
static void *swapper(void *arg)
{
    (void)arg;
    const char *race = strdup(st_path("www/race"));
    const char *tmp = strdup(st_path("www/race.tmp"));
    const char *racedir = strdup(st_path("www/racedir"));
    const char *tmpdir = strdup(st_path("www/racedir.tmp"));
    for (unsigned i = 0; !atomic_load(&g_stop); i++) {
        unlink(tmp);
        if (symlink(i & 1 ? "../outside/secret.txt" : "safe.txt", tmp) == 0)
            rename(tmp, race);
        unlink(tmpdir);
        if (symlink(i & 1 ? "../outside" : "safedir", tmpdir) == 0)
            rename(tmpdir, racedir);
    }
    free((void *)race);
    free((void *)tmp);
    free((void *)racedir);
    free((void *)tmpdir);
    return NULL;
}

/* cache: the [static] cache_valid value. Without the cache every request
 * resolves the name, which is the race to run; with it the answers stay
 * for cache_valid, and only the no-leak rule is checked. */
static void race_case(const char *resolver, const char *cache)
{
    st_make_tree();
    st_write_str("www/safe.txt", "SAFE");
    st_mkdir("www/safedir");
    st_write_str("www/safedir/secret.txt", "SAFE");
    st_symlink("safe.txt", "www/race");
    st_symlink("safedir", "www/racedir");
    kh_proc *p = st_start(ht_fmt("mount = / %%R resolve=%s\ncache_valid = %s\n", resolver, cache));
    atomic_store(&g_stop, 0);
    pthread_t t;
    cr_assert(pthread_create(&t, NULL, swapper, NULL) == 0);
    int served = 0, refused = 0;
    ht_conn *c = ht_connect(kh_port(p, 0));
    long long until = kh_now_ms() + 2500;
    for (int i = 0; kh_now_ms() < until; i++) {
        if (i > 0 && i % 500 == 0) { /* under http1's max_requests per connection */
            ht_close(c);
            c = ht_connect(kh_port(p, 0));
        }
        ht_send_str(c, i & 1 ? "GET /racedir/secret.txt HTTP/1.1\r\nHost: t\r\n\r\n"
                             : "GET /race HTTP/1.1\r\nHost: t\r\n\r\n");
        ht_resp r;
        if (ht_read_response(c, &r, 0, 5000) != 0) {
            atomic_store(&g_stop, 1);
            pthread_join(t, NULL);
            kh_assert(p, 0, "reading response %d: %s", i, r.err);
        }
        if (r.body_len > 0 && memmem(r.body, r.body_len, ST_SECRET, strlen(ST_SECRET)) != NULL) {
            atomic_store(&g_stop, 1);
            pthread_join(t, NULL);
            kh_assert(p, 0, "request %d served the outside file (status %d)", i, r.status);
        }
        if (r.status == 200)
            served++;
        else
            refused++;
        ht_resp_free(&r);
    }
    atomic_store(&g_stop, 1);
    pthread_join(t, NULL);
    ht_close(c);
    cr_log_info("%s, cache %s: served %d, refused %d", resolver, cache, served, refused);
    /* Both outcomes must have happened, or the race was not run. */
    if (strcmp(cache, "0") == 0)
        kh_assert(p, served > 0 && refused > 0, "served %d, refused %d", served, refused);
}

T(symlink_swapped_during_requests_openat2, 30)
{
    race_case("auto", "0");
}

T(symlink_swapped_during_requests_walk, 30)
{
    race_case("walk", "0");
}

T(symlink_swapped_during_requests_cached, 30)
{
    race_case("auto", "100ms");
}

/* ---- dotfiles, Windows shapes, special files ---------------------------------------------- */

T(dotfiles_hidden_unless_allowed, 30)
{
    st_make_tree();
    st_write_str("www/.env", "SECRET=1");
    st_mkdir("www/.git");
    st_write_str("www/.git/config", "[core]");
    st_mkdir("www/sub");
    st_write_str("www/sub/.htpasswd", "u:x");
    kh_proc *p = st_start("mount = / %R\nmount = /all %R dotfiles=allow\n");
    static const char *const hidden[] = {"/.env", "/.git/config", "/.git/", "/sub/.htpasswd",
                                         "/%2egit/config"};
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
        ht_resp r;
        st_get(p, hidden[i], NULL, &r);
        st_assert_status(p, &r, 404);
        ht_resp_free(&r);
    }
    ht_resp r;
    st_get(p, "/all/.env", NULL, &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
}

/* A mount's index may be a dotfile: served for its directory, but a
 * request naming it is still refused, however often the directory was
 * asked for first (the open-file cache skips the lexical checks only for
 * names that passed them). */
T(dotfile_index_not_served_by_name, 30)
{
    st_make_tree();
    st_mkdir("www/d");
    st_write_str("www/d/.idx.html", "index");
    kh_proc *p = st_start("mount = / %R index=.idx.html\n");
    for (int round = 0; round < 3; round++) {
        ht_resp r;
        st_get(p, "/d/", NULL, &r);
        st_assert_status(p, &r, 200);
        kh_assert(p, strcmp(r.body, "index") == 0, "body %s", r.body);
        ht_resp_free(&r);
        st_get(p, "/d/.idx.html", NULL, &r);
        st_assert_status(p, &r, 404);
        ht_resp_free(&r);
    }
}

T(windows_shapes_refused, 30)
{
    st_make_tree();
    /* Legal names on POSIX: they exist, so a 403 is a refusal, not a miss. */
    static const char *const files[] = {"f.txt::$DATA", "CON",    "con.txt", "NUL.html", "LPT1",
                                        "com1.txt",     "f.txt.", "f.txt ",  "a\\b",     "C:"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        st_write_str(ht_fmt("www/%s", files[i]), "should not be served");
    st_mkdir("www/sub");
    st_write_str("www/sub/aux", "x");
    kh_proc *p = st_start("mount = / %R\n");
    static const char *const targets[] = {
        "/f.txt::$DATA", "/f.txt%3a%3a$DATA", "/CON",       "/con.txt", "/NUL.html", "/lpt1",
        "/COM1.txt",     "/f.txt.",           "/f.txt%20",  "/a%5cb",   "/C:",       "/C:/x",
        "/sub/AUX",      "/conin$",           "/CON%20.txt"};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        ht_resp r;
        st_get(p, targets[i], NULL, &r);
        st_assert_status(p, &r, 403);
        kh_assert(p, strstr(r.body, st_base) == NULL, "a filesystem path in the body");
        ht_resp_free(&r);
    }
    /* Names that merely contain a device name are fine. */
    st_write_str("www/console.txt", "ok");
    ht_resp r;
    st_get(p, "/console.txt", NULL, &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
}

T(fifo_and_unreadable_files, 30)
{
    st_make_tree();
    cr_assert(mkfifo(st_path("www/pipe"), 0644) == 0);
    st_write_str("www/locked.txt", "x");
    chmod(st_path("www/locked.txt"), 0);
    kh_proc *p = st_start("mount = / %R\n");
    ht_resp r;
    st_get(p, "/pipe", NULL, &r); /* must not block the loop in open() */
    st_assert_status(p, &r, 403);
    ht_resp_free(&r);
    if (geteuid() != 0) { /* root reads anything */
        st_get(p, "/locked.txt", NULL, &r);
        st_assert_status(p, &r, 403);
        ht_resp_free(&r);
    }
    st_get(p, "/missing", NULL, &r);
    st_assert_status(p, &r, 404);
    kh_assert(p, strstr(r.body, st_base) == NULL, "a filesystem path in the body");
    ht_resp_free(&r);
}
