/* The rewrite module's rules (compiled in, no keel calls): a rule written
 * "^PREFIX(.*)$" is matched without PCRE2 (rw_rule_match), and must give
 * PCRE2's own answer and offsets for every path, a LF anywhere in it
 * included ('.' stops at LF, '$' holds before a final one). */
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

static void same_as_pcre2(const char *line, int fast)
{
    rw_rule r;
    char why[512];
    cr_assert_eq(rw_rule_parse(&r, line, why, sizeof why), 0, "%s: %s", line, why);
    cr_expect_eq(r.rest_capture, fast, "%s: matched without PCRE2: %d", line, r.rest_capture);
    pcre2_match_data *md = pcre2_match_data_create(10, NULL);
    cr_assert_not_null(md);
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
    }
    pcre2_match_data_free(md);
    rw_rule_free(&r);
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
