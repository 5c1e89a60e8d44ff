/* The static module's content cache: small files answered from memory
 * (`cache_content`), read once and then not again (the process's read
 * counter tells, Linux), the bytes dropped when the once-per-turn fstat
 * sees the file change (rewritten in place with the same size), ranges and
 * HEAD from memory, a budget (`cache_content_max`) that evicts the least
 * recently used, files above the limit still sent with sendfile, and
 * deflate's compress_files = off still seeing a file (not compressed). */
#define _GNU_SOURCE
#include "test_static.h"

#define T(name, secs) Test(static_content, name, .timeout = secs, .fini = st_cleanup)

#define FILE_LEN 4096

static void fill(char *b, size_t n, char seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (char)(seed + (char)(i % 23));
}

/* GETs target `times` times on one connection; every body must be want. */
static void get_n(kh_proc *p, const char *target, const char *want, size_t len, int times)
{
    ht_conn *c = ht_connect(kh_port(p, 0));
    for (int i = 0; i < times; i++) {
        ht_send_str(c, ht_fmt("GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target));
        ht_resp r;
        kh_assert(p, ht_read_response(c, &r, 0, 10000) == 0, "reading: %s", r.err);
        st_assert_status(p, &r, 200);
        kh_assert(p, r.body_len == len && memcmp(r.body, want, len) == 0,
                  "request %d: %zu bytes, or they differ", i, r.body_len);
        ht_resp_free(&r);
    }
    ht_close(c);
}

/* Twenty requests for a 4 KiB file read it once from memory's point of
 * view: keel's read counter grows by about one file, where sendfile (the
 * same config with cache_content = 0) reads it for every response. */
static long long read_for_twenty(const char *section)
{
    st_make_tree();
    char data[FILE_LEN];
    fill(data, sizeof data, 'a');
    st_write("www/small.bin", data, sizeof data);
    kh_proc *p = st_start(section);
    get_n(p, "/small.bin", data, sizeof data, 1); /* opened and cached */
    long long before = ht_bytes_read(p);
    if (before < 0)
        cr_skip_test("no /proc/PID/io here");
    get_n(p, "/small.bin", data, sizeof data, 20);
    long long delta = ht_bytes_read(p) - before;
    kh_stop(p);
    st_cleanup();
    return delta;
}

T(small_files_come_from_memory, 60)
{
    long long from_memory = read_for_twenty("mount = / %R\n");
    long long with_sendfile = read_for_twenty("mount = / %R\ncache_content = 0\n");
    /* The requests themselves are read too (a few hundred bytes each). */
    cr_assert(with_sendfile >= 20 * FILE_LEN, "sendfile read %lld bytes for 20 responses",
              with_sendfile);
    cr_assert(from_memory < 2 * FILE_LEN + 20 * 200,
              "from memory, keel read %lld bytes for 20 responses (sendfile: %lld)", from_memory,
              with_sendfile);
}

/* Same size, new bytes: the fstat of the next turn sees the new mtime and
 * the stale copy goes; no request gets the old bytes after the change. */
T(a_file_rewritten_in_place_is_read_again, 30)
{
    st_make_tree();
    char a[FILE_LEN], b[FILE_LEN];
    fill(a, sizeof a, 'a');
    fill(b, sizeof b, 'B');
    st_write("www/f.bin", a, sizeof a);
    struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
    cr_assert(utimes(st_path("www/f.bin"), tv) == 0);
    kh_proc *p = st_start("mount = / %R\n");
    get_n(p, "/f.bin", a, sizeof a, 3);
    /* Rewritten through the same inode, the length unchanged. */
    FILE *f = fopen(st_path("www/f.bin"), "r+b");
    cr_assert(f && fwrite(b, 1, sizeof b, f) == sizeof b && fclose(f) == 0, "rewrite");
    struct timeval tv2[2] = {{1000000100, 0}, {1000000100, 0}};
    cr_assert(utimes(st_path("www/f.bin"), tv2) == 0);
    get_n(p, "/f.bin", b, sizeof b, 3);
    /* The validators kept with the cached file are the new metadata's. */
    ht_resp r;
    st_get(p, "/f.bin", NULL, &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, strcmp(ht_header(&r, "Last-Modified"), "Sun, 09 Sep 2001 01:48:20 GMT") == 0,
              "Last-Modified %s", ht_header(&r, "Last-Modified"));
    kh_assert(p, strcmp(ht_header(&r, "ETag"), "\"3b9aca64.0-1000\"") == 0, "ETag %s",
              ht_header(&r, "ETag"));
    ht_resp_free(&r);
}

T(ranges_and_head_from_memory, 30)
{
    st_make_tree();
    char data[FILE_LEN];
    fill(data, sizeof data, 'r');
    st_write("www/r.bin", data, sizeof data);
    kh_proc *p = st_start("mount = / %R\n");
    get_n(p, "/r.bin", data, sizeof data, 1);
    ht_resp r;
    st_get(p, "/r.bin", "Range: bytes=100-199\r\n", &r);
    st_assert_status(p, &r, 206);
    kh_assert(p, r.body_len == 100 && memcmp(r.body, data + 100, 100) == 0, "range: %zu bytes",
              r.body_len);
    ht_resp_free(&r);
    st_get(p, "/r.bin", "Range: bytes=-10\r\n", &r);
    st_assert_status(p, &r, 206);
    kh_assert(p, r.body_len == 10 && memcmp(r.body, data + FILE_LEN - 10, 10) == 0,
              "suffix range: %zu bytes", r.body_len);
    ht_resp_free(&r);
    st_req(p, "HEAD", "/r.bin", NULL, &r);
    st_assert_status(p, &r, 200);
    kh_assert(p, r.content_length == FILE_LEN && r.body_len == 0, "HEAD: length %lld, %zu bytes",
              (long long)r.content_length, r.body_len);
    ht_resp_free(&r);
}

/* A budget of two files' bytes, four files asked for in turn, twice: each
 * answer is right whoever was evicted; a file above cache_content goes by
 * sendfile and is right too. */
T(the_budget_evicts_and_large_files_use_sendfile, 60)
{
    st_make_tree();
    static char data[4][FILE_LEN];
    for (int i = 0; i < 4; i++) {
        fill(data[i], FILE_LEN, (char)('A' + i));
        st_write(ht_fmt("www/%d.bin", i), data[i], FILE_LEN);
    }
    static char big[64 * 1024];
    fill(big, sizeof big, 'z');
    st_write("www/big.bin", big, sizeof big);
    kh_proc *p = st_start("mount = / %R\ncache_content_max = 8k\n");
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 4; i++)
            get_n(p, ht_fmt("/%d.bin", i), data[i], FILE_LEN, 2);
    get_n(p, "/big.bin", big, sizeof big, 2);
}

/* deflate with compress_files = off leaves files alone: a small text file
 * served from memory is still a file to it. */
T(deflate_still_sees_a_file, 30)
{
    st_make_tree();
    char text[FILE_LEN];
    memset(text, 'x', sizeof text);
    st_write("www/t.txt", text, sizeof text);
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\n"
             "listen = 127.0.0.1:0 http1\n"
             "workers = 1\n"
             "modules = http1 deflate static\n" KH_MODULE_PATH "[deflate]\n"
             "compress_files = off\n"
             "[static]\n"
             "mount = / %s\n",
             st_root);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    for (int i = 0; i < 3; i++) {
        ht_resp r;
        st_get(p, "/t.txt", "Accept-Encoding: gzip\r\n", &r);
        st_assert_status(p, &r, 200);
        const char *ce = ht_header(&r, "Content-Encoding");
        kh_assert(p, ce == NULL && r.body_len == FILE_LEN,
                  "request %d: Content-Encoding '%s', %zu bytes", i, ce ? ce : "", r.body_len);
        ht_resp_free(&r);
    }
}
