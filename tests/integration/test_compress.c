/* Compression as a user of nginx or Caddy expects (docs/web.md,
 * "Compression"): with deflate loaded and no key written, the static
 * module's text files are compressed, images and small files are not;
 * the coding is the client's best by q-value among gzip, deflate and
 * (where built in) br and zstd, q=0 excludes, identity rated higher wins,
 * and every answer that could have been compressed says Vary:
 * Accept-Encoding; precompressed siblings (.br, .zst, .gz) win over
 * compressing on the fly. curl (--compressed) decodes every coding. */
#define _GNU_SOURCE
#include "test_static.h"

#ifndef KEEL_TEST_HAVE_BR
#define KEEL_TEST_HAVE_BR 0
#endif
#ifndef KEEL_TEST_HAVE_ZSTD
#define KEEL_TEST_HAVE_ZSTD 0
#endif

static size_t page_len;

static void make_files(void)
{
    st_make_tree();
    char page[40000];
    size_t n = 0;
    for (int i = 0; n + 100 < sizeof page; i++)
        n += (size_t)snprintf(page + n, sizeof page - n, "<p>paragraph %d of a page</p>\n", i);
    page_len = n;
    st_write("www/page.html", page, n);
    st_write("www/app.js", page, n); /* text/javascript */
    char png[8192];
    for (size_t i = 0; i < sizeof png; i++)
        png[i] = (char)(i * 7 % 251);
    st_write("www/pic.png", png, sizeof png);
    st_write_str("www/tiny.txt", "short\n");
    st_write("www/pre.css", page, n);
    st_write_str("www/pre.css.br", "BR-SIBLING");
    st_write_str("www/pre.css.zst", "ZSTD-SIBLING");
    st_write_str("www/pre.css.gz", "GZ-SIBLING");
}

static kh_proc *start_compress(const char *extra)
{
    char conf[4096];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n"
             "modules = http1 deflate static\n" KH_MODULE_PATH "[static]\nmount = / %s\n%s",
             st_root, extra ? extra : "");
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port in the 'listening on' line");
    return p;
}

/* The Content-Encoding of GET target with this Accept-Encoding ("" for
 * none), and that it varies. */
static const char *coding_of(kh_proc *p, const char *target, const char *ae, int *vary)
{
    static char coding[32];
    ht_resp r;
    st_get(p, target, ae[0] ? ht_fmt("Accept-Encoding: %s\r\n", ae) : "", &r);
    kh_assert(p, r.status == 200, "%s (%s): status %d", target, ae, r.status);
    const char *ce = ht_header(&r, "Content-Encoding");
    snprintf(coding, sizeof coding, "%s", ce ? ce : "identity");
    if (vary != NULL)
        *vary = ht_header_has_token(&r, "Vary", "Accept-Encoding");
    ht_resp_free(&r);
    return coding;
}

Test(compress, text_files_compressed_by_default_images_and_small_ones_not, .timeout = 60,
     .fini = st_cleanup)
{
    make_files();
    kh_proc *p = start_compress(NULL);
    int vary;
    cr_expect_str_eq(coding_of(p, "/page.html", "gzip", &vary), "gzip");
    cr_expect(vary, "Vary on the compressed page");
    cr_expect_str_eq(coding_of(p, "/app.js", "gzip", NULL), "gzip");
    cr_expect_str_eq(coding_of(p, "/pic.png", "gzip", NULL), "identity");
    cr_expect_str_eq(coding_of(p, "/tiny.txt", "gzip", NULL), "identity", "below min_length (256)");
    /* The identity answer to a client without the field varies too. */
    cr_expect_str_eq(coding_of(p, "/page.html", "", &vary), "identity");
    cr_expect(vary, "Vary on the identity page");
    kh_stop(p);
}

Test(compress, the_client_s_best_coding_by_qvalue, .timeout = 60, .fini = st_cleanup)
{
    make_files();
    kh_proc *p = start_compress(NULL);
    const char *br = KEEL_TEST_HAVE_BR ? "br" : "gzip";
    const char *zstd = KEEL_TEST_HAVE_ZSTD ? "zstd" : KEEL_TEST_HAVE_BR ? "br" : "gzip";
    cr_expect_str_eq(coding_of(p, "/page.html", "gzip;q=0.5, br", NULL), br);
    cr_expect_str_eq(coding_of(p, "/page.html", "br;q=0.5, zstd", NULL), zstd);
    cr_expect_str_eq(coding_of(p, "/page.html", "gzip;q=1, br;q=0.4, zstd;q=0.3", NULL), "gzip");
    cr_expect_str_eq(coding_of(p, "/page.html", "br;q=0, zstd;q=0, gzip;q=0.1", NULL), "gzip");
    cr_expect_str_eq(coding_of(p, "/page.html", "gzip;q=0", NULL), "identity", "q=0 excludes");
    cr_expect_str_eq(coding_of(p, "/page.html", "identity, gzip;q=0.5", NULL), "identity");
    cr_expect_str_eq(coding_of(p, "/page.html", "*;q=0", NULL), "identity");
    kh_stop(p);
    /* Turned off: the next best. */
    p = start_compress("[deflate]\nbrotli = off\nzstd = off\n");
    cr_expect_str_eq(coding_of(p, "/page.html", "br, zstd, gzip;q=0.1", NULL), "gzip");
    kh_stop(p);
}

/* Every coding decodes to the file (curl's own decoders). */
Test(compress, every_coding_decodes_to_the_file, .timeout = 60, .fini = st_cleanup)
{
    make_files();
    kh_proc *p = start_compress(NULL);
    const char *codings[] = {"gzip", "deflate", "br", "zstd"};
    for (size_t i = 0; i < sizeof codings / sizeof codings[0]; i++) {
        if ((i == 2 && !KEEL_TEST_HAVE_BR) || (i == 3 && !KEEL_TEST_HAVE_ZSTD))
            continue;
        char url[128], ae[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%u/page.html", kh_port(p, 0));
        snprintf(ae, sizeof ae, "Accept-Encoding: %s", codings[i]);
        const char *argv[] = {"curl", "-s", "--max-time", "15", "--compressed",
                              "-H",   ae,   url,          NULL};
        ht_run_result rr = ht_run(argv, 20000);
        if (rr.status != 0 && i >= 2) { /* a curl without this decoder */
            ht_run_free(&rr);
            continue;
        }
        kh_assert(p, rr.status == 0 && rr.out_len == page_len, "%s: curl %d, %zu of %zu bytes",
                  codings[i], rr.status, rr.out_len, page_len);
        ht_run_free(&rr);
    }
    kh_stop(p);
}

Test(compress, precompressed_siblings_win, .timeout = 60, .fini = st_cleanup)
{
    make_files();
    kh_proc *p = start_compress(NULL);
    static const struct {
        const char *ae, *coding, *body;
    } cases[] = {
        {"gzip", "gzip", "GZ-SIBLING"},
        {"gzip, br", "br", "BR-SIBLING"},
        {"gzip, zstd", "zstd", "ZSTD-SIBLING"},
        {"br, zstd, gzip", "br", "BR-SIBLING"},
        {"br;q=0.5, zstd", "zstd", "ZSTD-SIBLING"},
        {"br;q=0, zstd;q=0, gzip;q=0.2", "gzip", "GZ-SIBLING"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ht_resp r;
        st_get(p, "/pre.css", ht_fmt("Accept-Encoding: %s\r\n", cases[i].ae), &r);
        const char *ce = ht_header(&r, "Content-Encoding");
        kh_assert(p,
                  r.status == 200 && ce && strcmp(ce, cases[i].coding) == 0 &&
                      r.body_len == strlen(cases[i].body) &&
                      memcmp(r.body, cases[i].body, r.body_len) == 0 &&
                      ht_header_has_token(&r, "Vary", "Accept-Encoding"),
                  "%s: %d %s '%.*s'\n%s", cases[i].ae, r.status, ce ? ce : "-", (int)r.body_len,
                  r.body, r.head);
        ht_resp_free(&r);
    }
    kh_stop(p);
}
