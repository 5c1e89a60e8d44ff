/* What the rewrite module's files share: targets with variables
 * (template.c), the rules of one scope compiled with PCRE2 (rules.c), and
 * the module (rewrite.c). template.c and rules.c make no keel call. */
#ifndef KEEL_REWRITE_H
#define KEEL_REWRITE_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The variables a target may name (docs/web.md, "Redirects and rewrites"). */
enum rw_var {
    RW_VAR_SCHEME,      /* http or https */
    RW_VAR_HOST,        /* Host / :authority without port, lower-case; else the local address */
    RW_VAR_HTTPS_HOST,  /* $host, with ":https_port" unless that is 443 */
    RW_VAR_REQUEST_URI, /* the target as received: path and query, encoded */
    RW_VAR_URI,         /* the decoded path after the rewrites so far */
    RW_VAR_ARGS,        /* the query (raw), also $query */
    RW_VAR_IS_ARGS,     /* "?" if there is a query, else "" */
    RW_VAR_SERVER_PORT, /* the port the client reached */
    RW_VAR_REMOTE_ADDR, /* the client's address (PROXY protocol's when on) */
    RW_VAR_COUNT
};

/* What a variable holds and whether it is decoded text (which a URI must
 * escape) or already target bytes. */
typedef struct rw_value {
    const char *ptr;
    size_t len;
} rw_value;

/* Which pieces rw_template_expand writes. */
enum { RW_PART_PATH = 0, RW_PART_QUERY = 1, RW_PART_SEPARATOR = 2, RW_PART_ALL = 3 };

/* One piece of a target: literal text, a variable, or capture $0..$9. */
typedef struct rw_piece {
    enum { RW_LITERAL, RW_VARIABLE, RW_CAPTURE } kind;
    int which; /* the rw_var, or the capture's number */
    const char *text;
    size_t len;
    int in_query; /* RW_PART_PATH, _QUERY (after the first literal '?'), or _SEPARATOR (it) */
} rw_piece;

typedef struct rw_template {
    rw_piece *pieces;
    size_t npieces;
    unsigned vars;   /* bit (1 << rw_var) for each variable it names */
    int max_capture; /* the highest $N it names, -1 if none */
    int has_query;   /* it holds a literal '?' */
    int ends_query;  /* it ends with that '?': the old query is dropped */
} rw_template;

/* Parses text into t (pieces point into text, which must outlive t).
 * 0, or -1 with the reason in why. */
int rw_template_parse(rw_template *t, const char *text, char *why, size_t whylen);
void rw_template_free(rw_template *t);

/* A growable output: an inline buffer, the heap past it. */
typedef struct rw_buf {
    char *ptr;
    size_t len, cap;
    int heap;
    int failed; /* an allocation failed: the text is incomplete */
    char inline_bytes[1024];
} rw_buf;

void rw_buf_init(rw_buf *b);
void rw_buf_free(rw_buf *b);
void rw_buf_add(rw_buf *b, const char *p, size_t n);

/* The last regular expression's match: the subject and the offsets. */
typedef struct rw_captures {
    const char *subject;
    int n; /* pairs set (0: no match yet) */
    size_t ovector[20];
} rw_captures;

/* Appends t expanded with vals (indexed by rw_var; only those t names are
 * read) and caps: all of it (RW_PART_ALL), or only the part before its
 * first literal '?' (RW_PART_PATH) or after it (RW_PART_QUERY). With
 * uri_escape, decoded values ($uri, captures) are percent-encoded
 * everywhere (a Location); otherwise only in the query part (an internal
 * rewrite, whose path stays decoded). */
void rw_template_expand(const rw_template *t, const rw_value *vals, const rw_captures *caps,
                        int uri_escape, int part, rw_buf *out);

/* ---- rules ---- */

enum rw_flag { RW_FLAG_NONE, RW_FLAG_LAST, RW_FLAG_BREAK, RW_FLAG_REDIRECT, RW_FLAG_PERMANENT };

typedef struct rw_rule {
    const char *line; /* the config value, for messages */
    pcre2_code *re;
    rw_template replacement;
    char *text; /* the replacement's text, which its pieces point into */
    enum rw_flag flag;
    int external; /* a redirect: the flag says so, or it starts with a scheme */
    int jit;      /* JIT-compiled: matched with pcre2_jit_match */
    /* What every match starts with ("^/old/(.*)" gives "/old/"): a path
     * that does not is no match without a call to PCRE2. */
    const char *prefix;
    size_t prefix_len;
    /* The expression is "^PREFIX(.*)$" and nothing else (the usual
     * "^/old/(.*)$"): rw_rule_match gives PCRE2's answer without it. */
    int rest_capture;
    /* ...and the replacement is "PREFIX$1", no query, no variable: a match
     * that reaches the path's end (no final LF left out of $1) gives the
     * path back as it is (rw_rule_keeps_path). */
    int identity;
} rw_rule;

/* The `return` of a scope. */
typedef struct rw_return {
    int status;
    int redirect;     /* 301, 302, 303, 307, 308: the target is a Location */
    int has_target;   /* a target or a text was written */
    rw_template what; /* the Location, or the body's text */
} rw_return;

/* One scope's program: its rules in order and its return. */
typedef struct rw_program {
    const void *conf; /* the scope's struct it was made for */
    rw_rule *rules;
    size_t nrules;
    const rw_return *ret; /* NULL: none */
    unsigned vars;        /* every variable its templates name */
} rw_program;

/* Parses "REGEX REPLACEMENT [last|break|redirect|permanent]" (line must
 * outlive the rule) and compiles the expression (JIT where available).
 * 0, or -1 with the reason in why (PCRE2's message and offset for a bad
 * expression). */
int rw_rule_parse(rw_rule *r, const char *line, char *why, size_t whylen);

/* rw_rule_match (below) matches path against the rule: > 0 with caps set
 * (at most 10 pairs), PCRE2_ERROR_NOMATCH, or another PCRE2 error (the
 * match limit). md holds 10 pairs. rw_rule_match_pcre2 is its part for
 * an expression that is not "^PREFIX(.*)$", once the prefix matched. */
int rw_rule_match_pcre2(const rw_rule *r, const char *path, size_t len, pcre2_match_data *md,
                        pcre2_match_context *mctx, rw_captures *caps);
/* Inline: the prefix's check and the "^PREFIX(.*)$" answer cost less than
 * the call to a function that saves the registers PCRE2's path needs. */
static inline int rw_rule_match(const rw_rule *r, const char *path, size_t len,
                                pcre2_match_data *md, pcre2_match_context *mctx, rw_captures *caps)
{
    /* A path that does not start with the prefix is no match without a
     * call to PCRE2; a prefix of one byte ("^/(.*)$") needs no memcmp. */
    if (r->prefix_len > 0 &&
        (len < r->prefix_len || path[0] != r->prefix[0] ||
         (r->prefix_len > 1 && memcmp(path + 1, r->prefix + 1, r->prefix_len - 1) != 0)))
        return PCRE2_ERROR_NOMATCH;
    if (!r->rest_capture)
        return rw_rule_match_pcre2(r, path, len, md, mctx, caps);
    /* '.' stops at LF; '$' holds at the end or before a final LF (PCRE2's
     * defaults, pcre2pattern "Circumflex and dollar"). */
    const char *rest = path + r->prefix_len;
    size_t n = len - r->prefix_len;
    const char *lf = n > 0 ? memchr(rest, '\n', n) : NULL;
    if (lf != NULL) {
        if ((size_t)(lf - rest) != n - 1)
            return PCRE2_ERROR_NOMATCH;
        n--;
    }
    caps->subject = path;
    caps->n = 2;
    caps->ovector[0] = 0;
    caps->ovector[1] = r->prefix_len + n;
    caps->ovector[2] = r->prefix_len;
    caps->ovector[3] = r->prefix_len + n;
    return 2;
}
/* After a match of path[0..len) that set caps: 1 if the rule's
 * replacement expands to the path itself, so that there is nothing to
 * expand or set (the expansion is not made to find out). */
static inline int rw_rule_keeps_path(const rw_rule *r, const rw_captures *caps, size_t len)
{
    return r->identity && caps->n == 2 && caps->ovector[1] == len;
}
void rw_rule_free(rw_rule *r);

/* Parses "STATUS [TARGET or TEXT]" or "URL" (a 302). 0 or -1 with why. */
int rw_return_parse(rw_return *r, const char *line, char *why, size_t whylen);
void rw_return_free(rw_return *r);

#endif
