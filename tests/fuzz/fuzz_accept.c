/* fuzz_accept — the two Accept-Encoding parsers: the deflate module's
 * (modules/deflate/accept.c, which coding a response is compressed with)
 * and the static module's (modules/static/encoding.c, which precompressed
 * sibling is served). Neither calls a keel function; both are compiled in.
 *
 * The input is one or more field lines separated by '\n'. Checked besides
 * ASan/UBSan:
 *   - every qvalue kept is -1 (not listed) or 0..1000, and the choice is
 *     consistent with them: a coding is chosen only with a weight above 0,
 *     gzip only if it weighs at least as much as deflate, deflate only if
 *     it weighs more than gzip, never one that identity outweighs;
 *   - field lines are a list (RFC 9110 5.3): the lines given one by one
 *     and the same lines joined with ", " in one field give the same state
 *     (checked when no line leaves a quoted string open, which would
 *     swallow what follows it in the joined form);
 *   - st_accept_q is 0..1000 for gzip and br. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kd.h"
#include "static.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_accept: " __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static int q_ok(int q)
{
    return q >= -1 && q <= 1000;
}

static int eff(int q, int star)
{
    return q >= 0 ? q : star >= 0 ? star : 0;
}

/* Does the line leave a quoted string open (accept.c's skip_quoted)? */
static int quote_open(const char *s, size_t n)
{
    int in = 0;
    for (size_t i = 0; i < n; i++) {
        if (in && s[i] == '\\' && i + 1 < n)
            i++;
        else if (s[i] == '"')
            in = !in;
        else if (in && s[i] == '\\')
            return 1; /* a lone backslash at the end */
    }
    return in;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    kd_accept one, joined;
    kd_accept_init(&one);
    kd_accept_init(&joined);
    char *all = malloc(size * 3 + 1); /* lines joined with ", " */
    CHECK(all != NULL, "malloc");
    size_t alen = 0;
    int open = 0, lines = 0;
    size_t i = 0;
    while (i <= size) {
        size_t j = i;
        while (j < size && in[j] != '\n')
            j++;
        /* A copy of exactly the line, so ASan sees any read past it. */
        char *line = malloc(j - i + 1);
        CHECK(line != NULL, "malloc");
        memcpy(line, in + i, j - i);
        kd_accept_add(&one, line, j - i);
        open |= quote_open(line, j - i);
        if (lines++ > 0) {
            memcpy(all + alen, ", ", 2);
            alen += 2;
        }
        memcpy(all + alen, line, j - i);
        alen += j - i;

        int qg = st_accept_q((keel_str){line, j - i}, "gzip");
        int qb = st_accept_q((keel_str){line, j - i}, "br");
        CHECK(qg >= 0 && qg <= 1000 && qb >= 0 && qb <= 1000, "st_accept_q: %d %d", qg, qb);
        free(line);
        i = j + 1;
    }
    char *copy = malloc(alen ? alen : 1);
    CHECK(copy != NULL, "malloc");
    memcpy(copy, all, alen);
    kd_accept_add(&joined, copy, alen);
    free(copy);
    free(all);

    CHECK(q_ok(one.q_gzip) && q_ok(one.q_deflate) && q_ok(one.q_star) && q_ok(one.q_ident),
          "a qvalue out of range: %d %d %d %d", one.q_gzip, one.q_deflate, one.q_star, one.q_ident);
    int c = kd_accept_choose(&one);
    int gz = eff(one.q_gzip, one.q_star), df = eff(one.q_deflate, one.q_star);
    CHECK(c == KD_IDENTITY || c == KD_GZIP || c == KD_DEFLATE, "chose %d", c);
    if (c == KD_GZIP)
        CHECK(gz > 0 && gz >= df && one.q_ident <= gz, "gzip chosen at %d (deflate %d, id %d)", gz,
              df, one.q_ident);
    if (c == KD_DEFLATE)
        CHECK(df > 0 && df > gz && one.q_ident <= df, "deflate chosen at %d (gzip %d, id %d)", df,
              gz, one.q_ident);
    if (c == KD_IDENTITY)
        CHECK((gz <= 0 && df <= 0) || one.q_ident > (gz > df ? gz : df),
              "identity chosen with gzip %d, deflate %d, identity %d", gz, df, one.q_ident);
    if (!open)
        CHECK(memcmp(&one, &joined, sizeof one) == 0,
              "field lines and their join differ: gzip %d/%d deflate %d/%d * %d/%d identity %d/%d",
              one.q_gzip, joined.q_gzip, one.q_deflate, joined.q_deflate, one.q_star, joined.q_star,
              one.q_ident, joined.q_ident);
    return 0;
}
