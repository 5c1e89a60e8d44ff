#!/usr/bin/env python3
"""Writes include/keel/header_tokens.h: the well-known HTTP field names as
small integers (h2o's token table is the precedent), each with the flags the
core acts on and its index in the HPACK static table, and a lookup that
classifies a name in one pass.

    tools/gen-header-tokens.py            rewrite the header
    tools/gen-header-tokens.py --check    exit 1 if the header differs
                                          from what this script writes
                                          (ctest header_tokens.generated)

NAMES below is the only place a name is added: APPEND ONLY. A name's id is
its position in the list, and ids are ABI-stable once a release has
shipped them (modules compile them in); never reorder, remove or rename.

The lookup switches on the length, then on one byte chosen per length
(the one that tells most names of that length apart), then compares the
candidates' bytes folded to lower case: most names that are not listed
fail at the length or at that byte, and appending a name needs no search
for a collision-free hash.
"""
import os
import sys

# Flags (the values are ABI too: only ever add new bits).
PSEUDO = 1  # an HTTP/2 pseudo-field (RFC 9113 8.3)
CONNECTION = 2  # connection-specific (RFC 9110 7.6.1; RFC 9113 8.2.2: malformed in h2;
#                 "te" is allowed there with the value "trailers" only)
HOP_BY_HOP = 4  # a proxy never forwards it (RFC 9110 7.6.1, 7.8, 6.6.2; RFC 7540 3.2.1)
# Never taken from a trailer section (RFC 9110 6.5.1; core/http/body.c drops
# them): framing (content-length, transfer-encoding, trailer: RFC 9112 6,
# RFC 9110 6.6.2), routing (host, the pseudo-fields), the connection (7.6.1,
# 7.8, 10.1.4), authentication (authorization, proxy-authorization, cookie:
# 11.6, 11.7, RFC 6265), request modifiers (expect, max-forwards, range, the
# preconditions, cache-control, pragma: 10.1, 7.6.2, 14.2, 13.1, RFC 9111
# 5.2, 5.4) and the content's format (content-type, -encoding, -range).
NOT_TRAILER = 8

# The HPACK static table's names (RFC 7541 Appendix A), each once, in the
# table's order; then the names keel's core and modules act on.
# (name, flags). APPEND ONLY.
NAMES = [
    (":authority", PSEUDO | NOT_TRAILER),
    (":method", PSEUDO | NOT_TRAILER),
    (":path", PSEUDO | NOT_TRAILER),
    (":scheme", PSEUDO | NOT_TRAILER),
    (":status", PSEUDO | NOT_TRAILER),
    ("accept-charset", 0),
    ("accept-encoding", 0),
    ("accept-language", 0),
    ("accept-ranges", 0),
    ("accept", 0),
    ("access-control-allow-origin", 0),
    ("age", 0),
    ("allow", 0),
    ("authorization", NOT_TRAILER),
    ("cache-control", NOT_TRAILER),
    ("content-disposition", 0),
    ("content-encoding", NOT_TRAILER),
    ("content-language", 0),
    ("content-length", NOT_TRAILER),
    ("content-location", 0),
    ("content-range", NOT_TRAILER),
    ("content-type", NOT_TRAILER),
    ("cookie", NOT_TRAILER),
    ("date", 0),
    ("etag", 0),
    ("expect", NOT_TRAILER),
    ("expires", 0),
    ("from", 0),
    ("host", NOT_TRAILER),
    ("if-match", NOT_TRAILER),
    ("if-modified-since", NOT_TRAILER),
    ("if-none-match", NOT_TRAILER),
    ("if-range", NOT_TRAILER),
    ("if-unmodified-since", NOT_TRAILER),
    ("last-modified", 0),
    ("link", 0),
    ("location", 0),
    ("max-forwards", NOT_TRAILER),
    ("proxy-authenticate", 0),
    ("proxy-authorization", NOT_TRAILER),
    ("range", NOT_TRAILER),
    ("referer", 0),
    ("refresh", 0),
    ("retry-after", 0),
    ("server", 0),
    ("set-cookie", 0),
    ("strict-transport-security", 0),
    ("transfer-encoding", CONNECTION | HOP_BY_HOP | NOT_TRAILER),
    ("user-agent", 0),
    ("vary", 0),
    ("via", 0),
    ("www-authenticate", 0),
    # the connection's own (RFC 9110 7.6.1, 7.8, 10.1.4, 6.6.2)
    ("connection", CONNECTION | HOP_BY_HOP | NOT_TRAILER),
    ("keep-alive", CONNECTION | HOP_BY_HOP | NOT_TRAILER),
    ("proxy-connection", CONNECTION | HOP_BY_HOP | NOT_TRAILER),
    ("te", CONNECTION | HOP_BY_HOP | NOT_TRAILER),
    ("trailer", HOP_BY_HOP | NOT_TRAILER),
    ("upgrade", CONNECTION | HOP_BY_HOP | NOT_TRAILER),
    ("http2-settings", HOP_BY_HOP),
    # WebSocket (RFC 6455 11.3, RFC 8441)
    ("origin", 0),
    ("sec-websocket-key", 0),
    ("sec-websocket-version", 0),
    ("sec-websocket-protocol", 0),
    ("sec-websocket-extensions", 0),
    ("sec-websocket-accept", 0),
    # proxies (RFC 7239; the de-facto X-Forwarded-*)
    ("forwarded", 0),
    ("x-forwarded-for", 0),
    ("x-forwarded-host", 0),
    ("x-forwarded-proto", 0),
    # CORS (Fetch standard)
    ("access-control-request-method", 0),
    ("access-control-request-headers", 0),
    ("access-control-allow-methods", 0),
    ("access-control-allow-headers", 0),
    ("access-control-allow-credentials", 0),
    ("access-control-expose-headers", 0),
    ("access-control-max-age", 0),
    # caching and content (RFC 9111 5.4; RFC 9218; security headers)
    ("pragma", NOT_TRAILER),
    ("priority", 0),
    ("content-security-policy", 0),
    ("x-content-type-options", 0),
    ("x-frame-options", 0),
]

# RFC 7541 Appendix A, names by index (1..61).
HPACK = [
    ":authority", ":method", ":method", ":path", ":path", ":scheme", ":scheme",
    ":status", ":status", ":status", ":status", ":status", ":status", ":status",
    "accept-charset", "accept-encoding", "accept-language", "accept-ranges",
    "accept", "access-control-allow-origin", "age", "allow", "authorization",
    "cache-control", "content-disposition", "content-encoding",
    "content-language", "content-length", "content-location", "content-range",
    "content-type", "cookie", "date", "etag", "expect", "expires", "from",
    "host", "if-match", "if-modified-since", "if-none-match", "if-range",
    "if-unmodified-since", "last-modified", "link", "location", "max-forwards",
    "proxy-authenticate", "proxy-authorization", "range", "referer", "refresh",
    "retry-after", "server", "set-cookie", "strict-transport-security",
    "transfer-encoding", "user-agent", "vary", "via", "www-authenticate",
]

FLAG_NAMES = [
    ("PSEUDO", PSEUDO, "an HTTP/2 pseudo-field (RFC 9113 8.3)"),
    ("CONNECTION_SPECIFIC", CONNECTION,
     "connection-specific (RFC 9110 7.6.1): malformed in an HTTP/2\n"
     "     * request (RFC 9113 8.2.2), except TE with the value \"trailers\""),
    ("HOP_BY_HOP", HOP_BY_HOP,
     "the connection's, never forwarded by a proxy (RFC 9110 7.6.1,\n"
     "     * 6.6.2; HTTP2-Settings: RFC 7540 3.2.1); with the fields Connection\n"
     "     * names"),
    ("NOT_TRAILER", NOT_TRAILER,
     "never taken from a trailer section (RFC 9110 6.5.1): framing,\n"
     "     * routing, the connection, authentication, request modifiers, the\n"
     "     * content's format"),
]


def ident(name):
    if name.startswith(":"):
        return "KEEL_HDR_PSEUDO_" + name[1:].upper().replace("-", "_")
    return "KEEL_HDR_" + name.upper().replace("-", "_")


def c_char(ch):
    return "'\\''" if ch == "'" else "'%s'" % ch


def lookup_body(out):
    """The switch: by length, then by the byte that best splits the names of
    that length (ties: the earliest such byte)."""
    by_len = {}
    for i, (name, _) in enumerate(NAMES):
        by_len.setdefault(len(name), []).append((name, i + 1))
    out.append("    switch (len) {")
    for length in sorted(by_len):
        names = by_len[length]
        out.append("    case %d:" % length)
        if len(names) == 1:
            name, tid = names[0]
            out.append("        if (keel__hdr_is(n, \"%s\", %d))" % (name, length))
            out.append("            return %s;" % ident(name))
            out.append("        return 0;")
            continue
        best = max(range(length), key=lambda k: (len({nm[k] for nm, _ in names}), -k))
        out.append("        switch ((unsigned char)n[%d] | 0x20) {" % best)
        groups = {}
        for name, tid in names:
            groups.setdefault(name[best], []).append(name)
        for ch in sorted(groups):
            out.append("        case %s:" % c_char(ch))
            for name in groups[ch]:
                out.append("            if (keel__hdr_is(n, \"%s\", %d))" % (name, length))
                out.append("                return %s;" % ident(name))
            out.append("            return 0;")
        out.append("        default:")
        out.append("            return 0;")
        out.append("        }")
    out.append("    default:")
    out.append("        return 0;")
    out.append("    }")


def render():
    names = [n for n, _ in NAMES]
    assert len(set(names)) == len(names), "a name listed twice"
    for n in names:
        # keel__hdr_is relies on it: the bytes with 0x40 set are the letters.
        assert all(c in "abcdefghijklmnopqrstuvwxyz0123456789-:" for c in n), n
        assert 2 <= len(n) < 256, n
    hpack_first = {}
    for i, n in enumerate(HPACK):
        hpack_first.setdefault(n, i + 1)
    for n in hpack_first:
        assert n in names, "HPACK name missing: " + n
    assert len(names) < 65536

    o = []
    o.append("""/* keel/header_tokens.h — the well-known HTTP field names as small integers.
 *
 * GENERATED by tools/gen-header-tokens.py: do not edit; change the script's
 * list and run it (ctest header_tokens.generated checks the two agree).
 * Included by keel/util.h, and stands alone; header-only, like util.h (no
 * slot in the host's table, any host version).
 *
 * keel_header_token(name, len) says which well-known field a name is (any
 * ASCII case), or 0 for any other name: once a name is classified, the
 * questions asked of it are integer compares and flag tests, not byte
 * compares. The core classifies each request field once, when a protocol
 * hands the head over (HTTP/1.1 while parsing, HTTP/2 from the HPACK
 * static table's index); keel_request_header uses the token when the name
 * it is given is a known one.
 *
 * ABI: the ids only grow. An id, once shipped in a release, names the same
 * field forever (modules compile the numbers in); new names get new ids at
 * the end, and KEEL_HDR_COUNT_ grows with them (a bound for this header's
 * table, not a constant to store). The flag bits only grow too.
 */
#ifndef KEEL_HEADER_TOKENS_H
#define KEEL_HEADER_TOKENS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The token ids: 0 is "not a well-known name". */
enum keel_header_token_id {
    KEEL_HDR_UNKNOWN = 0,""")
    for i, n in enumerate(names):
        o.append("    %s = %d," % (ident(n), i + 1))
    o.append("    KEEL_HDR_COUNT_ = %d /* ids are 1 .. KEEL_HDR_COUNT_ - 1 */" % (len(names) + 1))
    o.append("};")
    o.append("")
    o.append("/* What the core acts on (keel_header_token_flags). */")
    o.append("enum {")
    for fname, bit, doc in FLAG_NAMES:
        o.append("    /* %s */" % doc)
        o.append("    KEEL_HDR_FLAG_%s = %d," % (fname, bit))
    o.append("};")
    o.append("""
/* One token's facts. */
typedef struct keel_header_token_info {
    const char *name;          /* lower case, NUL-terminated */
    unsigned char len;         /* strlen(name) */
    unsigned char hpack_index; /* RFC 7541 Appendix A: the first static entry
                                  with this name, 0 if there is none */
    unsigned short flags;      /* KEEL_HDR_FLAG_* */
} keel_header_token_info;

/* The facts of token id, or NULL for 0 and ids this header does not know
 * (a newer host's). */
static inline const keel_header_token_info *keel_header_token_info_of(unsigned id)
{
    static const keel_header_token_info table[KEEL_HDR_COUNT_] = {
        {"", 0, 0, 0},""")
    for n, flags in NAMES:
        fl = " | ".join("KEEL_HDR_FLAG_" + f for f, bit, _ in FLAG_NAMES if flags & bit) or "0"
        row = "        {\"%s\", %d, %d, %s}," % (n, len(n), hpack_first.get(n, 0), fl)
        if len(row) > 100:  # as clang-format breaks it
            row = "        {\"%s\", %d, %d,\n         %s}," % (n, len(n), hpack_first.get(n, 0), fl)
        o.append(row)
    o.append("""    };
    return id > 0 && id < KEEL_HDR_COUNT_ ? &table[id] : NULL;
}

/* The flags of token id (0 for 0 and unknown ids). */
static inline unsigned keel_header_token_flags(unsigned id)
{
    const keel_header_token_info *t = keel_header_token_info_of(id);
    return t != NULL ? t->flags : 0;
}

/* The token of the name at HPACK static table index i (RFC 7541 Appendix
 * A, 1..61), or 0: an HTTP/2 decoder that found a name by index knows its
 * token without looking at a byte of it. */
static inline unsigned keel_header_token_of_hpack(unsigned i)
{
    static const unsigned char by_index[62] = {""")
    row = [("%d," % v).ljust(3) for v in [0] + [names.index(n) + 1 for n in HPACK]]
    for k in range(0, len(row), 21):  # as clang-format lays it out
        o.append(("        " + " ".join(row[k:k + 21])).rstrip())
    o.append("""    };
    return i < 62 ? by_index[i] : 0;
}

/* Whether the bytes at n are lc's, letters in any case, a word at a time:
 * lc is a listed name (lower-case letters, digits, '-' and ':'), whose
 * letters are its bytes with 0x40 set, so the case bit (0x20) is or-ed
 * into n's bytes under lc's letters and nowhere else: "Content-Length"
 * matches, "content\\rlength" ('\\r' | 0x20 is '-') does not. lc and the
 * length are constants where this is inlined: the compiler folds lc's
 * words and the masks. */
static inline uint64_t keel__hdr_u64(const char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint32_t keel__hdr_u32(const char *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

static inline uint16_t keel__hdr_u16(const char *p)
{
    uint16_t w;
    memcpy(&w, p, 2);
    return w;
}

static inline int keel__hdr_eq8(const char *n, const char *lc)
{
    uint64_t l = keel__hdr_u64(lc);
    return (keel__hdr_u64(n) | ((l & 0x4040404040404040u) >> 1)) == l;
}

static inline int keel__hdr_eq4(const char *n, const char *lc)
{
    uint32_t l = keel__hdr_u32(lc);
    return (keel__hdr_u32(n) | ((l & 0x40404040u) >> 1)) == l;
}

static inline int keel__hdr_eq2(const char *n, const char *lc)
{
    uint16_t l = keel__hdr_u16(lc);
    return (uint16_t)(keel__hdr_u16(n) | ((l & 0x4040u) >> 1)) == l;
}

/* n[0..len) is lc (len >= 2: every listed name is), the last word
 * overlapping the one before. */
static inline int keel__hdr_is(const char *n, const char *lc, size_t len)
{
    if (len >= 8) {
        for (size_t i = 0; i + 8 < len; i += 8)
            if (!keel__hdr_eq8(n + i, lc + i))
                return 0;
        return keel__hdr_eq8(n + len - 8, lc + len - 8);
    }
    if (len >= 4)
        return keel__hdr_eq4(n, lc) && keel__hdr_eq4(n + len - 4, lc + len - 4);
    return keel__hdr_eq2(n, lc) && keel__hdr_eq2(n + len - 2, lc + len - 2);
}

/* The token of the field name n[0..len) (ASCII case ignored), or 0 if it
 * is not a well-known name. Any bytes: a name that is not a token is
 * simply not well-known. */
static inline unsigned keel_header_token(const char *n, size_t len)
{""")
    lookup_body(o)
    o.append("""}

#ifdef __cplusplus
}
#endif

#endif
""")
    return "\n".join(o)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "include", "keel", "header_tokens.h")
    text = render()
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        with open(path, encoding="utf-8", newline="") as f:
            if f.read() != text:
                sys.stderr.write("%s differs from what tools/gen-header-tokens.py writes: "
                                 "run the script\n" % path)
                return 1
        print("header_tokens.h matches tools/gen-header-tokens.py")
        return 0
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
