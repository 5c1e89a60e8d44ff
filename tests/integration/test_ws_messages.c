/* Messages (RFC 6455 5.4, 8.1): fragmentation with control frames in
 * between, UTF-8 checked across fragments and failing fast, messages
 * split at every byte boundary and arriving a byte at a time, size
 * limits (1009), and streaming delivery (on_fragment). */
#define _GNU_SOURCE
#include "ws_test.h"

Test(ws_messages, fragmented_with_interleaved_control, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    wsc *c = wsc_open(kh_port(p, 0), "/t/app", NULL);
    wsc_send(c, 0, 1, "Hello, ", 7);
    wsc_send(c, 1, 9, "ping1", 5);
    wsc_send(c, 0, 0, "frag", 4);
    wsc_send(c, 1, 10, "pong", 4);
    wsc_send(c, 0, 0, "", 0);
    wsc_send(c, 1, 9, "ping2", 5);
    wsc_send(c, 1, 0, "mented!", 7);
    wt_expect(p, c, 10, "ping1", 5);
    wt_expect_text(p, c, "pong:pong");
    wt_expect(p, c, 10, "ping2", 5);
    wt_expect_text(p, c, "Hello, fragmented!");
    /* Binary, with empty fragments. */
    wsc_send(c, 0, 2, "", 0);
    wsc_send(c, 0, 0, "\x00\x01", 2);
    wsc_send(c, 1, 0, "", 0);
    wt_expect(p, c, 2, "\x00\x01", 2);
    /* Empty messages. */
    wsc_send(c, 1, 1, "", 0);
    wt_expect(p, c, 1, "", 0);
    wsc_close(c);
    wt_finish(p);
}

Test(ws_messages, utf8_across_fragments, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    /* "κόσμε" and an emoji, split inside characters. */
    const char text[] = "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5 \xf0\x9f\x98\x80";
    size_t n = sizeof text - 1;
    wsc *c = wsc_open(kh_port(p, 0), "/ws", NULL);
    for (size_t cut = 1; cut < n; cut++) {
        wsc_send(c, 0, 1, text, cut);
        wsc_send(c, 1, 0, text + cut, n - cut);
        wt_expect(p, c, 1, text, n);
    }
    wsc_close(c);
    /* Invalid sequences: overlong, surrogate, above U+10FFFF, a lone
     * continuation byte, a character cut off at the end. */
    const char *bad[] = {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\x80", "ok\xe2\x82"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        c = wsc_open(kh_port(p, 0), "/ws", NULL);
        size_t len = strlen(bad[i]);
        wsc_send(c, 0, 1, bad[i], 1);
        wsc_send(c, 1, 0, bad[i] + 1, len - 1);
        wt_expect_close(p, c, 1007, 0);
        wsc_close(c);
    }
    /* Fail fast: the first fragment's invalid byte is enough, the message
     * has not ended (Autobahn 6.4). */
    c = wsc_open(kh_port(p, 0), "/ws", NULL);
    wsc_send(c, 0, 1, "fine \xf5 then", 11);
    wt_expect_close(p, c, 1007, 0);
    wsc_close(c);
    /* ... even in the middle of a frame whose rest never comes. */
    c = wsc_open(kh_port(p, 0), "/ws", NULL);
    uint8_t frame[64];
    size_t fl = wsc_build(frame, 1, 0, 1, "abc\xff\x01\x02\x03\x04\x05\x06", 10, 1, 0);
    wsc_send_raw(c, frame, fl - 4);
    wt_expect_close(p, c, 1007, 0);
    wsc_close(c);
    wt_finish(p);
}

/* A stream of frames (a text message in two fragments with a ping in
 * between, a binary message in the 16-bit form, a close) sent in two
 * writes, split at every byte. */
Test(ws_messages, split_at_every_boundary, .timeout = 90, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    static uint8_t stream[1024];
    static uint8_t bin[300];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (uint8_t)(i * 7);
    size_t n = wsc_build(stream, 0, 0, 1, "caf\xc3", 4, 1, 0);
    n += wsc_build(stream + n, 1, 0, 9, "pi", 2, 1, 0);
    n += wsc_build(stream + n, 1, 0, 0, "\xa9!", 2, 1, 0);
    n += wsc_build(stream + n, 1, 0, 2, bin, sizeof bin, 1, 0);
    wsc *c = wsc_open(kh_port(p, 0), "/ws", NULL);
    for (size_t cut = 1; cut < n; cut++) {
        wsc_send_raw(c, stream, cut);
        kh_assert(p, kh_wait_peer_read(c->fd, 5000), "the first %zu bytes were not read", cut);
        wsc_send_raw(c, stream + cut, n - cut);
        wt_expect(p, c, 10, "pi", 2);
        wt_expect(p, c, 1, "caf\xc3\xa9!", 6);
        wt_expect(p, c, 2, bin, sizeof bin);
    }
    /* And the whole stream a byte at a time. */
    wsc_send_bytewise(c, stream, n);
    wt_expect(p, c, 10, "pi", 2);
    wt_expect(p, c, 1, "caf\xc3\xa9!", 6);
    wt_expect(p, c, 2, bin, sizeof bin);
    wsc_close(c);
    wt_finish(p);
}

Test(ws_messages, limits, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start("[websocket]\nmax_frame = 1k\nmax_message = 2k\n");
    static char big[4096];
    memset(big, 'z', sizeof big);
    wsc *c = wsc_open(kh_port(p, 0), "/ws", NULL);
    wsc_send(c, 1, 1, big, 1024);
    wt_expect(p, c, 1, big, 1024);
    wsc_send(c, 1, 1, big, 1025);
    wt_expect_close(p, c, 1009, 0);
    wsc_close(c);
    /* Frames within max_frame, a message over max_message. */
    c = wsc_open(kh_port(p, 0), "/ws", NULL);
    wsc_send(c, 0, 2, big, 1000);
    wsc_send(c, 0, 0, big, 1000);
    wsc_send(c, 1, 0, big, 48);
    wt_expect(p, c, 2, big, 2048);
    wsc_send(c, 0, 2, big, 1000);
    wsc_send(c, 0, 0, big, 1000);
    wsc_send(c, 1, 0, big, 49);
    wt_expect_close(p, c, 1009, 0);
    wsc_close(c);
    /* The frame header alone (a 64-bit length of 1 GiB) is enough. */
    c = wsc_open(kh_port(p, 0), "/ws", NULL);
    uint8_t hdr[] = {0x82, 0xff, 0, 0, 0, 0, 0x40, 0, 0, 0, 1, 2, 3, 4};
    wsc_send_raw(c, hdr, sizeof hdr);
    wt_expect_close(p, c, 1009, 0);
    wsc_close(c);
    wt_finish(p);
}

Test(ws_messages, streaming_pieces, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    wsc *c = wsc_open(kh_port(p, 0), "/t/frag", NULL);
    /* "é" split between frames: the first piece ends before it. */
    wsc_send(c, 0, 1, "ab\xc3", 3);
    wt_expect_text(p, c, "F10:ab");
    wsc_send(c, 1, 0, "\xa9z", 2);
    wt_expect_text(p, c, "F00:\xc3\xa9"); /* the character completed */
    wt_expect_text(p, c, "F00:z");
    wt_expect_text(p, c, "F01:");
    wsc_close(c);
    wt_finish(p);
}

Test(ws_messages, server_fragments, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    wsc *c = wsc_open(kh_port(p, 0), "/t/app", NULL);
    wsc_send_text(c, "stream");
    wsc_frame f;
    const char *want[] = {"one ", "mid", "two ", "three"};
    int ops[] = {1, 9, 0, 0}, fins[] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) {
        kh_assert(p, wsc_read(c, &f, 5000) == 0, "frame %d", i);
        kh_assert(p, f.op == ops[i] && f.fin == fins[i] && strcmp((char *)f.data, want[i]) == 0,
                  "frame %d: op %d fin %d '%s'", i, f.op, f.fin, f.data);
        wsc_frame_free(&f);
    }
    wsc_close(c);
    wt_finish(p);
}

/* Random messages (text from 1- to 4-byte characters, binary), each cut
 * into 1-5 frames with pings between them, all sent as one stream in
 * random-sized writes: the echoes and pongs come back in order. Seeded,
 * so a failure repeats. */
Test(ws_messages, random_streams, .timeout = 90, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start(NULL);
    static const char *chars[] = {"a",
                                  "Z",
                                  " ",
                                  "\xc3\xa9",
                                  "\xce\xbb",
                                  "\xe2\x82\xac",
                                  "\xe6\x97\xa5",
                                  "\xf0\x9f\x98\x80",
                                  "\xf4\x8f\xbf\xbf"};
    srand(4242);
    enum { NMSG = 150 };
    static uint8_t stream[1 << 20];
    size_t slen = 0;
    struct expect {
        int op;
        size_t off, len; /* in the payload store */
    } want[NMSG * 8];
    static uint8_t store[1 << 20];
    size_t nwant = 0, stored = 0;
    for (int m = 0; m < NMSG; m++) {
        int text = rand() % 2;
        size_t target = (size_t)(rand() % 3000), len = 0;
        uint8_t *msg = store + stored;
        while (len < target) {
            if (text) {
                const char *ch = chars[rand() % 9];
                memcpy(msg + len, ch, strlen(ch));
                len += strlen(ch);
            } else {
                msg[len++] = (uint8_t)rand();
            }
        }
        int nfrag = 1 + rand() % 5;
        size_t at = 0;
        for (int f = 0; f < nfrag; f++) {
            size_t piece = f == nfrag - 1 ? len - at : (size_t)rand() % (len - at + 1);
            slen += wsc_build(stream + slen, f == nfrag - 1, 0, f == 0 ? (text ? 1 : 2) : 0,
                              msg + at, piece, 1, 0);
            at += piece;
            if (rand() % 3 == 0 && f < nfrag - 1) {
                char ping[8];
                int pl = snprintf(ping, sizeof ping, "p%d", m);
                memcpy(store + stored + len, ping, (size_t)pl);
                slen += wsc_build(stream + slen, 1, 0, 9, ping, (size_t)pl, 1, 0);
                want[nwant++] = (struct expect){10, stored + len, (size_t)pl};
                len += (size_t)pl; /* keep the ping's bytes after the message's */
                target = len;
            }
        }
        want[nwant++] = (struct expect){text ? 1 : 2, stored, at};
        stored += len;
    }
    wsc *c = wsc_open(kh_port(p, 0), "/ws", NULL);
    for (size_t at = 0; at < slen;) {
        size_t n = 1 + (size_t)rand() % 700;
        if (n > slen - at)
            n = slen - at;
        wsc_send_raw(c, stream + at, n);
        at += n;
        if (rand() % 4 == 0) /* now and then a piece read on its own */
            kh_assert(p, kh_wait_peer_read(c->fd, 5000), "not read");
    }
    for (size_t i = 0; i < nwant; i++)
        wt_expect(p, c, want[i].op, store + want[i].off, want[i].len);
    wsc_close(c);
    wt_finish(p);
}
