/* The rewrite module's rules (compiled in, no keel calls): a rule written
 * "^PREFIX(.*)$" is matched without PCRE2 (rw_rule_match), and must give
 * PCRE2's own answer and offsets for every path, a LF anywhere in it
 * included ('.' stops at LF, '$' holds before a final one); a rule whose
 * replacement gives the match back ("^/a/(.*)$ /a/$1") says so exactly
 * when its expansion is the path. */
#include <criterion/criterion.h>
#include <string.h>

#include "rewrite.h"

#define S(text)                                                                                    \
    {                                                                                              \
        text, sizeof text - 1                                                                      \
    }
static const struct {
    const char *text;
    size_t len;
} subjects[] = {
    S("/"),          S("/old"),          S("/old/"),
    S("/old/a"),     S("/old/a/b.html"), S("/ol"),
    S("/new/old/x"), S("/old/\n"),       S("/old/a\n"),
    S("/old/a\nb"),  S("/old/\n\n"),     S("/old/a\n\n"),
    S("\n"),         S("/\n"),           S("/old/\na"),
    S("/OLD/a"),     S("/old/a\r"),      S("/a-b_c~x,=@%&:/q"),
    S("/a-b_c~"),    S("/a-b_c~\n"),     S("/a-b_c~/y\nz"),
    S("/old/a\0b"),
};

/* Parses line into r (it must parse) and makes the match data for it. */
static pcre2_match_data *parse(rw_rule *r, const char *line)
{
    char why[512];
    cr_assert_eq(rw_rule_parse(r, line, why, sizeof why), 0, "%s: %s", line, why);
    pcre2_match_data *md = pcre2_match_data_create(10, NULL);
    cr_assert_not_null(md);
    return md;
}

/* The rule's answer and offsets for every subject against PCRE2's own;
 * and where it matches, rw_rule_keeps_path is 1 exactly when the rule is
 * an identity and the replacement, expanded as an internal rewrite's
 * path, is the path. fast and identity: the flags the parse must set
 * (-1: not checked). */
static void check_rule(const char *line, int fast, int identity)
{
    rw_rule r;
    pcre2_match_data *md = parse(&r, line);
    if (fast >= 0)
        cr_expect_eq(r.rest_capture, fast, "%s: matched without PCRE2: %d", line, r.rest_capture);
    if (identity >= 0)
        cr_expect_eq(r.identity, identity, "%s: identity %d", line, r.identity);
    for (size_t i = 0; i < sizeof subjects / sizeof *subjects; i++) {
        const char *s = subjects[i].text;
        size_t len = subjects[i].len;
        rw_captures caps = {0};
        int got = rw_rule_match(&r, s, len, md, NULL, &caps);
        int want = pcre2_match(r.re, (PCRE2_SPTR)s, len, 0, 0, md, NULL);
        cr_expect_eq(got > 0, want > 0, "%s on '%s': %d, PCRE2 %d", line, s, got, want);
        if (got <= 0 || want <= 0)
            continue;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        cr_expect_eq(caps.n, want, "%s on '%s': %d pairs, PCRE2 %d", line, s, caps.n, want);
        cr_expect_eq(caps.subject, s);
        for (int k = 0; k < 2 * want && k < 2 * caps.n; k++)
            cr_expect_eq(caps.ovector[k], ov[k], "%s on '%s': offset %d is %zu, PCRE2 %zu", line, s,
                         k, caps.ovector[k], (size_t)ov[k]);
        rw_value vals[RW_VAR_COUNT] = {{0}};
        rw_buf b;
        rw_buf_init(&b);
        rw_template_expand(&r.replacement, vals, &caps, 0, RW_PART_PATH, &b);
        int same = !r.replacement.has_query && b.len == len && memcmp(b.ptr, s, len) == 0;
        cr_expect_eq(rw_rule_keeps_path(&r, &caps, len), r.identity && same,
                     "%s on '%s': keeps the path %d, the expansion is the path %d", line, s,
                     rw_rule_keeps_path(&r, &caps, len), same);
        rw_buf_free(&b);
    }
    pcre2_match_data_free(md);
    rw_rule_free(&r);
}

static void same_as_pcre2(const char *line, int fast)
{
    check_rule(line, fast, -1);
}

Test(rewrite_rules, rest_capture_gives_pcre2s_answer)
{
    same_as_pcre2("^/old/(.*)$ /new/$1", 1);
    same_as_pcre2("^/(.*)$ /$1 break", 1);
    same_as_pcre2("^(.*)$ /x$1", 1);
    same_as_pcre2("^/a-b_c~(.*)$ /$1 last", 1);
    same_as_pcre2("^/a-b_c~x,=@%&:/(.*)$ /$1", 1);
}

Test(rewrite_rules, other_expressions_go_to_pcre2)
{
    same_as_pcre2("^/old/(.*) /new/$1", 0);      /* no '$' */
    same_as_pcre2("^/old/(.+)$ /new/$1", 0);     /* not '.*' */
    same_as_pcre2("(?s)^/old/(.*)$ /new/$1", 0); /* '.' takes LF too */
    same_as_pcre2("^/old/(.*)$$ /new/$1", 0);
    same_as_pcre2("^/ol?d/(.*)$ /new/$1", 0);
    same_as_pcre2("^/old/(.*)\\z /new/$1", 0);
    same_as_pcre2("^/o.d/(.*)$ /new/$1", 0);
}

/* Which rules are identities; check_rule checks rw_rule_keeps_path on
 * every subject they match. */
static void keeps_path_iff_same(const char *line, int identity)
{
    check_rule(line, -1, identity);
}

Test(rewrite_rules, identity_only_where_the_expansion_is_the_path)
{
    keeps_path_iff_same("^/old/(.*)$ /old/$1", 1);
    keeps_path_iff_same("^/(.*)$ /$1 break", 1);
    keeps_path_iff_same("^(.*)$ $1", 1);
    keeps_path_iff_same("^/a-b_c~(.*)$ /a-b_c~$1 last", 1); /* apply leaves `last` alone */
    keeps_path_iff_same("^/old/(.*)$ /new/$1", 0);
    keeps_path_iff_same("^/old/(.*)$ /old$1", 0);
    keeps_path_iff_same("^/old/(.*)$ /old/$1/", 0);
    keeps_path_iff_same("^/old/(.*)$ /old/$1?", 0);         /* a query (empty) */
    keeps_path_iff_same("^/old/(.*)$ /old/$1?x=1", 0);      /* a query */
    keeps_path_iff_same("^/old/(.*)$ /old/$0", 0);          /* $0, not $1 */
    keeps_path_iff_same("^/old/(.*)$ /old/$1$uri", 0);      /* a variable */
    keeps_path_iff_same("^/old/(.*)$ https://h/old/$1", 0); /* a redirect */
    keeps_path_iff_same("^/old/(.*)$ /old/$1 permanent", 0);
    keeps_path_iff_same("^/old/(.+)$ /old/$1", 0);     /* PCRE2's match */
    keeps_path_iff_same("(?i)^/old/(.*)$ /old/$1", 0); /* case-insensitive */
    keeps_path_iff_same("^/OLD/(.*)$ /old/$1", 0);
}
