/* UDP listeners across reloads and from a service manager (docs/udp.md,
 * docs/operations.md): the sockets are handed down as the TCP listeners'
 * are, so the kernel sockets after a reload are the very ones before it
 * (their inodes in /proc/net/udp), a client echoing numbered datagrams
 * all through the reload gets every one back, a reload works without
 * reuseport (before, the new process could not bind the port the old one
 * held), and a bound UDP socket passed by LISTEN_FDS is adopted instead of
 * bound (before, keel refused it and could not bind beside it). Linux:
 * /proc/net/udp. The echo plugin's udp_echo is the protocol: it answers
 * each datagram at once, so a datagram is either answered by the old
 * process or read by the new one. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static pid_t successors[8];
static int nsuccessors;

static void udp_reload_fini(void)
{
    for (int i = 0; i < nsuccessors; i++)
        kill(successors[i], SIGKILL);
    nsuccessors = 0;
    kh_cleanup_all();
}

static pid_t wait_new_pid(const char *path, pid_t old)
{
    pid_t pid;
    if (!KH_WAIT_UNTIL((pid = kh_read_pid(path)) > 0 && pid != old, 10000))
        return 0;
    if (nsuccessors < (int)(sizeof successors / sizeof *successors))
        successors[nsuccessors++] = pid;
    return pid;
}

/* The inodes of the UDP sockets bound to 127.0.0.1:port, sorted, as a
 * string ("" if none): the kernel's names for the sockets themselves. */
static void udp_inodes(unsigned port, char *out, size_t size)
{
    unsigned long inodes[64];
    size_t n = 0;
    FILE *f = fopen("/proc/net/udp", "r");
    cr_assert(f != NULL, "/proc/net/udp: %s", strerror(errno));
    char line[512], want[32];
    snprintf(want, sizeof want, "0100007F:%04X", port);
    while (fgets(line, sizeof line, f) != NULL) {
        char local[64];
        unsigned long inode;
        /* sl local rem st tx:rx tr:tm retrnsmt uid timeout inode */
        if (sscanf(line, " %*s %63s %*s %*s %*s %*s %*s %*s %*s %lu", local, &inode) == 2 &&
            strcmp(local, want) == 0 && n < 64)
            inodes[n++] = inode;
    }
    fclose(f);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && inodes[j - 1] > inodes[j]; j--) {
            unsigned long t = inodes[j];
            inodes[j] = inodes[j - 1];
            inodes[j - 1] = t;
        }
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && at < size; i++)
        at += (size_t)snprintf(out + at, size - at, "%s%lu", i ? " " : "", inodes[i]);
}

static int udp_client(unsigned port)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0)
        return -1;
    return fd;
}

/* A client sending numbered datagrams, one every millisecond or so, and
 * reading the echoes as they come. */
#define ECHO_MAX 20000

typedef struct echo_load {
    int fd;
    volatile int stop;
    long sent;
    unsigned char echoed[ECHO_MAX];
} echo_load;

static void read_echoes(echo_load *l, int timeout_ms)
{
    struct pollfd pfd = {.fd = l->fd, .events = POLLIN};
    char buf[64];
    while (poll(&pfd, 1, timeout_ms) == 1) {
        ssize_t n = recv(l->fd, buf, sizeof buf - 1, 0);
        if (n <= 0)
            break;
        buf[n] = '\0';
        long seq = strtol(buf, NULL, 10);
        if (seq >= 0 && seq < ECHO_MAX)
            l->echoed[seq] = 1;
    }
}

static void *echo_run(void *arg)
{
    echo_load *l = arg;
    while (!l->stop && l->sent < ECHO_MAX) {
        char msg[32];
        int n = snprintf(msg, sizeof msg, "%ld", l->sent);
        if (send(l->fd, msg, (size_t)n, 0) == n)
            l->sent++;
        read_echoes(l, 1);
    }
    return NULL;
}

static long missing(const echo_load *l)
{
    long m = 0;
    for (long i = 0; i < l->sent; i++)
        m += !l->echoed[i];
    return m;
}

/* Two reloads while the client sends: the same sockets all along, every
 * datagram answered. */
static void reload_under_echoes(const char *reuseport)
{
    /* A fixed port, as configs have (a port 0 would be another one in the
     * new process unless the socket is handed down). */
    char conf[1024];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:%u udp_echo udp\nworkers = 2\nreuseport = %s\n"
             "modules = echo\npid_file = keel.pid\n" KH_MODULE_PATH,
             kh_free_port(), reuseport);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    char pid_path[400];
    snprintf(pid_path, sizeof pid_path, "%s/keel.pid", p->dir);
    kh_assert(p, KH_WAIT_UNTIL(kh_read_pid(pid_path) == p->pid, 5000), "no pid file");
    unsigned port = kh_port(p, 0);
    char before[512], after[512];
    udp_inodes(port, before, sizeof before);
    kh_assert(p, before[0] != '\0', "no UDP socket on port %u in /proc/net/udp", port);

    static echo_load load;
    memset(&load, 0, sizeof load);
    load.fd = udp_client(port);
    kh_assert(p, load.fd >= 0, "udp client");
    pthread_t t;
    cr_assert(pthread_create(&t, NULL, echo_run, &load) == 0);
    kh_assert(p, KH_WAIT_UNTIL(load.sent > 100, 5000), "the client does not send");

    pid_t current = p->pid;
    for (int r = 0; r < 2; r++) {
        kill(current, SIGHUP);
        pid_t next = wait_new_pid(pid_path, current);
        kh_assert(p, next > 0, "reload %d: no new process (reuseport %s)", r + 1, reuseport);
        kh_assert(
            p, KH_WAIT_UNTIL(kill(current, 0) != 0 || (current == p->pid && kh_exited(p)), 10000),
            "reload %d: the old process %d did not exit", r + 1, (int)current);
        current = next;
        long seen = load.sent;
        kh_assert(p, KH_WAIT_UNTIL(load.sent > seen + 100, 5000), "the client stalled");
        udp_inodes(port, after, sizeof after);
        kh_assert(p, strcmp(before, after) == 0,
                  "reload %d: the UDP sockets were replaced (inodes '%s', then '%s')", r + 1,
                  before, after);
    }
    load.stop = 1;
    pthread_join(t, NULL);
    read_echoes(&load, 500);
    kh_assert(p, missing(&load) == 0, "%ld of %ld datagrams never answered across the reloads",
              missing(&load), load.sent);
    close(load.fd);
    kill(current, SIGTERM);
    kh_assert(p, KH_WAIT_UNTIL(kill(current, 0) != 0, 10000), "SIGTERM did not stop keel");
}

Test(udp_reload, sockets_handed_down_with_reuseport, .timeout = 60, .fini = udp_reload_fini)
{
    reload_under_echoes("on");
}

/* One socket, which the new process could not bind beside the old one's. */
Test(udp_reload, sockets_handed_down_without_reuseport, .timeout = 60, .fini = udp_reload_fini)
{
    reload_under_echoes("off");
}

/* systemd's ListenDatagram= by hand (sd_listen_fds(3), as test_reload.c
 * does for TCP): a bound UDP socket at descriptor 3, LISTEN_FDS=1 and
 * LISTEN_PID naming keel. keel answers on it and binds nothing of its own
 * there (made without SO_REUSEPORT, the socket admits no siblings: both
 * workers read it through descriptors of their own). */
Test(udp_reload, adopts_a_udp_socket_from_a_service_manager, .timeout = 30, .fini = udp_reload_fini)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                  getsockname(fd, (struct sockaddr *)&a, &len) == 0,
              "bind: %s", strerror(errno));
    unsigned port = ntohs(a.sin_port);
    char passed[512];
    udp_inodes(port, passed, sizeof passed);
    char dir[] = "/tmp/keel-udp-activation-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL, "mkdtemp");
    char conf[300], config[512], script[256];
    snprintf(conf, sizeof conf, "%s/keel.conf", dir);
    snprintf(
        config, sizeof config,
        "[keel]\nlisten = 127.0.0.1:%u udp_echo udp\nworkers = 2\nmodules = echo\n" KH_MODULE_PATH,
        port);
    FILE *f = fopen(conf, "w");
    cr_assert(f != NULL && fputs(config, f) >= 0 && fclose(f) == 0);
    snprintf(script, sizeof script,
             "exec 3<&%d %d<&-; LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" \"$@\"", fd, fd);
    const char *args[] = {"-c", script, KEEL_BIN, "-c", conf, NULL};
    kh_proc *p = kh_start_program("/bin/bash", NULL, args, 1, 10000);
    close(fd);
    kh_assert(p, kh_port(p, 0) == port, "keel listens on %u, not the passed %u", kh_port(p, 0),
              port);
    kh_assert(p,
              kh_count_log(p, "matches no listen line") == 0 &&
                  kh_count_log(p, "neither a listening") == 0,
              "the passed socket was not adopted");
    char now[512];
    udp_inodes(port, now, sizeof now);
    kh_assert(p, strcmp(now, passed) == 0, "keel bound sockets of its own: '%s', passed '%s'", now,
              passed);
    for (int i = 0; i < 8; i++) {
        int c = udp_client(port);
        char msg[32], buf[64];
        int n = snprintf(msg, sizeof msg, "activated %d", i);
        kh_assert(p, c >= 0 && send(c, msg, (size_t)n, 0) == n, "send");
        struct pollfd pfd = {.fd = c, .events = POLLIN};
        kh_assert(p, poll(&pfd, 1, 5000) == 1, "no echo from the passed socket");
        ssize_t got = recv(c, buf, sizeof buf - 1, 0);
        kh_assert(p, got == n && memcmp(buf, msg, (size_t)n) == 0, "echo %d wrong", i);
        close(c);
    }
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "keel did not exit 0");
    unlink(conf);
    rmdir(dir);
}
