/* The portability layer's listening sockets (core/platform): a held port is
 * refused to a second listener and to a socket that asks to share it
 * (SO_REUSEADDR); it binds again right after a listener that served a
 * connection closed, which is what a restart right after a stop needs; on
 * Windows the listener is exclusive (SO_EXCLUSIVEADDRUSE), so that even a
 * wildcard listener's port cannot be taken for one specific address. */
#include <criterion/criterion.h>

#include <string.h>

#include "platform/platform.h"

#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#endif

#ifdef _WIN32
#define BAD_SOCKET INVALID_SOCKET
#else
#define BAD_SOCKET (-1)
#endif

static struct sockaddr_in address(uint32_t host, unsigned port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(host);
    a.sin_port = htons((uint16_t)port);
    return a;
}

static kl_socket listen_on(uint32_t host, unsigned port)
{
    struct sockaddr_in a = address(host, port);
    kl_socket s;
    int rc = kl_listen_socket((const struct sockaddr *)&a, 0, 16, &s);
    cr_assert_eq(rc, 0, "listen on port %u: %s", port, uv_strerror(rc));
    return s;
}

static unsigned port_of(kl_socket s)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
    return ntohs(a.sin_port);
}

/* A blocking client connected to 127.0.0.1:port. */
static kl_socket connect_to(unsigned port)
{
    struct sockaddr_in a = address(INADDR_LOOPBACK, port);
    kl_socket c = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_neq(c, BAD_SOCKET);
    cr_assert_eq(connect(c, (const struct sockaddr *)&a, sizeof a), 0, "connect to port %u", port);
    return c;
}

/* The connection pending on a non-blocking listener, waiting up to 5 s. */
static kl_socket accept_from(kl_socket listener)
{
    for (int i = 0; i < 500; i++) {
        kl_socket s;
        int rc = kl_accept(listener, &s);
        if (rc == 0)
            return s;
        cr_assert_eq(rc, UV_EAGAIN, "accept: %s", uv_strerror(rc));
        uv_sleep(10);
    }
    cr_assert_fail("no connection to accept within 5 s");
    return BAD_SOCKET;
}

/* recv() of one byte on a non-blocking socket, waiting up to 5 s. */
static int recv_byte(kl_socket s, char *byte)
{
    for (int i = 0; i < 500; i++) {
        int n = (int)recv(s, byte, 1, 0);
        if (n >= 0)
            return n;
        uv_sleep(10);
    }
    return -1;
}

/* Whether a socket with SO_REUSEADDR can bind host:port (it is closed). */
static int can_share(uint32_t host, unsigned port)
{
    struct sockaddr_in a = address(host, port);
    kl_socket s = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_neq(s, BAD_SOCKET);
    int on = 1;
    cr_assert_eq(setsockopt(s, SOL_SOCKET, SO_REUSEADDR, (const char *)&on, sizeof on), 0);
    int bound = bind(s, (const struct sockaddr *)&a, sizeof a) == 0;
    kl_socket_close(s);
    return bound;
}

static void init(void)
{
    kl_platform_init();
}

TestSuite(platform, .init = init);

Test(platform, held_port_is_refused)
{
    kl_socket l = listen_on(INADDR_LOOPBACK, 0);
    unsigned port = port_of(l);
    struct sockaddr_in a = address(INADDR_LOOPBACK, port);
    kl_socket second;
    int rc = kl_listen_socket((const struct sockaddr *)&a, 0, 16, &second);
    cr_expect(rc == UV_EADDRINUSE || rc == UV_EACCES, "a second listener on port %u: %s", port,
              rc ? uv_strerror(rc) : "bound");
    if (rc == 0)
        kl_socket_close(second);
    cr_expect_not(can_share(INADDR_LOOPBACK, port),
                  "a socket with SO_REUSEADDR bound the listener's port %u", port);
    kl_socket_close(l);
}

/* A stop closes the listener and the connections it accepted, keel first
 * (so they linger in TIME_WAIT on the server's port); the next start must
 * still get the port. */
Test(platform, port_binds_again_right_after_close)
{
    kl_socket l = listen_on(INADDR_LOOPBACK, 0);
    unsigned port = port_of(l);
    kl_socket client = connect_to(port);
    kl_socket served = accept_from(l);
    cr_assert_eq(send(client, "x", 1, 0), 1);
    char byte;
    cr_assert_eq(recv_byte(served, &byte), 1);
    kl_socket_close(served); /* the server closes first: TIME_WAIT is its */
    cr_assert_eq(recv(client, &byte, 1, 0), 0, "no end of stream");
    kl_socket_close(client);
    kl_socket_close(l);

    kl_socket again = listen_on(INADDR_LOOPBACK, port);
    client = connect_to(port);
    served = accept_from(again);
    kl_socket_close(served);
    kl_socket_close(client);
    kl_socket_close(again);
}

#ifdef _WIN32
Test(platform, listener_is_exclusive)
{
    kl_socket l = listen_on(INADDR_ANY, 0);
    unsigned port = port_of(l);
    BOOL exclusive = FALSE;
    int len = sizeof exclusive;
    cr_assert_eq(getsockopt(l, SOL_SOCKET, SO_EXCLUSIVEADDRUSE, (char *)&exclusive, &len), 0);
    cr_expect(exclusive, "no SO_EXCLUSIVEADDRUSE on a fresh port");
    /* Without the flag Windows lets SO_REUSEADDR bind one specific address
     * of a wildcard listener's port, and take its connections there. */
    cr_expect_not(can_share(INADDR_LOOPBACK, port),
                  "127.0.0.1:%u was bound beside the wildcard listener", port);
    kl_socket_close(l);
}
#endif

/* ---- A thread's CPU time (platform.h kl_thread_cpu_ns) ---------------------- */

#define SPUN_NS (30 * 1000000ull)

typedef struct spinner {
    uv_sem_t spun, release;
} spinner;

/* Burns SPUN_NS of its own CPU time (by its own clock: on a loaded machine
 * wall time says little), then blocks until released. */
static void spin_then_wait(void *arg)
{
    spinner *sp = arg;
    uint64_t ns = 0;
    while (kl_thread_cpu_ns(uv_thread_self(), &ns) == 0 && ns < SPUN_NS)
        ;
    uv_sem_post(&sp->spun);
    uv_sem_wait(&sp->release);
}

Test(platform, thread_cpu_time_of_another_thread)
{
#ifdef __APPLE__
    uint64_t ns = 0;
    cr_assert_eq(kl_thread_cpu_ns(uv_thread_self(), &ns), UV_ENOTSUP);
#else
    spinner sp;
    uv_thread_t t;
    uv_sem_init(&sp.spun, 0);
    uv_sem_init(&sp.release, 0);
    cr_assert_eq(uv_thread_create(&t, spin_then_wait, &sp), 0);
    uv_sem_wait(&sp.spun);
    uint64_t spun = 0, later = 0;
    cr_assert_eq(kl_thread_cpu_ns(t, &spun), 0);
    cr_assert_geq(spun, SPUN_NS, "the spinner's CPU time, asked from another thread: %llu",
                  (unsigned long long)spun);
    uv_sleep(100);
    cr_assert_eq(kl_thread_cpu_ns(t, &later), 0);
    cr_assert_lt(later - spun, 20 * 1000000ull,
                 "a blocked thread uses no CPU: %llu ns more in 100 ms of waiting",
                 (unsigned long long)(later - spun));
    uv_sem_post(&sp.release);
    uv_thread_join(&t);
    uv_sem_destroy(&sp.spun);
    uv_sem_destroy(&sp.release);
#endif
}

/* ---- Unix socket addresses (platform.h kl_unix_addr) ------------------------ */

#ifdef _WIN32
Test(platform, unix_addresses_are_unsupported)
{
    struct sockaddr_storage a;
    cr_assert_eq(kl_unix_addr("/run/keel.sock", &a), UV_ENOTSUP);
}
#else
#include <stddef.h>
#include <sys/un.h>

Test(platform, unix_addresses_paths_and_abstract_names)
{
    struct sockaddr_storage a, b;
    cr_assert_eq(kl_unix_addr("/run/keel.sock", &a), 0);
    cr_assert_eq(a.ss_family, AF_UNIX);
    /* A path's length counts its NUL, as bind(2) wants. */
    cr_assert_eq(kl_sockaddr_len(&a), offsetof(struct sockaddr_un, sun_path) + 15);
    char name[128];
    kl_unix_name(&a, name, sizeof name);
    cr_assert_str_eq(name, "unix:/run/keel.sock");

    cr_assert_eq(kl_unix_addr("", &a), UV_EINVAL);
    cr_assert_eq(kl_unix_addr("@", &a), UV_EINVAL);
    char path[sizeof((struct sockaddr_un *)0)->sun_path + 1];
    memset(path, 'x', sizeof path - 1);
    path[sizeof path - 1] = '\0';
    cr_assert_eq(kl_unix_addr(path, &a), UV_ENAMETOOLONG, "a path needs room for its NUL");
    path[sizeof path - 2] = '\0';
    cr_assert_eq(kl_unix_addr(path, &a), 0, "the longest path that fits");

#ifdef __linux__
    /* An abstract name is exactly its bytes: "@ab" and "@abc" differ. */
    cr_assert_eq(kl_unix_addr("@abc", &a), 0);
    cr_assert_eq(kl_sockaddr_len(&a), offsetof(struct sockaddr_un, sun_path) + 4);
    kl_unix_name(&a, name, sizeof name);
    cr_assert_str_eq(name, "unix:@abc");
    cr_assert_eq(kl_unix_addr("@ab", &b), 0);
    cr_assert(!kl_unix_same(&a, &b));
    cr_assert_eq(kl_unix_addr("@abc", &b), 0);
    cr_assert(kl_unix_same(&a, &b));
    cr_assert_eq(kl_unix_addr("/abc", &b), 0);
    cr_assert(!kl_unix_same(&a, &b), "a path is not the abstract name");
#else
    cr_assert_eq(kl_unix_addr("@abc", &a), UV_ENOTSUP);
#endif
}
#endif
