/* The static module's conditional requests (RFC 9110 13) and content
 * codings: If-None-Match (lists, weak comparison, "*") and
 * If-Modified-Since → 304, If-None-Match winning over If-Modified-Since,
 * If-Match (strong) and If-Unmodified-Since → 412, a file changed between
 * requests (new ETag, no stale answer), and precompressed siblings chosen
 * by q-value with Vary and a distinct ETag. */
#define _GNU_SOURCE
#include "test_static.h"

#define T(name, secs) Test(static_cond, name, .timeout = secs, .fini = st_cleanup)

static kh_proc *start_with_file(void)
{
    st_make_tree();
    st_write_str("www/f.txt", "version one\n");
    /* A known modification time, well in the past. */
    struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
    cr_assert(utimes(st_path("www/f.txt"), tv) == 0);
    return st_start("mount = / %R\n");
}

static char *etag_of(kh_proc *p)
{
    ht_resp r;
    st_get(p, "/f.txt", NULL, &r);
    st_assert_status(p, &r, 200);
    char *e = strdup(ht_header(&r, "ETag"));
    ht_resp_free(&r);
    return e;
}

T(if_none_match_gives_304_with_validators, 30)
{
    kh_proc *p = start_with_file();
    char *etag = etag_of(p);
    ht_resp r;
    const char *forms[] = {
        ht_fmt("If-None-Match: %s\r\n", etag),
        ht_fmt("If-None-Match: \"nope\", %s\r\n", etag),
        ht_fmt("If-None-Match: W/%s\r\n", etag), /* weak comparison */
        "If-None-Match: *\r\n",
    };
    for (size_t i = 0; i < 4; i++) {
        st_get(p, "/f.txt", forms[i], &r);
        st_assert_status(p, &r, 304);
        kh_assert(p, r.body_len == 0, "304 with a body");
        kh_assert(p, strcmp(ht_header(&r, "ETag"), etag) == 0, "304 carries the ETag");
        ht_resp_free(&r);
    }
    st_get(p, "/f.txt", "If-None-Match: \"other\"\r\n", &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
    st_req(p, "HEAD", "/f.txt", ht_fmt("If-None-Match: %s\r\n", etag), &r);
    st_assert_status(p, &r, 304);
    ht_resp_free(&r);
    free(etag);
}

T(if_modified_since_and_precedence, 30)
{
    kh_proc *p = start_with_file();
    ht_resp r;
    /* 1000000000 is Sun, 09 Sep 2001 01:46:40 GMT. */
    st_get(p, "/f.txt", NULL, &r);
    kh_assert(p, strcmp(ht_header(&r, "Last-Modified"), "Sun, 09 Sep 2001 01:46:40 GMT") == 0,
              "Last-Modified %s", ht_header(&r, "Last-Modified"));
    ht_resp_free(&r);
    const char *same[] = {
        "If-Modified-Since: Sun, 09 Sep 2001 01:46:40 GMT\r\n",
        "If-Modified-Since: Sunday, 09-Sep-01 01:46:40 GMT\r\n", /* RFC 850 */
        "If-Modified-Since: Sun Sep  9 01:46:40 2001\r\n",       /* asctime */
        "If-Modified-Since: Mon, 10 Sep 2001 00:00:00 GMT\r\n",
    };
    for (size_t i = 0; i < 4; i++) {
        st_get(p, "/f.txt", same[i], &r);
        st_assert_status(p, &r, 304);
        ht_resp_free(&r);
    }
    st_get(p, "/f.txt", "If-Modified-Since: Sun, 09 Sep 2001 01:46:39 GMT\r\n", &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
    st_get(p, "/f.txt", "If-Modified-Since: yesterday\r\n", &r); /* invalid: ignored */
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
    /* 13.2.2: If-None-Match decides when present, If-Modified-Since is not looked at. */
    st_get(p, "/f.txt",
           "If-None-Match: \"other\"\r\nIf-Modified-Since: Mon, 10 Sep 2001 00:00:00 GMT\r\n", &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
}

T(if_match_and_if_unmodified_since_give_412, 30)
{
    kh_proc *p = start_with_file();
    char *etag = etag_of(p);
    ht_resp r;
    st_get(p, "/f.txt", "If-Match: \"other\"\r\n", &r);
    st_assert_status(p, &r, 412);
    ht_resp_free(&r);
    st_get(p, "/f.txt", ht_fmt("If-Match: W/%s\r\n", etag), &r); /* strong comparison */
    st_assert_status(p, &r, 412);
    ht_resp_free(&r);
    st_get(p, "/f.txt", ht_fmt("If-Match: \"a\", %s\r\n", etag), &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
    st_get(p, "/f.txt", "If-Match: *\r\n", &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
    st_get(p, "/f.txt", "If-Unmodified-Since: Sun, 09 Sep 2001 01:46:39 GMT\r\n", &r);
    st_assert_status(p, &r, 412);
    ht_resp_free(&r);
    st_get(p, "/f.txt", "If-Unmodified-Since: Sun, 09 Sep 2001 01:46:40 GMT\r\n", &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
    free(etag);
}

T(changed_file_gets_new_etag_and_body, 30)
{
    kh_proc *p = start_with_file();
    char *etag1 = etag_of(p);
    /* Same size, same second: only the nanoseconds (or the size) differ. */
    st_write_str("www/f.txt", "version two\n");
    ht_resp r;
    st_get(p, "/f.txt", ht_fmt("If-None-Match: %s\r\n", etag1), &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, strcmp(r.body, "version two\n") == 0, "stale body: %s", r.body);
    kh_assert(p, strcmp(ht_header(&r, "ETag"), etag1) != 0, "same ETag after a change");
    ht_resp_free(&r);
    /* Replaced by rename (a new inode), longer. */
    st_write_str("www/f.new", "version three, longer\n");
    cr_assert(rename(st_path("www/f.new"), st_path("www/f.txt")) == 0);
    st_get(p, "/f.txt", NULL, &r);
    kh_assert(p, strcmp(r.body, "version three, longer\n") == 0, "stale body: %s", r.body);
    ht_resp_free(&r);
    free(etag1);
}

T(precompressed_siblings_by_q_value, 30)
{
    st_make_tree();
    st_write_str("www/app.js", "plain");
    st_write_str("www/app.js.gz", "gzipped");
    st_write_str("www/app.js.br", "brotli");
    st_write_str("www/only.css", "plain css");
    st_write_str("www/only.css.gz", "gz css");
    kh_proc *p = st_start("mount = / %R\nmount = /off %R precompressed=off\n");
    static const struct {
        const char *path, *accept, *body, *coding;
    } cases[] = {
        {"/app.js", NULL, "plain", NULL},
        {"/app.js", "gzip", "gzipped", "gzip"},
        {"/app.js", "gzip, deflate, br", "brotli", "br"},       /* equal q: br */
        {"/app.js", "br;q=0.5, gzip;q=0.8", "gzipped", "gzip"}, /* q decides */
        {"/app.js", "br;q=0, gzip", "gzipped", "gzip"},
        {"/app.js", "br;q=0, gzip;q=0", "plain", NULL},
        {"/app.js", "*", "brotli", "br"},
        {"/app.js", "identity", "plain", NULL},
        {"/app.js", "x-gzip", "gzipped", "gzip"},
        {"/only.css", "br, gzip", "gz css", "gzip"}, /* br wanted but absent */
        {"/off/app.js", "br, gzip", "plain", NULL},
    };
    char *tags[sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ht_resp r;
        st_get(p, cases[i].path,
               cases[i].accept ? ht_fmt("Accept-Encoding: %s\r\n", cases[i].accept) : NULL, &r);
        st_assert_status(p, &r, 200);
        kh_assert(p, strcmp(r.body, cases[i].body) == 0, "case %zu: body %s", i, r.body);
        const char *ce = ht_header(&r, "Content-Encoding");
        kh_assert(p, cases[i].coding ? ce && strcmp(ce, cases[i].coding) == 0 : ce == NULL,
                  "case %zu: Content-Encoding %s", i, ce);
        const char *type = ht_header(&r, "Content-Type");
        kh_assert(
            p, strncmp(type, strstr(cases[i].path, ".js") ? "text/javascript" : "text/css", 8) == 0,
            "case %zu: the original's type, got %s", i, type);
        const char *vary = ht_header(&r, "Vary");
        int off = strncmp(cases[i].path, "/off", 4) == 0;
        kh_assert(p, off ? vary == NULL : vary && strcmp(vary, "Accept-Encoding") == 0,
                  "case %zu: Vary %s", i, vary);
        tags[i] = strdup(ht_header(&r, "ETag"));
        ht_resp_free(&r);
    }
    kh_assert(p,
              strcmp(tags[0], tags[1]) != 0 && strcmp(tags[1], tags[2]) != 0 &&
                  strcmp(tags[0], tags[2]) != 0,
              "each variant has its own ETag: %s %s %s", tags[0], tags[1], tags[2]);
    /* The gzip variant's tag validates the gzip variant only. */
    ht_resp r;
    st_get(p, "/app.js", ht_fmt("Accept-Encoding: gzip\r\nIf-None-Match: %s\r\n", tags[1]), &r);
    st_assert_status(p, &r, 304);
    ht_resp_free(&r);
    st_get(p, "/app.js", ht_fmt("If-None-Match: %s\r\n", tags[1]), &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
    /* The br sibling asked for by its own name, after it was served as
     * app.js's br variant (one cached file, which keeps its type and
     * validators): its own type, no coding, and a tag of its own. */
    for (int round = 0; round < 2; round++) {
        st_get(p, "/app.js.br", NULL, &r);
        st_assert_status(p, &r, 200);
        kh_assert(p, strcmp(r.body, "brotli") == 0, "body %s", r.body);
        kh_assert(p, ht_header(&r, "Content-Encoding") == NULL, "Content-Encoding %s",
                  ht_header(&r, "Content-Encoding"));
        kh_assert(p, strcmp(ht_header(&r, "Content-Type"), "application/octet-stream") == 0,
                  "type %s", ht_header(&r, "Content-Type"));
        kh_assert(p, strcmp(ht_header(&r, "ETag"), tags[2]) != 0, "the br variant's tag %s",
                  tags[2]);
        ht_resp_free(&r);
        st_get(p, "/app.js", "Accept-Encoding: br\r\n", &r);
        kh_assert(p, strcmp(ht_header(&r, "ETag"), tags[2]) == 0, "br variant's tag %s, was %s",
                  ht_header(&r, "ETag"), tags[2]);
        kh_assert(p, strncmp(ht_header(&r, "Content-Type"), "text/javascript", 15) == 0,
                  "br variant's type %s", ht_header(&r, "Content-Type"));
        ht_resp_free(&r);
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        free(tags[i]);
}

T(open_file_cache_sees_deletes_and_new_files, 30)
{
    st_make_tree();
    st_write_str("www/f.txt", "one");
    kh_proc *p = st_start("mount = / %R\ncache_valid = 500ms\n");
    ht_resp r;
    st_get(p, "/f.txt", NULL, &r);
    st_assert_status(p, &r, 200);
    ht_resp_free(&r);
    /* Unlinked: the cached descriptor says so at once (no link left). */
    cr_assert(unlink(st_path("www/f.txt")) == 0);
    st_get(p, "/f.txt", NULL, &r);
    st_assert_status(p, &r, 404);
    ht_resp_free(&r);
    /* A name remembered as missing is looked up again after cache_valid. */
    st_write_str("www/f.txt", "two");
    kh_sleep_ms(700); /* cache_valid (500 ms) passing is the test */
    st_get(p, "/f.txt", NULL, &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, strcmp(r.body, "two") == 0, "body %s", r.body);
    ht_resp_free(&r);
    /* Rewritten in place, shorter: the new length, never a truncated body. */
    st_write_str("www/f.txt", "3");
    st_get(p, "/f.txt", NULL, &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, strcmp(r.body, "3") == 0 && r.content_length == 1, "body %s", r.body);
    ht_resp_free(&r);
}

/* A cached file's ETag and Last-Modified are made once (keel_field_make)
 * and added by pointer: the same text as the file's metadata gives
 * (mtime.nsec-size in hex; the IMF-fixdate), once each, on the miss and
 * the hits, on 200, 304 and 206 alike; If-Range compares with them. */
T(validators_made_once_match_the_metadata, 30)
{
    kh_proc *p = start_with_file();
    const char *etag = "\"3b9aca00.0-c\"", *date = "Sun, 09 Sep 2001 01:46:40 GMT";
    ht_resp r;
    char inm[64], ims[80], ir_etag[80], ir_date[96];
    snprintf(inm, sizeof inm, "If-None-Match: %s\r\n", etag);
    snprintf(ims, sizeof ims, "If-Modified-Since: %s\r\n", date);
    snprintf(ir_etag, sizeof ir_etag, "Range: bytes=0-6\r\nIf-Range: %s\r\n", etag);
    snprintf(ir_date, sizeof ir_date, "Range: bytes=0-6\r\nIf-Range: %s\r\n", date);
    const char *const extra[] = {
        NULL, NULL, inm, ims, ir_etag, ir_date, "Range: bytes=0-6\r\nIf-Range: \"other\"\r\n"};
    const int want[] = {200, 200, 304, 304, 206, 206, 200};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        st_get(p, "/f.txt", extra[i], &r);
        st_assert_status(p, &r, want[i]);
        kh_assert(p, ht_header_count(&r, "ETag") == 1 && strcmp(ht_header(&r, "ETag"), etag) == 0,
                  "case %zu: ETag:\n%s", i, r.head);
        kh_assert(p,
                  ht_header_count(&r, "Last-Modified") == 1 &&
                      strcmp(ht_header(&r, "Last-Modified"), date) == 0,
                  "case %zu: Last-Modified:\n%s", i, r.head);
        const char *body = want[i] == 200 ? "version one\n" : want[i] == 206 ? "version" : "";
        kh_assert(p, strcmp(r.body, body) == 0, "case %zu: body %s", i, r.body);
        ht_resp_free(&r);
    }
}
