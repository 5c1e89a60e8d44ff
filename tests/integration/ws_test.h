/* ws_test.h — what the test_ws_*.c files share: keel started with http1,
 * websocket, hello (its /ws echo) and the wstest module, and assertions on
 * frames. Static functions: one copy per test executable. */
#ifndef KEEL_TEST_WS_TEST_H
#define KEEL_TEST_WS_TEST_H

#include "harness.h"
#include "ws_client.h"

#include <stdlib.h>
#include <string.h>

#define WT_FN static __attribute__((unused))

/* keel on one port; extra (may be NULL) is appended to the config, e.g.
 * "[websocket]\nmax_message = 1k\n". modules: NULL for the default set. */
WT_FN kh_proc *wt_start_modules(int workers, const char *modules, const char *extra)
{
    char conf[4096];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = %d\nmodules = %s\n" KH_MODULE_PATH "%s",
             workers, modules ? modules : "http1 websocket hello wstest", extra ? extra : "");
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port in the 'listening on' line");
    return p;
}

WT_FN kh_proc *wt_start(const char *extra)
{
    return wt_start_modules(1, NULL, extra);
}

/* Reads one frame and checks its opcode and payload. */
WT_FN void wt_expect(kh_proc *p, wsc *c, int op, const void *data, size_t len)
{
    wsc_frame f;
    int rc = wsc_read(c, &f, 5000);
    kh_assert(p, rc == 0, "reading a frame (expected op %d, %zu bytes): %d", op, len, rc);
    kh_assert(p, f.op == op && f.fin, "frame op %d fin %d, expected op %d: '%.*s'", f.op, f.fin, op,
              (int)(f.len < 200 ? f.len : 200), f.data);
    kh_assert(p, f.len == len && (len == 0 || memcmp(f.data, data, len) == 0),
              "payload of %zu bytes '%.*s', expected %zu '%.*s'", f.len,
              (int)(f.len < 200 ? f.len : 200), f.data, len, (int)(len < 200 ? len : 200),
              (const char *)data);
    wsc_frame_free(&f);
}

WT_FN void wt_expect_text(kh_proc *p, wsc *c, const char *text)
{
    wt_expect(p, c, 1, text, strlen(text));
}

/* Expects a close frame with code, then the server's TCP close (RFC 6455
 * 7.1.1: the server closes first). Answers the close as a client would
 * when answer != 0. */
WT_FN void wt_expect_close(kh_proc *p, wsc *c, int code, int answer)
{
    int got = wsc_expect_close(c, NULL, 0, 5000);
    kh_assert(p, got == code, "close code %d, expected %d", got, code);
    if (answer) {
        uint8_t body[2] = {(uint8_t)(code >> 8), (uint8_t)code};
        uint8_t frame[16];
        size_t n = wsc_build(frame, 1, 0, 8, body, code == 1005 ? 0 : 2, 1, 0);
        wsc_send_raw(c, frame, n);
    }
    kh_assert(p, wsc_wait_eof(c, 5000) == 1, "the server did not close the TCP connection");
}

/* Ends a test: keel stops gracefully (SIGTERM) and exits 0, and its log
 * holds no sanitizer report (in the ASan build, LeakSanitizer runs at that
 * exit: every connection, message and subscription must be freed). Close
 * the test's connections first, or the shutdown waits for their close
 * handshakes. */
WT_FN void wt_finish(kh_proc *p)
{
    if (!kh_exited(p))
        kh_signal(p, SIGTERM);
    int rc = kh_wait_exit(p, 20000);
    kh_assert(p, rc == 0, "keel exited with %d", rc);
    const char *log = kh_stderr(p);
    kh_assert(p, !strstr(log, "Sanitizer") && !strstr(log, "runtime error"), "sanitizer report");
}

#endif
