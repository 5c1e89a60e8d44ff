/* ktls.c — kernel TLS detection (ktls.h). Linux's `tls` ULP (the tls
 * kernel module) takes a socket's record encryption once the handshake
 * is done (setsockopt TCP_ULP "tls", then TLS_TX/TLS_RX with the
 * session's keys), which lets sendfile(2) send a file's pages encrypted
 * without copying them to user space. The module is loaded on demand
 * (modprobe tls) and listed in tcp_available_ulp once registered;
 * reading that file has no side effect, where a TCP_ULP setsockopt on a
 * probe socket may make the kernel load the module. keel's OpenSSL
 * sessions run over keel's own BIO (session.c), not over the socket, so
 * OpenSSL cannot turn kTLS on by itself: the log says so rather than
 * claiming a data path keel does not have (docs/tls.md, "Kernel TLS"). */
#include "ktls.h"

#include <stdio.h>
#include <string.h>

int ko_ulp_list_has_tls(const char *text)
{
    for (const char *p = text; *p;) {
        p += strspn(p, " \t\r\n");
        size_t n = strcspn(p, " \t\r\n");
        if (n == 3 && memcmp(p, "tls", 3) == 0)
            return 1;
        p += n;
    }
    return 0;
}

int ko_ktls_describe(int wanted, int library_has_ktls, char *buf, size_t size)
{
#ifdef __linux__
    char ulps[256] = "";
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r");
    if (f != NULL) {
        size_t n = fread(ulps, 1, sizeof ulps - 1, f);
        ulps[n] = '\0';
        fclose(f);
    }
    int kernel = ko_ulp_list_has_tls(ulps);
    if (!wanted)
        snprintf(buf, size, "off ([tls] ktls = off)");
    else if (f == NULL)
        snprintf(buf, size, "not used: cannot read /proc/sys/net/ipv4/tcp_available_ulp");
    else if (!kernel)
        snprintf(buf, size, "not used: the kernel has no tls module (modprobe tls)");
    else if (!library_has_ktls)
        snprintf(buf, size, "not used: this OpenSSL was built without kTLS (enable-ktls)");
    else
        snprintf(buf, size,
                 "not used: the kernel has the tls module, but keel's TLS sessions run over its "
                 "own transport, which OpenSSL cannot hand to the kernel (docs/tls.md, \"Kernel "
                 "TLS\")");
    return kernel;
#else
    (void)library_has_ktls;
    snprintf(buf, size,
             wanted ? "not available on this system (Linux only)" : "off ([tls] ktls = off)");
    return 0;
#endif
}
