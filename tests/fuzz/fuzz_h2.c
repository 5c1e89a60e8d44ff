/* fuzz_h2 — the h2 module (RFC 9113) from a client's raw bytes: frames,
 * HPACK, streams, flow control, the limits, and back through the core's
 * HTTP layer and handlers.
 *
 * As fuzz_http1 (fuzz_client.h): one in-process server for the session
 * (h2 on a listener of its own, prior knowledge, RFC 9113 3.3; the hello
 * plugin and the h2test handlers compiled in), one socket-pair connection
 * per input, written in up to three pieces each read before the next.
 *
 * Input: one byte, then the client's byte stream. The byte seeds the cuts;
 * unless its bit 7 is set the harness puts the connection preface and an
 * empty SETTINGS frame (3.4) in front, so the fuzzer spends its time on
 * frames rather than on the 24-byte magic (with bit 7 the preface is the
 * input's own, and its checking is fuzzed too).
 *
 * Checked besides ASan/UBSan/leaks, on what the server sends (its first
 * 256 KiB, whole frames):
 *   - it starts with a SETTINGS frame (3.4: the server's preface);
 *   - every frame is of a type a server sends (no PUSH_PROMISE: push is
 *     not offered; no PRIORITY), no larger than the largest
 *     SETTINGS_MAX_FRAME_SIZE the client may have sent (4.2), with the
 *     reserved bit clear (4.1), on the stream its type allows and of the
 *     length it requires (6.x);
 *   - a header block is HEADERS then CONTINUATIONs on the same stream with
 *     nothing between (6.2, 6.10); it decodes with HPACK (our decoder,
 *     which the unit test checks against RFC 7541); a response head starts
 *     with :status and three digits and has no other pseudo-field, trailers
 *     have none (8.3);
 *   - nothing but RST_STREAM and WINDOW_UPDATE on a stream after its
 *     END_STREAM, nothing at all after its RST_STREAM (5.1);
 *   - nothing after a GOAWAY with an error code (5.4.1: the connection
 *     ends).
 * An input the server has not finished with after 2 s is abandoned.
 * FUZZ_H2_TRACE=1 in the environment lists the server's frames. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/embed.h>

#include "fuzz_client.h"
#include "hpack.h"

KEEL_MODULE_DECLARE(h2);
KEEL_MODULE_DECLARE(hello);
KEEL_MODULE_DECLARE(h2test);

static keel_server *server;

static const char config[] = "[keel]\n"
                             "listen = 127.0.0.1:0 h2\n"
                             "workers = 1\n"
                             "modules = h2 hello h2test\n"
                             "log_level = error\n"
                             "crash_report = off\n"
                             "max_connections = 100000\n"
                             "[h2]\n"
                             "idle_timeout = 1s\n"
                             "stream_timeout = 1s\n"
                             "max_body = 64k\n"
                             "body_buffer = 64k\n"
                             "max_header_list = 8k\n"
                             "max_concurrent_streams = 16\n"
                             "[hello]\n"
                             "slow_delay = 1ms\n";

/* RFC 9113 3.4 and an empty SETTINGS frame (6.5). */
static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                 "\x00\x00\x00\x04\x00\x00\x00\x00\x00";
#define PREFACE_LEN (sizeof preface - 1)

enum {
    DATA,
    HEADERS,
    PRIORITY,
    RST_STREAM,
    SETTINGS,
    PUSH_PROMISE,
    PING,
    GOAWAY,
    WINDOW_UPDATE,
    CONTINUATION
};
#define END_STREAM  0x1
#define ACK         0x1
#define END_HEADERS 0x4
#define PADDED      0x8
#define PRIO        0x20

#define OUT_CAP (256 * 1024)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const keel_module_desc *const modules[] = {&keel_module_h2, &keel_module_hello,
                                                      &keel_module_h2test, NULL};
    server = fuzz_server_start(modules, config, "fuzz_h2");
    return 0;
}

static uint32_t get24(const uint8_t *p)
{
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void fail(const char *why, size_t at, const uint8_t *frame)
{
    fprintf(stderr,
            "fuzz_h2: %s (the server's frame at byte %zu: length %u type %u flags 0x%02x "
            "stream %u)\n",
            why, at, get24(frame), frame[3], frame[4], get32(frame + 5) & 0x7fffffffu);
    abort();
}

/* The largest frame the server may send: 16,384 unless a SETTINGS frame
 * of the client's, found walking its frames as the server would, allowed
 * more (6.5.2). An upper bound: the server may not have read that far. */
static uint32_t peer_max_frame(const uint8_t *in, size_t len)
{
    uint32_t max = 16384;
    if (len < 24 || memcmp(in, preface, 24) != 0)
        return max;
    for (size_t at = 24; len - at >= 9;) {
        uint32_t flen = get24(in + at);
        if (in[at + 3] == SETTINGS && !(in[at + 4] & ACK) && flen <= len - at - 9)
            for (uint32_t i = 0; i + 6 <= flen; i += 6)
                if ((in[at + 9 + i] << 8 | in[at + 10 + i]) == 5 /* MAX_FRAME_SIZE */ &&
                    get32(in + at + 11 + i) > max)
                    max = get32(in + at + 11 + i);
        at += 9 + (size_t)flen;
        if (at > len)
            break;
    }
    return max;
}

/* The fields of one response header block, as the decoder emits them. */
typedef struct head_check {
    int trailers, unknown; /* unknown: a stream past those tracked */
    char status0;          /* :status's first digit */
    size_t n;
    const char *why; /* the first problem, or NULL */
} head_check;

static int check_field(void *ud, const h2_hpack_field *hf)
{
    const char *name = hf->name, *value = hf->value;
    size_t nlen = hf->nlen, vlen = hf->vlen;
    unsigned name_index = hf->name_index;
    head_check *h = ud;
    (void)name_index;
    if (h->unknown)
        return 0;
    int pseudo = nlen > 0 && name[0] == ':';
    if (h->n == 0 && !h->trailers) {
        if (nlen != 7 || memcmp(name, ":status", 7) != 0)
            h->why = "a response head that does not start with :status";
        else if (vlen != 3 || value[0] < '1' || value[0] > '5' || value[1] < '0' ||
                 value[1] > '9' || value[2] < '0' || value[2] > '9')
            h->why = "a :status that is not three digits, 1xx to 5xx";
        else
            h->status0 = value[0];
    } else if (pseudo) {
        h->why = "a pseudo-field after the first, or in trailers (8.3)";
    }
    for (size_t i = 0; i < nlen; i++)
        if (name[i] >= 'A' && name[i] <= 'Z')
            h->why = "an uppercase field name (8.2.1)";
    h->n++;
    return h->why != NULL;
}

/* Per-stream state of what the server sent, for the first streams. */
#define TRACKED 64
typedef struct sent_stream {
    uint32_t id;
    unsigned head : 1, ended : 1, reset : 1;
} sent_stream;

static sent_stream *track(sent_stream *s, size_t *n, uint32_t id)
{
    for (size_t i = 0; i < *n; i++)
        if (s[i].id == id)
            return &s[i];
    if (*n == TRACKED)
        return NULL;
    s[*n] = (sent_stream){.id = id};
    return &s[(*n)++];
}

static void check_output(const uint8_t *out, size_t len, uint32_t max_frame)
{
    /* FUZZ_H2_TRACE=1: the server's frames on stderr, to see what an input does. */
    static int trace = -1;
    if (trace < 0)
        trace = getenv("FUZZ_H2_TRACE") != NULL;
    static h2_scratch scratch;
    h2_hpack dec;
    h2_hpack_init(&dec, 4096);
    static uint8_t block[OUT_CAP];
    size_t blen = 0;
    uint32_t block_sid = 0; /* a header block in progress on this stream */
    int block_end_stream = 0, goaway_error = 0;
    sent_stream streams[TRACKED];
    size_t nstreams = 0;

    for (size_t at = 0; len - at >= 9;) {
        const uint8_t *f = out + at;
        uint32_t flen = get24(f), sid = get32(f + 5);
        uint8_t type = f[3], flags = f[4];
        if (flen > len - at - 9)
            break; /* cut off by the capture */
        const uint8_t *payload = f + 9;
        if (trace)
            fprintf(stderr, "fuzz_h2: < length %u type %u flags 0x%02x stream %u\n", flen, type,
                    flags, sid);
        if (at == 0 && (type != SETTINGS || (flags & ACK)))
            fail("the server's preface is not a SETTINGS frame (3.4)", at, f);
        if (goaway_error)
            fail("a frame after GOAWAY with an error code (5.4.1)", at, f);
        if (sid & 0x80000000u)
            fail("the reserved bit set (4.1)", at, f);
        if (flen > max_frame)
            fail("a frame larger than the client allows (4.2)", at, f);
        if (block_sid != 0 && (type != CONTINUATION || sid != block_sid))
            fail("a header block interrupted (6.10)", at, f);
        switch (type) {
        case DATA:
        case HEADERS:
        case CONTINUATION:
            if (sid == 0 || !(sid & 1))
                fail("a stream frame on stream 0 or a server-initiated stream", at, f);
            break;
        case RST_STREAM:
            if (sid == 0 || flen != 4)
                fail("RST_STREAM on stream 0 or not 4 bytes (6.4)", at, f);
            break;
        case SETTINGS:
            if (sid != 0 || flen % 6 != 0 || ((flags & ACK) && flen != 0))
                fail("a malformed SETTINGS frame (6.5)", at, f);
            break;
        case PING:
            if (sid != 0 || flen != 8)
                fail("a malformed PING frame (6.7)", at, f);
            break;
        case GOAWAY:
            if (sid != 0 || flen < 8)
                fail("a malformed GOAWAY frame (6.8)", at, f);
            goaway_error = get32(payload + 4) != 0;
            break;
        case WINDOW_UPDATE:
            if (flen != 4 || (get32(payload) & 0x7fffffffu) == 0)
                fail("a malformed WINDOW_UPDATE frame (6.9)", at, f);
            break;
        default:
            fail("a frame type a server does not send here", at, f);
        }
        if (sid != 0) {
            sent_stream *s = track(streams, &nstreams, sid);
            if (s != NULL) {
                if (s->reset)
                    fail("a frame on a stream the server reset (5.1)", at, f);
                if (s->ended && (type == DATA || type == HEADERS))
                    fail("DATA or HEADERS after END_STREAM (5.1)", at, f);
                if (type == DATA && !s->head)
                    fail("DATA before the response head (8.1)", at, f);
                if (type == RST_STREAM)
                    s->reset = 1;
                if ((type == DATA || type == HEADERS) && (flags & END_STREAM))
                    s->ended = 1;
            }
        }
        if (type == HEADERS || type == CONTINUATION) {
            size_t off = 0, pad = 0;
            if (type == HEADERS) {
                if (flags & PADDED) {
                    if (flen < 1)
                        fail("PADDED HEADERS without its pad length", at, f);
                    pad = payload[0];
                    off = 1;
                }
                if (flags & PRIO)
                    off += 5;
                if (off + pad > flen)
                    fail("HEADERS padding past the frame (6.2)", at, f);
                block_end_stream = (flags & END_STREAM) != 0;
            }
            memcpy(block + blen, payload + off, flen - off - pad);
            blen += flen - off - pad;
            block_sid = sid;
            if (flags & END_HEADERS) {
                sent_stream *s = track(streams, &nstreams, sid);
                head_check h = {.trailers = s != NULL && s->head, .unknown = s == NULL};
                int rc = h2_hpack_decode(&dec, block, blen, &scratch, check_field, &h);
                if (h.why != NULL)
                    fail(h.why, at, f);
                if (rc != 0)
                    fail("a header block that does not decode (RFC 7541)", at, f);
                if (h.trailers && !block_end_stream)
                    fail("trailers without END_STREAM (8.1)", at, f);
                /* 8.1: a 1xx head is followed by another head, not trailers. */
                if (s != NULL && !h.trailers && h.status0 != '1')
                    s->head = 1;
                if (s != NULL && !h.trailers && h.status0 == '1' && block_end_stream)
                    fail("END_STREAM on an informational head (8.1)", at, f);
                blen = 0;
                block_sid = 0;
            }
        }
        at += 9 + (size_t)flen;
    }
    h2_hpack_free(&dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t seed = data[0];
    data++;
    size--;
    static uint8_t in[PREFACE_LEN + 65536];
    if (size > sizeof in - PREFACE_LEN)
        size = sizeof in - PREFACE_LEN;
    size_t len = 0;
    if (!(seed & 0x80)) {
        memcpy(in, preface, PREFACE_LEN);
        len = PREFACE_LEN;
    }
    memcpy(in + len, data, size);
    len += size;

    static unsigned char out[OUT_CAP];
    fuzz_client c;
    fuzz_client_open(&c, server, out, sizeof out, 2000);
    fuzz_client_send_cut(&c, seed, in, len);
    fuzz_client_finish(&c);

    check_output(c.in, c.nin, peer_max_frame(in, len));
    return 0;
}
