/* keel with http1 + deflate: HTTP response compression seen from a raw
 * socket, every compressed body decoded here with zlib itself. The
 * responses come from tests/modules/mod_deflatefix.c (fields, statuses,
 * lengths, a timer-paced stream, files, the service) and plugins/hello
 * (/stream, /echo). */
#define _GNU_SOURCE
#include "test_http.h"

#include <netinet/in.h>
#include <zlib.h>

/* keel with gzip and deflate only: these tests decode with zlib; br and
 * zstd (where built in) are test_compress.c's. */
static kh_proc *start(const char *extra)
{
    static const char *const zlib_only[] = {"--set", "deflate.brotli=off", "--set",
                                            "deflate.zstd=off", NULL};
    char conf[4096];
    snprintf(conf, sizeof conf,
             "[keel]\n"
             "listen = 127.0.0.1:0 http1\n"
             "workers = 2\n"
             "modules = http1 deflate deflatefix hello\n" KH_MODULE_PATH "%s",
             extra ? extra : "");
    kh_proc *p = kh_start(conf, zlib_only, 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port in the 'listening on' line");
    return p;
}

/* Stops keel gracefully and expects exit status 0: under ASan a leak of a
 * compressor or of a request's state turns it into a failure. */
static void stop_clean(kh_proc *p)
{
    kh_signal(p, SIGTERM);
    int st = kh_wait_exit(p, 15000);
    kh_assert(p, st == 0, "keel exited with %d", st);
    kh_stop(p);
}

/* GET target with extra header lines (each ending in \r\n). */
static void get(kh_proc *p, const char *target, const char *headers, ht_resp *r)
{
    ht_roundtrip(p, ht_fmt("GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n", target, headers), r);
}

/* Inflates a whole body; zlib's windowBits say the framing (15 + 16:
 * gzip only, 15: zlib only). Fails the test unless the stream ends
 * exactly where the body does. */
static char *decode(kh_proc *p, const char *data, size_t len, int wbits, size_t *outlen)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    cr_assert(inflateInit2(&z, wbits) == Z_OK);
    size_t cap = len * 8 + 65536, n = 0;
    char *out = malloc(cap);
    cr_assert(out);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)len;
    int rc;
    for (;;) {
        if (cap - n < 65536) {
            cap *= 2;
            out = realloc(out, cap);
            cr_assert(out);
        }
        z.next_out = (Bytef *)out + n;
        z.avail_out = (uInt)(cap - n - 1);
        rc = inflate(&z, Z_NO_FLUSH);
        n = (size_t)((char *)z.next_out - out);
        if (rc != Z_OK)
            break;
    }
    kh_assert(p, rc == Z_STREAM_END, "inflate: %d (%s) after %zu bytes out", rc, z.msg ? z.msg : "",
              n);
    kh_assert(p, z.avail_in == 0, "%u bytes after the end of the stream", z.avail_in);
    inflateEnd(&z);
    out[n] = '\0';
    *outlen = n;
    return out;
}

#define GZIP    31
#define ZLIB    15
#define AE_GZIP "Accept-Encoding: gzip, deflate, br\r\n"

/* Counts how often token appears in the Vary lines (case-insensitive). */
static int vary_count(const ht_resp *r, const char *token)
{
    int n = 0;
    size_t tl = strlen(token);
    for (size_t i = 0; i < r->nfields; i++) {
        if (strcasecmp(r->fields[i].name, "Vary") != 0)
            continue;
        for (const char *s = r->fields[i].value; *s;) {
            while (*s == ' ' || *s == ',')
                s++;
            const char *e = s;
            while (*e && *e != ',')
                e++;
            const char *t = e;
            while (t > s && t[-1] == ' ')
                t--;
            n += (size_t)(t - s) == tl && strncasecmp(s, token, tl) == 0;
            s = e;
        }
    }
    return n;
}

/* Checks that r is the compressed form of the identity body `plain`. */
static void expect_compressed(kh_proc *p, const ht_resp *r, const char *coding, const char *plain,
                              size_t plain_len)
{
    const char *ce = ht_header(r, "Content-Encoding");
    kh_assert(p, ce && strcmp(ce, coding) == 0, "Content-Encoding '%s', not %s\n%s",
              ce ? ce : "(none)", coding, r->head);
    kh_assert(p, ht_header(r, "Content-Length") == NULL, "a Content-Length survived\n%s", r->head);
    kh_assert(p, ht_header(r, "Accept-Ranges") == NULL, "Accept-Ranges survived\n%s", r->head);
    kh_assert(p, vary_count(r, "Accept-Encoding") == 1, "Vary\n%s", r->head);
    size_t n;
    char *got = decode(p, r->body, r->body_len,
                       strcmp(coding, "gzip") == 0 ? GZIP : ZLIB /* RFC 9110 8.4.1.2 */, &n);
    kh_assert(p, n == plain_len && memcmp(got, plain, n) == 0,
              "decoded %zu bytes, the identity body has %zu", n, plain_len);
    kh_assert(p, r->body_len < plain_len, "%zu bytes compressed to %zu", plain_len, r->body_len);
    free(got);
}

static void expect_identity(kh_proc *p, const ht_resp *r)
{
    kh_assert(p, ht_header(r, "Content-Encoding") == NULL, "compressed\n%s", r->head);
}

/* The identity body of a target, to compare a compressed one with. */
static ht_resp plain(kh_proc *p, const char *target)
{
    ht_resp r;
    get(p, target, "", &r);
    kh_assert(p, r.status == 200 || r.status == 404 || r.status == 403, "status %d", r.status);
    expect_identity(p, &r);
    return r;
}

/* ---- choosing the coding (RFC 9110 12.5.3) ------------------------------- */

Test(deflate, gzip_and_deflate_by_accept_encoding, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    ht_resp id = plain(p, "/fix/body?len=20000");
    kh_assert(p, vary_count(&id, "Accept-Encoding") == 1,
              "no Vary on an identity response that could have been compressed\n%s", id.head);
    struct {
        const char *ae, *coding;
    } cases[] = {
        {"gzip", "gzip"},
        {"deflate", "deflate"},
        {"gzip, deflate", "gzip"},
        {"deflate, gzip", "gzip"}, /* a tie goes to gzip */
        {"gzip;q=0.5, deflate;q=0.8", "deflate"},
        {"gzip;q=0.8, deflate;q=0.5", "gzip"},
        {"gzip;q=0, deflate", "deflate"},
        {"*", "gzip"},
        {"gzip;q=0, *", "deflate"},
        {"br, x-gzip", "gzip"},
        {"identity;q=0, deflate", "deflate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ht_resp r;
        get(p, "/fix/body?len=20000", ht_fmt("Accept-Encoding: %s\r\n", cases[i].ae), &r);
        kh_assert(p, r.status == 200 && r.chunked, "'%s': status %d, chunked %d", cases[i].ae,
                  r.status, r.chunked);
        expect_compressed(p, &r, cases[i].coding, id.body, id.body_len);
        ht_resp_free(&r);
    }
    ht_resp_free(&id);
    stop_clean(p);
}

Test(deflate, nothing_acceptable_gives_identity_with_vary, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    const char *headers[] = {
        "",                                  /* no Accept-Encoding */
        "Accept-Encoding: identity;q=0\r\n", /* nothing acceptable: send as is */
        "Accept-Encoding: br, zstd\r\n",     /* only codings keel lacks */
        "Accept-Encoding: gzip;q=0, deflate;q=0\r\n",
        "Accept-Encoding: *;q=0\r\n",
        "Accept-Encoding:\r\n", /* empty: no coding wanted */
        "Accept-Encoding: identity, gzip;q=0.5\r\n",
        "Accept-Encoding: ;;;,,=q\"\r\n", /* garbage must not crash */
        "Accept-Encoding: gzip;q=7\r\n",
    };
    for (size_t i = 0; i < sizeof headers / sizeof *headers; i++) {
        ht_resp r;
        get(p, "/fix/body?len=5000", headers[i], &r);
        kh_assert(p, r.status == 200 && r.body_len == 5000, "case %zu: %d, %zu bytes", i, r.status,
                  r.body_len);
        expect_identity(p, &r);
        /* Declined (keel_response_filter_skip_body): the length survives. */
        kh_assert(p, r.content_length == 5000 && !r.chunked, "case %zu: framing\n%s", i, r.head);
        kh_assert(p, vary_count(&r, "Accept-Encoding") == 1, "case %zu: Vary\n%s", i, r.head);
        ht_resp_free(&r);
    }
    stop_clean(p);
}

/* ---- what is never compressed ----------------------------------------------- */

Test(deflate, untouched_responses, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    const char *targets[] = {
        "/fix/body?len=5000&status=500",     /* nginx's statuses: 200, 403, 404 */
        "/fix/body?len=5000&status=206",     /* a part of a representation */
        "/fix/body?len=5000&type=image/png", /* not a listed type */
        "/fix/body?len=5000&type=application/octet-stream",
        "/fix/body?len=5000&ce=br",                     /* no double compression */
        "/fix/body?len=5000&cc=public,%20no-transform", /* RFC 9110 7.7 */
        "/fix/body?len=100&cl=1",                       /* known and below min_length */
        "/fix/service",                                 /* application/gzip */
    };
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
        ht_resp r;
        get(p, targets[i], AE_GZIP, &r);
        kh_assert(p, r.status != 0, "%s: no response", targets[i]);
        const char *ce = ht_header(&r, "Content-Encoding");
        kh_assert(p, ce == NULL || strcmp(ce, "br") == 0, "%s: compressed\n%s", targets[i], r.head);
        kh_assert(p, vary_count(&r, "Accept-Encoding") == 0,
                  "%s: Vary on a response never compressed\n%s", targets[i], r.head);
        ht_resp_free(&r);
    }
    /* Left alone, a body keeps its length, declared or not. */
    ht_resp r0;
    get(p, "/fix/body?len=5000&type=image/png", AE_GZIP, &r0);
    kh_assert(p, r0.content_length == 5000 && !r0.chunked, "image: framing\n%s", r0.head);
    ht_resp_free(&r0);
    /* The body left alone is the very body the handler sent. */
    ht_resp r;
    get(p, "/fix/body?len=100&cl=1", AE_GZIP, &r);
    kh_assert(p, r.content_length == 100 && r.body_len == 100 && memcmp(r.body, "line 0:", 7) == 0,
              "small body: length %lld, %zu bytes", (long long)r.content_length, r.body_len);
    ht_resp_free(&r);
    stop_clean(p);
}

Test(deflate, head_204_304_untouched, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    ht_resp r;
    ht_roundtrip(p, "HEAD /fix/body?len=5000 HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n", &r);
    kh_assert(p, r.status == 200, "HEAD: %d", r.status);
    expect_identity(p, &r);
    kh_assert(p, vary_count(&r, "Accept-Encoding") == 0, "HEAD: Vary\n%s", r.head);
    kh_assert(p, r.content_length == 5000, "HEAD: the length was lost\n%s", r.head);
    ht_resp_free(&r);
    const char *statuses[] = {"204", "304"};
    for (int i = 0; i < 2; i++) {
        get(p, ht_fmt("/fix/body?len=0&status=%s&etag=%%22v1%%22", statuses[i]), AE_GZIP, &r);
        kh_assert(p, r.status == atoi(statuses[i]), "status %d", r.status);
        expect_identity(p, &r);
        kh_assert(p, vary_count(&r, "Accept-Encoding") == 0, "%s: Vary\n%s", statuses[i], r.head);
        const char *etag = ht_header(&r, "ETag");
        kh_assert(p, etag && strcmp(etag, "\"v1\"") == 0, "%s: ETag %s", statuses[i],
                  etag ? etag : "(none)");
        ht_resp_free(&r);
    }
    stop_clean(p);
}

/* nginx's list: 403 and 404 pages are compressed too. */
Test(deflate, statuses_403_404_compressed, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    const char *s[] = {"403", "404"};
    for (int i = 0; i < 2; i++) {
        const char *target = ht_fmt("/fix/body?len=3000&status=%s", s[i]);
        ht_resp id = plain(p, target), r;
        get(p, target, AE_GZIP, &r);
        kh_assert(p, r.status == atoi(s[i]), "status %d", r.status);
        expect_compressed(p, &r, "gzip", id.body, id.body_len);
        ht_resp_free(&r);
        ht_resp_free(&id);
    }
    stop_clean(p);
}

/* Without chunked framing a compressed body could end only with the
 * connection: HTTP/1.0 gets identity (nginx's gzip_http_version 1.1). */
Test(deflate, http10_gets_identity_with_vary, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    ht_resp r;
    ht_roundtrip(p, "GET /fix/body?len=5000 HTTP/1.0\r\n" AE_GZIP "\r\n", &r);
    kh_assert(p, r.status == 200 && r.body_len == 5000, "%d, %zu bytes", r.status, r.body_len);
    expect_identity(p, &r);
    kh_assert(p, vary_count(&r, "Accept-Encoding") == 1, "Vary\n%s", r.head);
    ht_resp_free(&r);
    stop_clean(p);
}

/* ---- fields of a compressed response ------------------------------------------ */

Test(deflate, vary_merged_not_duplicated, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    struct {
        const char *vary;
        int ae;
    } cases[] = {{"Origin", 1}, {"accept-encoding", 1}, {"Origin,%20Accept-Encoding", 1}, {"*", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int compressed = 0; compressed < 2; compressed++) {
            ht_resp r;
            get(p, ht_fmt("/fix/body?len=3000&vary=%s", cases[i].vary), compressed ? AE_GZIP : "",
                &r);
            kh_assert(p, vary_count(&r, "Accept-Encoding") == cases[i].ae,
                      "Vary %s (compressed %d): Accept-Encoding %d times\n%s", cases[i].vary,
                      compressed, vary_count(&r, "Accept-Encoding"), r.head);
            if (i == 0 || i == 2)
                kh_assert(p, vary_count(&r, "Origin") == 1, "Origin lost\n%s", r.head);
            if (i == 3)
                kh_assert(p, vary_count(&r, "*") == 1, "Vary: * lost\n%s", r.head);
            kh_assert(p, (ht_header(&r, "Content-Encoding") != NULL) == compressed,
                      "compressed %d\n%s", compressed, r.head);
            ht_resp_free(&r);
        }
    }
    stop_clean(p);
}

/* RFC 9110 8.8.3: other bytes, so a strong validator becomes weak. */
Test(deflate, strong_etag_made_weak, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    struct {
        const char *sent, *compressed, *identity;
    } cases[] = {
        {"%22abc%22", "W/\"abc\"", "\"abc\""},
        {"W/%22abc%22", "W/\"abc\"", "W/\"abc\""},
    };
    for (size_t i = 0; i < 2; i++) {
        ht_resp r;
        get(p, ht_fmt("/fix/body?len=3000&etag=%s", cases[i].sent), AE_GZIP, &r);
        const char *etag = ht_header(&r, "ETag");
        kh_assert(p, etag && strcmp(etag, cases[i].compressed) == 0, "compressed: ETag %s",
                  etag ? etag : "(none)");
        ht_resp_free(&r);
        get(p, ht_fmt("/fix/body?len=3000&etag=%s", cases[i].sent), "", &r);
        etag = ht_header(&r, "ETag");
        kh_assert(p, etag && strcmp(etag, cases[i].identity) == 0, "identity: ETag %s",
                  etag ? etag : "(none)");
        ht_resp_free(&r);
    }
    stop_clean(p);
}

/* A declared Content-Length goes (the protocol frames the new body) and a
 * small known length takes a small window (still decodable). */
Test(deflate, declared_length_replaced_by_chunked, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    size_t lens[] = {300, 2000, 70000};
    for (size_t i = 0; i < 3; i++) {
        const char *target = ht_fmt("/fix/body?len=%zu&cl=1", lens[i]);
        ht_resp id = plain(p, target), r;
        kh_assert(p, id.content_length == (int64_t)lens[i], "identity length %lld",
                  (long long)id.content_length);
        get(p, target, AE_GZIP, &r);
        kh_assert(p, r.chunked, "not chunked\n%s", r.head);
        expect_compressed(p, &r, "gzip", id.body, id.body_len);
        ht_resp_free(&r);
        ht_resp_free(&id);
    }
    stop_clean(p);
}

/* ---- bodies ---------------------------------------------------------------------- */

Test(deflate, large_body_decodes_exactly, .timeout = 90, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    const char *target = "/fix/body?len=6000000";
    ht_resp id = plain(p, target), r;
    kh_assert(p, id.body_len == 6000000, "identity: %zu bytes", id.body_len);
    get(p, target, AE_GZIP, &r);
    expect_compressed(p, &r, "gzip", id.body, id.body_len);
    ht_resp_free(&r);
    get(p, target, "Accept-Encoding: deflate\r\n", &r);
    expect_compressed(p, &r, "deflate", id.body, id.body_len);
    ht_resp_free(&r);
    ht_resp_free(&id);
    stop_clean(p);
}

/* Bytes that do not compress (every value, no repetition) still come back
 * exactly: POST /echo answers with the request's own Content-Type. */
Test(deflate, incompressible_body_roundtrips, .timeout = 90, .fini = kh_cleanup_all)
{
    kh_proc *p = start("[http1]\nmax_body = 8m\n");
    size_t n = 3u << 20;
    char *body = malloc(n);
    cr_assert(body);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        body[i] = (char)x;
    }
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, ht_fmt("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n"
                          "Content-Length: %zu\r\n" AE_GZIP "\r\n",
                          n));
    ht_send(c, body, n);
    ht_resp r;
    int rc = ht_read_response(c, &r, 0, 20000);
    kh_assert(p, rc == 0, "reading: %s", r.err);
    const char *ce = ht_header(&r, "Content-Encoding");
    kh_assert(p, ce && strcmp(ce, "gzip") == 0, "not gzip\n%s", r.head);
    size_t outlen;
    char *got = decode(p, r.body, r.body_len, GZIP, &outlen);
    kh_assert(p, outlen == n && memcmp(got, body, n) == 0, "decoded %zu of %zu bytes", outlen, n);
    free(got);
    ht_resp_free(&r);
    ht_close(c);
    free(body);
    stop_clean(p);
}

/* hello's /stream: streamed pieces and a trailer, compressed. */
Test(deflate, hello_stream_with_trailer, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    ht_resp id = plain(p, "/stream?n=300"), r;
    get(p, "/stream?n=300", AE_GZIP, &r);
    expect_compressed(p, &r, "gzip", id.body, id.body_len);
    const char *t = ht_trailer(&r, "X-Stream-Chunks");
    kh_assert(p, t && strcmp(t, "300") == 0, "trailer %s", t ? t : "(none)");
    ht_resp_free(&r);
    ht_resp_free(&id);
    stop_clean(p);
}

/* A stream's first lines reach the client, decodable, long before its
 * end: each piece of a streamed body is flushed (SYNC), not held until
 * zlib's buffers fill. /fix/tick writes one line every 200 ms. */
Test(deflate, stream_flushed_piece_by_piece, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    long long t0 = kh_now_ms();
    ht_send_str(c, "GET /fix/tick?n=10&ms=200 HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n");
    ht_resp r;
    kh_assert(p, ht_read_head(c, &r, 5000) == 0, "head: %s", r.err);
    const char *ce = ht_header(&r, "Content-Encoding");
    kh_assert(p, ce && strcmp(ce, "gzip") == 0 && r.chunked, "not gzip, chunked\n%s", r.head);

    z_stream z;
    memset(&z, 0, sizeof z);
    cr_assert(inflateInit2(&z, GZIP) == Z_OK);
    char out[65536];
    size_t outlen = 0;
    long long first_at = -1;
    int zrc = Z_OK, chunks = 0;
    for (;;) {
        char line[64];
        kh_assert(p, ht_read_line(c, &r, line, sizeof line, 5000) == 0, "%s", r.err);
        size_t size = strtoul(line, NULL, 16);
        if (size == 0)
            break;
        kh_assert(p, ht_wait_bytes(c, size + 2, 5000) == 0, "chunk of %zu bytes", size);
        z.next_in = (Bytef *)c->buf + c->pos;
        z.avail_in = (uInt)size;
        z.next_out = (Bytef *)out + outlen;
        z.avail_out = (uInt)(sizeof out - outlen - 1);
        zrc = inflate(&z, Z_SYNC_FLUSH);
        kh_assert(p, zrc == Z_OK || zrc == Z_STREAM_END || zrc == Z_BUF_ERROR, "inflate %d", zrc);
        kh_assert(p, z.avail_in == 0, "inflate left input");
        outlen = sizeof out - 1 - z.avail_out;
        out[outlen] = '\0';
        c->pos += size + 2;
        chunks++;
        if (first_at < 0 && strstr(out, "tick 1 of 10\n"))
            first_at = kh_now_ms() - t0;
    }
    long long total = kh_now_ms() - t0;
    inflateEnd(&z);
    kh_assert(p, zrc == Z_STREAM_END, "the gzip stream did not end");
    kh_assert(p, first_at >= 0 && first_at < 1000,
              "the first line decoded after %lld ms (the stream took %lld ms)", first_at, total);
    kh_assert(p, total >= 1800, "the stream took only %lld ms", total);
    kh_assert(p, chunks >= 10, "%d chunks for 10 lines", chunks);
    char expect[400] = "";
    for (int i = 1; i <= 10; i++)
        snprintf(expect + strlen(expect), sizeof expect - strlen(expect), "tick %d of 10\n", i);
    kh_assert(p, strcmp(out, expect) == 0, "decoded:\n%s", out);
    ht_resp_free(&r);
    ht_close(c);
    stop_clean(p);
}

/* A client that leaves mid-stream: the compressor and the request state
 * are freed (ASan would see the leak), keel goes on serving. */
Test(deflate, client_leaves_mid_stream, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    for (int i = 0; i < 3; i++) {
        ht_conn *c = ht_connect(kh_port(p, 0));
        ht_send_str(c, "GET /fix/tick?n=100&ms=20 HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n");
        ht_resp r;
        kh_assert(p, ht_read_head(c, &r, 5000) == 0, "head: %s", r.err);
        ht_resp_free(&r);
        /* mid-stream: some of the body has come */
        kh_assert(p, ht_avail(c) > 0 || ht_fill(c, 5000) > 0, "no body after the head");
        ht_close(c);
    }
    ht_resp r;
    get(p, "/fix/body?len=4000", AE_GZIP, &r);
    kh_assert(p, r.status == 200 && ht_header(&r, "Content-Encoding"), "after: %d", r.status);
    ht_resp_free(&r);
    stop_clean(p);
}

/* A body from a file (keel_response_send_file) is read in pieces by the
 * core when a body filter is registered; compressed, it decodes to the
 * file. compress_files = on is the default (issue 25). */
Test(deflate, file_body_compressed, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    char path[400];
    snprintf(path, sizeof path, "%s/big.txt", p->dir);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    size_t n = 0;
    for (int i = 0; n < (1u << 20) + 12345; i++)
        n += (size_t)fprintf(f, "file line %d, compressible and a little varied %d\n", i, i % 97);
    cr_assert(fclose(f) == 0);
    const char *target = ht_fmt("/fix/file?path=%s", path);
    ht_resp id = plain(p, target), r;
    kh_assert(p, id.body_len == n, "identity: %zu of %zu bytes", id.body_len, n);
    get(p, target, AE_GZIP, &r);
    expect_compressed(p, &r, "gzip", id.body, id.body_len);
    ht_resp_free(&r);
    ht_resp_free(&id);
    stop_clean(p);
}

/* The value of an unlabelled series on a Prometheus page, or -1. */
static long long prom_value(const char *page, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = page; (s = strstr(s, name)) != NULL; s += n)
        if ((s == page || s[-1] == '\n') && s[n] == ' ')
            return atoll(s + n + 1);
    return -1;
}

/* compress_files = off: a file body is left alone, so it keeps its
 * Content-Length and sendfile (keel_response_body_from_file). */
Test(deflate, file_body_left_to_sendfile_when_asked, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start("[deflate]\ncompress_files = off\n");
    char path[400];
    snprintf(path, sizeof path, "%s/page.html", p->dir);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    for (int i = 0; i < 2000; i++)
        fprintf(f, "<p>line %d of a compressible page</p>\n", i);
    long size = ftell(f);
    cr_assert(fclose(f) == 0);
    ht_resp r;
    get(p, ht_fmt("/fix/file?path=%s", path), AE_GZIP, &r);
    expect_identity(p, &r);
    kh_assert(
        p, r.status == 200 && !r.chunked && r.content_length == size && r.body_len == (size_t)size,
        "status %d, chunked %d, Content-Length %lld of %ld\n%s", r.status, r.chunked,
        (long long)r.content_length, size, r.head);
    ht_resp_free(&r);
    stop_clean(p);
}

/* A small body given whole has a known length even without a declared
 * Content-Length (keel_response_body_length): hello's 13-byte "Hello,
 * World!" is not inflated to a larger gzip member. */
Test(deflate, small_body_given_whole_not_compressed, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    ht_resp r;
    get(p, "/", AE_GZIP, &r);
    expect_identity(p, &r);
    kh_assert(p, r.body_len == 13 && memcmp(r.body, "Hello, World!", 13) == 0, "body %.*s",
              (int)r.body_len, r.body);
    ht_resp_free(&r);
    stop_clean(p);
}

/* A streamer paced by its pieces' release stays paced through the
 * compressor: with a client that reads nothing, what the filter was fed
 * stays near what the sockets hold, not the whole stream (which would pile
 * up in keel's write queue). /fix/pump streams 64 MiB of incompressible
 * bytes; loopback's socket buffers hold a few MiB. */
Test(deflate, streamed_body_paced_through_the_filter, .timeout = 60, .fini = kh_cleanup_all)
{
    char conf[4096];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n"
             "modules = http1 deflate deflatefix stats\n" KH_MODULE_PATH);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 8192;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)kh_port(p, 0))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    kh_assert(p, connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    const char *req = "GET /fix/pump?n=16384&size=4096 HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n";
    kh_assert(p, kh_send_str(fd, req) == 0, "send");
    /* Read nothing for a second: time passing is the test (a filter that
     * does not pace its producer would have been fed 16 MiB by then). */
    kh_sleep_ms(1000);
    ht_resp r;
    get(p, "/metrics", "", &r);
    long long in = prom_value(r.body, "deflate_bytes_in_total");
    ht_resp_free(&r);
    kh_assert(p, in > 0 && in < 16 * 1024 * 1024, "the compressor was fed %lld bytes", in);
    close(fd);
    stop_clean(p);
}

/* ---- config ------------------------------------------------------------------- */

Test(deflate, config_types_min_length_http_off, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start("[deflate]\ntypes = application/x-keel, image/*\nmin_length = 10k\n");
    ht_resp r;
    get(p, "/fix/body?len=20000&type=image/png", AE_GZIP, &r);
    kh_assert(p, ht_header(&r, "Content-Encoding") != NULL, "image/* not compressed\n%s", r.head);
    ht_resp_free(&r);
    get(p, "/fix/body?len=20000&type=Application/X-Keel;%20a=b", AE_GZIP, &r);
    kh_assert(p, ht_header(&r, "Content-Encoding") != NULL, "application/x-keel\n%s", r.head);
    ht_resp_free(&r);
    get(p, "/fix/body?len=20000", AE_GZIP, &r);
    kh_assert(p, ht_header(&r, "Content-Encoding") == NULL, "text/html is not listed\n%s", r.head);
    ht_resp_free(&r);
    get(p, "/fix/body?len=9000&cl=1&type=image/png", AE_GZIP, &r);
    kh_assert(p, ht_header(&r, "Content-Encoding") == NULL, "below 10k\n%s", r.head);
    ht_resp_free(&r);
    stop_clean(p);

    p = start("[deflate]\nhttp = off\n");
    get(p, "/fix/body?len=20000", AE_GZIP, &r);
    expect_identity(p, &r);
    kh_assert(p, vary_count(&r, "Accept-Encoding") == 0, "Vary with http = off");
    ht_resp_free(&r);
    /* The service is still there. */
    get(p, "/fix/service", "", &r);
    const char *s = ht_header(&r, "X-Service");
    kh_assert(p, s && strncmp(s, "ok ", 3) == 0, "service: %s", s ? s : "(none)");
    ht_resp_free(&r);
    stop_clean(p);
}

Test(deflate, bad_config_refused, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *bad[] = {"level = 0",    "level = 10",    "mem_level = 0",    "window_bits = 8",
                         "types = text", "types = /html", "min_length = lots"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char conf[1024];
        snprintf(conf, sizeof conf,
                 "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 deflate\n" KH_MODULE_PATH
                 "[deflate]\n%s\n",
                 bad[i]);
        const char *args[] = {"-t", NULL};
        kh_proc *p = kh_spawn(conf, args);
        int st = kh_wait_exit(p, 10000);
        kh_assert(p, st == 1, "'%s': exit %d", bad[i], st);
        kh_assert(p, strstr(kh_stderr(p), "[deflate]") != NULL, "'%s': no message", bad[i]);
        kh_stop(p);
    }
}

/* ---- the service, from another module ------------------------------------------- */

Test(deflate, service_from_another_module, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(NULL);
    ht_resp r;
    get(p, "/fix/service", AE_GZIP, &r);
    const char *s = ht_header(&r, "X-Service");
    kh_assert(p, s && strncmp(s, "ok ", 3) == 0, "X-Service: %s", s ? s : "(none)");
    size_t live = 0, idle = 0;
    kh_assert(p, sscanf(s, "ok live=%zu idle=%zu", &live, &idle) == 2, "X-Service: %s", s);
    kh_assert(p, live > 200000 && idle <= 64, "live %zu, idle %zu bytes", live, idle);
    size_t n;
    char *text = decode(p, r.body, r.body_len, GZIP, &n);
    kh_assert(p, n == 100000 && memcmp(text, "line 0: the quick", 17) == 0, "%zu bytes", n);
    free(text);
    ht_resp_free(&r);
    stop_clean(p);
}

/* ---- metrics ----------------------------------------------------------------- */

Test(deflate, metrics_count_responses_and_bytes, .timeout = 60, .fini = kh_cleanup_all)
{
    char conf[4096];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 2\n"
             "modules = http1 deflate deflatefix stats\n" KH_MODULE_PATH);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    ht_resp r;
    for (int i = 0; i < 3; i++) {
        get(p, "/fix/body?len=20000", AE_GZIP, &r);
        kh_assert(p, ht_header(&r, "Content-Encoding") != NULL, "not compressed");
        ht_resp_free(&r);
    }
    get(p, "/fix/body?len=20000", "", &r); /* declined: counted nowhere */
    ht_resp_free(&r);
    get(p, "/metrics", "", &r);
    kh_assert(p, r.status == 200, "/metrics: %d", r.status);
    long long n = prom_value(r.body, "deflate_responses_compressed_total");
    long long in = prom_value(r.body, "deflate_bytes_in_total");
    long long out = prom_value(r.body, "deflate_bytes_out_total");
    kh_assert(p, n == 3 && in == 60000 && out > 0 && out < in / 3,
              "responses %lld, in %lld, out %lld\n%s", n, in, out, r.body);
    ht_resp_free(&r);
    stop_clean(p);
}
