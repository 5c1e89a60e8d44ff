/* auth_basic's parts that call neither keel nor crypt (compiled in): the
 * htpasswd parser's verdicts and lookup, the constant-time comparison,
 * SipHash-1-3-128 against the reference code's output, AES-128-CMAC
 * against RFC 4493's examples. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "htpasswd.h"
#include "mac.h"
#include "siphash.h"

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

Test(auth_basic_files, siphash_vectors)
{
    /* Key 00..0f; messages 00..(len-1), as the reference's vectors_sip128
     * for 2-4; these are the reference code's output with cROUNDS 1 and
     * dROUNDS 3 (one to three whole words, with and without a tail). */
    static const struct {
        size_t len;
        const char *out;
    } v[] = {
        {0, "e77ebcb22788a5befd62db6add303001"},  {7, "1084b923f2aae0c3a62f2ec80848ab77"},
        {8, "aa12fee1d5e3dab4724f16ab35f9c799"},  {15, "c17e5505b2bd526c2921cdec1e7e0109"},
        {20, "3c2c2f11bb90cf0be335ca9b2e91e9b7"},
    };
    unsigned char key[AB_SIPHASH_KEY], msg[64];
    for (int i = 0; i < 16; i++)
        key[i] = (unsigned char)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (unsigned char)i;
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        unsigned char d[AB_SIPHASH_OUT];
        char h[2 * AB_SIPHASH_OUT + 1];
        ab_siphash128(key, msg, v[i].len, d);
        for (int k = 0; k < AB_SIPHASH_OUT; k++)
            snprintf(h + 2 * k, 3, "%02x", d[k]);
        cr_expect_str_eq(h, v[i].out, "vector %zu", i);
    }
}

static void hex_of(const unsigned char *d, size_t n, char *out)
{
    for (size_t k = 0; k < n; k++)
        snprintf(out + 2 * k, 3, "%02x", d[k]);
}

static void from_hex(const char *h, unsigned char *out)
{
    for (size_t k = 0; h[2 * k] != '\0'; k++) {
        unsigned v = 0;
        sscanf(h + 2 * k, "%2x", &v);
        out[k] = (unsigned char)v;
    }
}

/* RFC 4493 4: the key and messages of its four examples (0, 16, 40 and 64
 * bytes: an empty message, one whole block, a padded last block, whole
 * blocks only). Where the CPU has no AES instructions, the cache uses
 * SipHash and this test has nothing to check. */
Test(auth_basic_files, cmac_rfc4493_vectors)
{
    static const struct {
        size_t len;
        const char *out;
    } v[] = {
        {0, "bb1d6929e95937287fa37d129b756746"},
        {16, "070a16b46b4d4144f79bdd9dd04a287c"},
        {40, "dfa66747de9ae63030ca32611497c827"},
        {64, "51f0bebf7e3b9d92fc49741779363cfe"},
    };
    unsigned char key[AB_MAC_KEY], msg[64];
    from_hex("2b7e151628aed2a6abf7158809cf4f3c", key);
    from_hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
             "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
             msg);
    ab_mac m;
    ab_mac_init(&m, key, 1);
    if (!m.aes)
        cr_skip_test("no AES instructions on this CPU: the cache uses SipHash-1-3");
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        unsigned char d[AB_MAC_OUT];
        char h[2 * AB_MAC_OUT + 1];
        ab_mac_digest(&m, msg, v[i].len, d);
        hex_of(d, sizeof d, h);
        cr_expect_str_eq(h, v[i].out, "example of %zu bytes", v[i].len);
    }
    ab_mac_wipe(&m);
}

/* Without AES instructions (allow_aes 0 here), the digest is SipHash-1-3's. */
Test(auth_basic_files, mac_without_aes_is_siphash)
{
    unsigned char key[AB_MAC_KEY], msg[40], a[AB_MAC_OUT], b[AB_SIPHASH_OUT];
    for (int i = 0; i < 16; i++)
        key[i] = (unsigned char)(i * 7);
    for (int i = 0; i < 40; i++)
        msg[i] = (unsigned char)i;
    ab_mac m;
    ab_mac_init(&m, key, 0);
    cr_expect_eq(m.aes, 0);
    for (size_t len = 0; len <= sizeof msg; len += 13) {
        ab_mac_digest(&m, msg, len, a);
        ab_siphash128(key, msg, len, b);
        cr_expect(memcmp(a, b, sizeof a) == 0, "length %zu", len);
    }
}
