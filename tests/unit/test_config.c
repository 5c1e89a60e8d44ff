/* tests/unit/test_config.c — the config parser, overrides and value parsers. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>

#include <keel/types.h>

#include "runtime/config.h"
#include "runtime/config_values.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME "t.conf"

static char err[512];

/* Parses text (named NAME) and asserts success. */
static kl_config *parse_ok(const char *text)
{
    kl_config *cfg = kl_config_new();
    cr_assert_not_null(cfg);
    err[0] = '\0';
    int rc = kl_config_parse_string(cfg, text, NAME, err, sizeof err);
    cr_assert_eq(rc, KEEL_OK, "parse failed (%d): %s", rc, err);
    return cfg;
}

/* Parses text and asserts KEEL_ERR_CONFIG with exactly the message msg. */
static void parse_fails(const char *text, const char *msg)
{
    kl_config *cfg = kl_config_new();
    cr_assert_not_null(cfg);
    err[0] = '\0';
    int rc = kl_config_parse_string(cfg, text, NAME, err, sizeof err);
    cr_expect_eq(rc, KEEL_ERR_CONFIG, "input: %s", text);
    cr_expect_str_eq(err, msg, "input: %s", text);
    kl_config_free(cfg);
}

static const char *text_of(kl_config *cfg, const char *sec, const char *key, size_t i)
{
    const kl_config_value *v = kl_config_get(kl_config_section_find(cfg, sec), key, i);
    return v ? v->text : NULL;
}

static void override_ok(kl_config *cfg, const char *assignment)
{
    err[0] = '\0';
    int rc = kl_config_override(cfg, assignment, err, sizeof err);
    cr_assert_eq(rc, KEEL_OK, "override '%s' failed: %s", assignment, err);
}

/* Writes len bytes to a new temporary file; path receives its name. */
static void write_temp(char path[64], const void *data, size_t len)
{
    strcpy(path, "/tmp/keel_test_config_XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp failed");
    cr_assert_eq(write(fd, data, len), (ssize_t)len);
    cr_assert_eq(close(fd), 0);
}

/* ---- good files --------------------------------------------------------- */

Test(config, basic_sections_and_values, .timeout = 10)
{
    kl_config *cfg = parse_ok("; leading comment\n"
                              "# another comment\n"
                              "\n"
                              "[server]\n"
                              "workers = 4\n"
                              "  name=keel   \n"
                              "\tpath.root = /srv/www ; inline comment\n"
                              "\n"
                              "[mod_x-2]\n"
                              "greeting = hello world # inline too\n"
                              "url = http://x/#frag;semi\n");
    cr_assert_eq(kl_config_section_count(cfg), 2);
    kl_config_section *s = kl_config_section_at(cfg, 0);
    cr_assert_str_eq(kl_config_section_name(s), "server");
    cr_assert_str_eq(kl_config_section_file(s), NAME);
    cr_assert_eq(kl_config_section_line(s), 4);
    cr_assert_str_eq(kl_config_section_name(kl_config_section_at(cfg, 1)), "mod_x-2");
    cr_assert_eq(kl_config_section_line(kl_config_section_at(cfg, 1)), 9);
    cr_assert_null(kl_config_section_at(cfg, 2));
    cr_assert_eq(kl_config_section_find(cfg, "server"), s);
    cr_assert_null(kl_config_section_find(cfg, "Server"));
    cr_assert_null(kl_config_section_find(cfg, "nope"));

    const kl_config_value *v = kl_config_get(s, "workers", 0);
    cr_assert_not_null(v);
    cr_assert_str_eq(v->text, "4");
    cr_assert_str_eq(v->file, NAME);
    cr_assert_eq(v->line, 5);
    cr_assert_str_eq(text_of(cfg, "server", "name", 0), "keel");
    cr_assert_str_eq(text_of(cfg, "server", "path.root", 0), "/srv/www");
    cr_assert_str_eq(text_of(cfg, "mod_x-2", "greeting", 0), "hello world");
    /* '#' and ';' not preceded by whitespace are part of the value */
    cr_assert_str_eq(text_of(cfg, "mod_x-2", "url", 0), "http://x/#frag;semi");
    cr_assert_null(text_of(cfg, "server", "greeting", 0));
    cr_assert_eq(kl_config_count(s, "missing"), 0);
    cr_assert_null(kl_config_get(s, "workers", 1));
    cr_assert_null(kl_config_get(NULL, "workers", 0));
    cr_assert_eq(kl_config_count(NULL, "workers"), 0);
    kl_config_free(cfg);
}

Test(config, quoted_values, .timeout = 10)
{
    kl_config *cfg = parse_ok("[q]\n"
                              "a = \"quoted ; value # kept\"\n"
                              "b = \"say \\\"hi\\\" c:\\\\dir\\\\\"\n"
                              "c = \"\"\n"
                              "d = \"  padded  \" ; comment\n"
                              "e = \"x\"# comment\n"
                              "f = in \"middle\" stays\n"
                              "g=;not a comment\n");
    cr_assert_str_eq(text_of(cfg, "q", "a", 0), "quoted ; value # kept");
    cr_assert_str_eq(text_of(cfg, "q", "b", 0), "say \"hi\" c:\\dir\\");
    cr_assert_str_eq(text_of(cfg, "q", "c", 0), "");
    cr_assert_str_eq(text_of(cfg, "q", "d", 0), "  padded  ");
    cr_assert_str_eq(text_of(cfg, "q", "e", 0), "x");
    cr_assert_str_eq(text_of(cfg, "q", "f", 0), "in \"middle\" stays");
    cr_assert_str_eq(text_of(cfg, "q", "g", 0), ";not a comment");
    kl_config_free(cfg);
}

Test(config, crlf_and_no_final_newline, .timeout = 10)
{
    kl_config *cfg = parse_ok("[a]\r\n"
                              "x = 1\r\n"
                              "y = \"q\"\r\n"
                              "\r\n"
                              "; c\r\n"
                              "[b] ; header comment\r\n"
                              "z = last");
    cr_assert_str_eq(text_of(cfg, "a", "x", 0), "1");
    cr_assert_str_eq(text_of(cfg, "a", "y", 0), "q");
    const kl_config_value *z = kl_config_get(kl_config_section_find(cfg, "b"), "z", 0);
    cr_assert_not_null(z);
    cr_assert_str_eq(z->text, "last");
    cr_assert_eq(z->line, 7);
    cr_assert_eq(kl_config_section_line(kl_config_section_find(cfg, "b")), 6);
    kl_config_free(cfg);
}

Test(config, utf8_bom, .timeout = 10)
{
    kl_config *cfg = parse_ok("\xEF\xBB\xBF[s]\nk = caf\xC3\xA9\n");
    cr_assert_eq(kl_config_section_count(cfg), 1);
    cr_assert_str_eq(kl_config_section_name(kl_config_section_at(cfg, 0)), "s");
    cr_assert_str_eq(text_of(cfg, "s", "k", 0), "caf\xC3\xA9");
    kl_config_free(cfg);
    /* a BOM is only skipped at the very start */
    parse_fails("[s]\n\xEF\xBB\xBFk = 1\n",
                NAME ":2: invalid key '\xEF\xBB\xBFk': byte 0xEF not allowed (use a-z 0-9 _ . -)");
}

Test(config, repeated_keys, .timeout = 10)
{
    kl_config *cfg = parse_ok("[listener]\n"
                              "listen = 0.0.0.0:80\n"
                              "other = 1\n"
                              "listen = [::]:80\n"
                              "listen = unix:/run/k.sock\n");
    kl_config_section *s = kl_config_section_find(cfg, "listener");
    cr_assert_eq(kl_config_count(s, "listen"), 3);
    cr_assert_str_eq(kl_config_get(s, "listen", 0)->text, "0.0.0.0:80");
    cr_assert_eq(kl_config_get(s, "listen", 0)->line, 2);
    cr_assert_str_eq(kl_config_get(s, "listen", 1)->text, "[::]:80");
    cr_assert_eq(kl_config_get(s, "listen", 1)->line, 4);
    cr_assert_str_eq(kl_config_get(s, "listen", 2)->text, "unix:/run/k.sock");
    cr_assert_eq(kl_config_get(s, "listen", 2)->line, 5);
    cr_assert_null(kl_config_get(s, "listen", 3));
    kl_config_free(cfg);
}

Test(config, empty_values, .timeout = 10)
{
    kl_config *cfg = parse_ok("[e]\n"
                              "a =\n"
                              "b=\n"
                              "c =    \t\n"
                              "d = ; only a comment\n"
                              "e = # only a comment\n");
    const char *keys[] = {"a", "b", "c", "d", "e"};
    for (size_t i = 0; i < 5; i++) {
        const char *t = text_of(cfg, "e", keys[i], 0);
        cr_assert_not_null(t, "key %s", keys[i]);
        cr_assert_str_eq(t, "", "key %s", keys[i]);
    }
    kl_config_free(cfg);
}

Test(config, empty_input, .timeout = 10)
{
    kl_config *cfg = parse_ok("");
    cr_assert_eq(kl_config_section_count(cfg), 0);
    kl_config_free(cfg);
    cfg = parse_ok("\n\n; nothing\n");
    cr_assert_eq(kl_config_section_count(cfg), 0);
    cr_assert_null(kl_config_section_at(cfg, 0));
    kl_config_free(cfg);
}

Test(config, parse_file_good, .timeout = 10)
{
    static const char text[] = "\xEF\xBB\xBF; keel\r\n[server]\r\nport = 8080\r\n";
    char path[64];
    write_temp(path, text, sizeof text - 1);
    kl_config *cfg = kl_config_new();
    int rc = kl_config_parse_file(cfg, path, err, sizeof err);
    cr_assert_eq(rc, KEEL_OK, "%s", err);
    const kl_config_value *v = kl_config_get(kl_config_section_find(cfg, "server"), "port", 0);
    cr_assert_not_null(v);
    cr_assert_str_eq(v->text, "8080");
    cr_assert_str_eq(v->file, path);
    cr_assert_eq(v->line, 3);
    cr_assert_str_eq(kl_config_section_file(kl_config_section_find(cfg, "server")), path);
    kl_config_free(cfg);
    unlink(path);
}

Test(config, parse_only_once, .timeout = 10)
{
    kl_config *cfg = parse_ok("[a]\nx = 1\n");
    cr_assert_eq(kl_config_parse_string(cfg, "[b]\n", "other", err, sizeof err), KEEL_ERR_STATE);
    cr_assert_null(kl_config_section_find(cfg, "b"));
    kl_config_free(cfg);
}

/* ---- bad files -------------------------------------------------------- */

Test(config, error_key_outside_section, .timeout = 10)
{
    parse_fails("; comment\nport = 80\n[s]\n", NAME ":2: key 'port' outside of a section");
}

Test(config, error_malformed_header, .timeout = 10)
{
    parse_fails("[a]\n[server\n", NAME ":2: malformed section header: missing ']'");
    parse_fails("[]\n", NAME ":1: malformed section header: empty name");
    parse_fails("[a]\n\n[b] x\n", NAME ":3: malformed section header: unexpected text after ']'");
    parse_fails("[a]]\n", NAME ":1: malformed section header: unexpected text after ']'");
}

Test(config, error_bad_section_name, .timeout = 10)
{
    parse_fails("[Server]\n",
                NAME ":1: invalid section name 'Server': 'S' not allowed (use a-z 0-9 _ -)");
    parse_fails("[a]\n[ b ]\n",
                NAME ":2: invalid section name ' b ': ' ' not allowed (use a-z 0-9 _ -)");
    parse_fails("[a.b]\n",
                NAME ":1: invalid section name 'a.b': '.' not allowed (use a-z 0-9 _ -)");
    parse_fails("[a\tb]\n",
                NAME ":1: invalid section name 'a\tb': byte 0x09 not allowed (use a-z 0-9 _ -)");
}

Test(config, error_bad_key, .timeout = 10)
{
    parse_fails("[s]\nPort = 1\n",
                NAME ":2: invalid key 'Port': 'P' not allowed (use a-z 0-9 _ . -)");
    parse_fails("[s]\nok = 1\npo$rt = 1\n",
                NAME ":3: invalid key 'po$rt': '$' not allowed (use a-z 0-9 _ . -)");
    parse_fails("[s]\n= 5\n", NAME ":2: missing key before '='");
}

/* The key rule a module's table is checked by (kl_schema_check) is the
 * file's: a name the reader accepts is a valid key, and one it refuses is
 * not. */
Test(config, valid_key_names, .timeout = 10)
{
    static const char *const good[] = {"port", "a.b-c_9", "0", "-", "."};
    static const char *const bad[] = {"", "Port", "a b", "a=b", "a$", "\xc3\xa9"};
    char text[64];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cr_expect(kl_config_valid_key(good[i]), "'%s' is a key", good[i]);
        snprintf(text, sizeof text, "[s]\n%s = 1\n", good[i]);
        kl_config_free(parse_ok(text));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect(!kl_config_valid_key(bad[i]), "'%s' is not a key", bad[i]);
    cr_expect(!kl_config_valid_key(NULL));
}

Test(config, error_missing_equals, .timeout = 10)
{
    parse_fails("[s]\nport 80\n", NAME ":2: missing '=' after key 'port'");
    parse_fails("[s]\n\nport\n", NAME ":3: missing '=' after key 'port'");
    parse_fails("[s]\nport ; = 1\n", NAME ":2: missing '=' after key 'port'");
}

Test(config, error_duplicate_section, .timeout = 10)
{
    parse_fails("[a]\nx = 1\n[b]\n[a]\n", NAME ":4: duplicate section [a] (first at line 1)");
}

Test(config, error_quotes, .timeout = 10)
{
    parse_fails("[s]\nk = \"abc\n", NAME ":2: unterminated quoted value");
    parse_fails("[s]\nk = \"abc\\\"\n", NAME ":2: unterminated quoted value");
    parse_fails("[s]\nk = \"abc\\\n", NAME ":2: unterminated quoted value");
    parse_fails("[s]\n\nk = \"a\" b\n", NAME ":3: unexpected text after closing quote");
    parse_fails("[s]\nk = \"a\"\"b\"\n", NAME ":2: unexpected text after closing quote");
    parse_fails("[s]\nk = \"a\\nb\"\n",
                NAME ":2: '\\' followed by 'n' in quoted value: only \\\" and \\\\ are escapes");
}

Test(config, error_nul_byte, .timeout = 10)
{
    static const char text[] = "[s]\na = 1\nb = x\0y\n";
    char path[64];
    write_temp(path, text, sizeof text - 1);
    kl_config *cfg = kl_config_new();
    int rc = kl_config_parse_file(cfg, path, err, sizeof err);
    cr_assert_eq(rc, KEEL_ERR_CONFIG);
    char want[128];
    snprintf(want, sizeof want, "%s:3: NUL byte in line", path);
    cr_assert_str_eq(err, want);
    kl_config_free(cfg);
    unlink(path);
}

/* A file: "[s]\n", then "k = " padded with 'v' to a line of len bytes, then eol. */
static int parse_long_line(size_t len, const char *eol, char path[64])
{
    size_t total = 4 + len + strlen(eol);
    char *buf = malloc(total);
    cr_assert_not_null(buf);
    memcpy(buf, "[s]\nk = ", 8);
    memset(buf + 8, 'v', len - 4);
    memcpy(buf + 4 + len, eol, strlen(eol));
    write_temp(path, buf, total);
    free(buf);
    kl_config *cfg = kl_config_new();
    int rc = kl_config_parse_file(cfg, path, err, sizeof err);
    if (rc == KEEL_OK) {
        const char *t = text_of(cfg, "s", "k", 0);
        cr_assert_not_null(t);
        cr_assert_eq(strlen(t), len - 4);
    }
    kl_config_free(cfg);
    unlink(path);
    return rc;
}

Test(config, line_length_cap, .timeout = 10)
{
    char path[64], want[128];
    cr_assert_eq(parse_long_line(65536, "\n", path), KEEL_OK, "%s", err);
    cr_assert_eq(parse_long_line(65536, "\r\n", path), KEEL_OK, "%s", err);
    cr_assert_eq(parse_long_line(65536, "", path), KEEL_OK, "%s", err);

    cr_assert_eq(parse_long_line(65537, "\n", path), KEEL_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:2: line longer than 65536 bytes", path);
    cr_assert_str_eq(err, want);
    cr_assert_eq(parse_long_line(65537, "\r\n", path), KEEL_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:2: line longer than 65536 bytes", path);
    cr_assert_str_eq(err, want);
    cr_assert_eq(parse_long_line(200000, "", path), KEEL_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:2: line longer than 65536 bytes", path);
    cr_assert_str_eq(err, want);
}

Test(config, file_not_found, .timeout = 10)
{
    const char *path = "/tmp/keel-test-config-does-not-exist/none.conf";
    kl_config *cfg = kl_config_new();
    int rc = kl_config_parse_file(cfg, path, err, sizeof err);
    cr_assert_eq(rc, KEEL_ERR_NOTFOUND);
    cr_assert_str_eq(err, "/tmp/keel-test-config-does-not-exist/none.conf: cannot open: No such "
                          "file or directory");
    /* nothing was read: the config may still be parsed, e.g. from a default */
    cr_assert_eq(kl_config_parse_string(cfg, "[d]\nk = v\n", "default", err, sizeof err), KEEL_OK,
                 "%s", err);
    cr_assert_str_eq(text_of(cfg, "d", "k", 0), "v");
    kl_config_free(cfg);
}

Test(config, file_io_error, .timeout = 10)
{
    char dir[] = "/tmp/keel_test_config_dir_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    kl_config *cfg = kl_config_new();
    int rc = kl_config_parse_file(cfg, dir, err, sizeof err);
    cr_expect_eq(rc, KEEL_ERR_IO, "%s", err);
    char want[128];
    snprintf(want, sizeof want, "%s: cannot ", dir);
    cr_expect_eq(strncmp(err, want, strlen(want)), 0, "got: %s", err);
    cr_expect_not_null(strstr(err, "Is a directory"), "got: %s", err);
    kl_config_free(cfg);
    rmdir(dir);
}

/* ---- overrides -------------------------------------------------------- */

static const char *const FILE_TEXT = "[http]\n"
                                     "port = 80\n"
                                     "listen = a\n"
                                     "listen = b\n"
                                     "[log]\n"
                                     "level = info\n";

static void check_overridden(kl_config *cfg)
{
    kl_config_section *http = kl_config_section_find(cfg, "http");
    cr_assert_eq(kl_config_count(http, "port"), 1);
    const kl_config_value *v = kl_config_get(http, "port", 0);
    cr_assert_str_eq(v->text, "8080");
    cr_assert_str_eq(v->file, "--set");
    cr_assert_eq(v->line, 0);
    /* replace, then append */
    cr_assert_eq(kl_config_count(http, "listen"), 2);
    cr_assert_str_eq(text_of(cfg, "http", "listen", 0), "c");
    cr_assert_str_eq(text_of(cfg, "http", "listen", 1), "d");
    cr_assert_null(text_of(cfg, "http", "listen", 2));
    /* untouched keys keep the file's values */
    cr_assert_str_eq(text_of(cfg, "log", "level", 0), "info");
    cr_assert_eq(kl_config_get(kl_config_section_find(cfg, "log"), "level", 0)->line, 6);
    /* a new section comes after the file's */
    cr_assert_eq(kl_config_section_count(cfg), 3);
    cr_assert_str_eq(kl_config_section_name(kl_config_section_at(cfg, 0)), "http");
    cr_assert_str_eq(kl_config_section_name(kl_config_section_at(cfg, 1)), "log");
    kl_config_section *extra = kl_config_section_at(cfg, 2);
    cr_assert_str_eq(kl_config_section_name(extra), "extra");
    cr_assert_str_eq(kl_config_section_file(extra), "--set");
    cr_assert_eq(kl_config_section_line(extra), 0);
    cr_assert_str_eq(text_of(cfg, "extra", "on", 0), "yes");
}

static void apply_overrides(kl_config *cfg)
{
    override_ok(cfg, "http.port=8080");
    override_ok(cfg, "http.listen=c");
    override_ok(cfg, "extra.on=yes");
    override_ok(cfg, "http.listen=d");
}

Test(config, override_after_parse, .timeout = 10)
{
    kl_config *cfg = parse_ok(FILE_TEXT);
    apply_overrides(cfg);
    check_overridden(cfg);
    kl_config_free(cfg);
}

Test(config, override_before_parse, .timeout = 10)
{
    kl_config *cfg = kl_config_new();
    apply_overrides(cfg);
    cr_assert_eq(kl_config_parse_string(cfg, FILE_TEXT, NAME, err, sizeof err), KEEL_OK, "%s", err);
    check_overridden(cfg);
    kl_config_free(cfg);
}

Test(config, override_around_parse, .timeout = 10)
{
    /* first override before the parse, the second after: still replace-then-append */
    kl_config *cfg = kl_config_new();
    override_ok(cfg, "http.listen=c");
    cr_assert_eq(kl_config_parse_string(cfg, FILE_TEXT, NAME, err, sizeof err), KEEL_OK, "%s", err);
    override_ok(cfg, "http.listen=d");
    kl_config_section *http = kl_config_section_find(cfg, "http");
    cr_assert_eq(kl_config_count(http, "listen"), 2);
    cr_assert_str_eq(text_of(cfg, "http", "listen", 0), "c");
    cr_assert_str_eq(text_of(cfg, "http", "listen", 1), "d");
    kl_config_free(cfg);
}

Test(config, override_section_then_file_section, .timeout = 10)
{
    /* a section named by --set first takes the file's position and line */
    kl_config *cfg = kl_config_new();
    override_ok(cfg, "z.k=1");
    override_ok(cfg, "b.k=2");
    cr_assert_eq(kl_config_parse_string(cfg, "[a]\n[b]\nk = file\nj = 3\n", NAME, err, sizeof err),
                 KEEL_OK, "%s", err);
    cr_assert_eq(kl_config_section_count(cfg), 3);
    cr_assert_str_eq(kl_config_section_name(kl_config_section_at(cfg, 0)), "a");
    kl_config_section *b = kl_config_section_at(cfg, 1);
    cr_assert_str_eq(kl_config_section_name(b), "b");
    cr_assert_eq(kl_config_section_line(b), 2);
    cr_assert_str_eq(kl_config_section_file(b), NAME);
    cr_assert_str_eq(kl_config_section_name(kl_config_section_at(cfg, 2)), "z");
    cr_assert_str_eq(text_of(cfg, "b", "k", 0), "2");
    cr_assert_str_eq(text_of(cfg, "b", "j", 0), "3");
    kl_config_free(cfg);
}

Test(config, override_syntax, .timeout = 10)
{
    kl_config *cfg = kl_config_new();
    override_ok(cfg, "a.b.c=1");
    override_ok(cfg, "s.k =  x = y ; not a comment \"q\"  ");
    override_ok(cfg, " s . e =");
    cr_assert_str_eq(text_of(cfg, "a", "b.c", 0), "1");
    cr_assert_null(text_of(cfg, "a", "b", 0));
    cr_assert_str_eq(text_of(cfg, "s", "k", 0), "x = y ; not a comment \"q\"");
    cr_assert_str_eq(text_of(cfg, "s", "e", 0), "");
    kl_config_free(cfg);
}

static void override_fails(const char *assignment, const char *msg)
{
    kl_config *cfg = kl_config_new();
    err[0] = '\0';
    cr_expect_eq(kl_config_override(cfg, assignment, err, sizeof err), KEEL_ERR_CONFIG, "%s",
                 assignment);
    cr_expect_str_eq(err, msg);
    cr_expect_eq(kl_config_section_count(cfg), 0);
    kl_config_free(cfg);
}

Test(config, override_errors, .timeout = 10)
{
    override_fails("foo", "--set 'foo': expected section.key=value");
    override_fails("foo=1", "--set 'foo=1': expected section.key=value");
    override_fails("a=b.c", "--set 'a=b.c': expected section.key=value");
    override_fails(".k=1", "--set '.k=1': expected section.key=value");
    override_fails("s.=1", "--set 's.=1': expected section.key=value");
    override_fails("S.k=1",
                   "--set 'S.k=1': invalid section name 'S': 'S' not allowed (use a-z 0-9 _ -)");
    override_fails("s.K=1", "--set 's.K=1': invalid key 'K': 'K' not allowed (use a-z 0-9 _ . -)");
    override_fails("s.a b=1",
                   "--set 's.a b=1': invalid key 'a b': ' ' not allowed (use a-z 0-9 _ . -)");
}

/* ---- unused keys -------------------------------------------------------- */

Test(config, check_unused, .timeout = 10)
{
    kl_config *cfg = parse_ok("[s]\n"
                              "used = 1\n"
                              "zeta = 2\n"
                              "alpha = 3\n"
                              "counted = 4\n");
    kl_config_section *s = kl_config_section_find(cfg, "s");
    cr_assert_eq(kl_config_check_unused(NULL, err, sizeof err), KEEL_OK);
    cr_assert_not_null(kl_config_get(s, "used", 0));
    cr_assert_eq(kl_config_count(s, "counted"), 1);
    cr_assert_eq(kl_config_check_unused(s, err, sizeof err), KEEL_ERR_CONFIG);
    cr_assert_str_eq(err, NAME ":3: [s] unknown key 'zeta'");
    cr_assert_not_null(kl_config_get(s, "zeta", 0));
    cr_assert_eq(kl_config_check_unused(s, err, sizeof err), KEEL_ERR_CONFIG);
    cr_assert_str_eq(err, NAME ":4: [s] unknown key 'alpha'");
    const kl_config_value *v;
    cr_assert_eq(kl_config_get_single(s, "alpha", &v, err, sizeof err), KEEL_OK);
    cr_assert_eq(kl_config_check_unused(s, err, sizeof err), KEEL_OK);
    kl_config_free(cfg);
}

Test(config, check_unused_overrides, .timeout = 10)
{
    kl_config *cfg = kl_config_new();
    override_ok(cfg, "s.typo=1");
    cr_assert_eq(kl_config_parse_string(cfg, "[s]\nknown = 1\nlater = 2\n", NAME, err, sizeof err),
                 KEEL_OK, "%s", err);
    kl_config_section *s = kl_config_section_find(cfg, "s");
    kl_config_count(s, "known");
    /* file keys come first, in line order */
    cr_assert_eq(kl_config_check_unused(s, err, sizeof err), KEEL_ERR_CONFIG);
    cr_assert_str_eq(err, NAME ":3: [s] unknown key 'later'");
    kl_config_count(s, "later");
    cr_assert_eq(kl_config_check_unused(s, err, sizeof err), KEEL_ERR_CONFIG);
    cr_assert_str_eq(err, "--set: [s] unknown key 'typo'");
    kl_config_count(s, "typo");
    cr_assert_eq(kl_config_check_unused(s, err, sizeof err), KEEL_OK);
    /* a file key hidden by an override is reported where its value now comes from */
    kl_config *cfg2 = parse_ok("[t]\nk = 1\n");
    override_ok(cfg2, "t.k=2");
    cr_assert_eq(kl_config_check_unused(kl_config_section_find(cfg2, "t"), err, sizeof err),
                 KEEL_ERR_CONFIG);
    cr_assert_str_eq(err, "--set: [t] unknown key 'k'");
    kl_config_free(cfg2);
    /* among overridden keys, the order of the overrides decides */
    cfg2 = parse_ok("[t]\na = 1\nb = 1\n");
    override_ok(cfg2, "t.b=2");
    override_ok(cfg2, "t.a=2");
    override_ok(cfg2, "t.b=3");
    cr_assert_eq(kl_config_check_unused(kl_config_section_find(cfg2, "t"), err, sizeof err),
                 KEEL_ERR_CONFIG);
    cr_assert_str_eq(err, "--set: [t] unknown key 'b'");
    kl_config_free(cfg2);
    kl_config_free(cfg);
}

/* ---- get_single ------------------------------------------------------- */

Test(config, get_single, .timeout = 10)
{
    kl_config *cfg = parse_ok("[s]\n"
                              "port = 80\n"
                              "one = x\n"
                              "\n"
                              "port = 81\n"
                              "port = 82\n");
    kl_config_section *s = kl_config_section_find(cfg, "s");
    const kl_config_value *v = (const kl_config_value *)1;

    cr_assert_eq(kl_config_get_single(s, "one", &v, err, sizeof err), KEEL_OK);
    cr_assert_not_null(v);
    cr_assert_str_eq(v->text, "x");
    cr_assert_eq(v->line, 3);

    cr_assert_eq(kl_config_get_single(s, "absent", &v, err, sizeof err), KEEL_OK);
    cr_assert_null(v);
    v = (const kl_config_value *)1;
    cr_assert_eq(kl_config_get_single(NULL, "one", &v, err, sizeof err), KEEL_OK);
    cr_assert_null(v);

    cr_assert_eq(kl_config_get_single(s, "port", &v, err, sizeof err), KEEL_ERR_CONFIG);
    cr_assert_str_eq(err, NAME ":5: [s] port: given more than once (first at line 2)");
    /* the failed lookup still marks the key used */
    cr_assert_eq(kl_config_check_unused(s, err, sizeof err), KEEL_OK, "%s", err);

    /* an override makes the key single again; two overrides repeat it */
    override_ok(cfg, "s.port=90");
    cr_assert_eq(kl_config_get_single(s, "port", &v, err, sizeof err), KEEL_OK, "%s", err);
    cr_assert_str_eq(v->text, "90");
    override_ok(cfg, "s.port=91");
    cr_assert_eq(kl_config_get_single(s, "port", &v, err, sizeof err), KEEL_ERR_CONFIG);
    cr_assert_str_eq(err, "--set: [s] port: given more than once");
    kl_config_free(cfg);
}

/* ---- value parsers ---------------------------------------------------- */

static void int_ok(const char *s, int64_t min, int64_t max, int64_t want)
{
    int64_t got = 12345;
    cr_expect_eq(kl_parse_int(s, min, max, &got, err, sizeof err), KEEL_OK, "'%s': %s", s, err);
    cr_expect_eq(got, want, "'%s' gave %lld", s, (long long)got);
}

static void int_bad(const char *s, int64_t min, int64_t max, const char *msg)
{
    int64_t got = 12345;
    err[0] = '\0';
    cr_expect_eq(kl_parse_int(s, min, max, &got, err, sizeof err), KEEL_ERR_CONFIG, "'%s'", s);
    cr_expect_eq(got, 12345, "'%s' wrote the output", s);
    cr_expect_str_eq(err, msg, "'%s'", s);
}

Test(parse, integers, .timeout = 10)
{
    int_ok("0", 0, 10, 0);
    int_ok("42", 1, 64, 42);
    int_ok("1", 1, 64, 1);
    int_ok("64", 1, 64, 64);
    int_ok("-7", -10, 10, -7);
    int_ok("-0", 0, 0, 0);
    int_ok("007", 0, 10, 7);
    int_ok("9223372036854775807", INT64_MIN, INT64_MAX, INT64_MAX);
    int_ok("-9223372036854775808", INT64_MIN, INT64_MAX, INT64_MIN);

    const char *m = "expected an integer between 1 and 64";
    int_bad("0", 1, 64, m);
    int_bad("65", 1, 64, m);
    int_bad("-1", 1, 64, m);
    int_bad("", 1, 64, m);
    int_bad("-", 1, 64, m);
    int_bad("+5", 1, 64, m);
    int_bad(" 5", 1, 64, m);
    int_bad("5 ", 1, 64, m);
    int_bad("5x", 1, 64, m);
    int_bad("5:", 1, 64, m);
    int_bad("/", 1, 64, m);
    int_bad("0x10", 1, 64, m);
    int_bad("1.0", 1, 64, m);
    int_bad("--5", 1, 64, m);
    int_bad("99999999999999999999999", 1, 64, m);
    int_bad(NULL, 1, 64, m);

    const char *full = "expected an integer between -9223372036854775808 and 9223372036854775807";
    int_bad("9223372036854775808", INT64_MIN, INT64_MAX, full);
    int_bad("-9223372036854775809", INT64_MIN, INT64_MAX, full);
    int_bad("18446744073709551616", INT64_MIN, INT64_MAX, full);
    int_bad("-18446744073709551616", INT64_MIN, INT64_MAX, full);
}

Test(parse, booleans, .timeout = 10)
{
    static const char *const yes[] = {"on", "yes", "true", "1", "ON", "Yes", "TRUE", "tRuE"};
    static const char *const no[] = {"off", "no", "false", "0", "OFF", "No", "FALSE", "fAlSe"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        int b = 7;
        cr_expect_eq(kl_parse_bool(yes[i], &b, err, sizeof err), KEEL_OK, "%s", yes[i]);
        cr_expect_eq(b, 1, "%s", yes[i]);
        b = 7;
        cr_expect_eq(kl_parse_bool(no[i], &b, err, sizeof err), KEEL_OK, "%s", no[i]);
        cr_expect_eq(b, 0, "%s", no[i]);
    }
    static const char *const bad[] = {"",    "2",  "y",   "n",       "o",  "onn", "yess",
                                      "tru", "1 ", " on", "enabled", "01", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int b = 7;
        err[0] = '\0';
        cr_expect_eq(kl_parse_bool(bad[i], &b, err, sizeof err), KEEL_ERR_CONFIG, "'%s'", bad[i]);
        cr_expect_eq(b, 7);
        cr_expect_str_eq(err, "expected on/off, yes/no, true/false or 1/0");
    }
    int b = 7;
    cr_expect_eq(kl_parse_bool(NULL, &b, err, sizeof err), KEEL_ERR_CONFIG);
}

static void size_ok(const char *s, uint64_t want)
{
    uint64_t got = 12345;
    cr_expect_eq(kl_parse_size(s, &got, err, sizeof err), KEEL_OK, "'%s': %s", s, err);
    cr_expect_eq(got, want, "'%s' gave %llu", s, (unsigned long long)got);
}

static void size_bad(const char *s)
{
    uint64_t got = 12345;
    err[0] = '\0';
    cr_expect_eq(kl_parse_size(s, &got, err, sizeof err), KEEL_ERR_CONFIG, "'%s'", s);
    cr_expect_eq(got, 12345);
    cr_expect_str_eq(err, "expected a size such as 64k or 1m", "'%s'", s);
}

Test(parse, sizes, .timeout = 10)
{
    size_ok("0", 0);
    size_ok("64", 64);
    size_ok("64k", 65536);
    size_ok("64K", 65536);
    size_ok("1m", 1048576);
    size_ok("1M", 1048576);
    size_ok("2g", 2147483648ULL);
    size_ok("2G", 2147483648ULL);
    size_ok("0k", 0);
    size_ok("18446744073709551615", UINT64_MAX);
    size_ok("18014398509481983k", 18014398509481983ULL << 10);
    size_ok("17179869183g", 17179869183ULL << 30);

    size_bad("18446744073709551616");
    size_bad("18014398509481984k");
    size_bad("17179869184g");
    size_bad("99999999999999999999g");
    size_bad("");
    size_bad("k");
    size_bad("64kb");
    size_bad("64KB");
    size_bad("64b");
    size_bad("64 k");
    size_bad("1t");
    size_bad("1.5k");
    size_bad("-1");
    size_bad("+1");
    size_bad("1kk");
    size_bad(NULL);
}

static void dur_ok(const char *s, uint64_t want)
{
    uint64_t got = 12345;
    cr_expect_eq(kl_parse_duration_ms(s, &got, err, sizeof err), KEEL_OK, "'%s': %s", s, err);
    cr_expect_eq(got, want, "'%s' gave %llu", s, (unsigned long long)got);
}

static void dur_bad(const char *s)
{
    uint64_t got = 12345;
    err[0] = '\0';
    cr_expect_eq(kl_parse_duration_ms(s, &got, err, sizeof err), KEEL_ERR_CONFIG, "'%s'", s);
    cr_expect_eq(got, 12345);
    cr_expect_str_eq(err, "expected a duration such as 500ms, 10s or 5m", "'%s'", s);
}

Test(parse, durations, .timeout = 10)
{
    dur_ok("500ms", 500);
    dur_ok("0ms", 0);
    dur_ok("10s", 10000);
    dur_ok("10", 10000);
    dur_ok("0", 0);
    dur_ok("5m", 300000);
    dur_ok("2h", 7200000);
    dur_ok("18446744073709551615ms", UINT64_MAX);
    dur_ok("18446744073709551s", 18446744073709551000ULL);
    dur_ok("18446744073709551", 18446744073709551000ULL);
    dur_ok("307445734561825m", 307445734561825ULL * 60000);
    dur_ok("5124095576030h", 5124095576030ULL * 3600000);

    dur_bad("18446744073709551616ms");
    dur_bad("18446744073709552s");
    dur_bad("18446744073709552");
    dur_bad("307445734561826m");
    dur_bad("5124095576031h");
    dur_bad("");
    dur_bad("ms");
    dur_bad("s");
    dur_bad("10x");
    dur_bad("10 s");
    dur_bad("1.5s");
    dur_bad("10S");
    dur_bad("10MS");
    dur_bad("10msx");
    dur_bad("10sec");
    dur_bad("-1s");
    dur_bad("10d");
    dur_bad(NULL);
}
