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
 * "undefined symbol" at its first call; the loader refuses it first. */
Test(loader, module_built_with_keel_linked, .timeout = 30, .fini = kh_cleanup_all)
{
#if KEEL_TEST_HAVE_LINKED
    refuses("echo linked",
            "module 'linked': " KEEL_TEST_MODULE_DIR "/mod_linked.so was built with KEEL_LINKED");
#else
    cr_skip_test("mod_linked cannot be linked on this system");
#endif
}
