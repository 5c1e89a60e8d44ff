/* body.c — reading request bodies: Content-Length and chunked.
 *
 * llhttp parses heads only; bodies are framed here. llhttp's loose build
 * (Debian's sources, and what system libraries ship) is lax exactly where
 * body framing is decided: it skips any two bytes after chunk data, takes a
 * bare CR or LF as the end of a chunk-size line or of the trailer section,
 * and (8.1) refuses valid multi-extension chunk headers. A request body
 * whose end two parsers see differently is how requests are smuggled, so
 * the chunked coding is decoded by this small strict state machine
 * (RFC 9112 7.1), one byte at a time for the framing and in bulk for data.
 */
#include "h1.h"

#include <stdlib.h>
#include <string.h>

/* Chunked decoder states. */
enum {
    CS_SIZE0 = 0,  /* the first hex digit of a chunk size */
    CS_SIZE,       /* more hex digits */
    CS_EXT_BWS,    /* whitespace that must lead to ';' */
    CS_EXT_NAME0,  /* after ';': BWS, then a token */
    CS_EXT_NAME,   /* in an extension name */
    CS_EXT_AFTER,  /* BWS after a name: '=' or ';' must follow */
    CS_EXT_VAL0,   /* after '=': BWS, then a token or a quoted-string */
    CS_EXT_TOKEN,  /* in a token value */
    CS_EXT_QUOTED, /* in a quoted-string value */
    CS_EXT_QESC,   /* after a backslash in a quoted-string */
    CS_EXT_QEND,   /* after the closing quote */
    CS_SIZE_LF,    /* the LF ending the chunk-size line */
    CS_DATA,       /* chunk data */
    CS_DATA_CR,    /* the CRLF after chunk data */
    CS_DATA_LF,    /* */
    CS_TRAILER,    /* the start of a trailer line, or the final CRLF */
    CS_TR_NAME,    /* a trailer field name */
    CS_TR_VALUE,   /* a trailer field value */
    CS_TR_LF,      /* the LF ending a trailer line */
    CS_END_LF,     /* the LF of the final empty line */
    CS_CONTENT     /* Content-Length framed data */
};

/* A chunk-size line with its extensions, and each trailer line, is at most
 * this long: 400 (431 for a trailer line) beyond it. nginx refuses chunk
 * headers far shorter; Node.js caps a message's extensions at 16 KiB
 * (CVE-2024-22019). The line cap alone does not bound a body, since lines
 * repeat: every framing byte is also counted (cfg->max_chunked, below). */
#define H1_CHUNK_LINE_MAX 4096

void h1_body_init(h1_conn *c)
{
    if (c->exch->head.content_length >= 0) {
        c->exch->body_state = CS_CONTENT;
        c->exch->body_left = (uint64_t)c->exch->head.content_length;
    } else {
        c->exch->body_state = CS_SIZE0;
        c->exch->body_left = 0;
    }
    c->exch->line_len = 0;
    c->exch->overhead = 0;
    c->exch->tr_len = 0;
    c->exch->ntr = 0;
    c->exch->tr_count = 0;
    c->exch->tr_bytes = 0;
}

/* Hands data to the core while it wants the body, else drops it. */
static void deliver(h1_conn *c, const char *p, size_t n)
{
    if (c->read_state == H1_READ_BODY && c->exch_state == H1_EXCH_ACTIVE) {
        /* The handler may answer (and finish the exchange) inside this
         * call; the next piece then finds exch_state != ACTIVE and is dropped. A
         * refusal (the core answering 413 on its own limit) turns the rest
         * into discarding. */
        if (keel_http_request_body(c->exch->req, p, n, 0) < 0 && c->exch_state == H1_EXCH_ACTIVE)
            c->read_state = H1_READ_DISCARD;
    }
}

static int is_ws(unsigned char ch)
{
    return ch == ' ' || ch == '\t';
}

/* RFC 9110 5.6.4 qdtext (obs-text allowed). */
static int is_qdtext(unsigned char ch)
{
    return ch == '\t' || ch == ' ' || ch == 0x21 || (ch >= 0x23 && ch <= 0x5b) ||
           (ch >= 0x5d && ch <= 0x7e) || ch >= 0x80;
}

/* The LF that ends a line (its CR came before): 400 for any other byte;
 * the next line, in state next, starts its own count against
 * H1_CHUNK_LINE_MAX. */
static int line_end(h1_exch *exch, unsigned char ch, uint8_t next)
{
    if (ch != '\n')
        return 400;
    exch->line_len = 0;
    exch->body_state = next;
    return 0;
}

/* ---- the trailer section ---------------------------------------------------- */

void h1_body_trailers_free(h1_exch *exch)
{
    free(exch->tr_buf);
    free(exch->tr_spans);
    free(exch->tr_fields);
    exch->tr_buf = NULL;
    exch->tr_spans = NULL;
    exch->tr_fields = NULL;
    exch->tr_len = exch->tr_cap = exch->ntr = exch->tr_fields_cap = 0;
}

/* Appends one byte of a trailer field to tr_buf; -1 if out of memory. The
 * section is bounded by max_header_bytes before this runs, so the buffer
 * is too. */
static int tr_put(h1_exch *exch, unsigned char ch)
{
    if (exch->tr_len == exch->tr_cap) {
        uint32_t cap = exch->tr_cap ? exch->tr_cap * 2 : 256;
        char *grown = realloc(exch->tr_buf, cap);
        if (grown == NULL)
            return -1;
        exch->tr_buf = grown;
        exch->tr_cap = cap;
    }
    exch->tr_buf[exch->tr_len++] = (char)ch;
    return 0;
}

/* Opens the next field's span (its name starts at the end of tr_buf). */
static int tr_begin(h1_exch *exch)
{
    if (exch->ntr == exch->tr_fields_cap) {
        uint32_t cap = exch->tr_fields_cap ? exch->tr_fields_cap * 2 : 8;
        h1_span *spans = realloc(exch->tr_spans, cap * sizeof *spans);
        if (spans == NULL)
            return -1;
        exch->tr_spans = spans;
        keel_header *fields = realloc(exch->tr_fields, cap * sizeof *fields);
        if (fields == NULL)
            return -1;
        exch->tr_fields = fields;
        exch->tr_fields_cap = cap;
    }
    exch->tr_spans[exch->ntr] = (h1_span){.name_off = exch->tr_len};
    return 0;
}

/* One byte of the trailer section, in a state >= CS_TRAILER. keep: the
 * fields go to the core (the body is being read, not discarded). */
static int trailer_byte(h1_exch *exch, const h1_config *cfg, unsigned char ch, int keep)
{
    /* The trailer section is a field section like the head (RFC 9112 5,
     * 7.1.2), so it gets the head's limits, 431 beyond (RFC 6585 5), on
     * top of the framing allowance it shares with the chunk lines. */
    if (++exch->tr_bytes > cfg->max_header_bytes)
        return 431;
    h1_span *f = keep && exch->ntr < exch->tr_fields_cap ? &exch->tr_spans[exch->ntr] : NULL;
    switch (exch->body_state) {
    case CS_TRAILER:
        if (ch == '\r') {
            exch->body_state = CS_END_LF;
        } else if (h1_is_tchar(ch)) {
            if (++exch->tr_count > cfg->max_headers)
                return 431;
            if (keep && (tr_begin(exch) != 0 || tr_put(exch, ch) != 0))
                return 500;
            exch->body_state = CS_TR_NAME;
        } else {
            /* A line starting with whitespace continues the previous one:
             * obs-fold, which a server may refuse with 400 (RFC 9112 5.2),
             * as keel does in the head. Anything else is no field line. */
            return 400;
        }
        return 0;
    case CS_TR_NAME:
        /* No whitespace between the name and the colon (RFC 9112 5.1). */
        if (ch == ':') {
            if (f != NULL) {
                f->name_len = exch->tr_len - f->name_off;
                f->value_off = exch->tr_len;
            }
            exch->body_state = CS_TR_VALUE;
        } else if (!h1_is_tchar(ch)) {
            return 400;
        } else if (f != NULL && tr_put(exch, ch) != 0) {
            return 500;
        }
        return 0;
    case CS_TR_VALUE:
        if (ch == '\r') {
            if (f != NULL) {
                /* field-line = field-name ":" OWS field-value OWS (RFC 9112
                 * 5): the trailing OWS goes (the leading never came in). */
                while (exch->tr_len > f->value_off &&
                       is_ws((unsigned char)exch->tr_buf[exch->tr_len - 1]))
                    exch->tr_len--;
                f->value_len = exch->tr_len - f->value_off;
                exch->ntr++;
            }
            exch->body_state = CS_TR_LF;
        } else if (!keel_field_value_char(ch)) {
            return 400; /* NUL, a bare LF, other controls (RFC 9110 5.5) */
        } else if (f != NULL && !(is_ws(ch) && exch->tr_len == f->value_off) &&
                   tr_put(exch, ch) != 0) {
            return 500;
        }
        return 0;
    case CS_TR_LF:
        return line_end(exch, ch, CS_TRAILER);
    case CS_END_LF:
        return ch == '\n' ? 1 : 400;
    default:
        return 400;
    }
}

void h1_body_end(h1_conn *c)
{
    h1_exch *exch = c->exch;
    if (exch->ntr > 0) {
        for (uint32_t i = 0; i < exch->ntr; i++) {
            const h1_span *f = &exch->tr_spans[i];
            exch->tr_fields[i] = (keel_header){{exch->tr_buf + f->name_off, f->name_len},
                                               {exch->tr_buf + f->value_off, f->value_len}};
        }
        /* The core copies them; a failure there (out of memory) has
         * answered 500 and may have ended the exchange. */
        keel_http_request_trailers(exch->req, exch->tr_fields, exch->ntr);
        if (c->exch_state != H1_EXCH_ACTIVE)
            return;
    }
    keel_http_request_body(exch->req, NULL, 0, 1);
}

/* ---- chunk extensions -------------------------------------------------------
 * chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ),
 * chunk-ext-val = token / quoted-string (RFC 9112 7.1.1; RFC 9110 5.6.4
 * for quoted-pair). After the size's digits the rest of the line is this
 * grammar; each byte's class and the state pick the next state. */

/* The classes of byte the grammar tells apart (disjoint), in this order:
 * the qdtext ones first, then the other bytes a quoted-pair may escape. */
enum {
    X_TCHAR,  /* RFC 9110 5.6.2 tchar */
    X_WS,     /* SP, HTAB */
    X_SEMI,   /* ';' */
    X_EQ,     /* '=' */
    X_TEXT,   /* any other qdtext (obs-text too) */
    X_DQUOTE, /* '"' */
    X_BSLASH, /* '\\' */
    X_CR,     /* the end of the line */
    X_BAD,    /* the other controls and DEL: in no part of the line */
    X_COUNT
};

static unsigned ext_class(unsigned char ch)
{
    switch (ch) {
    case '\r':
        return X_CR;
    case ' ':
    case '\t':
        return X_WS;
    case ';':
        return X_SEMI;
    case '=':
        return X_EQ;
    case '"':
        return X_DQUOTE;
    case '\\':
        return X_BSLASH;
    default:
        return h1_is_tchar(ch) ? X_TCHAR : is_qdtext(ch) ? X_TEXT : X_BAD;
    }
}

/* Every qdtext class to state s. */
#define QDTEXT_TO(s) [X_TCHAR] = s, [X_WS] = s, [X_SEMI] = s, [X_EQ] = s, [X_TEXT] = s

/* The next state by state (CS_SIZE once its digits are read, and the
 * CS_EXT_ ones) and class; 0 (CS_SIZE0, never reached from these) refuses
 * the byte with 400. Whitespace after a value leads to ';' or the end;
 * after a name, to '=' too. */
static const uint8_t ext_next[CS_EXT_QEND + 1][X_COUNT] = {
    [CS_SIZE] = {[X_SEMI] = CS_EXT_NAME0, [X_CR] = CS_SIZE_LF, [X_WS] = CS_EXT_BWS},
    [CS_EXT_BWS] = {[X_SEMI] = CS_EXT_NAME0, [X_WS] = CS_EXT_BWS},
    [CS_EXT_NAME0] = {[X_TCHAR] = CS_EXT_NAME, [X_WS] = CS_EXT_NAME0},
    [CS_EXT_NAME] = {[X_TCHAR] = CS_EXT_NAME,
                     [X_EQ] = CS_EXT_VAL0,
                     [X_SEMI] = CS_EXT_NAME0,
                     [X_CR] = CS_SIZE_LF,
                     [X_WS] = CS_EXT_AFTER},
    [CS_EXT_AFTER] = {[X_EQ] = CS_EXT_VAL0, [X_SEMI] = CS_EXT_NAME0, [X_WS] = CS_EXT_AFTER},
    [CS_EXT_VAL0] = {[X_DQUOTE] = CS_EXT_QUOTED, [X_TCHAR] = CS_EXT_TOKEN, [X_WS] = CS_EXT_VAL0},
    [CS_EXT_TOKEN] = {[X_TCHAR] = CS_EXT_TOKEN,
                      [X_SEMI] = CS_EXT_NAME0,
                      [X_CR] = CS_SIZE_LF,
                      [X_WS] = CS_EXT_BWS},
    /* quoted-string = DQUOTE *( qdtext / quoted-pair ) DQUOTE */
    [CS_EXT_QUOTED] =
        {QDTEXT_TO(CS_EXT_QUOTED), [X_DQUOTE] = CS_EXT_QEND, [X_BSLASH] = CS_EXT_QESC},
    /* quoted-pair = "\\" ( HTAB / SP / VCHAR / obs-text ) */
    [CS_EXT_QESC] =
        {QDTEXT_TO(CS_EXT_QUOTED), [X_DQUOTE] = CS_EXT_QUOTED, [X_BSLASH] = CS_EXT_QUOTED},
    [CS_EXT_QEND] = {[X_SEMI] = CS_EXT_NAME0, [X_CR] = CS_SIZE_LF, [X_WS] = CS_EXT_BWS},
};

#undef QDTEXT_TO

/* One byte of a chunk-size line after the size: 0 or 400. */
static int ext_byte(h1_exch *exch, unsigned char ch)
{
    uint8_t next = ext_next[exch->body_state][ext_class(ch)];
    if (next == CS_SIZE0)
        return 400;
    exch->body_state = next;
    return 0;
}

/* One framing byte of the chunked coding. Returns 0 to go on, 1 when the
 * message is complete, or an error status. */
static int chunk_byte(h1_exch *exch, const h1_config *cfg, unsigned char ch, int keep)
{
    uint64_t max_body = cfg->max_body;
    if (++exch->line_len > H1_CHUNK_LINE_MAX)
        return exch->body_state >= CS_TRAILER ? 431 : 400;
    /* Every byte of the chunked body is counted: the data against
     * max_body, as with Content-Length, and data plus framing (size lines,
     * extensions, CRLFs, trailer fields) against max_chunked, which leaves
     * room for ordinary framing only (read_config). Were framing free,
     * 10,000 one-byte chunks with 4 KB extensions (41 MB) would pass a
     * 1 MiB max_body (issue 13). */
    if (exch->body_seen + ++exch->overhead > cfg->max_chunked)
        return 413;
    switch (exch->body_state) {
    case CS_SIZE0:
    case CS_SIZE: {
        int v = keel_hex_value(ch);
        if (v >= 0) {
            if (exch->body_left > (UINT64_MAX >> 4))
                return 400; /* overflow: not a size */
            exch->body_left = exch->body_left * 16 + (uint64_t)v;
            exch->body_state = CS_SIZE;
            return 0;
        }
        if (exch->body_state == CS_SIZE0)
            return 400; /* no digit: "-3", "0x3", " 3" */
        /* A chunk that would take the body over the limit is refused
         * before its data is read. */
        if (exch->body_left > max_body || exch->body_seen + exch->body_left > max_body)
            return 413;
        return ext_byte(exch, ch);
    }
    case CS_EXT_BWS:
    case CS_EXT_NAME0:
    case CS_EXT_NAME:
    case CS_EXT_AFTER:
    case CS_EXT_VAL0:
    case CS_EXT_TOKEN:
    case CS_EXT_QUOTED:
    case CS_EXT_QESC:
    case CS_EXT_QEND:
        return ext_byte(exch, ch);
    case CS_SIZE_LF:
        return line_end(exch, ch, exch->body_left == 0 ? CS_TRAILER : CS_DATA);
    case CS_DATA_CR:
        /* Chunk data is followed by CRLF; anything else means the chunk
         * is longer than its size said. */
        if (ch != '\r')
            return 400;
        exch->body_state = CS_DATA_LF;
        return 0;
    case CS_DATA_LF:
        return line_end(exch, ch, CS_SIZE0);
    /* trailer-section = *( field-line CRLF ), then CRLF (RFC 9112 7.1.2):
     * checked like header fields and kept for the core (trailer_byte).
     * They count as framing (above). */
    case CS_TRAILER:
    case CS_TR_NAME:
    case CS_TR_VALUE:
    case CS_TR_LF:
    case CS_END_LF:
        return trailer_byte(exch, cfg, ch, keep);
    default:
        return 400;
    }
}

int h1_parse_body(h1_conn *c)
{
    const char *p = c->data + c->pos, *end = c->data + c->len;
    while (p < end) {
        if (c->exch->body_state == CS_CONTENT || c->exch->body_state == CS_DATA) {
            size_t n = (size_t)(end - p);
            if (n > c->exch->body_left)
                n = (size_t)c->exch->body_left;
            c->exch->body_left -= n;
            c->exch->body_seen += n;
            c->pos = (size_t)(p + n - c->data);
            deliver(c, p, n);
            p += n;
            if (c->closing)
                return H1_FAILED;
            if (c->exch->body_left == 0) {
                if (c->exch->body_state == CS_CONTENT)
                    return H1_READY;
                c->exch->body_state = CS_DATA_CR;
            }
            if (h1_body_held(c))
                return H1_NEED_MORE; /* paused inside the call: the rest waits in the buffer */
            continue;
        }
        int r = chunk_byte(c->exch, c->w->cfg, (unsigned char)*p++, c->read_state == H1_READ_BODY);
        c->pos = (size_t)(p - c->data);
        if (r == 1)
            return H1_READY;
        if (r != 0) {
            /* The framing is lost: nothing after this can be trusted. */
            h1_fail(c, r);
            return H1_FAILED;
        }
    }
    /* An empty Content-Length body never gets here (no body state). */
    return H1_NEED_MORE;
}
