/* fuzz_h1_head — http1's request-head fast path (modules/http1/fast_head.c)
 * against llhttp with the checks of parse.c and validate.c, on the same
 * bytes (tests/unit/h1_head_diff.h; the module's sources compiled in, no
 * server).
 *
 * The input's first byte picks the limits (max_request_line,
 * max_header_bytes, max_headers, max_body: the configured defaults or
 * small ones, so that heads reach them exactly); the rest is the head, in
 * a buffer of exactly its size. Checked: if the fast path takes a head,
 * llhttp and the checks take it too, ending at the same byte, with the same
 * exchange fields (request line, spans, tokens, Host, framing,
 * persistence, expectations); so a head they refuse is never the fast
 * path's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h1_head_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned pick = data[0];
    data++;
    size--;
    h1_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_request_line = pick & 1 ? 8192 : 16 + (pick >> 1 & 7) * 4;
    cfg.max_header_bytes = pick & 16 ? 16384 : 24 + (pick >> 5 & 3) * 16;
    cfg.max_headers = pick & 128 ? 100 : 2;
    cfg.max_body = pick & 64 ? 1 << 20 : 10;

    char *head = malloc(size > 0 ? size : 1);
    if (head == NULL)
        return 0;
    memcpy(head, data, size);
    h1_head_diff d;
    h1_head_diff_run(&cfg, head, size, &d);
    if (d.why[0] != '\0') {
        fprintf(stderr, "fuzz_h1_head: %s, for %zu bytes: '%.*s'\n", d.why, size, (int)size, head);
        abort();
    }
    free(head);
    return 0;
}
