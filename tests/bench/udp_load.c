/* udp_load — the load of bench's udp scenario (udp.sh): datagrams of SIZE
 * bytes to 127.0.0.1:PORT from one socket, in sendmmsg batches, for WARMUP
 * then DURATION seconds (bounded: at most MAX_DATAGRAMS in all). The
 * server counts what it received and answers "?count" with the number
 * (the echo plugin's udp_discard, udp_sink.c); the server's CPU time comes
 * from /proc/PID/stat. Between the phases the load pauses so that the
 * server drains its queue, and the count is asked then (retried: a
 * datagram may be dropped).
 *
 *   udp_load PORT SIZE WARMUP DURATION SERVER_PID
 *
 * Prints: received=N seconds=S rate=N/S per_cpu_s=N/CPU-s sent=M */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH         32
#define MAX_DATAGRAMS 200000000ull

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* utime + stime of pid, in seconds. */
static double cpu_seconds(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long utime = 0, stime = 0;
    if (!p ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static unsigned long long sent_total;

static void send_for(int fd, const char *payload, size_t size, double seconds)
{
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = (void *)payload;
        iov[i].iov_len = size;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    double end = now() + seconds;
    while (now() < end && sent_total < MAX_DATAGRAMS) {
        int n = sendmmsg(fd, msgs, BATCH, 0);
        if (n > 0)
            sent_total += (unsigned long long)n;
    }
}

/* The server's count, asked until it answers (5 s at most). */
static long long ask_count(int fd)
{
    char buf[128];
    /* Whatever the server sent before (nothing, usually) goes first. */
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
        ;
    for (int tries = 0; tries < 50; tries++) {
        if (send(fd, "?count", 6, 0) != 6)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) == 1) {
            ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
            if (n > 0) {
                buf[n] = '\0';
                return atoll(buf);
            }
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: udp_load PORT SIZE WARMUP DURATION SERVER_PID\n");
        return 2;
    }
    unsigned port = (unsigned)atoi(argv[1]);
    size_t size = (size_t)atol(argv[2]);
    double warmup = atof(argv[3]), duration = atof(argv[4]);
    long pid = atol(argv[5]);
    if (size < 1 || size > 65507 || duration <= 0 || duration > 600 || warmup > 600) {
        fprintf(stderr, "udp_load: bad arguments\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        perror("udp_load: socket");
        return 1;
    }
    char *payload = malloc(size);
    memset(payload, 'x', size);
    /* A statsd-like line, for servers that parse what they get. */
    memcpy(payload, "bench.udp:1|c\n", size < 14 ? size : 14);

    send_for(fd, payload, size, warmup);
    usleep(200000);
    long long c0 = ask_count(fd);
    double cpu0 = cpu_seconds(pid), t0 = now();
    send_for(fd, payload, size, duration);
    usleep(200000); /* the server drains its queue: its CPU time counts */
    long long c1 = ask_count(fd);
    double cpu1 = cpu_seconds(pid), t1 = now();
    if (c0 < 0 || c1 < 0 || cpu0 < 0 || cpu1 < 0) {
        fprintf(stderr, "udp_load: the server did not answer ?count (or no /proc/%ld)\n", pid);
        return 1;
    }
    double received = (double)(c1 - c0), cpu = cpu1 - cpu0;
    printf("received=%.0f seconds=%.2f rate=%.0f per_cpu_s=%.0f sent=%llu\n", received, t1 - t0,
           received / (t1 - t0), cpu > 0 ? received / cpu : 0, sent_total);
    free(payload);
    close(fd);
    return 0;
}
