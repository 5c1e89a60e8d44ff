/* The h2 module's frame codec (modules/h2/frame.c, linked alone as
 * h2_codec: no keel type in it): frame headers both ways, each frame
 * type's payload checks in RFC 9113 6's order (the error code a frame gets
 * by itself), SETTINGS values (6.5.2), and the frames a server writes,
 * byte for byte, HEADERS split into CONTINUATIONs (6.10) read back. */
#include <criterion/criterion.h>

#include "frame.h"

#include <stdint.h>
#include <string.h>

/* ---- frame headers (4.1) ------------------------------------------------------ */

Test(h2_codec, frame_header_round_trip)
{
    uint8_t p[H2_FRAME_HD];
    h2_put_hd(p, 0x123456, H2_HEADERS, H2_FLAG_END_HEADERS | H2_FLAG_PADDED, 0x7fffffffu);
    const uint8_t want[H2_FRAME_HD] = {0x12, 0x34, 0x56, 0x01, 0x0c, 0x7f, 0xff, 0xff, 0xff};
    cr_assert_arr_eq(p, want, sizeof want);
    h2_frame_hd hd;
    h2_get_hd(p, &hd);
    cr_assert_eq(hd.length, 0x123456u);
    cr_assert_eq(hd.type, H2_HEADERS);
    cr_assert_eq(hd.flags, H2_FLAG_END_HEADERS | H2_FLAG_PADDED);
    cr_assert_eq(hd.sid, 0x7fffffff);
}

Test(h2_codec, reserved_bit_ignored_and_never_sent)
{
    /* 4.1: the R bit MUST be ignored on receipt and sent as 0. */
    const uint8_t in[H2_FRAME_HD] = {0, 0, 0, H2_PING, 0, 0x80, 0, 0, 3};
    h2_frame_hd hd;
    h2_get_hd(in, &hd);
    cr_assert_eq(hd.sid, 3);
    uint8_t out[H2_FRAME_HD];
    h2_put_hd(out, 0, H2_PING, 0, 0x80000003u);
    cr_assert_eq(out[5], 0);
    cr_assert_eq(out[8], 3);
}

/* ---- DATA (6.1) ---------------------------------------------------------------- */

Test(h2_codec, data)
{
    uint32_t head = 9, pad = 9;
    cr_assert_eq(h2_decode_data(0, 1, 10, NULL, &head, &pad), 0);
    cr_assert_eq(head, 0);
    cr_assert_eq(pad, 0);
    const uint8_t padlen[] = {4};
    cr_assert_eq(h2_decode_data(H2_FLAG_PADDED, 1, 10, padlen, &head, &pad), 0);
    cr_assert_eq(head, 1);
    cr_assert_eq(pad, 4);
    /* The pad length alone, no data: valid. */
    const uint8_t nine[] = {9};
    cr_assert_eq(h2_decode_data(H2_FLAG_PADDED, 1, 10, nine, &head, &pad), 0);
}

Test(h2_codec, data_errors)
{
    uint32_t head, pad;
    const uint8_t ten[] = {10};
    cr_assert_eq(h2_decode_data(0, 0, 10, NULL, &head, &pad), H2_PROTOCOL_ERROR);
    /* PADDED without room for the pad length. */
    cr_assert_eq(h2_decode_data(H2_FLAG_PADDED, 1, 0, NULL, &head, &pad), H2_FRAME_SIZE_ERROR);
    /* Padding as long as the payload: PROTOCOL_ERROR (6.1). */
    cr_assert_eq(h2_decode_data(H2_FLAG_PADDED, 1, 10, ten, &head, &pad), H2_PROTOCOL_ERROR);
    /* The stream id is checked first. */
    cr_assert_eq(h2_decode_data(H2_FLAG_PADDED, 0, 0, NULL, &head, &pad), H2_PROTOCOL_ERROR);
}

/* ---- HEADERS (6.2) ------------------------------------------------------------- */

Test(h2_codec, headers_plain)
{
    const uint8_t p[] = {0x82, 0x84, 0x86};
    h2_headers_payload h;
    cr_assert_eq(h2_decode_headers(H2_FLAG_END_HEADERS, 1, p, sizeof p, &h), 0);
    cr_assert_eq(h.fragment, p);
    cr_assert_eq(h.fragment_len, 3);
    cr_assert_eq(h.has_priority, 0);
}

Test(h2_codec, headers_padded_with_priority)
{
    /* pad length 2, exclusive dependency on 3, weight 15, a fragment of
     * two bytes, two bytes of padding. */
    const uint8_t p[] = {2, 0x80, 0, 0, 3, 15, 0x82, 0x84, 0, 0};
    h2_headers_payload h;
    cr_assert_eq(h2_decode_headers(H2_FLAG_PADDED | H2_FLAG_PRIORITY, 5, p, sizeof p, &h), 0);
    cr_assert_eq(h.fragment, p + 6);
    cr_assert_eq(h.fragment_len, 2);
    cr_assert_eq(h.has_priority, 1);
    cr_assert_eq(h.priority.dependency, 3);
    cr_assert_eq(h.priority.exclusive, 1);
    cr_assert_eq(h.priority.weight, 15);
}

Test(h2_codec, headers_errors)
{
    h2_headers_payload h;
    const uint8_t p[] = {5, 0, 0, 0, 1, 16, 0x82};
    cr_assert_eq(h2_decode_headers(0, 0, p, sizeof p, &h), H2_PROTOCOL_ERROR);
    cr_assert_eq(h2_decode_headers(H2_FLAG_PADDED, 1, p, 0, &h), H2_FRAME_SIZE_ERROR);
    /* PRIORITY flag, fewer than 5 bytes after the pad length. */
    cr_assert_eq(h2_decode_headers(H2_FLAG_PADDED | H2_FLAG_PRIORITY, 1, p, 5, &h),
                 H2_FRAME_SIZE_ERROR);
    cr_assert_eq(h2_decode_headers(H2_FLAG_PRIORITY, 1, p, 4, &h), H2_FRAME_SIZE_ERROR);
    /* Padding past the frame's end: PROTOCOL_ERROR (6.2). */
    cr_assert_eq(h2_decode_headers(H2_FLAG_PADDED, 1, p, sizeof p, &h), 0);
    cr_assert_eq(h.fragment_len, 1);
    cr_assert_eq(h2_decode_headers(H2_FLAG_PADDED, 1, p, 5, &h), H2_PROTOCOL_ERROR);
}

/* ---- PRIORITY, RST_STREAM, PING, GOAWAY, WINDOW_UPDATE ------------------------------- */

Test(h2_codec, priority)
{
    const uint8_t p[] = {0, 0, 0, 7, 200, 0};
    h2_priority pr;
    cr_assert_eq(h2_decode_priority(1, p, 5, &pr), 0);
    cr_assert_eq(pr.dependency, 7);
    cr_assert_eq(pr.exclusive, 0);
    cr_assert_eq(pr.weight, 200);
    cr_assert_eq(h2_decode_priority(0, p, 5, &pr), H2_PROTOCOL_ERROR);
    /* 6.3: a stream error, but the codec gives the code alone. */
    cr_assert_eq(h2_decode_priority(1, p, 6, &pr), H2_FRAME_SIZE_ERROR);
    cr_assert_eq(h2_decode_priority(1, p, 4, &pr), H2_FRAME_SIZE_ERROR);
}

Test(h2_codec, rst_stream)
{
    const uint8_t p[] = {0, 0, 0, H2_CANCEL};
    uint32_t code = 0;
    cr_assert_eq(h2_decode_rst_stream(1, p, 4, &code), 0);
    cr_assert_eq(code, H2_CANCEL);
    cr_assert_eq(h2_decode_rst_stream(0, p, 4, &code), H2_PROTOCOL_ERROR);
    cr_assert_eq(h2_decode_rst_stream(1, p, 3, &code), H2_FRAME_SIZE_ERROR);
    cr_assert_eq(h2_decode_rst_stream(0, p, 3, &code), H2_PROTOCOL_ERROR);
}

Test(h2_codec, ping)
{
    cr_assert_eq(h2_decode_ping(0, 8), 0);
    cr_assert_eq(h2_decode_ping(1, 8), H2_PROTOCOL_ERROR);
    cr_assert_eq(h2_decode_ping(0, 7), H2_FRAME_SIZE_ERROR);
    cr_assert_eq(h2_decode_ping(0, 9), H2_FRAME_SIZE_ERROR);
}

Test(h2_codec, goaway)
{
    const uint8_t p[] = {0x80, 0, 0, 5, 0, 0, 0, H2_ENHANCE_YOUR_CALM, 'b', 'y', 'e'};
    h2_goaway_payload g;
    cr_assert_eq(h2_decode_goaway(0, p, sizeof p, &g), 0);
    cr_assert_eq(g.last_sid, 5);
    cr_assert_eq(g.error_code, H2_ENHANCE_YOUR_CALM);
    cr_assert_eq(g.debug_len, 3);
    cr_assert_eq(memcmp(g.debug, "bye", 3), 0);
    cr_assert_eq(h2_decode_goaway(1, p, sizeof p, &g), H2_PROTOCOL_ERROR);
    cr_assert_eq(h2_decode_goaway(0, p, 7, &g), H2_FRAME_SIZE_ERROR);
}

Test(h2_codec, window_update)
{
    const uint8_t p[] = {0xff, 0xff, 0xff, 0xff};
    uint32_t inc = 0;
    cr_assert_eq(h2_decode_window_update(p, 4, &inc), 0);
    cr_assert_eq(inc, 0x7fffffffu, "the reserved bit is not part of the increment");
    const uint8_t zero[] = {0x80, 0, 0, 0};
    cr_assert_eq(h2_decode_window_update(zero, 4, &inc), 0);
    cr_assert_eq(inc, 0, "0 is the caller's error: connection or stream (6.9)");
    cr_assert_eq(h2_decode_window_update(p, 5, &inc), H2_FRAME_SIZE_ERROR);
}

/* ---- SETTINGS (6.5) ------------------------------------------------------------ */

Test(h2_codec, settings)
{
    const uint8_t p[] = {0,    H2_SET_INITIAL_WINDOW_SIZE,
                         0,    1,
                         0,    0,
                         0,    H2_SET_MAX_FRAME_SIZE,
                         0,    0,
                         0x40, 0,
                         0x12, 0x34, /* unknown: ignored (6.5.2) */
                         0xff, 0xff,
                         0xff, 0xff};
    uint32_t n = 0;
    cr_assert_eq(h2_decode_settings(0, 0, p, sizeof p, &n), 0);
    cr_assert_eq(n, 3);
    uint16_t id;
    uint32_t v;
    h2_setting_at(p, 0, &id, &v);
    cr_assert_eq(id, H2_SET_INITIAL_WINDOW_SIZE);
    cr_assert_eq(v, 65536);
    h2_setting_at(p, 1, &id, &v);
    cr_assert_eq(id, H2_SET_MAX_FRAME_SIZE);
    cr_assert_eq(v, 16384);
    h2_setting_at(p, 2, &id, &v);
    cr_assert_eq(id, 0x1234);
    cr_assert_eq(v, 0xffffffffu);
}

Test(h2_codec, settings_frame_errors)
{
    const uint8_t p[12] = {0};
    uint32_t n = 9;
    cr_assert_eq(h2_decode_settings(0, 1, p, 6, &n), H2_PROTOCOL_ERROR);
    cr_assert_eq(h2_decode_settings(0, 0, p, 7, &n), H2_FRAME_SIZE_ERROR);
    cr_assert_eq(h2_decode_settings(H2_FLAG_ACK, 0, p, 0, &n), 0);
    cr_assert_eq(n, 0, "an ACK carries no parameters");
    cr_assert_eq(h2_decode_settings(H2_FLAG_ACK, 0, p, 6, &n), H2_FRAME_SIZE_ERROR);
    cr_assert_eq(h2_decode_settings(H2_FLAG_ACK, 3, p, 0, &n), H2_PROTOCOL_ERROR);
}

Test(h2_codec, setting_values)
{
    cr_assert_eq(h2_setting_check(H2_SET_ENABLE_PUSH, 1), 0);
    cr_assert_eq(h2_setting_check(H2_SET_ENABLE_PUSH, 2), H2_PROTOCOL_ERROR);
    cr_assert_eq(h2_setting_check(H2_SET_ENABLE_CONNECT_PROTOCOL, 2), H2_PROTOCOL_ERROR);
    cr_assert_eq(h2_setting_check(H2_SET_NO_RFC7540_PRIORITIES, 2), H2_PROTOCOL_ERROR);
    cr_assert_eq(h2_setting_check(H2_SET_INITIAL_WINDOW_SIZE, 0x7fffffff), 0);
    cr_assert_eq(h2_setting_check(H2_SET_INITIAL_WINDOW_SIZE, 0x80000000u), H2_FLOW_CONTROL_ERROR);
    cr_assert_eq(h2_setting_check(H2_SET_MAX_FRAME_SIZE, 16383), H2_PROTOCOL_ERROR);
    cr_assert_eq(h2_setting_check(H2_SET_MAX_FRAME_SIZE, 16384), 0);
    cr_assert_eq(h2_setting_check(H2_SET_MAX_FRAME_SIZE, 16777215), 0);
    cr_assert_eq(h2_setting_check(H2_SET_MAX_FRAME_SIZE, 16777216), H2_PROTOCOL_ERROR);
    cr_assert_eq(h2_setting_check(H2_SET_HEADER_TABLE_SIZE, 0xffffffffu), 0);
    cr_assert_eq(h2_setting_check(H2_SET_MAX_CONCURRENT_STREAMS, 0), 0);
}

Test(h2_codec, settings_first_bad_value_decides)
{
    /* ENABLE_PUSH = 2 (PROTOCOL_ERROR), then INITIAL_WINDOW_SIZE = 2^31
     * (FLOW_CONTROL_ERROR): the first decides. */
    const uint8_t p[] = {0, H2_SET_ENABLE_PUSH,         0,    0, 0, 2,
                         0, H2_SET_INITIAL_WINDOW_SIZE, 0x80, 0, 0, 0};
    uint32_t n;
    cr_assert_eq(h2_decode_settings(0, 0, p, sizeof p, &n), H2_PROTOCOL_ERROR);
    cr_assert_eq(h2_decode_settings(0, 0, p + 6, 6, &n), H2_FLOW_CONTROL_ERROR);
}

/* ---- encoding -------------------------------------------------------------------- */

Test(h2_codec, encode_control_frames)
{
    uint8_t f[64];
    cr_assert_eq(h2_encode_rst_stream(f, 3, H2_CANCEL), 13);
    const uint8_t rst[] = {0, 0, 4, H2_RST_STREAM, 0, 0, 0, 0, 3, 0, 0, 0, H2_CANCEL};
    cr_assert_arr_eq(f, rst, sizeof rst);

    cr_assert_eq(h2_encode_window_update(f, 0, 0xffffffffu), 13);
    const uint8_t wu[] = {0, 0, 4, H2_WINDOW_UPDATE, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff};
    cr_assert_arr_eq(f, wu, sizeof wu);

    const uint8_t opaque[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cr_assert_eq(h2_encode_ping(f, H2_FLAG_ACK, opaque), 17);
    const uint8_t ping[] = {0, 0, 8, H2_PING, H2_FLAG_ACK, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    cr_assert_arr_eq(f, ping, sizeof ping);

    cr_assert_eq(h2_encode_goaway(f, 7, H2_PROTOCOL_ERROR), 17);
    const uint8_t ga[] = {0, 0, 8, H2_GOAWAY, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1};
    cr_assert_arr_eq(f, ga, sizeof ga);

    cr_assert_eq(h2_encode_settings_ack(f), 9);
    const uint8_t ack[] = {0, 0, 0, H2_SETTINGS, H2_FLAG_ACK, 0, 0, 0, 0};
    cr_assert_arr_eq(f, ack, sizeof ack);
}

Test(h2_codec, encode_settings_decodes_back)
{
    const h2_setting_value set[] = {{H2_SET_MAX_CONCURRENT_STREAMS, 100},
                                    {H2_SET_INITIAL_WINDOW_SIZE, 65535},
                                    {H2_SET_NO_RFC7540_PRIORITIES, 1}};
    uint8_t f[H2_SETTINGS_FRAME(3)];
    cr_assert_eq(h2_encode_settings(f, set, 3), sizeof f);
    h2_frame_hd hd;
    h2_get_hd(f, &hd);
    cr_assert_eq(hd.length, 18);
    cr_assert_eq(hd.type, H2_SETTINGS);
    cr_assert_eq(hd.flags, 0);
    cr_assert_eq(hd.sid, 0);
    uint32_t n;
    cr_assert_eq(h2_decode_settings(hd.flags, hd.sid, f + H2_FRAME_HD, hd.length, &n), 0);
    cr_assert_eq(n, 3);
    for (uint32_t i = 0; i < n; i++) {
        uint16_t id;
        uint32_t v;
        h2_setting_at(f + H2_FRAME_HD, i, &id, &v);
        cr_assert_eq(id, set[i].id);
        cr_assert_eq(v, set[i].value);
    }
}

/* Reads back what h2_encode_headers wrote: HEADERS then CONTINUATIONs, on
 * sid, END_HEADERS on the last only, each within max_frame; the block
 * reassembled into out. */
static size_t read_headers(const uint8_t *f, size_t n, uint32_t sid, size_t max_frame, uint8_t *out,
                           uint8_t *first_flags)
{
    size_t at = 0, got = 0, frames = 0;
    for (;;) {
        cr_assert_leq(at + H2_FRAME_HD, n);
        h2_frame_hd hd;
        h2_get_hd(f + at, &hd);
        cr_assert_eq(hd.type, frames == 0 ? H2_HEADERS : H2_CONTINUATION);
        cr_assert_eq(hd.sid, (int32_t)sid);
        cr_assert_leq(hd.length, max_frame);
        if (frames == 0)
            *first_flags = hd.flags;
        else
            cr_assert_eq(hd.flags & ~H2_FLAG_END_HEADERS, 0);
        memcpy(out + got, f + at + H2_FRAME_HD, hd.length);
        got += hd.length;
        at += H2_FRAME_HD + hd.length;
        frames++;
        if (hd.flags & H2_FLAG_END_HEADERS)
            break;
        cr_assert_eq(hd.length, max_frame, "only the last frame is short");
    }
    cr_assert_eq(at, n, "nothing after END_HEADERS");
    return got;
}

Test(h2_codec, encode_headers_split)
{
    uint8_t block[100];
    for (size_t i = 0; i < sizeof block; i++)
        block[i] = (uint8_t)i;
    const uint8_t prefix = 0x20;
    static uint8_t f[1024], back[256];
    /* Sizes around the frame size, with and without the prefix byte. */
    for (size_t len = 0; len <= sizeof block; len++) {
        for (size_t pre = 0; pre <= 1; pre++) {
            for (size_t max = 1; max <= 40; max += 13) {
                size_t n = h2_encode_headers(f, 9, (int)pre, &prefix, pre, block, len, max);
                cr_assert_eq(n, h2_headers_size(pre + len, max), "len %zu pre %zu max %zu", len,
                             pre, max);
                uint8_t flags = 0;
                size_t got = read_headers(f, n, 9, max, back, &flags);
                cr_assert_eq(got, pre + len);
                cr_assert_eq((flags & H2_FLAG_END_STREAM) != 0, pre == 1);
                if (pre)
                    cr_assert_eq(back[0], prefix);
                cr_assert_eq(memcmp(back + pre, block, len), 0);
            }
        }
    }
}

Test(h2_codec, encode_headers_one_frame)
{
    const uint8_t block[] = {0x88};
    uint8_t f[16];
    cr_assert_eq(h2_encode_headers(f, 1, 1, NULL, 0, block, 1, 16384), 10);
    const uint8_t want[] = {0, 0, 1, H2_HEADERS, H2_FLAG_END_STREAM | H2_FLAG_END_HEADERS,
                            0, 0, 0, 1,          0x88};
    cr_assert_arr_eq(f, want, sizeof want);
}
