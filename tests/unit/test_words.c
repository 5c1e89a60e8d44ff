/* kl_split_words: how config values become words (lists of modules,
 * directories, listen lines with their options). */
#include <criterion/criterion.h>
#include <string.h>

#include "runtime/settings.h"

static void expect(const char *text, const char *const *want, size_t nwant)
{
    size_t n = 0;
    char **words = kl_split_words(text, &n);
    cr_assert(words != NULL);
    cr_assert_eq(n, nwant, "'%s': %zu words, expected %zu", text, n, nwant);
    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(words[i], want[i], "'%s': word %zu", text, i);
    cr_assert_null(words[n]);
    kl_free_words(words, n);
}

Test(words, blanks_and_commas_separate)
{
    const char *const want[] = {"http1", "static", "stats"};
    expect("http1 static stats", want, 3);
    expect("http1, static,stats", want, 3);
    expect("  http1\t,static ,, stats  ", want, 3);
}

Test(words, commas_stay_inside_a_key_value_word)
{
    const char *const want[] = {"0.0.0.0:443", "http1", "tls", "alpn=h2,http/1.1", "x=1"};
    expect("0.0.0.0:443 http1 tls alpn=h2,http/1.1 x=1", want, 5);
    const char *const want2[] = {"a", "b=c,d", "e"};
    expect("a, b=c,d, e", want2, 3);
}

Test(words, nothing)
{
    expect("", NULL, 0);
    expect(" , ,\t", NULL, 0);
}
