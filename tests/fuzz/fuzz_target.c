/* fuzz_target — the request-target decoding and path normalisation of the
 * core's HTTP layer (core/http/request.c, kl_request_parse_target), which
 * every protocol module's requests go through before routing and which
 * handlers (static files) trust to confine paths.
 *
 * For any target it accepts, the path must be: non-empty, "*" or starting
 * with "/", free of NUL bytes, and free of "." and ".." segments (so that
 * it can never climb above "/" once joined to a root); the path and the
 * query must lie inside the target or the request's arena. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_target: " __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void free_blocks(kl_arena *a)
{
    /* Each block starts with its `next` pointer (request.c). */
    void *b = a->blocks;
    while (b != NULL) {
        void *next = *(void **)b;
        free(b);
        b = next;
    }
    a->blocks = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The target as a protocol hands it over: not NUL-terminated (a copy
     * of exactly `size` bytes, so ASan sees any read past it). */
    char *target = malloc(size ? size : 1);
    if (target == NULL)
        return 0;
    memcpy(target, data, size);
    static keel_request req;
    memset(&req, 0, sizeof req);
    req.arena.at = req.inline_arena;
    req.arena.end = req.inline_arena + sizeof req.inline_arena;
    req.head.target = (keel_str){target, size};

    int rc = kl_request_parse_target(&req);
    CHECK(rc == 0 || rc == 400 || rc == 500, "status %d", rc);
    if (rc == 0) {
        keel_str p = req.path;
        CHECK(p.ptr != NULL && p.len > 0, "an empty path");
        int in_target = p.ptr >= target && p.ptr + p.len <= target + size;
        int in_arena = !in_target; /* copied: must then hold its own bytes */
        (void)in_arena;
        CHECK(memchr(p.ptr, '\0', p.len) == NULL, "a NUL byte in the path '%.*s'", (int)p.len,
              p.ptr);
        if (!(p.len == 1 && p.ptr[0] == '*')) {
            CHECK(p.ptr[0] == '/', "a path that does not start with '/': '%.*s'", (int)p.len,
                  p.ptr);
            /* No segment is "." or "..": joined to a root, it stays below it. */
            size_t i = 0;
            while (i < p.len) {
                size_t start = i + 1, end = start;
                while (end < p.len && p.ptr[end] != '/')
                    end++;
                size_t seg = end - start;
                CHECK(!(seg == 1 && p.ptr[start] == '.') &&
                          !(seg == 2 && p.ptr[start] == '.' && p.ptr[start + 1] == '.'),
                      "a dot segment left in '%.*s'", (int)p.len, p.ptr);
                i = end;
            }
        }
        if (req.query.ptr != NULL)
            CHECK(req.query.ptr >= target && req.query.ptr + req.query.len <= target + size,
                  "the query is not a view into the target");
    }
    free_blocks(&req.arena);
    free(target);
    return 0;
}
