/* ktls.h — whether kernel TLS could carry this process's TLS records
 * (Linux's `tls` upper-layer protocol), for the start-up log. Pure C, no
 * OpenSSL type: tests/unit/test_ktls_probe.c links ktls.c alone. */
#ifndef KEEL_TLS_OPENSSL_KTLS_H
#define KEEL_TLS_OPENSSL_KTLS_H

#include <stddef.h>

/* Whether the text of /proc/sys/net/ipv4/tcp_available_ulp (the ULPs
 * the kernel has registered, space-separated: "mptcp tls") names "tls". */
int ko_ulp_list_has_tls(const char *text);

/* What kTLS does for this process, one sentence for the start-up log
 * ("kTLS: ..."): off by config, not available on this system (not
 * Linux), the kernel has no tls module, or the module is there but
 * keel's sessions cannot hand their records to it (docs/tls.md, "Kernel
 * TLS"). Returns 1 when the kernel has the tls ULP, 0 otherwise. */
int ko_ktls_describe(int wanted, int library_has_ktls, char *buf, size_t size);

#endif
