/* utf8.c — incremental UTF-8 validation for text messages (RFC 6455 8.1:
 * invalid text fails the connection with 1007) and close reasons (5.5.1).
 *
 * A DFA over byte classes, after Unicode 15 table 3-7 (well-formed byte
 * sequences): no overlong forms, no surrogates (ED A0..BF), nothing above
 * U+10FFFF. Its state is one byte, kept per connection between frames and
 * reads, so a message split anywhere (inside a character too) is checked
 * as it arrives and fails at the first byte that cannot start or continue
 * a character ("fail fast", as Autobahn 6.4 expects), not at the message's
 * end. Runs of ASCII are skipped eight bytes at a time (memcpy to a
 * uint64_t: no alignment assumption).
 */
#include "ws.h"

#include <string.h>

/* Byte → class: 0 ASCII, 1 80..8F, 2 90..9F, 3 A0..BF, 4 C2..DF, 5 E0,
 * 6 E1..EC EE..EF, 7 ED, 8 F0, 9 F1..F3, 10 F4, 11 never valid (C0 C1 F5..FF). */
static const uint8_t byte_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  1,  1,  1,  2,  2,  2,  2,  2,  2,  2,  2,  2, 2, 2, 2,
    2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 11, 11, 4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,  4,  4,  4,  4,  4,  5,  6,  6,  6,  6,  6,  6, 6, 6, 6,
    6, 6, 6, 7, 6, 6, 8, 9, 9, 9, 10, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11,
};

/* States: 0 accept, 1 reject, 2/3/4 expect 1/2/3 more continuation bytes,
 * 5 after E0 (A0..BF next), 6 after ED (80..9F next), 7 after F0 (90..BF
 * next), 8 after F4 (80..8F next). */
static const uint8_t next_state[9][12] = {
    {0, 1, 1, 1, 2, 5, 3, 6, 7, 4, 8, 1}, /* accept */
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, /* reject (sticky) */
    {1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, /* one more */
    {1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1}, /* two more */
    {1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, /* three more */
    {1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1}, /* E0: no overlong */
    {1, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1}, /* ED: no surrogate */
    {1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, /* F0: no overlong */
    {1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, /* F4: not above U+10FFFF */
};

uint8_t ws_utf8_run(uint8_t state, const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (state == WS_UTF8_ACCEPT) {
            /* ASCII fast path, a word at a time. */
            while (i + 8 <= len) {
                uint64_t w;
                memcpy(&w, s + i, 8);
                if (w & 0x8080808080808080ull)
                    break;
                i += 8;
            }
            if (i == len)
                break;
        }
        state = next_state[state][byte_class[s[i++]]];
        if (state == WS_UTF8_REJECT)
            return state;
    }
    return state;
}

size_t ws_utf8_tail(const uint8_t *s, size_t len)
{
    /* Called only on text the DFA accepted so far: the bytes after the
     * last lead byte are an unfinished character if the lead announced
     * more than follow it. */
    for (size_t i = 1; i <= 4 && i <= len; i++) {
        uint8_t b = s[len - i];
        if ((b & 0xC0) == 0x80)
            continue; /* a continuation byte */
        size_t need = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
        return need > i ? i : 0;
    }
    return 0;
}
