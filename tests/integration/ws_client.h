/* ws_client.h — a small WebSocket client for the integration tests: it
 * builds any frame (masked or not, any RSV bits and opcode, minimal or
 * deliberately non-minimal lengths) so tests can break every rule, and it
 * reads the server's frames strictly (a masked server frame, RSV bits the
 * test did not allow or a malformed length fail the read). POSIX only;
 * every wait has a timeout. */
#ifndef KEEL_TEST_WS_CLIENT_H
#define KEEL_TEST_WS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

typedef struct wsc {
    int fd;
    uint8_t *buf;
    size_t len, pos, cap; /* unread bytes are buf[pos, len) */
    int eof;
    int allow_rsv1;  /* permessage-deflate was negotiated */
    char head[4096]; /* the handshake's response head */
} wsc;

typedef struct wsc_frame {
    int fin, rsv, op;
    uint8_t *data; /* malloc'd, NUL-terminated; free with wsc_frame_free */
    size_t len;
} wsc_frame;

/* A TCP connection to 127.0.0.1:port (asserts). */
wsc *wsc_connect(unsigned port);

/* Sends a handshake for path with extra header lines ("Name: value\r\n"...,
 * may be NULL) and reads the response head into c->head. The status, or -1
 * if no head came within timeout_ms. When key is NULL a fixed valid key is
 * used (and default Upgrade/Connection/Version lines are sent unless
 * raw != 0, in which case extra must hold the whole set of fields). */
int wsc_handshake(wsc *c, const char *path, const char *extra, int raw, int timeout_ms);

/* Connects and completes a handshake, asserting 101 and the accept key. */
wsc *wsc_open(unsigned port, const char *path, const char *extra);

/* The same with the client's receive buffer set to rcvbuf bytes before
 * connecting: a peer whose window is small, so that what the server
 * queues does not all disappear into loopback's socket buffers (several
 * MB, depending on the kernel's autotuning and the machine's state). */
wsc *wsc_open_small_window(unsigned port, const char *path, int rcvbuf);

/* A field of the handshake's response head ("" if absent; static buffer). */
const char *wsc_header(const wsc *c, const char *name);

void wsc_close(wsc *c);

/* Writes a frame into out (at least len + 14 bytes): masked when mask !=
 * 0 (with a fixed, non-trivial key), the length in the form lenform (0:
 * minimal, else 126 or 127 even when smaller). Returns its size. */
size_t wsc_build(uint8_t *out, int fin, int rsv, int op, const void *payload, size_t len, int mask,
                 int lenform);

/* Sends bytes (asserts unless the peer already closed: returns -1). */
int wsc_send_raw(wsc *c, const void *data, size_t len);
/* The same, one byte per write, each read by the server before the next
 * is sent (kh_wait_peer_read), so that each arrives in its own read. */
int wsc_send_bytewise(wsc *c, const void *data, size_t len);
/* Builds and sends a masked frame with a minimal length. */
int wsc_send(wsc *c, int fin, int op, const void *payload, size_t len);
int wsc_send_text(wsc *c, const char *text);

/* Reads one frame: 0, -1 on timeout, -2 on EOF before a whole frame, -3 for
 * a frame a server must not send (masked, bad length, RSV not allowed). */
int wsc_read(wsc *c, wsc_frame *f, int timeout_ms);
void wsc_frame_free(wsc_frame *f);

/* Reads frames until a close frame: its code (1005 if it had none), or -1
 * (timeout), -2 (EOF first). Data frames before it are skipped. reason
 * (may be NULL) receives the reason, NUL-terminated. */
int wsc_expect_close(wsc *c, char *reason, size_t cap, int timeout_ms);

/* 1 if the server closes the TCP connection within timeout_ms (after any
 * remaining bytes, which are discarded), 0 otherwise. */
int wsc_wait_eof(wsc *c, int timeout_ms);

#endif
