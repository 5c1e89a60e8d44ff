/* Frame rules (RFC 6455 5.2-5.5, 7.4): every violation fails the
 * connection with the close code of 7.4.1, then the server closes TCP. */
#define _GNU_SOURCE
#include "ws_test.h"

/* Sends raw bytes on a fresh /ws connection and expects close code. */
static void expect_failure(kh_proc *p, const void *bytes, size_t n, int code, const char *what)
{
    wsc *c = wsc_open(kh_port(p, 0), "/ws", NULL);
    wsc_send_raw(c, bytes, n);
    int got = wsc_expect_close(c, NULL, 0, 5000);
    kh_assert(p, got == code, "%s: close code %d, expected %d", what, got, code);
    kh_assert(p, wsc_wait_eof(c, 5000) == 1, "%s: no TCP close", what);
    wsc_close(c);
}

static void expect_frame_failure(kh_proc *p, int fin, int rsv, int op, const void *payload,
                                 size_t len, int mask, int lenform, int code, const char *what)
{
    uint8_t buf[70000];
    size_t n = wsc_build(buf, fin, rsv, op, payload, len, mask, lenform);
    expect_failure(p, buf, n, code, what);
}

static char buf_for_bytewise[70000];

Test(ws_frames, lengths, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    static char big[70000];
    memset(big, 'a', sizeof big);
    /* The three forms, minimal: echoed. */
    wsc *c = wsc_open(kh_port(p, 0), "/ws", NULL);
    size_t sizes[] = {0, 1, 125, 126, 127, 65535, 65536, 69999};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        wsc_send(c, 1, 1, big, sizes[i]);
        wt_expect(p, c, 1, big, sizes[i]);
    }
    /* The 64-bit form with its header arriving a byte at a time. */
    size_t n = wsc_build((uint8_t *)buf_for_bytewise, 1, 0, 1, big, 65536, 1, 0);
    wsc_send_bytewise(c, buf_for_bytewise, 20);
    wsc_send_raw(c, buf_for_bytewise + 20, n - 20);
    wt_expect(p, c, 1, big, 65536);
    wsc_close(c);
    /* Non-minimal: 1002 (5.2: "the minimal number of bytes MUST be used"). */
    expect_frame_failure(p, 1, 0, 1, "hello", 5, 1, 126, 1002, "16-bit length for 5 bytes");
    expect_frame_failure(p, 1, 0, 1, big, 300, 1, 127, 1002, "64-bit length for 300 bytes");
    uint8_t msb[] = {0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4};
    expect_failure(p, msb, sizeof msb, 1002, "64-bit length with the top bit set");
    wt_finish(p);
}

Test(ws_frames, masking_rsv_opcodes, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    expect_frame_failure(p, 1, 0, 1, "hi", 2, 0, 0, 1002, "unmasked frame");
    expect_frame_failure(p, 1, 4, 1, "hi", 2, 1, 0, 1002, "RSV1 without an extension");
    expect_frame_failure(p, 1, 2, 1, "hi", 2, 1, 0, 1002, "RSV2");
    expect_frame_failure(p, 1, 1, 2, "hi", 2, 1, 0, 1002, "RSV3");
    int ops[] = {3, 4, 5, 6, 7, 11, 12, 13, 14, 15};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        char what[32];
        snprintf(what, sizeof what, "opcode %d", ops[i]);
        expect_frame_failure(p, 1, 0, ops[i], "", 0, 1, 0, 1002, what);
    }
    wt_finish(p);
}

Test(ws_frames, control_frames, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    char payload[126];
    memset(payload, 'x', sizeof payload);
    expect_frame_failure(p, 1, 0, 9, payload, 126, 1, 0, 1002, "a ping of 126 bytes");
    expect_frame_failure(p, 0, 0, 9, "a", 1, 1, 0, 1002, "a fragmented ping");
    expect_frame_failure(p, 1, 0, 8, "\x03", 1, 1, 0, 1002, "a close of one byte");
    /* A ping of 125 bytes is answered with the same payload; a pong is
     * taken quietly (wstest answers it in text). */
    wsc *c = wsc_open(kh_port(p, 0), "/t/app", NULL);
    wsc_send(c, 1, 9, payload, 125);
    wt_expect(p, c, 10, payload, 125);
    wsc_send(c, 1, 10, "unsolicited", 11);
    wt_expect_text(p, c, "pong:unsolicited");
    wsc_send(c, 1, 9, "", 0);
    wt_expect(p, c, 10, "", 0);
    wsc_close(c);
    wt_finish(p);
}

Test(ws_frames, continuation_rules, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    expect_frame_failure(p, 1, 0, 0, "orphan", 6, 1, 0, 1002, "continuation without a message");
    uint8_t buf[64];
    size_t n = wsc_build(buf, 0, 0, 1, "part", 4, 1, 0);
    n += wsc_build(buf + n, 1, 0, 1, "new", 3, 1, 0);
    expect_failure(p, buf, n, 1002, "a new message inside a fragmented one");
    n = wsc_build(buf, 0, 0, 2, "part", 4, 1, 0);
    n += wsc_build(buf + n, 1, 0, 2, "new", 3, 1, 0);
    expect_failure(p, buf, n, 1002, "a new binary message inside a fragmented one");
    wt_finish(p);
}

Test(ws_frames, close_codes, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    int bad[] = {0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint8_t body[2] = {(uint8_t)(bad[i] >> 8), (uint8_t)bad[i]};
        char what[48];
        snprintf(what, sizeof what, "close code %d on the wire", bad[i]);
        expect_frame_failure(p, 1, 0, 8, body, 2, 1, 0, 1002, what);
    }
    /* A reason that is not UTF-8: 1007. */
    expect_frame_failure(p, 1, 0, 8, "\x03\xe8\xff\xfe", 4, 1, 0, 1007, "an invalid reason");
    /* Valid codes are echoed (5.5.1), then the server closes TCP (7.1.1). */
    int good[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010,
                  1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        wsc *c = wsc_open(kh_port(p, 0), "/ws", NULL);
        uint8_t body[5] = {(uint8_t)(good[i] >> 8), (uint8_t)good[i], 'o', 'k', '!'};
        wsc_send(c, 1, 8, body, 5);
        wt_expect_close(p, c, good[i], 0);
        wsc_close(c);
    }
    /* An empty close is answered with an empty one. */
    wsc *c = wsc_open(kh_port(p, 0), "/ws", NULL);
    wsc_send(c, 1, 8, "", 0);
    wt_expect_close(p, c, 1005, 0);
    wsc_close(c);
    wt_finish(p);
}
