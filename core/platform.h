/* core/platform.h — the little the core needs beyond libuv, per platform.
 *
 * Implementations: platform/posix/platform.c and platform/win/platform.c.
 * Everything else in core/ uses libuv and standard C only.
 */
#ifndef KEEL_CORE_PLATFORM_H
#define KEEL_CORE_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <uv.h>

/* A raw socket as libuv's uv_os_sock_t (int on POSIX, SOCKET on Windows). */
typedef uv_os_sock_t kl_socket;

/* File name suffix of loadable modules: ".so", ".dylib" or ".dll". */
extern const char kl_module_suffix[];

/* Once per process before anything else (ignores SIGPIPE on POSIX, starts
 * Winsock on Windows). */
void kl_platform_init(void);

/* Non-zero where several sockets can bind one port and the kernel spreads
 * connections over them (Linux SO_REUSEPORT, FreeBSD SO_REUSEPORT_LB). */
int kl_reuseport_balances(void);

/* Creates a non-blocking listening socket bound to addr. With `shared`, the
 * port may be bound again by other sockets made the same way (reuseport). A
 * negative libuv error code on failure. */
int kl_listen_socket(const struct sockaddr *addr, int shared, int backlog, kl_socket *out);

/* Accepts one pending connection without blocking; the new socket is
 * non-blocking. Returns 0, UV_EAGAIN when none is pending, or a negative
 * libuv error code. */
int kl_accept(kl_socket listener, kl_socket *out);

void kl_socket_close(kl_socket sock);

/* uv_dlopen without side effects on the user: on Windows a DLL whose own
 * dependency is missing would otherwise raise a modal error box. */
int kl_lib_open(const char *path, uv_lib_t *lib);

/* gmtime that is thread-safe everywhere. */
void kl_gmtime(int64_t seconds, struct tm *out);

#endif
