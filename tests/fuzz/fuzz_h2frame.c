/* fuzz_h2frame — the h2 module's frame codec (modules/h2/frame.c, linked
 * alone as h2_codec, with HPACK: no keel in this harness) on a client's
 * frames as they would follow the connection preface.
 *
 * Input: one byte, the peer's SETTINGS_MAX_FRAME_SIZE for re-encoding
 * header blocks (1 + the byte * 64 bytes: frames smaller than the RFC's
 * minimum exercise the CONTINUATION split), then frames, each a 9-byte
 * header and its payload (the last one cut to what remains: the codec is
 * given only the bytes there are). Header blocks are gathered from HEADERS
 * and CONTINUATION frames of one stream, as a connection does, and
 * decoded through one HPACK decoder.
 *
 * Checked besides ASan/UBSan/leaks:
 *   - every decoder returns 0 or an error code its type may have
 *     (RFC 9113 6: PROTOCOL_ERROR, FRAME_SIZE_ERROR, and for SETTINGS
 *     FLOW_CONTROL_ERROR), and only PROTOCOL_ERROR on a stream id the
 *     type forbids;
 *   - what a decoder accepts lies within the payload: DATA's pad length
 *     and padding, HEADERS' fragment after its pad length and priority
 *     block and before its padding;
 *   - frames the server also writes (SETTINGS, PING, GOAWAY, RST_STREAM,
 *     WINDOW_UPDATE) encode back from what was decoded to the same bytes
 *     (the reserved bits cleared);
 *   - a header block re-encoded as HEADERS + CONTINUATIONs of the input's
 *     frame size reads back (frame headers decoded by the codec) to the
 *     same block, within h2_headers_size. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "hpack.h"

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_h2frame: %s\n", what);
        abort();
    }
}

static int is_frame_error(int rc)
{
    return rc == 0 || rc == H2_PROTOCOL_ERROR || rc == H2_FRAME_SIZE_ERROR;
}

static int count_field(void *ud, const h2_hpack_field *hf)
{
    const char *name = hf->name, *value = hf->value;
    size_t nlen = hf->nlen, vlen = hf->vlen;
    unsigned name_index = hf->name_index;
    unsigned *sum = ud;
    (void)name_index;
    for (size_t i = 0; i < nlen; i++)
        *sum += (unsigned char)name[i];
    for (size_t i = 0; i < vlen; i++)
        *sum += (unsigned char)value[i];
    return 0;
}

/* The block re-encoded in frames of max_frame bytes and read back. */
static void round_trip_block(const uint8_t *block, size_t len, int32_t sid, size_t max_frame)
{
    size_t size = h2_headers_size(len, max_frame);
    uint8_t *f = malloc(size);
    uint8_t *back = malloc(len + 1);
    check(f != NULL && back != NULL, "out of memory");
    size_t n = h2_encode_headers(f, (uint32_t)sid, 1, NULL, 0, block, len, max_frame);
    check(n == size, "h2_encode_headers and h2_headers_size disagree");
    size_t at = 0, got = 0;
    for (int first = 1;; first = 0) {
        check(at + H2_FRAME_HD <= n, "a header block's frames end without END_HEADERS");
        h2_frame_hd hd;
        h2_get_hd(f + at, &hd);
        check(hd.type == (first ? H2_HEADERS : H2_CONTINUATION), "a frame of another type");
        check(hd.sid == sid, "a frame of another stream");
        check(hd.length <= max_frame, "a frame over the frame size");
        check(first ? (hd.flags & H2_FLAG_END_STREAM) != 0 : (hd.flags & ~H2_FLAG_END_HEADERS) == 0,
              "flags that were not asked for");
        check(at + H2_FRAME_HD + hd.length <= n, "a frame past the end");
        memcpy(back + got, f + at + H2_FRAME_HD, hd.length);
        got += hd.length;
        at += H2_FRAME_HD + hd.length;
        if (hd.flags & H2_FLAG_END_HEADERS)
            break;
        check(hd.length == max_frame, "a short frame before the last");
    }
    check(at == n && got == len && memcmp(back, block, len) == 0,
          "a header block re-encoded reads back otherwise");
    free(f);
    free(back);
}

typedef struct conn {
    h2_hpack dec;
    h2_scratch scratch;
    uint8_t *block;
    size_t block_len, block_cap;
    int32_t block_sid; /* 0: no block in progress */
    size_t max_frame;
    unsigned sum;
    int dead; /* HPACK failed: the connection would end (RFC 9113 4.3) */
} conn;

static void block_add(conn *c, const uint8_t *p, size_t n)
{
    if (c->block_len + n > c->block_cap) {
        size_t cap = (c->block_len + n) * 2;
        uint8_t *b = realloc(c->block, cap);
        check(b != NULL, "out of memory");
        c->block = b;
        c->block_cap = cap;
    }
    if (n > 0)
        memcpy(c->block + c->block_len, p, n);
    c->block_len += n;
}

static void block_end(conn *c)
{
    /* Never NULL, even empty: the codec and hpack.c do arithmetic on it. */
    const uint8_t *block = c->block != NULL ? c->block : (const uint8_t *)"";
    round_trip_block(block, c->block_len, c->block_sid, c->max_frame);
    if (!c->dead) {
        int rc = h2_hpack_decode(&c->dec, block, c->block_len, &c->scratch, count_field, &c->sum);
        check(rc == 0 || rc == H2_HPACK_ERROR || rc == H2_HPACK_NOMEM,
              "h2_hpack_decode returned what it documents not");
        c->dead = rc != 0;
    }
    c->block_len = 0;
    c->block_sid = 0;
}

static void on_frame(conn *c, const h2_frame_hd *hd, const uint8_t *p, uint32_t len)
{
    uint8_t f[H2_SETTINGS_FRAME(16)];
    int rc;
    switch (hd->type) {
    case H2_DATA: {
        uint32_t head = 7, pad = 7;
        rc = h2_decode_data(hd->flags, hd->sid, len, p, &head, &pad);
        check(is_frame_error(rc), "DATA: an error code DATA cannot have");
        check(hd->sid != 0 || rc == H2_PROTOCOL_ERROR, "DATA on stream 0 accepted");
        if (rc == 0)
            check(head <= 1 && head + pad <= len && (pad == 0 || pad < len),
                  "DATA: padding outside the payload");
        break;
    }
    case H2_HEADERS: {
        h2_headers_payload h;
        rc = h2_decode_headers(hd->flags, hd->sid, p, len, &h);
        check(is_frame_error(rc), "HEADERS: an error code HEADERS cannot have");
        check(hd->sid != 0 || rc == H2_PROTOCOL_ERROR, "HEADERS on stream 0 accepted");
        if (rc != 0)
            break;
        size_t before = (size_t)(h.fragment - p);
        size_t pad = (hd->flags & H2_FLAG_PADDED) ? p[0] : 0;
        check(before == ((hd->flags & H2_FLAG_PADDED) ? 1u : 0u) + (h.has_priority ? 5u : 0u),
              "HEADERS: the fragment does not start after the pad length and priority");
        check(before + h.fragment_len + pad == len, "HEADERS: the fragment and padding overrun");
        check(h.has_priority == ((hd->flags & H2_FLAG_PRIORITY) != 0), "HEADERS: priority");
        c->block_len = 0;
        c->block_sid = hd->sid;
        block_add(c, h.fragment, h.fragment_len);
        if (hd->flags & H2_FLAG_END_HEADERS)
            block_end(c);
        break;
    }
    case H2_CONTINUATION:
        if (c->block_sid == 0 || hd->sid != c->block_sid)
            break; /* a connection error: nothing to gather */
        block_add(c, p, len);
        if (hd->flags & H2_FLAG_END_HEADERS)
            block_end(c);
        break;
    case H2_PRIORITY: {
        h2_priority pr;
        rc = h2_decode_priority(hd->sid, p, len, &pr);
        check(is_frame_error(rc), "PRIORITY: an error code PRIORITY cannot have");
        if (rc == 0)
            check(len == 5 && pr.dependency == (int32_t)(h2_get32(p) & 0x7fffffffu) &&
                      pr.exclusive == p[0] >> 7 && pr.weight == p[4],
                  "PRIORITY: decoded otherwise");
        break;
    }
    case H2_RST_STREAM: {
        uint32_t code;
        rc = h2_decode_rst_stream(hd->sid, p, len, &code);
        check(is_frame_error(rc), "RST_STREAM: an error code RST_STREAM cannot have");
        if (rc == 0)
            check(h2_encode_rst_stream(f, (uint32_t)hd->sid, code) == H2_FRAME_HD + len &&
                      memcmp(f + H2_FRAME_HD, p, len) == 0,
                  "RST_STREAM: encodes back otherwise");
        break;
    }
    case H2_SETTINGS: {
        uint32_t n;
        rc = h2_decode_settings(hd->flags, hd->sid, p, len, &n);
        check(is_frame_error(rc) || rc == H2_FLOW_CONTROL_ERROR,
              "SETTINGS: an error code SETTINGS cannot have");
        check(hd->sid == 0 || rc == H2_PROTOCOL_ERROR, "SETTINGS on a stream accepted");
        if (rc != 0 || (hd->flags & H2_FLAG_ACK)) {
            check(rc != 0 || len == 0, "SETTINGS: an ACK with a payload accepted");
            break;
        }
        check(n * 6 == len, "SETTINGS: parameters and length disagree");
        if (n > 16)
            break;
        h2_setting_value set[16];
        for (uint32_t i = 0; i < n; i++) {
            h2_setting_at(p, i, &set[i].id, &set[i].value);
            check(h2_setting_check(set[i].id, set[i].value) == 0, "SETTINGS: a bad value");
        }
        check(h2_encode_settings(f, set, n) == H2_FRAME_HD + len &&
                  memcmp(f + H2_FRAME_HD, p, len) == 0,
              "SETTINGS: encodes back otherwise");
        break;
    }
    case H2_PING:
        rc = h2_decode_ping(hd->sid, len);
        check(is_frame_error(rc), "PING: an error code PING cannot have");
        if (rc == 0)
            check(h2_encode_ping(f, hd->flags, p) == H2_PING_FRAME &&
                      memcmp(f + H2_FRAME_HD, p, 8) == 0,
                  "PING: encodes back otherwise");
        break;
    case H2_GOAWAY: {
        h2_goaway_payload g;
        rc = h2_decode_goaway(hd->sid, p, len, &g);
        check(is_frame_error(rc), "GOAWAY: an error code GOAWAY cannot have");
        if (rc != 0)
            break;
        check(g.debug == p + 8 && g.debug_len == len - 8, "GOAWAY: debug data elsewhere");
        h2_encode_goaway(f, g.last_sid, g.error_code);
        check((f[H2_FRAME_HD] == (p[0] & 0x7f)) && memcmp(f + H2_FRAME_HD + 1, p + 1, 7) == 0,
              "GOAWAY: encodes back otherwise");
        break;
    }
    case H2_WINDOW_UPDATE: {
        uint32_t inc;
        rc = h2_decode_window_update(p, len, &inc);
        check(is_frame_error(rc), "WINDOW_UPDATE: an error code WINDOW_UPDATE cannot have");
        if (rc != 0)
            break;
        check(inc <= H2_MAX_WINDOW, "WINDOW_UPDATE: an increment past 2^31-1");
        h2_encode_window_update(f, (uint32_t)hd->sid, inc);
        check((f[H2_FRAME_HD] == (p[0] & 0x7f)) && memcmp(f + H2_FRAME_HD + 1, p + 1, 3) == 0,
              "WINDOW_UPDATE: encodes back otherwise");
        break;
    }
    default:
        break; /* 5.5: unknown types are ignored */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static conn c; /* the scratch is kept between inputs, as a worker's is */
    c.max_frame = 1 + (size_t)data[0] * 64;
    h2_hpack_init(&c.dec, 4096);
    c.block_len = 0;
    c.block_sid = 0;
    c.dead = 0;
    data++;
    size--;
    while (size >= H2_FRAME_HD) {
        h2_frame_hd hd;
        h2_get_hd(data, &hd);
        uint8_t back[H2_FRAME_HD];
        h2_put_hd(back, hd.length, hd.type, hd.flags, (uint32_t)hd.sid);
        check(memcmp(back, data, 5) == 0 && back[5] == (data[5] & 0x7f) &&
                  memcmp(back + 6, data + 6, 3) == 0,
              "a frame header encodes back otherwise");
        data += H2_FRAME_HD;
        size -= H2_FRAME_HD;
        uint32_t len = hd.length <= size ? hd.length : (uint32_t)size;
        /* A copy of its own, exactly as long, so ASan sees a read past
         * the payload (malloc(0) too). */
        uint8_t *p = malloc(len);
        check(p != NULL || len == 0, "out of memory");
        if (len > 0)
            memcpy(p, data, len);
        on_frame(&c, &hd, p, len);
        free(p);
        data += len;
        size -= len;
    }
    h2_hpack_free(&c.dec);
    free(c.block);
    c.block = NULL;
    c.block_cap = 0;
    return 0;
}
