/* Kernel TLS detection (modules/tls_openssl/ktls.c, compiled in alone):
 * how /proc/sys/net/ipv4/tcp_available_ulp's text is read, and what the
 * start-up line says on this machine. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ktls.h"

Test(ktls_probe, the_ulp_list_names_tls_as_a_word)
{
    cr_assert_eq(ko_ulp_list_has_tls("mptcp\n"), 0);
    cr_assert_eq(ko_ulp_list_has_tls(""), 0);
    cr_assert_eq(ko_ulp_list_has_tls("\n"), 0);
    cr_assert_eq(ko_ulp_list_has_tls("tls\n"), 1);
    cr_assert_eq(ko_ulp_list_has_tls("mptcp tls\n"), 1);
    cr_assert_eq(ko_ulp_list_has_tls("tls mptcp"), 1);
    cr_assert_eq(ko_ulp_list_has_tls("espintcp\ttls"), 1);
    /* Not a word of its own. */
    cr_assert_eq(ko_ulp_list_has_tls("ktls mptcp"), 0);
    cr_assert_eq(ko_ulp_list_has_tls("tlsx"), 0);
    cr_assert_eq(ko_ulp_list_has_tls("mptcp tl"), 0);
}

Test(ktls_probe, off_says_so)
{
    char buf[300];
    cr_assert_eq(ko_ktls_describe(0, 1, buf, sizeof buf) >= 0, 1);
    cr_assert_str_eq(buf, "off ([tls] ktls = off)");
}

/* On this machine: the answer matches what the kernel lists. */
Test(ktls_probe, this_machine)
{
    char buf[300];
    int kernel = ko_ktls_describe(1, 1, buf, sizeof buf);
#ifdef __linux__
    char ulps[256] = "";
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r");
    if (f == NULL)
        cr_skip_test("no /proc/sys/net/ipv4/tcp_available_ulp");
    size_t n = fread(ulps, 1, sizeof ulps - 1, f);
    ulps[n] = '\0';
    fclose(f);
    cr_assert_eq(kernel, ko_ulp_list_has_tls(ulps), "%s", ulps);
    if (!kernel)
        cr_assert_str_eq(buf, "not used: the kernel has no tls module (modprobe tls)");
    else
        cr_assert(strstr(buf, "the kernel has the tls module") != NULL, "%s", buf);
    /* A library without kTLS is named when the kernel has it. */
    ko_ktls_describe(1, 0, buf, sizeof buf);
    if (kernel)
        cr_assert(strstr(buf, "built without kTLS") != NULL, "%s", buf);
#else
    cr_assert_eq(kernel, 0);
    cr_assert_str_eq(buf, "not available on this system (Linux only)");
#endif
}
