/* fuzz_client.h — what the harnesses that drive a whole server share
 * (fuzz_http1, fuzz_ws): one in-process server for the fuzzing session,
 * and per input a connection made of a UNIX socket pair whose server end
 * is handed to worker 0 as the single acceptor hands over accepted
 * sockets (kl_worker_handoff), so no TCP handshake is paid per input.
 * Writes wait until the server has read them (SIOCOUTQ is 0), so every
 * piece is a separate read and a crash reproduces. Linux only. */
#ifndef KEEL_FUZZ_CLIENT_H
#define KEEL_FUZZ_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <keel/embed.h>

/* Starts the server on a thread of its own with the modules (NULL-
 * terminated, compiled in) and config, and returns once it listens.
 * Aborts on any failure, and if the server ever stops. */
keel_server *fuzz_server_start(const keel_module_desc *const *modules, const char *config,
                               const char *name);

typedef struct fuzz_client {
    int fd;
    unsigned char *in; /* the first capin bytes the server sent; the rest is read and dropped */
    size_t nin, capin;
    int eof;            /* the server closed (or reset) */
    long long deadline; /* monotonic ms: past it the input is abandoned */
} fuzz_client;

/* A new connection to the server's worker 0, with timeout_ms to live. */
void fuzz_client_open(fuzz_client *c, keel_server *server, unsigned char *in, size_t capin,
                      int timeout_ms);

/* Reads what the server sent, waiting up to ms for the first byte. */
void fuzz_client_drain(fuzz_client *c, int ms);

/* Sends len bytes, then waits until the server has read them all. */
void fuzz_client_send(fuzz_client *c, const void *data, size_t len);

/* Half-closes, reads until the server closes or the deadline, closes. */
void fuzz_client_finish(fuzz_client *c);

/* Up to three cut points chosen by seed in [0, len), then len: the ends
 * of the pieces an input is written in. Returns how many ends. */
int fuzz_cuts(uint32_t seed, size_t len, size_t ends[4]);

/* Sends len bytes in the pieces fuzz_cuts(seed) chooses, stopping early if
 * the server closed or the deadline passed. */
void fuzz_client_send_cut(fuzz_client *c, uint32_t seed, const void *data, size_t len);

long long fuzz_now_ms(void);

#endif
