/* permessage-deflate (RFC 7692) with the deflate module loaded:
 * negotiation answers, the RFC's own examples of compressed frames (7.2.3),
 * RSV1 rules, corrupt data, and compression of what the server sends. The
 * Python test (tests/integration/ws_python.py) checks both directions
 * against a real implementation. */
#define _GNU_SOURCE
#include "ws_test.h"

#define MODULES "http1 deflate websocket hello wstest"

static const char *answer_to(kh_proc *p, const char *offer, wsc **out)
{
    char extra[512];
    snprintf(extra, sizeof extra, "Sec-WebSocket-Extensions: %s\r\n", offer);
    wsc *c = wsc_open(kh_port(p, 0), "/ws", extra);
    *out = c;
    return wsc_header(c, "Sec-WebSocket-Extensions");
}

static void expect_answer(kh_proc *p, const char *offer, const char *want)
{
    wsc *c;
    const char *got = answer_to(p, offer, &c);
    kh_assert(p, strcmp(got, want) == 0, "offer '%s': answer '%s', expected '%s'", offer, got,
              want);
    wsc_close(c);
}

#define NCT "permessage-deflate; server_no_context_takeover; client_no_context_takeover"

Test(ws_deflate, negotiation, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start_modules(1, MODULES, NULL);
    expect_answer(p, "permessage-deflate", NCT);
    expect_answer(p, "permessage-deflate; client_max_window_bits",
                  NCT "; client_max_window_bits=12");
    expect_answer(p, "permessage-deflate; client_max_window_bits=9",
                  NCT "; client_max_window_bits=9");
    expect_answer(p, "permessage-deflate; server_max_window_bits=15",
                  NCT "; server_max_window_bits=15");
    expect_answer(p, "permessage-deflate; server_max_window_bits=10",
                  NCT "; server_max_window_bits=10");
    /* 8 cannot be honoured by zlib's raw deflate: the next offer is taken. */
    expect_answer(p,
                  "permessage-deflate; server_max_window_bits=8, permessage-deflate; "
                  "server_max_window_bits=\"9\"",
                  NCT "; server_max_window_bits=9");
    expect_answer(p, "permessage-deflate; server_max_window_bits=8", "");
    /* Offers we must decline (5.1): unknown, repeated, invalid. */
    expect_answer(p, "permessage-deflate; foo=1", "");
    expect_answer(p, "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
                  "");
    expect_answer(p, "permessage-deflate; server_max_window_bits", "");
    expect_answer(p, "permessage-deflate; client_max_window_bits=16", "");
    expect_answer(p, "permessage-deflate; server_no_context_takeover=1", "");
    /* Other extensions are skipped. */
    expect_answer(p, "x-webkit-deflate-frame, permessage-deflate", NCT);
    wt_finish(p);
    /* A smaller window of ours is what the answer says, whatever the
     * client allowed. */
    p = wt_start_modules(1, MODULES, "[websocket]\ncompression_window_bits = 11\n");
    expect_answer(p, "permessage-deflate; server_max_window_bits=15",
                  NCT "; server_max_window_bits=11");
    expect_answer(p, "permessage-deflate; server_max_window_bits=10",
                  NCT "; server_max_window_bits=10");
    wt_finish(p);
}

Test(ws_deflate, context_takeover_when_configured, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start_modules(1, MODULES, "[websocket]\ncompression_context_takeover = on\n");
    expect_answer(p, "permessage-deflate", "permessage-deflate");
    expect_answer(p, "permessage-deflate; client_no_context_takeover",
                  "permessage-deflate; client_no_context_takeover");
    wt_finish(p);
}

Test(ws_deflate, off_when_configured, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start_modules(1, MODULES, "[websocket]\ncompression = off\n");
    expect_answer(p, "permessage-deflate", "");
    wt_finish(p);
}

/* RFC 7692 7.2.3.1-7.2.3.3: "Hello" compressed, fragmented, and as a
 * stored block. */
Test(ws_deflate, rfc_examples, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start_modules(1, MODULES, NULL);
    wsc *c;
    answer_to(p, "permessage-deflate", &c);
    static const uint8_t hello[] = {0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00};
    uint8_t buf[64];
    size_t n = wsc_build(buf, 1, 4, 1, hello, sizeof hello, 1, 0);
    wsc_send_raw(c, buf, n);
    wt_expect_text(p, c, "Hello");
    n = wsc_build(buf, 0, 4, 1, hello, 3, 1, 0);
    n += wsc_build(buf + n, 1, 0, 0, hello + 3, 4, 1, 0);
    wsc_send_raw(c, buf, n);
    wt_expect_text(p, c, "Hello");
    static const uint8_t stored[] = {0x00, 0x05, 0x00, 0xfa, 0xff, 0x48,
                                     0x65, 0x6c, 0x6c, 0x6f, 0x00};
    n = wsc_build(buf, 1, 4, 1, stored, sizeof stored, 1, 0);
    wsc_send_raw(c, buf, n);
    wt_expect_text(p, c, "Hello");
    /* No context takeover was agreed: the same bytes again decode alone. */
    n = wsc_build(buf, 1, 4, 2, hello, sizeof hello, 1, 0);
    wsc_send_raw(c, buf, n);
    wt_expect(p, c, 2, "Hello", 5);
    /* An uncompressed message in between. */
    wsc_send_text(c, "plain");
    wt_expect_text(p, c, "plain");
    wsc_close(c);
    wt_finish(p);
}

Test(ws_deflate, rsv1_rules_and_corrupt_data, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start_modules(1, MODULES, NULL);
    uint8_t buf[64];
    wsc *c;
    /* RSV1 on a continuation frame (RFC 7692 6.1). */
    answer_to(p, "permessage-deflate", &c);
    size_t n = wsc_build(buf, 0, 4, 1, "\xf2\x48", 2, 1, 0);
    n += wsc_build(buf + n, 1, 4, 0, "\xcd\xc9\xc9\x07\x00", 5, 1, 0);
    wsc_send_raw(c, buf, n);
    wt_expect_close(p, c, 1002, 0);
    wsc_close(c);
    /* RSV1 on a control frame. */
    answer_to(p, "permessage-deflate", &c);
    n = wsc_build(buf, 1, 4, 9, "", 0, 1, 0);
    wsc_send_raw(c, buf, n);
    wt_expect_close(p, c, 1002, 0);
    wsc_close(c);
    /* Corrupt deflate data (an invalid block type). */
    answer_to(p, "permessage-deflate", &c);
    n = wsc_build(buf, 1, 4, 2, "\xff\xff\xff\xff", 4, 1, 0);
    wsc_send_raw(c, buf, n);
    wt_expect_close(p, c, 1007, 0);
    wsc_close(c);
    /* Compressed text that inflates to invalid UTF-8: a stored block
     * holding 0xff. */
    answer_to(p, "permessage-deflate", &c);
    static const uint8_t bad[] = {0x00, 0x01, 0x00, 0xfe, 0xff, 0xff, 0x00};
    n = wsc_build(buf, 1, 4, 1, bad, sizeof bad, 1, 0);
    wsc_send_raw(c, buf, n);
    wt_expect_close(p, c, 1007, 0);
    wsc_close(c);
    wt_finish(p);
}

Test(ws_deflate, server_compresses_large_messages, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start_modules(1, MODULES, NULL);
    wsc *c;
    answer_to(p, "permessage-deflate", &c);
    char text[2000];
    memset(text, 'a', sizeof text);
    wsc_send(c, 1, 1, text, sizeof text);
    wsc_frame f;
    kh_assert(p, wsc_read(c, &f, 5000) == 0, "no echo");
    kh_assert(p, f.op == 1 && (f.rsv & 4) && f.len < 100, "op %d rsv %d len %zu", f.op, f.rsv,
              f.len);
    /* Sync flush with the 00 00 ff ff tail removed (7.2.1). */
    kh_assert(p, !(f.len >= 4 && memcmp(f.data + f.len - 4, "\x00\x00\xff\xff", 4) == 0),
              "tail not stripped");
    wsc_frame_free(&f);
    /* Below compression_threshold: plain. */
    wsc_send_text(c, "tiny");
    kh_assert(p, wsc_read(c, &f, 5000) == 0 && !(f.rsv & 4) && f.len == 4, "tiny message");
    wsc_frame_free(&f);
    wsc_close(c);
    wt_finish(p);
}
