/* fuzz_ws — the websocket module's frame parser, message reassembly, UTF-8
 * validation and permessage-deflate inflation (modules/websocket/frame.c,
 * utf8.c, deflate_ext.c over the deflate module's service), from bytes on
 * an upgraded connection.
 *
 * One in-process server for the whole session, as fuzz_http1's: http1,
 * deflate and websocket compiled in (KEEL_LINKED) with a small app module
 * of two endpoints, one worker, small limits. Each input becomes one
 * connection (a UNIX socket pair handed to the worker): a valid upgrade
 * request, its 101 read, then the input's frames written in pieces the
 * input chooses, each once the server has read the one before, so every
 * cut is a separate on_data and a crash reproduces.
 *
 * The input's first byte:
 *   bit 0    the endpoint: /echo (on_message: every message sent back)
 *            or /frag (on_fragment: every piece sent back as a fragment)
 *   bit 1    offer permessage-deflate
 *   bit 2    ... with client_no_context_takeover and
 *            server_no_context_takeover
 *   bit 3    raw: the rest goes on the wire as it is (the header parser's
 *            view); otherwise it is a list of frames the harness encodes:
 *              byte h: bit 7 FIN, bit 6 RSV1, bit 5 the harness deflates
 *              the payload (with RSV1: a compressed message the server can
 *              read), bit 4 unmasked, bits 0-3 the opcode;
 *              byte l: the payload length (255: two more bytes, big-endian);
 *              the payload (what is left if shorter).
 *   bits 4-7 seed the cuts (up to three).
 *
 * Checked besides ASan/UBSan: the upgrade is answered 101; everything the
 * server sends after it is a sequence of well-formed server frames
 * (unmasked, known opcodes, RSV2/3 clear, RSV1 only when the extension was
 * negotiated, control frames final and at most 125 bytes, a close code
 * one that may be sent); a text frame that is not compressed is valid
 * UTF-8 on its own (the echo sends back validated text, and the fragments
 * of /frag end on character boundaries). A connection the server has not
 * closed after 2 s is abandoned. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <keel/embed.h>
#include <keel/websocket.h>

#include "fuzz_client.h"

KEEL_MODULE_DECLARE(http1);
KEEL_MODULE_DECLARE(deflate);
KEEL_MODULE_DECLARE(websocket);

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_ws: " __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* ---- The app: two endpoints ------------------------------------------------ */

KEEL_WEBSOCKET_DEFINE

static void echo(keel_ws *ws, int kind, const char *data, size_t len, void *ud)
{
    (void)ud;
    keel_ws_send_copy(ws, kind, data, len);
}

static void frag(keel_ws *ws, int kind, const char *data, size_t len, int first, int last, void *ud)
{
    (void)ud;
    keel_ws_send_fragment(ws, kind, data, len, first, last);
}

static const keel_ws_endpoint endpoints[] = {
    {.size = sizeof(keel_ws_endpoint), .path = "/echo", .on_message = echo},
    {.size = sizeof(keel_ws_endpoint), .path = "/frag", .on_fragment = frag},
};

static int app_load(keel_module *module)
{
    int rc = keel_ws_bind(module);
    for (size_t i = 0; rc == KEEL_OK && i < 2; i++)
        rc = keel_ws_endpoint_add(module, &endpoints[i]);
    return rc;
}

static const char *const app_dependencies[] = {"websocket", NULL};

KEEL_MODULE(app, .version = "1.0.0", .dependencies = app_dependencies, .load = app_load);

/* ---- The server ------------------------------------------------------------- */

static keel_server *server;

static const char config[] = "[keel]\n"
                             "listen = 127.0.0.1:0 http1\n"
                             "workers = 1\n"
                             "modules = http1 deflate websocket app\n"
                             "log_level = error\n"
                             "crash_report = off\n"
                             "max_connections = 100000\n"
                             "[websocket]\n"
                             "max_frame = 4k\n"
                             "max_message = 8k\n"
                             "close_timeout = 1s\n"
                             "compression_threshold = 8\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const keel_module_desc *const modules[] = {
        &keel_module_http1, &keel_module_deflate, &keel_module_websocket, &keel_module_app, NULL};
    server = fuzz_server_start(modules, config, "fuzz_ws");
    return 0;
}

/* ---- Frames the harness writes ----------------------------------------------------- */

typedef struct obuf {
    unsigned char *p;
    size_t len, cap;
} obuf;

static void put(obuf *b, const void *d, size_t n)
{
    if (n == 0)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        CHECK(b->p != NULL, "realloc");
        b->cap = cap;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

/* Raw deflate of the payload, SYNC-flushed, without the 00 00 ff ff tail
 * (RFC 7692 7.2.1): what a client sends. A fresh compressor every time is
 * valid with or without context takeover. */
static size_t deflate_payload(const unsigned char *in, size_t len, unsigned char *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, -9, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return 0;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    deflate(&z, Z_SYNC_FLUSH);
    size_t n = cap - z.avail_out;
    deflateEnd(&z);
    if (n >= 4 && memcmp(out + n - 4, "\x00\x00\xff\xff", 4) == 0)
        n -= 4;
    return n;
}

static void frame(obuf *b, int h, const unsigned char *payload, size_t len, uint32_t k)
{
    unsigned char hdr[14];
    size_t n = 0;
    int masked = !(h & 0x10);
    hdr[n++] = (unsigned char)((h & 0x80) | (h & 0x40) | (h & 0x0f));
    if (len < 126) {
        hdr[n++] = (unsigned char)((masked ? 0x80 : 0) | len);
    } else if (len < 65536) {
        hdr[n++] = (unsigned char)((masked ? 0x80 : 0) | 126);
        hdr[n++] = (unsigned char)(len >> 8);
        hdr[n++] = (unsigned char)len;
    } else {
        hdr[n++] = (unsigned char)((masked ? 0x80 : 0) | 127);
        for (int i = 7; i >= 0; i--)
            hdr[n++] = (unsigned char)((uint64_t)len >> (8 * i));
    }
    unsigned char mask[4] = {(unsigned char)(k >> 24), (unsigned char)(k >> 16),
                             (unsigned char)(k >> 8), (unsigned char)k};
    if (masked) {
        memcpy(hdr + n, mask, 4);
        n += 4;
    }
    put(b, hdr, n);
    size_t at = b->len;
    put(b, payload, len);
    if (masked)
        for (size_t i = 0; i < len; i++)
            b->p[at + i] ^= mask[i & 3];
}

static void encode(obuf *b, const uint8_t *d, size_t size)
{
    size_t i = 0;
    uint32_t k = 0x9e3779b9u;
    unsigned char z[70000];
    while (i < size) {
        int h = d[i++];
        if (i >= size)
            break;
        size_t len = d[i++];
        if (len == 255 && i + 2 <= size) {
            len = (size_t)d[i] << 8 | d[i + 1];
            i += 2;
        }
        if (len > size - i)
            len = size - i;
        const unsigned char *p = d + i;
        i += len;
        k = k * 2654435761u + 1;
        if ((h & 0x20) && (h & 0x40)) {
            size_t zn = deflate_payload(p, len, z, sizeof z);
            frame(b, h, z, zn, k);
        } else {
            frame(b, h, p, len, k);
        }
    }
}

/* ---- What the server sent ------------------------------------------------------------ */

static const unsigned char *find(const unsigned char *h, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(h + i, needle, k) == 0)
            return h + i;
    return NULL;
}

static int utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4, min = 0x10000;
        } else {
            return 0;
        }
        if (i + len > n)
            return 0;
        unsigned cp = c & (0xFF >> (len + 1));
        for (size_t j = 1; j < len; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

static int close_code_sendable(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

static void check_frames(const unsigned char *p, size_t n, int pmd, int complete)
{
    size_t i = 0;
    int in_msg = 0, msg_text = 0;
    while (i < n) {
        if (n - i < 2)
            break;
        int fin = p[i] >> 7, rsv = (p[i] >> 4) & 7, op = p[i] & 15;
        CHECK(!(p[i + 1] & 0x80), "a masked server frame");
        uint64_t len = p[i + 1] & 127;
        size_t h = 2;
        if (len == 126) {
            if (n - i < 4)
                break;
            len = (uint64_t)p[i + 2] << 8 | p[i + 3];
            h = 4;
        } else if (len == 127) {
            if (n - i < 10)
                break;
            len = 0;
            for (int k = 0; k < 8; k++)
                len = len << 8 | p[i + 2 + k];
            h = 10;
        }
        CHECK(op <= 2 || (op >= 8 && op <= 10), "server opcode %d", op);
        CHECK(!(rsv & 3), "server RSV2/3");
        CHECK(!(rsv & 4) || (pmd && (op == 1 || op == 2)), "server RSV1 on op %d (pmd %d)", op,
              pmd);
        if (op >= 8)
            CHECK(fin && len <= 125, "server control frame (fin %d, %llu bytes)", fin,
                  (unsigned long long)len);
        if (op == 0)
            CHECK(in_msg, "server continuation outside a message");
        if (op == 1 || op == 2) {
            CHECK(!in_msg, "server message inside a message");
            msg_text = op == 1 && !(rsv & 4);
        }
        if (n - i - h < len)
            break; /* cut at the end (an abort): the rest is not checked */
        const unsigned char *pl = p + i + h;
        if (op == 8 && len >= 2) {
            unsigned code = (unsigned)pl[0] << 8 | pl[1];
            CHECK(close_code_sendable(code), "server close code %u", code);
            CHECK(utf8_valid(pl + 2, (size_t)len - 2), "server close reason not UTF-8");
        }
        if ((op == 1 || (op == 0 && msg_text)) && !(rsv & 4) && msg_text)
            CHECK(utf8_valid(pl, (size_t)len), "a server text frame of %llu bytes not UTF-8",
                  (unsigned long long)len);
        if (op <= 2)
            in_msg = !fin;
        i += h + (size_t)len;
    }
    (void)complete;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0];
    data++;
    size--;

    static unsigned char inbuf[1 << 20];
    fuzz_client c;
    fuzz_client_open(&c, server, inbuf, sizeof inbuf, 2000);

    /* The upgrade, and its 101. */
    char req[512];
    const char *ext = !(mode & 2)  ? ""
                      : (mode & 4) ? "Sec-WebSocket-Extensions: permessage-deflate; "
                                     "client_no_context_takeover; server_no_context_takeover\r\n"
                                   : "Sec-WebSocket-Extensions: permessage-deflate; "
                                     "client_max_window_bits\r\n";
    int rl = snprintf(req, sizeof req,
                      "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                      "Sec-WebSocket-Version: 13\r\n%s\r\n",
                      (mode & 1) ? "/frag" : "/echo", ext);
    fuzz_client_send(&c, req, (size_t)rl);
    size_t head = 0;
    while (!c.eof && fuzz_now_ms() < c.deadline) {
        const unsigned char *e = find(c.in, c.nin, "\r\n\r\n");
        if (e != NULL) {
            head = (size_t)(e - c.in) + 4;
            break;
        }
        fuzz_client_drain(&c, 5);
    }
    CHECK(head > 0 && c.nin >= 12 && memcmp(c.in, "HTTP/1.1 101", 12) == 0,
          "the upgrade was not answered 101: '%.*s'", (int)(c.nin < 200 ? c.nin : 200), c.in);
    int pmd = find(c.in, head, "permessage-deflate") != NULL;
    CHECK(pmd == ((mode & 2) != 0), "permessage-deflate negotiated %d for mode %d", pmd, mode);

    obuf b = {0};
    if (mode & 8)
        put(&b, data, size);
    else
        encode(&b, data, size);

    /* Up to three cuts, anywhere. */
    if (b.p != NULL)
        fuzz_client_send_cut(&c, (uint32_t)mode >> 4, b.p, b.len);
    fuzz_client_finish(&c);
    free(b.p);

    check_frames(c.in + head, c.nin - head, pmd, c.eof);
    return 0;
}
