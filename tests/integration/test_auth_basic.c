/* auth_basic (modules/auth_basic, docs/web.md "Basic authentication"):
 * bcrypt and SHA-crypt users checked through crypt_r, the challenge and
 * its realm, malformed credentials, an exempt path, weak hashes refused at
 * load, the per-worker cache of verified credentials, the file read again
 * on reload. The hashes below were made with Python's crypt module (which
 * is libxcrypt's): alice's bcrypt (cost 5, to keep the test fast) of
 * "alice-pw", bob's and carol's SHA-512 of "bob-pw" and "carol-pw",
 * dave's MD5-crypt of "dave-pw". */
#define _GNU_SOURCE
#include "auth_test.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define ALICE "alice:$2b$05$.YK.aMug64QMnnB0wFWfyuWiA/HCv3o9hDYpbTX142MsCpmPFq7l6\n"
#define BOB                                                                                        \
    "bob:$6$Kv0WTnyCuLgDQMda$1UqeVAjWEikptFnJWLxadcLY/5SYL6gQ/5vJv0WjvvB.e6SFGboIGcFQTyRQpvrS4p/"  \
    "k.BsQxO8VfA9pc3ZF10\n"
#define CAROL                                                                                      \
    "carol:$6$UzsTf1J.eZh4chid$a5aztYIRpIxtMAz5B.e3aTM1DxAyld4Id/7ltCTqeBAEGuWgkhIuOR/"            \
    "5ncXMRb7ROqvkDW0ZKMO1tRkGqVgxr/\n"
#define DAVE "dave:$1$PKq5k597$USqAJPgNQ3YouqCqRVIKv0\n"

/* base64 of user:password */
#define ALICE_OK  "Authorization: Basic YWxpY2U6YWxpY2UtcHc=\r\n" /* alice:alice-pw */
#define ALICE_BAD "Authorization: Basic YWxpY2U6d3Jvbmc=\r\n"     /* alice:wrong */
#define BOB_OK    "Authorization: Basic Ym9iOmJvYi1wdw==\r\n"     /* bob:bob-pw */
#define BOB_BAD   "Authorization: Basic Ym9iOmFsaWNlLXB3\r\n"     /* bob:alice-pw */
#define CAROL_OK  "Authorization: Basic Y2Fyb2w6Y2Fyb2wtcHc=\r\n" /* carol:carol-pw */
#define DAVE_OK   "Authorization: Basic ZGF2ZTpkYXZlLXB3\r\n"     /* dave:dave-pw */
#define NOBODY    "Authorization: Basic bm9ib2R5OmFsaWNlLXB3\r\n" /* nobody:alice-pw */

static char dir[256], users_path[512];

static void setup(void)
{
    if (access(KEEL_MODULE_DIR "/mod_auth_basic.so", F_OK) != 0)
        cr_skip_test("auth_basic is not built (no crypt_r: libxcrypt, Debian libcrypt-dev)");
    at_tmpdir(dir, sizeof dir, "auth");
    snprintf(users_path, sizeof users_path, "%s/users.htpasswd", dir);
    at_write(users_path, "# staff\n" ALICE BOB);
}

static char conf[4096];

static const char *config(const char *extra)
{
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 auth_basic hello stats\n"
             "workers = 1\npid_file = keel.pid\n" KH_MODULE_PATH
             "[auth_basic]\nfile = staff %s\nusers = staff\nrealm = \"Staff \\\"only\\\"\"\n"
             "%s[/metrics]\nauth_basic.users = off\n[/open/]\nauth_basic.users = off\n",
             users_path, extra);
    return conf;
}

static void expect_status(unsigned port, const char *path, const char *headers, int want)
{
    at_reply r;
    at_get(port, path, headers, &r);
    cr_expect_eq(r.status, want, "%s with %s: %d, want %d\n%s", path, headers ? headers : "-",
                 r.status, want, r.head);
}

Test(auth_basic, passwords_bcrypt_and_sha512, .init = setup, .fini = kh_cleanup_all, .timeout = 60)
{
    kh_proc *p = kh_start(config(""), NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    expect_status(port, "/", ALICE_OK, 200);
    expect_status(port, "/", ALICE_BAD, 401);
    expect_status(port, "/", BOB_OK, 200);
    expect_status(port, "/", BOB_BAD, 401);
    expect_status(port, "/", NOBODY, 401);
    /* The scheme is case-insensitive (RFC 9110 11.1). */
    expect_status(port, "/", "Authorization: bAsIc YWxpY2U6YWxpY2UtcHc=\r\n", 200);
}

Test(auth_basic, the_challenge_and_malformed_credentials, .init = setup, .fini = kh_cleanup_all,
     .timeout = 60)
{
    kh_proc *p = kh_start(config(""), NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    at_reply r;
    /* No credentials, or another scheme's: 401 with the challenge, the
     * realm quoted (RFC 9110 5.6.4) and the charset (RFC 7617 2.1). */
    static const char *const none[] = {NULL, "Authorization: Bearer abc\r\n",
                                       "Authorization: Basicx\r\n"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        at_get(port, "/", none[i], &r);
        cr_expect_eq(r.status, 401, "case %zu: %d", i, r.status);
        cr_expect(strstr(r.head, "WWW-Authenticate: Basic realm=\"Staff \\\"only\\\"\", "
                                 "charset=\"UTF-8\"\r\n") != NULL,
                  "case %zu: no challenge in\n%s", i, r.head);
    }
    /* A Basic token that is not base64 or lacks the colon: 400. */
    static const char *const bad[] = {
        "Authorization: Basic !!!!\r\n", "Authorization: Basic YWxpY2U=\r\n", /* "alice" */
        "Authorization: Basic YQ\r\n",                                        /* "a", no colon */
        "Authorization: Basic YTpiAWM=\r\n",                                  /* a control byte */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_status(port, "/", bad[i], 400);
}

Test(auth_basic, an_exempt_path_needs_no_credentials, .init = setup, .fini = kh_cleanup_all,
     .timeout = 60)
{
    kh_proc *p = kh_start(config(""), NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    /* hello has no /open/ route: 404, not 401, shows the filter let it by. */
    expect_status(port, "/open/x", NULL, 404);
    expect_status(port, "/openx", NULL, 401);
    expect_status(port, "/", NULL, 401);
}

Test(auth_basic, weak_hashes_are_refused_at_load, .init = setup, .fini = kh_cleanup_all,
     .timeout = 60)
{
    const char *args[] = {"-t", NULL};
    static const struct {
        const char *line, *why;
    } cases[] = {
        {DAVE, "users.htpasswd:3: an MD5-crypt hash ($1$) is weak"},
        {"erin:secret\n", "users.htpasswd:3: a plain-text password"},
        {"frank:$apr1$abc$def\n", "users.htpasswd:3: Apache's $apr1$"},
        {"no colon\n", "users.htpasswd:3: expected user:hash"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[1024];
        snprintf(text, sizeof text, "%s%s%s", ALICE, BOB, cases[i].line);
        at_write(users_path, text);
        kh_proc *p = kh_spawn(config(""), args);
        int status = kh_wait_exit(p, 10000);
        cr_expect_eq(status, 1, "case %zu: keel -t exited %d", i, status);
        cr_expect(strstr(kh_stderr(p), cases[i].why) != NULL &&
                      strstr(kh_stderr(p), "[auth_basic] file:") != NULL,
                  "case %zu: no '%s' in\n%s", i, cases[i].why, kh_stderr(p));
        kh_stop(p);
    }
    /* Written out, the user's choice: dave's MD5-crypt works. */
    at_write(users_path, ALICE DAVE);
    kh_proc *p = kh_start(config("allow_weak_hashes = on\n"), NULL, 1, 10000);
    expect_status(kh_port(p, 0), "/", DAVE_OK, 200);
    expect_status(kh_port(p, 0), "/", ALICE_OK, 200);
}

Test(auth_basic, a_verified_password_is_remembered, .init = setup, .fini = kh_cleanup_all,
     .timeout = 60)
{
    kh_proc *p = kh_start(config(""), NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    for (int i = 0; i < 5; i++)
        expect_status(port, "/", ALICE_OK, 200);
    expect_status(port, "/", ALICE_BAD, 401); /* a wrong password is never taken from it */
    kh_assert(p, at_metric(port, "auth_basic_verifications_total") == 2,
              "crypt_r ran %lld times for 5 good requests and 1 bad",
              at_metric(port, "auth_basic_verifications_total"));
    kh_assert(p, at_metric(port, "auth_basic_cache_hits_total") == 4, "cache hits: %lld",
              at_metric(port, "auth_basic_cache_hits_total"));
    kh_stop(p);

    /* cache_ttl = 0: every request is checked. */
    p = kh_start(config("cache_ttl = 0\n"), NULL, 1, 10000);
    port = kh_port(p, 0);
    for (int i = 0; i < 3; i++)
        expect_status(port, "/", ALICE_OK, 200);
    kh_assert(p, at_metric(port, "auth_basic_verifications_total") == 3, "verifications: %lld",
              at_metric(port, "auth_basic_verifications_total"));
}

/* ---- reload ------------------------------------------------------------- */

static pid_t successor;

static void reload_fini(void)
{
    if (successor > 0)
        kill(successor, SIGKILL);
    successor = 0;
    kh_cleanup_all();
}

static pid_t read_pid(const char *path)
{
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f == NULL)
        return 0;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    fclose(f);
    return (pid_t)pid;
}

Test(auth_basic, the_file_is_read_again_on_reload, .init = setup, .fini = reload_fini,
     .timeout = 60)
{
    kh_proc *p = kh_start(config(""), NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    char pid_path[400];
    snprintf(pid_path, sizeof pid_path, "%s/keel.pid", p->dir);
    kh_assert(p, KH_WAIT_UNTIL(read_pid(pid_path) == p->pid, 5000), "no pid file");
    expect_status(port, "/", ALICE_OK, 200);
    expect_status(port, "/", CAROL_OK, 401);

    /* Unreadable at reload: the reload fails, the old users stay. */
    char moved[600];
    snprintf(moved, sizeof moved, "%s.moved", users_path);
    cr_assert_eq(rename(users_path, moved), 0);
    kh_signal(p, SIGHUP);
    kh_assert(p, kh_wait_log(p, "reload failed", 10000), "the failed reload was not logged");
    kh_assert(p, strstr(kh_stderr(p), "users.htpasswd: No such file") != NULL,
              "the reason is not logged");
    expect_status(port, "/", ALICE_OK, 200);

    /* Carol replaces alice; the new process reads the file again. */
    at_write(users_path, CAROL BOB);
    kh_signal(p, SIGHUP);
    kh_assert(p, KH_WAIT_UNTIL((successor = read_pid(pid_path)) != p->pid && successor > 0, 10000),
              "no new process after the reload");
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "the old process did not exit");
    expect_status(port, "/", CAROL_OK, 200);
    expect_status(port, "/", ALICE_OK, 401);
}

/* The cookbook's example (docs/web.md) stays a config keel accepts. */
Test(auth_basic, the_example_config_checks, .init = setup, .fini = kh_cleanup_all, .timeout = 60)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s' -t -c '%s/examples/configs/api-auth-ratelimit.conf' --set "
             "'keel.module_path=%s' >/dev/null 2>&1",
             KEEL_BIN, KEEL_SOURCE_DIR, KEEL_MODULE_DIR);
    int status = system(cmd);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "keel -t refused the example: %s",
              cmd);
}

/* 1 if the file at path holds needle; its start is left in buf. */
static int file_has(const char *path, const char *needle, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* The access log's user field (CLF's authuser) is the authenticated user. */
Test(auth_basic, the_access_log_names_the_user, .init = setup, .fini = kh_cleanup_all,
     .timeout = 60)
{
    char text[2048], log[600];
    snprintf(log, sizeof log, "%s/access.log", dir);
    snprintf(text, sizeof text,
             "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 auth_basic accesslog hello\n"
             "workers = 1\n" KH_MODULE_PATH "[auth_basic]\nfile = staff %s\nusers = staff\n"
             "[accesslog]\npath = %s\nformat = common\n",
             users_path, log);
    kh_proc *p = kh_start(text, NULL, 1, 10000);
    expect_status(kh_port(p, 0), "/", BOB_OK, 200);
    expect_status(kh_port(p, 0), "/", NULL, 401);
    char lines[4096] = "";
    int found = KH_WAIT_UNTIL(file_has(log, "\"GET / HTTP/1.1\" 401", lines, sizeof lines), 5000);
    kh_assert(p, found, "no log lines:\n%s", lines);
    kh_assert(p, strstr(lines, "127.0.0.1 - bob [") != NULL, "no user in\n%s", lines);
    kh_assert(p, strstr(lines, "127.0.0.1 - - [") != NULL, "the 401 has a user in\n%s", lines);
}

/* A scope naming a file no `file` line declares fails closed: 500, never
 * an open door, and says why in the log. */
Test(auth_basic, an_unknown_file_name_fails_closed, .init = setup, .fini = kh_cleanup_all,
     .timeout = 60)
{
    kh_proc *p = kh_start(config("[/typo/]\nauth_basic.users = staf\n"), NULL, 1, 10000);
    expect_status(kh_port(p, 0), "/typo/x", ALICE_OK, 500);
    expect_status(kh_port(p, 0), "/typo/x", NULL, 500);
    kh_assert(p, kh_wait_log(p, "users = staf: no `file` of that name", 5000), "not logged");
    kh_assert(p, kh_count_log(p, "users = staf") == 1, "logged more than once");
}
