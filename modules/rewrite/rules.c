/* A scope's `rewrite` and `return` lines, parsed and compiled once at load
 * (nginx's ngx_http_rewrite_module directives, with its meanings). */
#include "rewrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* The next word of *p: its start and length; *p moves past it. */
static size_t next_word(const char **p, const char **word)
{
    const char *s = *p;
    while (is_space(*s))
        s++;
    *word = s;
    while (*s != '\0' && !is_space(*s))
        s++;
    *p = s;
    return (size_t)(s - *word);
}

static int word_is(const char *w, size_t n, const char *what)
{
    return strlen(what) == n && memcmp(w, what, n) == 0;
}

/* A replacement that names a scheme sends the client there (nginx: one
 * that starts with http://, https:// or $scheme is a redirect). */
static int starts_with_scheme(const char *s)
{
    return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0 ||
           strncmp(s, "$scheme", 7) == 0 || strncmp(s, "${scheme}", 9) == 0;
}

/* The literal text an anchored expression must start with: the bytes
 * after '^' up to the first that could mean anything else, less the last
 * one if a quantifier follows it. None for an expression with an
 * alternative anywhere ("^/a|/b" does not need "/a"), or not anchored by
 * a leading '^' (an option such as (?i) comes first and stops it too). */
static size_t literal_prefix(const char *re, size_t n)
{
    if (n == 0 || re[0] != '^' || memchr(re, '|', n) != NULL)
        return 0;
    size_t i = 1;
    while (i < n && ((re[i] >= 'a' && re[i] <= 'z') || (re[i] >= 'A' && re[i] <= 'Z') ||
                     (re[i] >= '0' && re[i] <= '9') || re[i] == '/' || re[i] == '_' ||
                     re[i] == '-' || re[i] == '~' || re[i] == ',' || re[i] == '=' || re[i] == '@' ||
                     re[i] == '%' || re[i] == '&' || re[i] == ':'))
        i++;
    size_t len = i - 1;
    if (i < n && len > 0 && strchr("*+?{", re[i]) != NULL)
        len--; /* "^/ab*": the b is optional */
    return len;
}

/* The template is "PREFIX$1" (PREFIX may be empty), with no query: after
 * "^PREFIX(.*)$" it writes back the bytes the expression matched. */
static int gives_back_prefix(const rw_template *t, const char *prefix, size_t prefix_len)
{
    if (t->has_query || t->vars != 0)
        return 0;
    size_t at = 0;
    if (prefix_len > 0) {
        if (t->npieces == 0 || t->pieces[0].kind != RW_LITERAL || t->pieces[0].len != prefix_len ||
            memcmp(t->pieces[0].text, prefix, prefix_len) != 0)
            return 0;
        at = 1;
    }
    return t->npieces == at + 1 && t->pieces[at].kind == RW_CAPTURE && t->pieces[at].which == 1;
}

int rw_rule_parse(rw_rule *r, const char *line, char *why, size_t whylen)
{
    memset(r, 0, sizeof *r);
    r->line = line;
    const char *p = line, *regex, *repl, *flag, *extra;
    size_t rn = next_word(&p, &regex), pn = next_word(&p, &repl), fn = next_word(&p, &flag);
    size_t xn = next_word(&p, &extra);
    if (rn == 0 || pn == 0 || xn != 0) {
        snprintf(why, whylen,
                 "expected REGEX REPLACEMENT [last|break|redirect|permanent] (a space in "
                 "the expression is written \\s or \\x20)");
        return -1;
    }
    if (fn == 0)
        r->flag = RW_FLAG_NONE;
    else if (word_is(flag, fn, "last"))
        r->flag = RW_FLAG_LAST;
    else if (word_is(flag, fn, "break"))
        r->flag = RW_FLAG_BREAK;
    else if (word_is(flag, fn, "redirect"))
        r->flag = RW_FLAG_REDIRECT;
    else if (word_is(flag, fn, "permanent"))
        r->flag = RW_FLAG_PERMANENT;
    else {
        snprintf(why, whylen, "unknown flag '%.*s' (last, break, redirect or permanent)", (int)fn,
                 flag);
        return -1;
    }
    /* The template keeps pointers into its text: a copy of the word, kept
     * with the rule. */
    char *text = malloc(pn + 1);
    if (text == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    memcpy(text, repl, pn);
    text[pn] = '\0';
    r->text = text;
    int err = 0;
    PCRE2_SIZE offset = 0;
    r->re = pcre2_compile((PCRE2_SPTR)regex, rn, 0, &err, &offset, NULL);
    if (r->re == NULL) {
        char msg[256];
        pcre2_get_error_message(err, (PCRE2_UCHAR *)msg, sizeof msg);
        snprintf(why, whylen, "bad regular expression '%.*s': %s at offset %zu", (int)rn, regex,
                 msg, (size_t)offset);
        rw_rule_free(r);
        return -1;
    }
    /* JIT where PCRE2 has it (PCRE2_ERROR_JIT_BADOPTION otherwise): the
     * interpreter stays correct, only slower. */
    size_t jit_size = 0;
    r->jit = pcre2_jit_compile(r->re, PCRE2_JIT_COMPLETE) == 0 &&
             pcre2_pattern_info(r->re, PCRE2_INFO_JITSIZE, &jit_size) == 0 && jit_size > 0;
    if (rw_template_parse(&r->replacement, text, why, whylen) != 0) {
        rw_rule_free(r);
        return -1;
    }
    uint32_t groups = 0;
    pcre2_pattern_info(r->re, PCRE2_INFO_CAPTURECOUNT, &groups);
    if (r->replacement.max_capture > (int)groups) {
        snprintf(why, whylen, "'%s' names $%d, and '%.*s' has %u group%s", text,
                 r->replacement.max_capture, (int)rn, regex, (unsigned)groups,
                 groups == 1 ? "" : "s");
        rw_rule_free(r);
        return -1;
    }
    r->prefix = regex + 1;
    r->prefix_len = literal_prefix(regex, rn);
    /* "(.*)$" right after the literal prefix, under the default newline
     * (LF) the expression was compiled with: the rest of the path up to
     * a final LF, or no match if an LF comes before that. */
    uint32_t newline = 0;
    r->rest_capture =
        rn == 1 + r->prefix_len + 5 && memcmp(regex + 1 + r->prefix_len, "(.*)$", 5) == 0 &&
        pcre2_pattern_info(r->re, PCRE2_INFO_NEWLINE, &newline) == 0 && newline == PCRE2_NEWLINE_LF;
    r->external =
        r->flag == RW_FLAG_REDIRECT || r->flag == RW_FLAG_PERMANENT || starts_with_scheme(text);
    r->identity = r->rest_capture && !r->external &&
                  gives_back_prefix(&r->replacement, r->prefix, r->prefix_len);
    return 0;
}

int rw_rule_match_pcre2(const rw_rule *r, const char *path, size_t len, pcre2_match_data *md,
                        pcre2_match_context *mctx, rw_captures *caps)
{
    /* pcre2_jit_match skips pcre2_match's checks of the pattern and
     * options (a third of a short match's cost); it honours the match
     * limit the same way. */
    int rc = r->jit ? pcre2_jit_match(r->re, (PCRE2_SPTR)path, len, 0, 0, md, mctx)
                    : pcre2_match(r->re, (PCRE2_SPTR)path, len, 0, 0, md, mctx);
    if (rc < 0)
        return rc;
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    uint32_t pairs = pcre2_get_ovector_count(md);
    caps->subject = path;
    caps->n = rc == 0 || (uint32_t)rc > pairs ? (int)pairs : rc;
    if (caps->n > 10)
        caps->n = 10;
    memcpy(caps->ovector, ov, (size_t)caps->n * 2 * sizeof *ov);
    return rc == 0 ? caps->n : rc;
}

void rw_rule_free(rw_rule *r)
{
    rw_template_free(&r->replacement);
    free(r->text);
    r->text = NULL;
    pcre2_code_free(r->re);
    r->re = NULL;
}

int rw_return_parse(rw_return *r, const char *line, char *why, size_t whylen)
{
    memset(r, 0, sizeof *r);
    const char *p = line, *word;
    size_t n = next_word(&p, &word);
    const char *rest = p;
    while (is_space(*rest))
        rest++;
    if (n > 0 && (strncmp(word, "http://", 7) == 0 || strncmp(word, "https://", 8) == 0 ||
                  strncmp(word, "$scheme", 7) == 0)) {
        /* nginx: `return URL` is a 302 to it. */
        r->status = 302;
        rest = word;
    } else {
        int status = 0;
        for (size_t i = 0; i < n && i < 4; i++)
            status = word[i] >= '0' && word[i] <= '9' ? status * 10 + (word[i] - '0') : -1;
        if (n != 3 || status < 200 || status > 599) {
            snprintf(why, whylen,
                     "expected STATUS [TARGET] with a status from 200 to 599, or a URL (a 302)");
            return -1;
        }
        r->status = status;
    }
    r->redirect = r->status == 301 || r->status == 302 || r->status == 303 || r->status == 307 ||
                  r->status == 308;
    r->has_target = *rest != '\0';
    if (r->redirect && !r->has_target) {
        snprintf(why, whylen, "a %d needs a target (the Location)", r->status);
        return -1;
    }
    if (r->has_target && (r->status == 204 || r->status == 304)) {
        snprintf(why, whylen, "a %d has no body", r->status);
        return -1;
    }
    if (r->has_target && rw_template_parse(&r->what, rest, why, whylen) != 0)
        return -1;
    return 0;
}

void rw_return_free(rw_return *r)
{
    rw_template_free(&r->what);
}
