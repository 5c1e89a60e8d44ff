/* harness.h — start the real `keel` binary and talk to it over sockets.
 *
 * Every integration test runs keel as a child process with a config written
 * to a private temporary directory, with stdout and stderr redirected to
 * files there (so keel never blocks on a full pipe, and everything it logged
 * can be shown when an assertion fails: use kh_assert). Children die with
 * the test process (PR_SET_PDEATHSIG on Linux) and are killed by
 * kh_cleanup_all (run by each test's .fini and at exit), so a failing or
 * timed-out test leaves no process behind.
 *
 * Socket helpers use poll() with explicit timeouts and never block forever.
 * POSIX only.
 */
#ifndef KEEL_TEST_HARNESS_H
#define KEEL_TEST_HARNESS_H

#include <criterion/criterion.h>

/* What every test file needs anyway: signals, sockets, stdio, close(). */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef KEEL_BIN
#error "KEEL_BIN must be defined (path of the keel executable)"
#endif
#ifndef KEEL_MODULE_DIR
#error "KEEL_MODULE_DIR must be defined (where mod_echo.so is)"
#endif
#ifndef KEEL_TEST_MODULE_DIR
#error "KEEL_TEST_MODULE_DIR must be defined (where the test modules are)"
#endif

/* A config prologue every test can start from: both module directories on
 * the path, logging at info. */
#define KH_MODULE_PATH "module_path = " KEEL_MODULE_DIR " " KEEL_TEST_MODULE_DIR "\n"

typedef struct kh_proc {
    pid_t pid;         /* 0 once reaped */
    pid_t pgid;        /* its process group (its own), killed whole by kh_stop */
    int status;        /* raw wait status once reaped */
    char dir[256];     /* private temporary directory */
    char conf[300];    /* config file path ("" if none) */
    char errpath[300]; /* keel's stderr */
    char outpath[300]; /* keel's stdout */
    char *err;         /* stderr read so far (NUL-terminated) */
    char *out;         /* stdout read so far */
} kh_proc;

/* Starts keel. If config is not NULL it is written to DIR/keel.conf and
 * passed with -c. args (NULL-terminated, may be NULL) are appended to the
 * command line. Never returns NULL (fails the test instead). */
kh_proc *kh_spawn(const char *config, const char *const *args);

/* Descriptor limits (RLIMIT_NOFILE, soft and hard) for the next keel
 * started: set in the child before exec, then forgotten. */
void kh_next_nofile(unsigned long soft, unsigned long hard);

/* Like kh_spawn, then waits (up to timeout_ms) until `nlisteners` lines
 * "listening on ADDR:PORT (PROTO)" have been logged. Fails the test, with
 * keel's stderr, if keel exits or the time runs out. */
kh_proc *kh_start(const char *config, const char *const *args, int nlisteners, int timeout_ms);

/* The same for another program than keel (an embedding example): program
 * is its path; config, if not NULL, is passed as "-c FILE". */
kh_proc *kh_spawn_program(const char *program, const char *config, const char *const *args);
kh_proc *kh_start_program(const char *program, const char *config, const char *const *args,
                          int nlisteners, int timeout_ms);

/* The port of the index-th "listening on" line (0-based), or 0. */
unsigned kh_port(kh_proc *p, int index);

/* Re-reads keel's stderr and stdout; returns p->err. */
const char *kh_stderr(kh_proc *p);
const char *kh_stdout(kh_proc *p);

/* Waits until keel's stderr contains `needle` (1) or the time runs out or
 * keel exits without having logged it (0). */
int kh_wait_log(kh_proc *p, const char *needle, int timeout_ms);

/* How many times `needle` occurs in keel's stderr. */
int kh_count_log(kh_proc *p, const char *needle);

/* Sends a signal to keel. */
void kh_signal(kh_proc *p, int sig);

/* Waits for keel to exit and returns its exit status (0..255), or -1 if it
 * was killed by a signal, or -2 if it did not exit in time (it is then
 * killed). */
int kh_wait_exit(kh_proc *p, int timeout_ms);

/* Without waiting: 1 if keel has exited (it is then reaped, and
 * kh_wait_exit returns its status at once), 0 if it is still running. */
int kh_exited(kh_proc *p);

/* Runs `keel -t` on config and asserts that it exits 1 naming the
 * config file's line ("FILE:LINE:") and saying `says`; label names the
 * case in a failure. */
void kh_expect_refused(const char *config, int line, const char *says, const char *label);

/* Kills (if running) and reaps keel, removes its files, frees p. */
void kh_stop(kh_proc *p);

/* Kills every child still running and removes their files. */
void kh_cleanup_all(void);

/* ---- Sockets ------------------------------------------------------------ */

/* Connects to host (an IPv4 or IPv6 literal) : port; -1 on failure. The
 * socket is blocking, with the timeouts of the helpers below. */
int kh_connect(const char *host, unsigned port);

/* Writes all of len bytes; 0 on success, -1 on error. */
int kh_send(int fd, const void *data, size_t len);
int kh_send_str(int fd, const char *s);

/* Reads until `len` bytes have arrived, EOF, error or timeout. Returns the
 * number of bytes read (buf is NUL-terminated, so cap must be > len). */
size_t kh_recv_n(int fd, char *buf, size_t cap, size_t len, int timeout_ms);

/* Reads until the data ends with '\n' (one line), EOF or timeout; returns the
 * bytes read (NUL-terminated). */
size_t kh_recv_line(int fd, char *buf, size_t cap, int timeout_ms);

/* Waits for the peer to close: returns 1 on EOF or reset, 0 on timeout, -1
 * if data arrived instead (copied into buf if buf is not NULL). */
int kh_expect_eof(int fd, char *buf, size_t cap, int timeout_ms);

/* A port on 127.0.0.1 that nothing listens on (bound, then closed: another
 * program may take it before the caller does, which a caller that starts a
 * server on it must expect). */
unsigned kh_free_port(void);

/* Milliseconds on a monotonic clock. */
long long kh_now_ms(void);

/* Sleeps for ms milliseconds. Only for a test that measures time passing
 * (a timeout must not fire before N ms, a rate over a second); a test that
 * waits for something to happen waits for it with the helpers below. */
void kh_sleep_ms(int ms);

/* ---- Waiting for a condition -------------------------------------------- */

/* Polls `cond` (an expression) until it is true or timeout_ms have passed;
 * the value is whether it became true. It is evaluated again after 1 ms,
 * then 2, 4, 8 and every 10 ms: what is quick is seen quickly, what takes
 * long costs few evaluations. A caller asserts on it with its own message:
 *     kh_assert(p, KH_WAIT_UNTIL(kh_count_fds(p) <= n, 5000), "...");    */
#define KH_WAIT_UNTIL(cond, timeout_ms)                                                            \
    __extension__({                                                                                \
        long long kh_wait_end_ = kh_now_ms() + (timeout_ms);                                       \
        int kh_wait_ok_, kh_wait_ms_ = 1;                                                          \
        while (!(kh_wait_ok_ = !!(cond)) && kh_now_ms() < kh_wait_end_) {                          \
            kh_sleep_ms(kh_wait_ms_);                                                              \
            kh_wait_ms_ = kh_wait_ms_ < 5 ? kh_wait_ms_ * 2 : 10;                                  \
        }                                                                                          \
        kh_wait_ok_;                                                                               \
    })

/* Waits until keel's stderr contains `needle` at least n times (1) or the
 * time runs out or keel exits with fewer (0). */
int kh_wait_log_count(kh_proc *p, const char *needle, int n, int timeout_ms);

/* Waits until the process at the other end of the TCP connection fd has
 * read every byte sent on it (nothing unsent on fd, nothing unread in the
 * peer socket's receive queue): what a test means by "keel has read my
 * request". 1, or 0 on timeout. Linux asks the kernel's socket table for
 * the peer's socket (sock_diag, as ss(8) does); where the kernel does not
 * show it this waits a fixed min(timeout_ms, 200) ms and returns 1. */
int kh_wait_peer_read(int fd, int timeout_ms);

/* Half-closes fd, waits (up to timeout_ms) for the peer to close its end
 * too (EOF or a reset; what arrives before is discarded), then closes fd:
 * 1 if the peer had closed, 0 otherwise. What a test means by "keel is
 * done with this connection". */
int kh_close_both(int fd, int timeout_ms);

/* kh_wait_peer_read for every connection to the server on port at once:
 * all accepted, and nothing they delivered left unread (one look at the
 * kernel's table a poll, however many connections there are). */
int kh_wait_port_read(unsigned port, int timeout_ms);

/* Waits until nothing waits in the accept queue of the TCP listener(s) on
 * 127.0.0.1/::1 port: every connection made to it has been accepted. 1,
 * or 0 on timeout; the fixed wait of kh_wait_peer_read where the kernel
 * does not show the queue. */
int kh_wait_accepted(unsigned port, int timeout_ms);

/* Descriptors the process holds open (Linux: /proc/PID/fd), or -1 where
 * that cannot be seen. */
int kh_count_fds(kh_proc *p);

/* Waits until the process holds at most n descriptors: what it closed when
 * a connection or file was done with. 1, or 0 on timeout; where
 * kh_count_fds cannot see, the fixed wait of kh_wait_peer_read and 1. */
int kh_wait_fds_at_most(kh_proc *p, int n, int timeout_ms);

/* Waits until connecting to 127.0.0.1:port succeeds (1) or is refused
 * (0 from kh_wait_refused) before the deadline: a server that has started,
 * or one that has stopped listening. The test connection is closed at once. */
int kh_wait_accepts(unsigned port, int timeout_ms);
int kh_wait_refused(unsigned port, int timeout_ms);

/* ---- Files keel writes, and one request ---------------------------------- */

/* The whole file (up to 1 MiB), NUL-terminated, or NULL if it cannot be
 * read. The caller frees it. */
char *kh_read_file(const char *path);

/* 1 if the file exists and holds `needle`. */
int kh_file_has(const char *path, const char *needle);

/* The number at the start of a pid file, or 0. */
pid_t kh_read_pid(const char *path);

/* The port of the first "listening on 127.0.0.1:PORT" line in a log file
 * keel writes (when [keel] log names a file, stderr has none), or 0. */
unsigned kh_log_file_port(const char *path);

/* One GET of `path` on a new connection to 127.0.0.1:port, Connection:
 * close; 1 if a 200 came back within 5 s. */
int kh_get_ok(unsigned port, const char *path);

/* A macro's value as a string literal (KH_STR(KEEL_ABI_MINOR) is "6"). */
#define KH_STR_(x) #x
#define KH_STR(x)  KH_STR_(x)

/* An assertion that shows keel's stderr when it fails. */
#define kh_assert(p, cond, ...) kh_assert_((p), (cond), __VA_ARGS__, "")
#define kh_assert_(p, cond, fmt, ...)                                                              \
    cr_assert((cond), fmt "%s\n---- keel stderr ----\n%s---- end ----", __VA_ARGS__, kh_stderr(p))

#endif
