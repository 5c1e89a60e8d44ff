/* nginx.h — nginx as a peer for the integration tests (an upstream in
 * test_proxy_nginx.c, the reference server in test_web_nginx.c): found
 * where a package installs it, else the test is skipped; started in the
 * foreground on a config the test writes, on a port it chose. */
#ifndef KEEL_TEST_NGINX_H
#define KEEL_TEST_NGINX_H

#include "harness.h"

#include <stdio.h>
#include <unistd.h>

static __attribute__((unused)) const char *kn_nginx_bin(void)
{
    static const char *const c[] = {"/usr/sbin/nginx", "/usr/local/sbin/nginx",
                                    "/usr/local/nginx/sbin/nginx"};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (access(c[i], X_OK) == 0)
            return c[i];
    cr_skip_test("nginx is not installed");
    return NULL;
}

/* Writes conf to dir/nginx.conf, starts nginx on it (its prefix dir, its
 * errors on stderr) and waits until port accepts. */
static __attribute__((unused)) kh_proc *kn_nginx_start(const char *dir, const char *conf,
                                                       unsigned port)
{
    char path[600];
    snprintf(path, sizeof path, "%s/nginx.conf", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f && fputs(conf, f) >= 0 && fclose(f) == 0);
    const char *args[] = {"-p", dir, "-e", "/dev/stderr", "-c", path, NULL};
    kh_proc *n = kh_spawn_program(kn_nginx_bin(), NULL, args);
    if (!kh_wait_accepts(port, 5000))
        cr_assert_fail("nginx did not start: %s", kh_stderr(n));
    return n;
}

#endif
