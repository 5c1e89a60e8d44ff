/* fuzz_http1 — the http1 request path from raw bytes, through the core's
 * HTTP layer and a handler, and back.
 *
 * One in-process server runs for the whole fuzzing session (embedding API,
 * KEEL_LINKED): http1 and the hello plugin compiled in, one worker, small
 * timeouts. Each input becomes one connection: a UNIX socket pair whose
 * server end is handed to the worker the way the single acceptor hands
 * over accepted sockets (kl_worker_handoff), so no TCP handshake is paid
 * per input. The input is written in pieces split at points the input
 * itself chooses (its first byte seeds up to three cuts), and each piece is written only
 * once the server has read the one before (SIOCOUTQ is 0), so every split
 * is a separate read and a separate on_data call, and a crash reproduces.
 * The client then half-closes and reads until the server closes.
 *
 * Checked besides ASan/UBSan: whatever the server sends starts with an
 * HTTP/1.1 status line (no byte of a request is ever echoed raw). An input
 * the server has not finished with after 2 s (hello's /slow?ms=9999) is
 * abandoned: the client closes, as a real one would. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/embed.h>

#include "fuzz_client.h"

KEEL_MODULE_DECLARE(http1);
KEEL_MODULE_DECLARE(hello);

static keel_server *server;

static const char config[] = "[keel]\n"
                             "listen = 127.0.0.1:0 http1\n"
                             "workers = 1\n"
                             "modules = http1 hello\n"
                             "log_level = error\n"
                             "crash_report = off\n"
                             "max_connections = 100000\n"
                             "[http1]\n"
                             "header_timeout = 1s\n"
                             "body_timeout = 1s\n"
                             "keepalive_timeout = 1s\n"
                             "max_body = 64k\n"
                             "max_header_bytes = 8k\n"
                             "max_headers = 32\n"
                             "[hello]\n"
                             "slow_delay = 1ms\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const keel_module_desc *const modules[] = {&keel_module_http1, &keel_module_hello, NULL};
    server = fuzz_server_start(modules, config, "fuzz_http1");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t seed = data[0];
    data++;
    size--;

    /* Only the start of the answer is checked: the rest is read and dropped. */
    unsigned char head[16];
    fuzz_client c;
    fuzz_client_open(&c, server, head, sizeof head, 2000);
    fuzz_client_send_cut(&c, seed, data, size);
    fuzz_client_finish(&c);

    if (c.nin > 0 && memcmp(c.in, "HTTP/1.1 ", c.nin < 9 ? c.nin : 9) != 0) {
        fprintf(stderr, "fuzz_http1: the response does not start with a status line: '%.*s'\n",
                (int)c.nin, (const char *)c.in);
        abort();
    }
    return 0;
}
