/* The module loader as an operator sees it: every way a module can fail
 * stops start-up with one [error] line naming it and exit status 1; a module
 * built against the frozen v1.0 headers loads and works. */
#define _GNU_SOURCE
#include "harness.h"

#include <keel/version.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Starts keel with `modules = echo <extra>` and expects it to refuse with
 * `message` in one [error] line. */
static void refuses(const char *modules, const char *message)
{
    char config[2048];
    snprintf(config, sizeof config,
             "[keel]\n"
             "listen = 127.0.0.1:0 echo\n"
             "workers = 2\n"
             "modules = %s\n" KH_MODULE_PATH,
             modules);
    kh_proc *p = kh_spawn(config, NULL);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "exit status %d, expected 1", status);

    const char *err = kh_stderr(p);
    const char *at = strstr(err, message);
    kh_assert(p, at != NULL, "no message '%s'", message);
    const char *bol = at;
    while (bol > err && bol[-1] != '\n')
        bol--;
    kh_assert(p, strstr(bol, "[error] ") != NULL && strstr(bol, "[error] ") < at,
              "'%s' is not logged as an [error]", message);
    kh_assert(p, kh_count_log(p, "[error]") == 1, "expected exactly one [error] line");
    kh_stop(p);
}

Test(loader, module_not_found, .timeout = 30, .fini = kh_cleanup_all)
{
    refuses("echo nosuch",
            "module 'nosuch': not found (looked for mod_nosuch.so in " KEEL_MODULE_DIR);
}

Test(loader, not_a_module, .timeout = 30, .fini = kh_cleanup_all)
{
    refuses("echo notmodule",
            "module 'notmodule': " KEEL_TEST_MODULE_DIR "/mod_notmodule.so is not a keel module "
            "(no symbol keel_module_notmodule)");
}

Test(loader, wrong_abi_major, .timeout = 30, .fini = kh_cleanup_all)
{
    char msg[200];
    snprintf(msg, sizeof msg, "module 'badabi': built for ABI %d.0, this keel has ABI %d.%d",
             KEEL_ABI_MAJOR + 1, KEEL_ABI_MAJOR, KEEL_ABI_MINOR);
    refuses("echo badabi", msg);
}

Test(loader, newer_abi_minor, .timeout = 30, .fini = kh_cleanup_all)
{
    char msg[200];
    snprintf(msg, sizeof msg, "module 'newminor': built for ABI %d.%d, this keel has ABI %d.%d",
             KEEL_ABI_MAJOR, KEEL_ABI_MINOR + 1, KEEL_ABI_MAJOR, KEEL_ABI_MINOR);
    refuses("echo newminor", msg);
}

Test(loader, missing_requirement, .timeout = 30, .fini = kh_cleanup_all)
{
    refuses("echo needsmissing", "module 'needsmissing': requires module 'nosuchmodule', "
                                 "which is not loaded before it");
}

Test(loader, load_fails, .timeout = 30, .fini = kh_cleanup_all)
{
    refuses("echo loadfail", "module 'loadfail': load failed: ");
}

Test(loader, start_fails, .timeout = 30, .fini = kh_cleanup_all)
{
    refuses("echo startfail", "module 'startfail': start failed on worker ");
}

Test(loader, module_listed_twice, .timeout = 30, .fini = kh_cleanup_all)
{
    /* A module listed twice is a config error, not a crash. */
    char config[1024];
    snprintf(config, sizeof config,
             "[keel]\n"
             "listen = 127.0.0.1:0 echo\n"
             "modules = echo echo\n" KH_MODULE_PATH);
    kh_proc *p = kh_spawn(config, NULL);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "exit status %d for a module listed twice", status);
    kh_assert(p, strstr(kh_stderr(p), "echo") != NULL, "the message does not name the module");
    kh_stop(p);
}

Test(loader, frozen_v1_module_works, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:0 frozen\n"
                          "listen = 127.0.0.1:0 echo\n"
                          "workers = 2\n"
                          "modules = frozen echo\n" KH_MODULE_PATH,
                          NULL, 2, 10000);
    kh_assert(p, strstr(kh_stderr(p), "(frozen)") != NULL, "no frozen listener");
    unsigned port = kh_port(p, 0);
    char buf[256];

    for (int i = 0; i < 4; i++) {
        int fd = kh_connect("127.0.0.1", port);
        kh_assert(p, fd >= 0, "connect failed");
        kh_assert(p, kh_send_str(fd, "Built against ") == 0, "send");
        kh_assert(p, kh_send_str(fd, "v1.0 headers\nsecond line\n") == 0, "send");
        const char *want = "BUILT AGAINST V1.0 HEADERS\nSECOND LINE\n";
        kh_recv_n(fd, buf, sizeof buf, strlen(want), 5000);
        kh_assert(p, strcmp(buf, want) == 0, "got '%s'", buf);
        close(fd);
    }

    kh_signal(p, SIGTERM);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "exit status %d", status);
    kh_stop(p);
}

Test(loader, descriptor_without_name, .timeout = 30, .fini = kh_cleanup_all)
{
    refuses("echo noname", "module 'noname': its descriptor has no name");
}

/* A module compiled with KEEL_LINKED would load and then die with
 * "undefined symbol" at its first call; the loader refuses it first. Where
 * its calls are bound at load (linkednow: -Wl,-z,now, or -fno-plt) dlopen
 * refuses it, and the loader says why all the same. */
Test(loader, module_built_with_keel_linked, .timeout = 30, .fini = kh_cleanup_all)
{
#if KEEL_TEST_HAVE_LINKED
    refuses("echo linked",
            "module 'linked': " KEEL_TEST_MODULE_DIR "/mod_linked.so was built with KEEL_LINKED");
    refuses("echo linkednow", "module 'linkednow': " KEEL_TEST_MODULE_DIR
                              "/mod_linkednow.so was built with KEEL_LINKED or calls libkeel "
                              "directly (undefined symbol keel_");
#else
    cr_skip_test("mod_linked cannot be linked on this system");
#endif
}

/* ---- module_path ----------------------------------------------------------
 * Repeatable and additive (the config's directories first, then the
 * defaults beside the executable); a relative directory is relative to the
 * folder of the config file that names it, or to the working directory for
 * --set. Each test builds a scratch tree of symbolic links to the built
 * modules and checks with `keel -t`, which loads modules without binding. */

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct scratch {
    char root[256];
} scratch;

static void scratch_make(scratch *t)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(t->root, sizeof t->root, "%s/keel-path-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert(mkdtemp(t->root) != NULL, "mkdtemp: %s", strerror(errno));
}

/* root/rel as a directory (one level under an existing one). */
static void scratch_dir(scratch *t, const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", t->root, rel);
    cr_assert(mkdir(path, 0700) == 0, "mkdir %s: %s", path, strerror(errno));
}

/* root/rel/mod_<as>.so -> the built module `target` in `dir`. */
static void scratch_module(scratch *t, const char *rel, const char *as, const char *dir,
                           const char *target)
{
    char link[512], to[512];
    snprintf(link, sizeof link, "%s/%s/mod_%s.so", t->root, rel, as);
    snprintf(to, sizeof to, "%s/mod_%s.so", dir, target);
    cr_assert(symlink(to, link) == 0, "symlink %s: %s", link, strerror(errno));
}

static void scratch_file(scratch *t, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", t->root, rel);
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL, "create %s: %s", path, strerror(errno));
    fputs(text, f);
    cr_assert(fclose(f) == 0);
}

static void scratch_remove(scratch *t)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->root);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", t->root);
}

/* Runs `keel -t ARGS...` and returns it, exited (status in *status). */
static kh_proc *check_config(const char *const *args, int *status)
{
    kh_proc *p = kh_spawn(NULL, args);
    *status = kh_wait_exit(p, 10000);
    return p;
}

Test(loader, relative_module_path_is_relative_to_its_config_file, .timeout = 30,
     .fini = kh_cleanup_all)
{
    scratch t;
    scratch_make(&t);
    scratch_dir(&t, "conf");
    scratch_dir(&t, "conf/mods");
    scratch_module(&t, "conf/mods", "target12", KEEL_TEST_MODULE_DIR, "target12");
    scratch_file(&t, "conf/keel.conf",
                 "[keel]\n"
                 "listen = 127.0.0.1:0 target12\n"
                 "modules = target12\n"
                 "module_path = mods\n");
    /* The working directory has no mods/: only the config's folder does. */
    cr_assert(chdir(t.root) == 0);
    char conf[300];
    snprintf(conf, sizeof conf, "%s/conf/keel.conf", t.root);
    const char *args[] = {"-t", "-c", conf, NULL};
    int status;
    kh_proc *p = check_config(args, &status);
    kh_assert(p, status == 0, "exit status %d", status);
    kh_assert(p, strstr(kh_stderr(p), "configuration ok") != NULL, "not checked");
    kh_stop(p);

    /* The same relative directory from --set is relative to the working
     * directory, not to the config file's folder (elsewhere/): from the
     * root it is found... */
    scratch_dir(&t, "elsewhere");
    scratch_file(&t, "elsewhere/keel.conf",
                 "[keel]\n"
                 "listen = 127.0.0.1:0 target12\n"
                 "modules = target12\n");
    snprintf(conf, sizeof conf, "%s/elsewhere/keel.conf", t.root);
    const char *set[] = {"-t", "-c", conf, "--set", "keel.module_path=conf/mods", NULL};
    p = check_config(set, &status);
    kh_assert(p, status == 0, "exit status %d with --set keel.module_path=conf/mods", status);
    kh_stop(p);
    /* ...and from conf/ it is not. */
    cr_assert(chdir("conf") == 0);
    p = check_config(set, &status);
    kh_assert(p, status == 1, "exit status %d: conf/mods found from conf/", status);
    kh_assert(p, strstr(kh_stderr(p), "looked for mod_target12.so in conf/mods, ") != NULL,
              "the message does not name the relative directory as given");
    kh_stop(p);
    scratch_remove(&t);
}

Test(loader, module_path_is_repeatable_and_searched_before_the_defaults, .timeout = 30,
     .fini = kh_cleanup_all)
{
    scratch t;
    scratch_make(&t);
    scratch_dir(&t, "one");
    scratch_dir(&t, "two");
    scratch_module(&t, "one", "target12", KEEL_TEST_MODULE_DIR, "target12");
    scratch_module(&t, "two", "authors", KEEL_TEST_MODULE_DIR, "authors");
    char config[2048];
    snprintf(config, sizeof config,
             "[keel]\n"
             "listen = 127.0.0.1:0 echo\n"
             "modules = target12 authors echo\n"
             "module_path = %s/one\n"
             "module_path = %s/two\n",
             t.root, t.root);
    /* target12 from the first line, authors from the second, echo from
     * the default beside the executable (build/modules). */
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn(config, args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "exit status %d", status);
    kh_stop(p);

    /* A directory of the config comes before the defaults: a file named
     * mod_echo.so there is the one opened (here a module that is not echo,
     * which the loader then refuses). */
    scratch_module(&t, "one", "echo", KEEL_TEST_MODULE_DIR, "target12");
    p = kh_spawn(config, args);
    status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "exit status %d", status);
    char want[1024];
    snprintf(want, sizeof want, "module 'echo': %s/one/mod_echo.so is not a keel module", t.root);
    kh_assert(p, strstr(kh_stderr(p), want) != NULL,
              "the config's directory was not searched first");
    kh_stop(p);

    /* Not found: every directory is listed, the config's first. */
    snprintf(config, sizeof config,
             "[keel]\n"
             "listen = 127.0.0.1:0 echo\n"
             "modules = nosuch\n"
             "module_path = %s/one %s/two\n"
             "module_path = %s/one\n",
             t.root, t.root, t.root);
    p = kh_spawn(config, args);
    status = kh_wait_exit(p, 10000);
    snprintf(want, sizeof want, "looked for mod_nosuch.so in %s/one, %s/two, %s/one, ", t.root,
             t.root, t.root);
    kh_assert(p, status == 1, "exit status %d", status);
    kh_assert(p, strstr(kh_stderr(p), want) != NULL, "no '%s'", want);
    kh_assert(p, strstr(kh_stderr(p), "/modules, ") != NULL, "the defaults are not searched");
    kh_stop(p);
    scratch_remove(&t);
}
