/* auth_basic's parts that call neither keel nor crypt (compiled in): the
 * htpasswd parser's verdicts and lookup, the constant-time comparison,
 * SHA-256 against FIPS 180-4's examples. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "htpasswd.h"
#include "sha256.h"

static const char *write_file(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "auth_basic_files_%d.txt", (int)sizeof(ab_user));
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL);
    fputs(text, f);
    fclose(f);
    return path;
}

Test(auth_basic_files, verdicts_and_lookup)
{
    static const struct {
        const char *text;
        int weak_ok, ok;
        const char *err;
    } cases[] = {
        {"# c\n\nb:$2y$05$x\r\na:$6$s$h\n", 0, 1, NULL},
        {"a:$y$j9T$x\n", 0, 1, NULL},
        {"a:$1$s$h\n", 0, 0, ":1: an MD5-crypt hash"},
        {"a:$1$s$h\n", 1, 1, NULL},
        {"a:x\nb:secret\n", 0, 0, ":1: a plain-text"},
        {"a:secret\n", 1, 1, NULL},
        {"a:abcdefghijklm\n", 0, 0, ":1: a DES crypt hash"},
        {"a:$apr1$x$y\n", 1, 0, "Apache's $apr1$"},
        {"a:{SHA}x\n", 1, 0, "Apache's $apr1$ and {SHA}"},
        {"a:$9$x\n", 1, 0, ":1: unknown hash method"},
        {"a:$6$x\n:$6$y\n", 0, 0, ":2: expected user:hash"},
        {"a:$6$x\na:$6$y\n", 0, 0, "user 'a' is written twice"},
        {"# nobody\n", 0, 0, "no user"},
        {"a:\n", 1, 0, ":1: an empty password hash"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ab_users u;
        char err[256] = "";
        int rc = ab_users_load(&u, write_file(cases[i].text), cases[i].weak_ok, err, sizeof err);
        cr_expect_eq(rc == 0, cases[i].ok, "case %zu: rc %d (%s)", i, rc, err);
        if (cases[i].err != NULL)
            cr_expect(strstr(err, cases[i].err) != NULL, "case %zu: '%s'", i, err);
        if (rc == 0)
            ab_users_free(&u);
    }
    ab_users u;
    char err[256];
    cr_assert_eq(
        ab_users_load(&u, write_file("bob:$6$b\nalice:$6$a\ncarl:$6$c\n"), 0, err, sizeof err), 0);
    cr_expect_str_eq(ab_users_find(&u, "alice", 5)->hash, "$6$a");
    cr_expect_str_eq(ab_users_find(&u, "carl", 4)->hash, "$6$c");
    cr_expect_null(ab_users_find(&u, "ali", 3));
    cr_expect_null(ab_users_find(&u, "alicex", 6));
    ab_users_free(&u);
    remove(write_file(""));
}

Test(auth_basic_files, equal_in_constant_time)
{
    cr_expect(ab_equal_ct("abc", 3, "abc", 3));
    cr_expect(!ab_equal_ct("abc", 3, "abd", 3));
    cr_expect(!ab_equal_ct("abc", 3, "abcd", 4));
    cr_expect(ab_equal_ct("", 0, "", 0));
}

static void hex(const unsigned char *d, char *out)
{
    for (int i = 0; i < AB_SHA256_LEN; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

Test(auth_basic_files, sha256_vectors)
{
    static const struct {
        const char *in, *out;
    } v[] = {
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        unsigned char d[AB_SHA256_LEN];
        char h[2 * AB_SHA256_LEN + 1];
        ab_sha256 s;
        ab_sha256_init(&s);
        /* In two pieces, across the block boundary for the long one. */
        size_t n = strlen(v[i].in), half = n / 2;
        ab_sha256_update(&s, v[i].in, half);
        ab_sha256_update(&s, v[i].in + half, n - half);
        ab_sha256_final(&s, d);
        hex(d, h);
        cr_expect_str_eq(h, v[i].out, "vector %zu", i);
    }
}
