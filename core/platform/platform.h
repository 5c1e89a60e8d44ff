/* core/platform/platform.h — the little the core needs beyond libuv, per platform.
 *
 * Implementations: platform/posix/platform.c and platform/win/platform.c.
 * Everything else in core/ uses libuv and standard C only.
 */
#ifndef KEEL_CORE_PLATFORM_H
#define KEEL_CORE_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <uv.h>

/* A raw socket as libuv's uv_os_sock_t (int on POSIX, SOCKET on Windows). */
typedef uv_os_sock_t kl_socket;

/* File name suffix of loadable modules: ".so", ".dylib" or ".dll". */
extern const char kl_module_suffix[];

/* Once per process before anything else (ignores SIGPIPE on POSIX, starts
 * Winsock on Windows). */
void kl_platform_init(void);

/* Reads up to len bytes of fd at offset only if the page cache holds them
 * (Linux preadv2 with RWF_NOWAIT): the bytes read (possibly fewer than
 * len), or -1 if the read would have waited for the disk, failed, or the
 * system cannot tell (everywhere else: always -1). Never waits for the
 * disk, so a worker may call it from its loop. */
int64_t kl_pread_cached(int fd, void *buf, size_t len, uint64_t offset);

/* Non-zero where several sockets can bind one port and the kernel spreads
 * connections over them (Linux SO_REUSEPORT, FreeBSD SO_REUSEPORT_LB). */
int kl_reuseport_balances(void);

/* Creates a non-blocking listening socket bound to addr. With `shared`, the
 * port may be bound again by other sockets made the same way (reuseport). A
 * negative libuv error code on failure. */
int kl_listen_socket(const struct sockaddr *addr, int shared, int backlog, kl_socket *out);

/* Creates a non-blocking UDP socket bound to addr, `shared` as for
 * kl_listen_socket (an IPv6 one takes IPv6 only). A negative libuv error
 * code on failure. */
int kl_udp_socket(const struct sockaddr *addr, int shared, kl_socket *out);

/* Accepts one pending connection without blocking; the new socket is
 * non-blocking. Returns 0, UV_EAGAIN when none is pending, or a negative
 * libuv error code. */
int kl_accept(kl_socket listener, kl_socket *out);

void kl_socket_close(kl_socket sock);

/* Sets TCP_NODELAY on a listening TCP socket where the sockets it accepts
 * inherit it (Linux copies the listener's TCP options into each accepted
 * socket), so that they need no setsockopt of their own. Returns 1 if
 * they will have it, 0 elsewhere or on failure (they need their own). */
int kl_listen_nodelay(kl_socket sock);

/* listen(2) again on a listening socket: sets its queue's length (one
 * made elsewhere, handed down by systemd or a reload, gets `backlog`).
 * 0 or a negative libuv error. */
int kl_socket_relisten(kl_socket sock, int backlog);

/* uv_dlopen without side effects on the user: on Windows a DLL whose own
 * dependency is missing would otherwise raise a modal error box. */
int kl_lib_open(const char *path, uv_lib_t *lib);

/* A second descriptor for the same socket (close-on-exec), so that it can
 * be watched with a uv_poll_t of its own: libuv allows one watcher per
 * descriptor, and the connection's uv_tcp_t is that one already. UV_ENOSYS
 * where sockets cannot be duplicated that way (Windows). */
int kl_socket_dup(kl_socket sock, kl_socket *out);

/* Sends up to len (> 0) bytes of the file fd, from offset, to the
 * non-blocking socket sock without copying them through the process.
 * Returns 0 with *sent the bytes that left (0 only at the end of the file),
 * UV_EAGAIN when the socket is full (*sent may still be non-zero: some
 * systems report a partial send that way), UV_ENOSYS where the system or
 * this kind of file has no sendfile (the caller reads and writes instead;
 * nothing was sent then), or another negative libuv error. */
int kl_sendfile(kl_socket sock, int fd, uint64_t offset, size_t len, size_t *sent);

/* Sends up to len bytes to the non-blocking socket, telling the kernel
 * that more follows when `more` is set (Linux MSG_MORE: the bytes wait for
 * the next send or sendfile, so a response head and its file body leave in
 * one segment despite TCP_NODELAY). Returns 0 with *sent, UV_EAGAIN when
 * the socket is full, UV_ENOSYS where the caller should write through
 * libuv instead (Windows), or another negative libuv error. */
int kl_send_more(kl_socket sock, const void *data, size_t len, int more, size_t *sent);

/* ---- Unix domain sockets (platform/posix/unix.c) -------------------------
 * `unix:PATH` and `unix:@NAME` (Linux's abstract namespace) addresses, for
 * listeners and outbound connections. Windows has none of it (every call
 * returns UV_ENOTSUP): libuv's named pipes are not sockets, and keel's
 * connections are. */

/* Fills out with the address `name` (what follows "unix:") names: a path,
 * or "@NAME" in the abstract namespace. 0; UV_EINVAL for an empty name;
 * UV_ENAMETOOLONG past sun_path's room (107 bytes on Linux, 103 on macOS
 * and the BSDs); UV_ENOTSUP for an abstract name off Linux, and on
 * Windows. */
int kl_unix_addr(const char *name, struct sockaddr_storage *out);

/* The length to give bind(2) or connect(2) for addr (any family): an
 * abstract name's is exact, its bytes being the whole name. */
socklen_t kl_sockaddr_len(const struct sockaddr_storage *addr);

/* "unix:/run/keel.sock" or "unix:@name" for a Unix address, NUL-terminated,
 * cut to size. */
void kl_unix_name(const struct sockaddr_storage *addr, char *buf, size_t size);

/* Whether a and b are the same Unix address. */
int kl_unix_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

/* A listening socket's file, to remove it when keel stops and only if it
 * is still the one bound (known == 0: an abstract name, no file). */
typedef struct kl_unix_file {
    uint64_t dev, ino;
    int known;
} kl_unix_file;

/* What a listener's socket file is given: mode (-1: the umask's), owner
 * and group (NULL: unchanged; a name or a number). */
typedef struct kl_unix_perms {
    int mode;
    const char *owner;
    const char *group;
} kl_unix_perms;

/* Binds and listens on the Unix address addr, non-blocking and
 * close-on-exec. A socket file already at the path is removed only if it
 * is a socket and nobody listens on it (a connect is refused); a socket in
 * use (UV_EADDRINUSE), any other kind of file (UV_EEXIST) or one that
 * cannot be probed is refused and left alone. The mode and owner are set
 * before listen(2), so no client connects under other permissions. On
 * failure err holds the reason and nothing is left at the path. Main
 * thread (the user and group are looked up with getpwnam/getgrnam). */
int kl_unix_listen(const struct sockaddr_storage *addr, int backlog, const kl_unix_perms *perms,
                   kl_socket *out, kl_unix_file *file, char *err, size_t errlen);

/* The file of an inherited listening socket bound to addr, as
 * kl_unix_listen records it. 0 or a negative libuv error. */
int kl_unix_file_of(kl_socket sock, const struct sockaddr_storage *addr, kl_unix_file *file);

/* Removes the socket file at addr if it is still `file`. 0 or a negative
 * libuv error. */
int kl_unix_remove(const struct sockaddr_storage *addr, const kl_unix_file *file);

/* Connects a new non-blocking socket to the Unix address addr. A Unix
 * socket connects at once or fails: 0; UV_ECONNREFUSED (nobody listens),
 * UV_ENOENT (no such path), UV_EAGAIN (the listener's queue is full), or
 * another negative libuv error. */
int kl_unix_connect(const struct sockaddr_storage *addr, kl_socket *out);

/* The credentials of the process at the other end of a connected Unix
 * socket, as the kernel recorded them when it connected: SO_PEERCRED on
 * Linux (uid, gid, pid), getpeereid(3) elsewhere (*pid = -1). 0 or a
 * negative libuv error (UV_ENOTSUP on Windows). */
int kl_socket_peer_cred(kl_socket sock, uint32_t *uid, uint32_t *gid, int32_t *pid);

/* ---- Descriptors ------------------------------------------------------- */

/* Raises the soft limit on open descriptors (RLIMIT_NOFILE) to the hard
 * limit, as Go's runtime does at start-up: the soft limit is commonly
 * 1024 for compatibility with select(), which keel does not use, while the
 * hard one is what the administrator allows. On macOS no higher than
 * kern.maxfilesperproc (OPEN_MAX if it cannot be read), which setrlimit
 * would refuse. Never lowers it. *before and *after get the soft limit
 * before and after (UINT64_MAX: unlimited). 0, or a negative libuv error
 * (the limit is then unchanged, *after == *before); UV_ENOSYS on Windows,
 * which has no such limit to raise. Main thread, before workers start. */
int kl_nofile_raise(uint64_t *before, uint64_t *after);

/* ---- Threads ------------------------------------------------------------- */

/* The CPU time (user and system) a running thread has used, in
 * nanoseconds, asked from any thread: 0 with *ns set, UV_ENOTSUP where
 * the system cannot tell another thread's (macOS: no
 * pthread_getcpuclockid), or another negative libuv error. */
int kl_thread_cpu_ns(uv_thread_t thread, uint64_t *ns);

/* ---- Log files ---------------------------------------------------------- */

/* Points the open file `file` (appending) at whatever `path` names now: a
 * log rotated away by renaming is written anew under its old name. The
 * descriptor number stays the same (the new file is dup2'd over it, close-
 * on-exec), so whoever kept it (the crash report) writes to the new file.
 * Flushes first. 0, or a negative libuv error (the file is unchanged);
 * UV_ENOSYS on Windows, where an open file cannot be renamed away. */
int kl_file_reopen(FILE *file, const char *path);

/* ---- Privileges (platform/posix/privileges.c) -------------------------- */

/* Non-zero when the process runs as root (effective uid 0); 0 on Windows. */
int kl_privileged(void);

/* Whether [keel] user (and group, NULL: the user's own) exist and this
 * process can run as them: it is root, or already runs as exactly them
 * (a reload's new process, started by a keel that dropped to them).
 * KEEL_OK, or KEEL_ERR_CONFIG with the reason in err. Not on Windows (the
 * settings refuse the keys there). */
int kl_privileges_check(const char *user, const char *group, char *err, size_t errlen);

/* Becomes user and group for good: the user's supplementary groups
 * (initgroups), the group, the user; checks that root cannot be regained;
 * no_new_privs on Linux. Nothing to do when already them. Every thread of
 * the process changes (glibc and musl broadcast set*id). Main thread.
 * KEEL_OK, or an error with the reason in err; the process may then be
 * half-changed and must not serve. */
int kl_privileges_drop(const char *user, const char *group, char *err, size_t errlen);

/* ---- Service managers and reloads (platform/posix/service.c) ----------- */

/* If sock is a listening stream socket, or a datagram socket bound to an
 * IPv4 or IPv6 address (a `udp` listener's), stores the address it is
 * bound to and whether it is a datagram socket (*dgram) and returns 0 (and
 * makes it non-blocking and close-on-exec, as keel's own listeners are);
 * UV_EINVAL if it is another kind of descriptor, UV_ENOSYS where sockets
 * cannot be inherited (Windows). */
int kl_socket_listening_addr(kl_socket sock, struct sockaddr_storage *addr, int *dgram);

/* Tells the service manager that started keel about its state, as
 * sd_notify(3) does ("READY=1", "RELOADING=1", "STOPPING=1",
 * "MAINPID=n"), through the datagram socket named by NOTIFY_SOCKET.
 * Nothing happens where that variable is not set (or on Windows). */
void kl_service_notify(const char *state);

/* Makes a descriptor inheritable or not by the programs this process
 * starts (FD_CLOEXEC). 0 or a negative libuv error. */
int kl_socket_set_inheritable(kl_socket sock, int inheritable);

/* gmtime that is thread-safe everywhere. */
void kl_gmtime(int64_t seconds, struct tm *out);

/* ---- Crash reports (platform/posix/crash.c, platform/win/crash.c) -------
 * runtime/crash.c says what the report is; these catch the crash, find the
 * code addresses and write the line. */

/* Writes the report line into buf and returns its length: what names the
 * signal, addrs are code addresses, innermost first, the first npc exact.
 * Async-signal-safe (runtime/crash.c's kl_crash_describe). */
typedef size_t (*kl_crash_describe_fn)(char *buf, size_t cap, const char *what,
                                       const uintptr_t *addrs, size_t naddrs, size_t npc);

/* Catches the fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) or,
 * on Windows, unhandled exceptions and abort(): writes the line from
 * `describe` to stderr and, if the log goes to a file (`log` not NULL),
 * there too, then lets the disposition that was there before end the
 * process. The layer above gives `describe`, so that the platform calls
 * nothing above it. Process-wide. KEEL_OK or KEEL_ERR_IO. */
int kl_crash_platform_install(FILE *log, kl_crash_describe_fn describe);
void kl_crash_platform_uninstall(void);

/* What the calling thread needs for a report of its own stack overflow
 * (an alternate signal stack; a stack guarantee on Windows), and its
 * removal. begin is idempotent; a thread that ends without calling end is
 * cleaned up when it exits. */
void kl_crash_platform_thread_begin(void);
void kl_crash_platform_thread_end(void);

/* The shared object holding addr: its load base (what a symboliser's
 * offsets count from) and the extent [lo, hi) of its mapped segments. hi
 * is 0 where the system cannot tell (then kl_crash_platform_base_of is
 * used). 0 on success, -1 if addr is in no shared object. */
int kl_lib_extent(const void *addr, uintptr_t *base, uintptr_t *lo, uintptr_t *hi);

/* The load base of the object holding pc, or 0. From the crash handler,
 * only where kl_lib_extent cannot give extents. */
uintptr_t kl_crash_platform_base_of(uintptr_t pc);

/* The wall-clock time, async-signal-safe. */
void kl_crash_platform_now(int64_t *seconds, unsigned *ms);

#endif
