/* framing.c — what loose llhttp lets through in an upstream's response,
 * checked beside it: the line ends of the heads (a bare CR, RFC 9112 2.2)
 * before llhttp reads them, and the chunked coding's framing (RFC 9112
 * 7.1) after. keel builds against the system's llhttp, which is not
 * built strict; http1 checks a request's line ends and decodes request
 * bodies itself for the same reason (modules/http1/validate.c, body.c).
 * Byte state machines that carry over from one read to the next, one per
 * upstream connection (px_framing in px.h); response.c calls them. */
#include "px.h"

/* RFC 9112 2.2: a bare CR MUST make a message invalid (or be replaced by
 * SP). Loose llhttp takes "\r" plus any byte for the end of the status
 * line and for the empty line ending the head: "HTTP/1.1 200 O\rXContent-
 * Length: 0\r\n\r\n" was a complete, empty response to keel, whose
 * connection went back to the pool, and a head that never ended to a
 * parser that follows 2.2. So each CR of a head must come before an LF,
 * checked on the bytes before llhttp reads them, head by head up to the
 * final one (an interim 1xx head is followed by the next head). A bare LF
 * ends a line, as in llhttp (2.2 lets a recipient take it). */
enum { LINES_DONE = 0, LINES_IN, LINES_CR, LINES_START, LINES_END_CR };
/* The status line's progress, to tell an interim head from the final one
 * (a 101's is final: what follows it is the tunnel's). */
enum { STATUS_VERSION = 0, STATUS_SPACE, STATUS_1, STATUS_10, STATUS_INTERIM, STATUS_FINAL };

static void head_lines_end(px_framing *f)
{
    int interim = f->head_status == STATUS_INTERIM;
    f->head_lines = interim ? LINES_IN : LINES_DONE;
    f->head_status = STATUS_VERSION;
}

/* 0, or -1 at a bare CR in a head. *body_at: where in data the final
 * head ended (0 if before it, len if not yet). */
int px_head_lines_check(px_framing *f, const char *data, size_t len, size_t *body_at)
{
    *body_at = f->head_lines == LINES_DONE ? 0 : len;
    for (size_t i = 0; i < len && f->head_lines != LINES_DONE; i++) {
        *body_at = i + 1;
        char b = data[i];
        switch (f->head_status) {
        case STATUS_VERSION:
            f->head_status = b == ' ' ? STATUS_SPACE : STATUS_VERSION;
            break;
        case STATUS_SPACE:
            f->head_status = b == ' ' ? STATUS_SPACE : b == '1' ? STATUS_1 : STATUS_FINAL;
            break;
        case STATUS_1:
            f->head_status = b == '0' ? STATUS_10 : STATUS_INTERIM;
            break;
        case STATUS_10:
            f->head_status = b == '1' ? STATUS_FINAL : STATUS_INTERIM;
            break;
        default:
            break;
        }
        switch (f->head_lines) {
        case LINES_IN:
            f->head_lines = b == '\r' ? LINES_CR : b == '\n' ? LINES_START : LINES_IN;
            break;
        case LINES_CR:
            if (b != '\n')
                return -1;
            f->head_lines = LINES_START;
            break;
        case LINES_START:
            if (b == '\r')
                f->head_lines = LINES_END_CR;
            else if (b == '\n')
                head_lines_end(f);
            else
                f->head_lines = LINES_IN;
            break;
        default: /* LINES_END_CR */
            if (b != '\n')
                return -1;
            head_lines_end(f);
            break;
        }
    }
    return 0;
}

/* The chunked coding's framing (RFC 9112 7.1), in the same way: loose
 * llhttp skips any two bytes after chunk data and takes "\r" plus any byte
 * for the end of a chunk-size line and of the trailer section ("2\rXok",
 * "ok\rX0", "0\r\n\rX" ended a response to keel, whose connection was
 * reused). Checked after llhttp read the bytes (whether the body is
 * chunked is its head's to say), before the response is taken as whole:
 * the sizes read here, the data skipped, and every CR before an LF; the
 * extensions' and trailers' grammar is llhttp's. */
enum {
    CHUNK_SIZE0 = 0,
    CHUNK_SIZE,
    CHUNK_EXT,
    CHUNK_SIZE_LF,
    CHUNK_DATA,
    CHUNK_DATA_CR,
    CHUNK_DATA_LF,
    CHUNK_LINE0,
    CHUNK_LINE,
    CHUNK_LINE_LF,
    CHUNK_END_LF,
    CHUNK_DONE
};

/* A byte of a chunk-size line after the size: an extension's, or the
 * line's end (a bare LF ends it, as in llhttp). */
static void chunk_line_byte(px_framing *f, int b)
{
    if (b == '\r')
        f->chunk = CHUNK_SIZE_LF;
    else if (b == '\n')
        f->chunk = f->chunk_left == 0 ? CHUNK_LINE0 : CHUNK_DATA;
}

/* 0, or -1 where the framing is not what RFC 9112 7.1 says. */
int px_chunks_check(px_framing *f, const char *data, size_t len)
{
    for (size_t i = 0; i < len && f->chunk != CHUNK_DONE; i++) {
        int b = (unsigned char)data[i], hex = keel_hex_value(b);
        switch (f->chunk) {
        case CHUNK_SIZE0:
        case CHUNK_SIZE:
            if (hex >= 0) {
                if (f->chunk_left >> 60 != 0)
                    return -1;
                f->chunk_left = f->chunk_left << 4 | (unsigned)hex;
                f->chunk = CHUNK_SIZE;
                break;
            }
            if (f->chunk == CHUNK_SIZE0)
                return -1;
            f->chunk = CHUNK_EXT;
            chunk_line_byte(f, b);
            break;
        case CHUNK_EXT:
            chunk_line_byte(f, b);
            break;
        case CHUNK_SIZE_LF:
            if (b != '\n')
                return -1;
            f->chunk = f->chunk_left == 0 ? CHUNK_LINE0 : CHUNK_DATA;
            break;
        case CHUNK_DATA: {
            size_t take = len - i < f->chunk_left ? len - i : (size_t)f->chunk_left;
            f->chunk_left -= take;
            i += take - 1;
            if (f->chunk_left == 0)
                f->chunk = CHUNK_DATA_CR;
            break;
        }
        case CHUNK_DATA_CR:
            if (b != '\r')
                return -1;
            f->chunk = CHUNK_DATA_LF;
            break;
        case CHUNK_DATA_LF:
            if (b != '\n')
                return -1;
            f->chunk = CHUNK_SIZE0;
            break;
        case CHUNK_LINE0: /* a trailer line, or the final empty one */
        case CHUNK_LINE:
            if (b == '\r')
                f->chunk = f->chunk == CHUNK_LINE0 ? CHUNK_END_LF : CHUNK_LINE_LF;
            else if (b == '\n')
                f->chunk = f->chunk == CHUNK_LINE0 ? CHUNK_DONE : CHUNK_LINE0;
            else
                f->chunk = CHUNK_LINE;
            break;
        case CHUNK_LINE_LF:
        case CHUNK_END_LF:
            if (b != '\n')
                return -1;
            f->chunk = f->chunk == CHUNK_END_LF ? CHUNK_DONE : CHUNK_LINE0;
            break;
        default:
            break;
        }
    }
    return 0;
}

void px_framing_reset(px_framing *f)
{
    f->head_lines = LINES_IN;
    f->head_status = STATUS_VERSION;
    f->chunk = CHUNK_SIZE0;
    f->chunk_left = 0;
}
