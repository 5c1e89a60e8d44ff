/* The static module over real sockets: files, types, index files and the
 * 301, directories without an index (403) and with a listing (escaping,
 * sorting), 404, 405 with Allow, HEAD, 0-byte files, Cache-Control,
 * several mounts (longest prefix), config errors, and curl as a client. */
#define _GNU_SOURCE
#include "test_static.h"

#define T(name, secs) Test(static, name, .timeout = secs, .fini = st_cleanup)

T(file_with_type_charset_and_validators, 30)
{
    st_make_tree();
    st_write_str("www/hello.txt", "hello, world\n");
    kh_proc *p = st_start("mount = / %R\n");
    ht_resp r;
    st_get(p, "/hello.txt", NULL, &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, r.body_len == 13 && memcmp(r.body, "hello, world\n", 13) == 0, "body '%s'",
              r.body);
    kh_assert(p, strcmp(ht_header(&r, "Content-Type"), "text/plain; charset=utf-8") == 0, "type %s",
              ht_header(&r, "Content-Type"));
    const char *etag = ht_header(&r, "ETag");
    kh_assert(p, etag && etag[0] == '"' && etag[strlen(etag) - 1] == '"', "strong ETag: %s", etag);
    kh_assert(p, ht_header(&r, "Last-Modified") != NULL, "Last-Modified");
    kh_assert(p, strcmp(ht_header(&r, "Accept-Ranges"), "bytes") == 0, "Accept-Ranges");
    kh_assert(p, ht_header(&r, "Cache-Control") == NULL, "no Cache-Control by default");
    ht_resp_free(&r);
}

T(mime_types_builtin_and_configured, 30)
{
    st_make_tree();
    static const struct {
        const char *name, *type;
    } cases[] = {
        {"a.wasm", "application/wasm"},
        {"a.mjs", "text/javascript; charset=utf-8"},
        {"a.js", "text/javascript; charset=utf-8"},
        {"a.json", "application/json; charset=utf-8"},
        {"a.svg", "image/svg+xml; charset=utf-8"},
        {"a.webp", "image/webp"},
        {"a.avif", "image/avif"},
        {"a.WOFF2", "font/woff2"},
        {"a.html", "text/html; charset=utf-8"},
        {"a.css", "text/css; charset=utf-8"},
        {"a.unknownext", "application/octet-stream"},
        {"noext", "application/octet-stream"},
        {"a.foo", "application/x-foo"},           /* from the config */
        {"a.md", "text/x-custom; charset=utf-8"}, /* the config overrides the table */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        st_write_str(ht_fmt("www/%s", cases[i].name), "x");
    kh_proc *p =
        st_start("mount = / %R\ntype = .foo application/x-foo\ntype = .MD text/x-custom\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ht_resp r;
        st_get(p, ht_fmt("/%s", cases[i].name), NULL, &r);
        st_assert_status(p, &r, 200);
        const char *t = ht_header(&r, "Content-Type");
        kh_assert(p, t && strcmp(t, cases[i].type) == 0, "%s: type '%s', expected '%s'",
                  cases[i].name, t, cases[i].type);
        ht_resp_free(&r);
    }
}

T(directory_redirect_index_and_forbidden, 30)
{
    st_make_tree();
    st_mkdir("www/docs");
    st_write_str("www/docs/index.htm", "<p>docs</p>");
    st_mkdir("www/empty");
    st_mkdir("www/sp ace");
    kh_proc *p = st_start("mount = / %R index=index.html,index.htm\n");
    ht_resp r;
    st_get(p, "/docs?x=1", NULL, &r);
    st_assert_status(p, &r, 301);
    kh_assert(p, strcmp(ht_header(&r, "Location"), "/docs/?x=1") == 0, "Location %s",
              ht_header(&r, "Location"));
    ht_resp_free(&r);
    st_get(p, "/sp%20ace", NULL, &r);
    st_assert_status(p, &r, 301);
    kh_assert(p, strcmp(ht_header(&r, "Location"), "/sp%20ace/") == 0, "re-encoded Location %s",
              ht_header(&r, "Location"));
    ht_resp_free(&r);
    st_get(p, "/docs/", NULL, &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, strcmp(r.body, "<p>docs</p>") == 0, "index body %s", r.body);
    kh_assert(p, strncmp(ht_header(&r, "Content-Type"), "text/html", 9) == 0, "index type");
    ht_resp_free(&r);
    st_get(p, "/empty/", NULL, &r);
    st_assert_status(p, &r, 403);
    ht_resp_free(&r);
    st_get(p, "/", NULL, &r); /* the root: no index, no listing */
    st_assert_status(p, &r, 403);
    ht_resp_free(&r);
}

T(not_found_method_not_allowed_and_head, 30)
{
    st_make_tree();
    st_write_str("www/f.txt", "0123456789");
    kh_proc *p = st_start("mount = / %R\n");
    ht_resp r;
    st_get(p, "/missing.txt", NULL, &r);
    st_assert_status(p, &r, 404);
    ht_resp_free(&r);
    st_get(p, "/f.txt/", NULL, &r); /* a file named as a directory */
    st_assert_status(p, &r, 404);
    ht_resp_free(&r);
    st_get(p, "/missing/deeper/f.txt", NULL, &r);
    st_assert_status(p, &r, 404);
    ht_resp_free(&r);
    for (int i = 0; i < 3; i++) {
        const char *m = i == 0 ? "POST" : i == 1 ? "PUT" : "DELETE";
        st_req(p, m, "/f.txt", "Content-Length: 0\r\n", &r);
        st_assert_status(p, &r, 405);
        const char *allow = ht_header(&r, "Allow");
        kh_assert(p, allow && strstr(allow, "GET") && strstr(allow, "HEAD"), "Allow: %s", allow);
        ht_resp_free(&r);
    }
    st_req(p, "HEAD", "/f.txt", NULL, &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, r.content_length == 10 && r.body_len == 0, "HEAD: length %lld, body %zu",
              (long long)r.content_length, r.body_len);
    kh_assert(p, ht_header(&r, "ETag") != NULL, "HEAD has the ETag");
    ht_resp_free(&r);
}

T(empty_file, 30)
{
    st_make_tree();
    st_write("www/empty.bin", "", 0);
    kh_proc *p = st_start("mount = / %R\n");
    ht_resp r;
    st_get(p, "/empty.bin", NULL, &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, r.content_length == 0 && r.body_len == 0, "empty body");
    ht_resp_free(&r);
    st_get(p, "/empty.bin", "Range: bytes=0-\r\n", &r);
    st_assert_status(p, &r, 416);
    kh_assert(p, strcmp(ht_header(&r, "Content-Range"), "bytes */0") == 0, "Content-Range %s",
              ht_header(&r, "Content-Range"));
    ht_resp_free(&r);
    st_get(p, "/empty.bin", "Range: bytes=-5\r\n", &r);
    st_assert_status(p, &r, 416);
    ht_resp_free(&r);
}

/* A relative directory is relative to the config file's folder (keel
 * writes the config to its own temporary folder, a sibling of st_base). */
T(relative_directory_is_relative_to_the_config_file, 30)
{
    st_make_tree();
    st_write_str("www/rel.txt", "found relative\n");
    const char *base = strrchr(st_base, '/') + 1;
    kh_proc *p = st_start(ht_fmt("mount = / ../%s/www\n", base));
    ht_resp r;
    st_get(p, "/rel.txt", NULL, &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, r.body_len == 15 && memcmp(r.body, "found relative\n", 15) == 0, "body '%s'",
              r.body);
    ht_resp_free(&r);
}

T(cache_control_per_mount_and_longest_prefix, 30)
{
    st_make_tree();
    st_mkdir("www/assets");
    st_mkdir("outside/other");
    st_write_str("www/assets/a.css", "root's");
    st_write_str("outside/other/a.css", "other's");
    kh_proc *p = st_start(ht_fmt("mount = / %%R cache_control=\"public, max-age=60\"\n"
                                 "mount = /assets %s/outside/other cache=3600\n",
                                 st_base));
    ht_resp r;
    st_get(p, "/assets/a.css", NULL, &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, strcmp(r.body, "other's") == 0, "the longer prefix wins: %s", r.body);
    kh_assert(p, strcmp(ht_header(&r, "Cache-Control"), "max-age=3600") == 0, "cache %s",
              ht_header(&r, "Cache-Control"));
    ht_resp_free(&r);
    st_get(p, "/assetsx", NULL, &r); /* not under /assets: the / mount */
    st_assert_status(p, &r, 404);
    ht_resp_free(&r);
    st_get(p, "/assets", NULL, &r);
    st_assert_status(p, &r, 301);
    ht_resp_free(&r);
    st_write_str("www/x.txt", "x");
    st_get(p, "/x.txt", NULL, &r);
    kh_assert(p, strcmp(ht_header(&r, "Cache-Control"), "public, max-age=60") == 0, "cache %s",
              ht_header(&r, "Cache-Control"));
    ht_resp_free(&r);
}

T(listing_escapes_sorts_and_hides_dotfiles, 30)
{
    st_make_tree();
    st_mkdir("www/d");
    st_write_str("www/d/<script>.txt", "x");
    st_write_str("www/d/b&\"q'.txt", "yy");
    st_write_str("www/d/a b.txt", "zzz");
    st_write_str("www/d/.hidden", "h");
    st_mkdir("www/d/zdir");
    kh_proc *p = st_start("mount = / %R listing=on\n");
    ht_resp r;
    st_get(p, "/d/", NULL, &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, strncmp(ht_header(&r, "Content-Type"), "text/html", 9) == 0, "type");
    kh_assert(p, strstr(r.body, "<script>") == NULL, "raw <script> in the page:\n%s", r.body);
    kh_assert(p, strstr(r.body, "&lt;script&gt;.txt") != NULL, "escaped text:\n%s", r.body);
    kh_assert(p, strstr(r.body, "href=\"./%3Cscript%3E.txt\"") != NULL, "encoded link:\n%s",
              r.body);
    kh_assert(p, strstr(r.body, "b&amp;&quot;q&#39;.txt") != NULL, "quotes escaped:\n%s", r.body);
    kh_assert(p, strstr(r.body, "href=\"./a%20b.txt\"") != NULL, "space encoded:\n%s", r.body);
    kh_assert(p, strstr(r.body, ".hidden") == NULL, "dotfile listed:\n%s", r.body);
    const char *dir = strstr(r.body, "zdir/"), *a = strstr(r.body, "a%20b.txt"),
               *b = strstr(r.body, "b%26"), *s = strstr(r.body, "%3Cscript");
    kh_assert(p, dir && a && b && s && dir < s && s < a && a < b,
              "order: directories first, then by name:\n%s", r.body);
    kh_assert(p, strstr(r.body, ">3<") != NULL, "size of 'a b.txt':\n%s", r.body);
    /* Again (the directory's descriptor now comes from the cache): the
     * same page, not one read from where the last listing stopped. */
    ht_resp again;
    st_get(p, "/d/", NULL, &again);
    kh_assert(p, again.body_len == r.body_len && memcmp(again.body, r.body, r.body_len) == 0,
              "second listing differs:\n%s", again.body);
    ht_resp_free(&again);
    ht_resp_free(&r);
    /* The escaped link leads to the file. */
    st_get(p, "/d/%3Cscript%3E.txt", NULL, &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
}

T(bad_mount_lines_stop_keel, 30)
{
    st_make_tree();
    static const char *const bad[] = {
        "mount = static %R\n",             /* no leading slash */
        "mount = /s\n",                    /* no directory */
        "mount = /s %R listing=maybe\n",   /* bad value */
        "mount = /s %R colour=blue\n",     /* unknown option */
        "mount = /s %R/none\n",            /* no such directory */
        "mount = /s %R\nmount = /s/ %R\n", /* twice */
        "mount = / %R\ntype = foo\n",      /* bad type line */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[1024];
        size_t n = 0;
        for (const char *s = bad[i]; *s; s++) {
            if (s[0] == '%' && s[1] == 'R') {
                n += (size_t)snprintf(body + n, sizeof body - n, "%s", st_root);
                s++;
            } else {
                body[n++] = *s;
            }
        }
        body[n] = '\0';
        kh_proc *p = kh_spawn(ht_fmt("[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n"
                                     "modules = http1 static\n" KH_MODULE_PATH "[static]\n%s",
                                     body),
                              NULL);
        int rc = kh_wait_exit(p, 10000);
        kh_assert(p, rc == 1, "case %zu: exit %d", i, rc);
        kh_assert(p, strstr(kh_stderr(p), "keel.conf:") != NULL, "case %zu names the file", i);
        kh_stop(p);
    }
}

T(curl_fetches_file_and_range, 60)
{
    const char *argv[] = {"curl", "--version", NULL};
    ht_run_result v = ht_run(argv, 5000);
    int have = v.status == 0;
    ht_run_free(&v);
    if (!have)
        cr_skip_test("curl is not installed");
    st_make_tree();
    char data[5000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)('a' + i % 26);
    st_write("www/data.txt", data, sizeof data);
    kh_proc *p = st_start("mount = /files %R\n");
    const char *url = ht_fmt("http://127.0.0.1:%u/files/data.txt", kh_port(p, 0));
    const char *a1[] = {"curl", "-s", "--max-time", "10", url, NULL};
    ht_run_result rr = ht_run(a1, 15000);
    kh_assert(p,
              rr.status == 0 && rr.out_len == sizeof data && memcmp(rr.out, data, sizeof data) == 0,
              "curl whole: exit %d, %zu bytes", rr.status, rr.out_len);
    ht_run_free(&rr);
    const char *a2[] = {"curl", "-s", "--max-time", "10", "-r", "4990-", url, NULL};
    rr = ht_run(a2, 15000);
    kh_assert(p, rr.status == 0 && rr.out_len == 10 && memcmp(rr.out, data + 4990, 10) == 0,
              "curl range: exit %d, %zu bytes", rr.status, rr.out_len);
    ht_run_free(&rr);
}
