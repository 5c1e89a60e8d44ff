/* tests/unit/test_config_schema.c — declared keys (keel/config.h,
 * runtime/config_schema.c): the table's own checks, values into the struct,
 * defaults, ranges, lists, paths, enums, and the messages a user reads. */
#include <criterion/criterion.h>

#include <keel/keel.h>

#include "base/log.h"
#include "runtime/config.h"
#include "runtime/config_schema.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct conf {
    const char *name;
    int flag;
    int64_t count;
    uint64_t size;
    uint64_t wait_ms;
    const char *upstream;
    const char *root;
    int mode;
    keel_config_list allow;
    keel_config_list roots;
} conf;

static const char *const modes[] = {"keep", "replace", "drop", NULL};

static const keel_config_key keys[] = {
    KEEL_KEY(conf, name, "name", KEEL_CONFIG_STRING, .def = "keel", .doc = "a name"),
    KEEL_KEY(conf, flag, "flag", KEEL_CONFIG_BOOL, .def = "on", .doc = "a switch"),
    KEEL_KEY(conf, count, "count", KEEL_CONFIG_INT, .def = "3", .min = 1, .max = 10,
             .doc = "how many"),
    KEEL_KEY(conf, size, "size", KEEL_CONFIG_SIZE, .def = "64k", .min = 1024, .max = 1 << 20,
             .doc = "how much"),
    KEEL_KEY(conf, wait_ms, "wait", KEEL_CONFIG_DURATION, .def = "5s", .doc = "how long"),
    KEEL_KEY(conf, upstream, "upstream", KEEL_CONFIG_ADDRESS, .doc = "where"),
    KEEL_KEY(conf, root, "root", KEEL_CONFIG_PATH, .def = "www", .doc = "a folder"),
    KEEL_KEY(conf, mode, "mode", KEEL_CONFIG_ENUM, .def = "replace", .choices = modes,
             .doc = "what to do"),
    KEEL_KEY(conf, allow, "allow", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .def = "127.0.0.1", .doc = "who"),
    KEEL_KEY(conf, roots, "extra", KEEL_CONFIG_PATH, .flags = KEEL_CONFIG_LIST,
             .doc = "more folders"),
};
KEEL_CONFIG_SCHEMA(schema, conf, keys);

/* The core's log goes to a file the tests read back. */
static char log_path[64];
static char logged[4096];

static void reset_log(void)
{
    FILE *f = fopen(log_path, "w");
    if (f != NULL)
        fclose(f);
    logged[0] = '\0';
}

static void read_log(void)
{
    FILE *f = fopen(log_path, "r");
    size_t n = f ? fread(logged, 1, sizeof logged - 1, f) : 0;
    logged[n] = '\0';
    if (f != NULL)
        fclose(f);
}

static void setup(void)
{
    char err[256];
    snprintf(log_path, sizeof log_path, "/tmp/keel-schema-%ld.log", (long)getpid());
    reset_log();
    cr_assert_eq(kl_log_configure(log_path, KEEL_LOG_INFO, err, sizeof err), KEEL_OK, "%s", err);
}

static void teardown(void)
{
    char err[256];
    kl_log_configure("stderr", KEEL_LOG_INFO, err, sizeof err);
    remove(log_path);
}

TestSuite(config_schema, .init = setup, .fini = teardown);

/* Parses text as a file named /etc/keel/t.conf and fills the struct from
 * its [m] section. */
static int fill(const char *text, kl_config **cfg, kl_schema_store *store)
{
    char err[512];
    *cfg = kl_config_new();
    cr_assert_eq(kl_config_parse_string(*cfg, text, "t.conf", err, sizeof err), KEEL_OK, "%s", err);
    reset_log();
    int rc = kl_schema_fill(&schema, *cfg, kl_config_section_find(*cfg, "m"), "m", store);
    read_log();
    return rc;
}

Test(config_schema, the_table_passes_its_own_check)
{
    char err[512] = "";
    cr_assert_eq(kl_schema_check(&schema, err, sizeof err), KEEL_OK, "%s", err);
}

Test(config_schema, defaults_fill_every_field)
{
    kl_config *cfg;
    kl_schema_store store;
    cr_assert_eq(fill("[keel]\n", &cfg, &store), KEEL_OK, "%s", logged);
    const conf *c = store.conf;
    cr_expect_str_eq(c->name, "keel");
    cr_expect_eq(c->flag, 1);
    cr_expect_eq(c->count, 3);
    cr_expect_eq(c->size, 65536);
    cr_expect_eq(c->wait_ms, 5000);
    cr_expect_null(c->upstream);
    cr_expect_str_eq(c->root, "www");
    cr_expect_eq(c->mode, 1);
    cr_expect_eq(c->allow.count, 1);
    cr_expect_str_eq(c->allow.items[0], "127.0.0.1");
    cr_expect_eq(c->roots.count, 0);
    kl_schema_store_free(&store);
    kl_config_free(cfg);
}

Test(config_schema, written_values_win_and_lists_keep_file_order)
{
    kl_config *cfg;
    kl_schema_store store;
    cr_assert_eq(fill("[m]\nname = x\nflag = off\ncount = 10\nsize = 1m\nwait = 250ms\n"
                      "upstream = [::1]:8080\nmode = drop\nallow = a\nallow = b\nallow = c\n",
                      &cfg, &store),
                 KEEL_OK, "%s", logged);
    const conf *c = store.conf;
    cr_expect_str_eq(c->name, "x");
    cr_expect_eq(c->flag, 0);
    cr_expect_eq(c->count, 10);
    cr_expect_eq(c->size, 1 << 20);
    cr_expect_eq(c->wait_ms, 250);
    cr_expect_str_eq(c->upstream, "[::1]:8080");
    cr_expect_eq(c->mode, 2);
    cr_assert_eq(c->allow.count, 3);
    cr_expect_str_eq(c->allow.items[0], "a");
    cr_expect_str_eq(c->allow.items[2], "c");
    kl_schema_store_free(&store);
    kl_config_free(cfg);
}

/* Each bad value is refused with FILE:LINE, the section, the key and why. */
Test(config_schema, bad_values_name_file_line_key_and_reason)
{
    static const struct {
        const char *line, *message;
    } cases[] = {
        {"count = 11", "t.conf:2: [m] count: expected an integer between 1 and 10"},
        {"size = 512", "t.conf:2: [m] size: expected a size between 1k and 1m"},
        {"size = 2m", "t.conf:2: [m] size: expected a size between 1k and 1m"},
        {"flag = maybe", "t.conf:2: [m] flag: expected on/off, yes/no, true/false or 1/0"},
        {"mode = keepit", "t.conf:2: [m] mode: expected one of keep replace drop"},
        {"upstream = example", "t.conf:2: [m] upstream: expected HOST:PORT, [IPv6]:PORT or "
                               "unix:/path, not 'example'"},
        {"upstream = a:0", "t.conf:2: [m] upstream: expected HOST:PORT, [IPv6]:PORT or "
                           "unix:/path, not 'a:0'"},
        {"upstream = ::1:80", "t.conf:2: [m] upstream: expected HOST:PORT, [IPv6]:PORT or "
                              "unix:/path, not '::1:80'"},
        {"wait = soon", "t.conf:2: [m] wait: expected a duration such as 500ms, 10s or 5m"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "[m]\n%s\n", cases[i].line);
        kl_config *cfg;
        kl_schema_store store;
        cr_expect_eq(fill(text, &cfg, &store), KEEL_ERR_CONFIG, "%s", cases[i].line);
        cr_expect(strstr(logged, cases[i].message) != NULL, "%s: logged '%s', wanted '%s'",
                  cases[i].line, logged, cases[i].message);
        kl_schema_store_free(&store);
        kl_config_free(cfg);
    }
}

Test(config_schema, a_scalar_written_twice_is_an_error)
{
    kl_config *cfg;
    kl_schema_store store;
    cr_expect_eq(fill("[m]\ncount = 2\ncount = 3\n", &cfg, &store), KEEL_ERR_CONFIG);
    cr_expect(strstr(logged, "count") != NULL && strstr(logged, "more than once") != NULL, "%s",
              logged);
    kl_schema_store_free(&store);
    kl_config_free(cfg);
}

/* The table marks its keys used: the unknown-key check sees only the rest. */
Test(config_schema, unknown_keys_are_left_for_the_unknown_key_check)
{
    kl_config *cfg;
    kl_schema_store store;
    char err[512];
    cr_assert_eq(fill("[m]\ncount = 2\ncuont = 3\n", &cfg, &store), KEEL_OK, "%s", logged);
    cr_expect_eq(kl_config_check_unused(kl_config_section_find(cfg, "m"), err, sizeof err),
                 KEEL_ERR_CONFIG);
    cr_expect(strstr(err, "t.conf:3: [m] unknown key 'cuont'") != NULL, "%s", err);
    kl_schema_store_free(&store);
    kl_config_free(cfg);
}

/* Relative paths from a file are resolved against the file's folder. */
Test(config_schema, paths_written_in_a_file_are_relative_to_its_folder)
{
    char path[64];
    snprintf(path, sizeof path, "./keel-schema-%ld.conf", (long)getpid());
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("[m]\nroot = site\nextra = /abs\nextra = rel/x\n", f);
    fclose(f);
    char err[512];
    kl_config *cfg = kl_config_new();
    cr_assert_eq(kl_config_parse_file(cfg, path, err, sizeof err), KEEL_OK, "%s", err);
    remove(path);
    kl_schema_store store;
    cr_assert_eq(kl_schema_fill(&schema, cfg, kl_config_section_find(cfg, "m"), "m", &store),
                 KEEL_OK);
    const conf *c = store.conf;
    cr_expect_str_eq(c->root, "./site");
    cr_assert_eq(c->roots.count, 2);
    cr_expect_str_eq(c->roots.items[0], "/abs");
    cr_expect_str_eq(c->roots.items[1], "./rel/x");
    kl_schema_store_free(&store);
    kl_config_free(cfg);
}

Test(config_schema, a_required_key_must_be_written)
{
    typedef struct r {
        const char *where;
    } r;
    static const keel_config_key rkeys[] = {
        KEEL_KEY(r, where, "where", KEEL_CONFIG_ADDRESS, .flags = KEEL_CONFIG_REQUIRED, .doc = "x"),
    };
    KEEL_CONFIG_SCHEMA(rschema, r, rkeys);
    char err[512];
    kl_config *cfg = kl_config_new();
    cr_assert_eq(kl_config_parse_string(cfg, "[m]\nother = 1\n", "t.conf", err, sizeof err),
                 KEEL_OK);
    kl_schema_store store;
    reset_log();
    cr_expect_eq(kl_schema_fill(&rschema, cfg, kl_config_section_find(cfg, "m"), "m", &store),
                 KEEL_ERR_CONFIG);
    read_log();
    cr_expect(strstr(logged, "t.conf:1: [m] where: required") != NULL, "%s", logged);
    kl_schema_store_free(&store);
    kl_config_free(cfg);
}

/* A faulty table is the module's bug, caught before any config is read. */
Test(config_schema, faulty_tables_are_refused_with_the_reason)
{
    typedef struct t {
        int small;
        uint64_t big;
        const char *s;
    } t;
    static const keel_config_key wrong_size[] = {
        KEEL_KEY(t, small, "small", KEEL_CONFIG_SIZE, .doc = "an int is no size field"),
    };
    static const keel_config_key bad_default[] = {
        KEEL_KEY(t, big, "big", KEEL_CONFIG_SIZE, .def = "9z", .doc = "x"),
    };
    static const keel_config_key out_of_range_default[] = {
        KEEL_KEY(t, big, "big", KEEL_CONFIG_SIZE, .def = "1m", .min = 1, .max = 1024, .doc = "x"),
    };
    static const keel_config_key twice[] = {
        KEEL_KEY(t, s, "s", KEEL_CONFIG_STRING, .doc = "x"),
        KEEL_KEY(t, s, "s", KEEL_CONFIG_STRING, .doc = "x"),
    };
    static const keel_config_key bad_name[] = {
        KEEL_KEY(t, s, "Bad Name", KEEL_CONFIG_STRING, .doc = "x"),
    };
    static const keel_config_key enum_without_choices[] = {
        KEEL_KEY(t, small, "e", KEEL_CONFIG_ENUM, .doc = "x"),
    };
    KEEL_CONFIG_SCHEMA(s1, t, wrong_size);
    KEEL_CONFIG_SCHEMA(s2, t, bad_default);
    KEEL_CONFIG_SCHEMA(s3, t, out_of_range_default);
    KEEL_CONFIG_SCHEMA(s4, t, twice);
    KEEL_CONFIG_SCHEMA(s5, t, bad_name);
    KEEL_CONFIG_SCHEMA(s6, t, enum_without_choices);
    const struct {
        const keel_config_schema *schema;
        const char *why;
    } cases[] = {
        {&s1, "key 'small': a size needs a field of 8 bytes"},
        {&s2, "key 'big': default '9z'"},
        {&s3, "key 'big': default '1m': expected a size between 1 and 1k"},
        {&s4, "key 's' declared twice"},
        {&s5, "invalid name 'Bad Name'"},
        {&s6, "key 'e': bad scopes, range or choices"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        cr_expect_eq(kl_schema_check(cases[i].schema, err, sizeof err), KEEL_ERR_ABI, "case %zu",
                     i);
        cr_expect(strstr(err, cases[i].why) != NULL, "case %zu: '%s', wanted '%s'", i, err,
                  cases[i].why);
    }
}

Test(config_schema, the_reference_lists_type_range_default_scope_and_doc)
{
    char buf[8192];
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    kl_schema_describe(f, "m", "1.0", &schema, 1);
    rewind(f);
    buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
    fclose(f);
    cr_expect(strstr(buf, "| `size` | size, between 1k and 1m | `64k` | global | how much |") !=
                  NULL,
              "%s", buf);
    cr_expect(strstr(buf, "| `mode` | enum: keep, replace, drop | `replace` |") != NULL, "%s", buf);
    cr_expect(strstr(buf, "| `allow` | string list | `127.0.0.1` |") != NULL, "%s", buf);
}
