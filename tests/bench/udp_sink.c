/* udp_sink — the plain baseline of bench's udp scenario (udp.sh): one
 * thread, one socket on 127.0.0.1:PORT, blocking recvmmsg of up to 16
 * datagrams into 64 KiB slots (what keel's UDP listener does per receive,
 * through libuv and epoll), counting them; "?count" is answered with the
 * count. No event loop, no callback: what a receiver costs at the least.
 * Stops after SECONDS (bounded; SIGTERM also ends it).
 *
 *   udp_sink PORT SECONDS */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define BATCH 16
#define SLOT  (64 * 1024)

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: udp_sink PORT SECONDS\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&at, sizeof at) != 0) {
        perror("udp_sink: bind");
        return 1;
    }
    /* Wakes up once a second to check the time bound. */
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    time_t end = time(NULL) + atol(argv[2]);
    static char bufs[BATCH][SLOT];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_storage peers[BATCH];
    unsigned long long count = 0;
    fprintf(stderr, "udp_sink: listening on 127.0.0.1:%s\n", argv[1]);
    while (time(NULL) < end) {
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = bufs[i];
            iov[i].iov_len = SLOT;
            memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = &peers[i];
            msgs[i].msg_hdr.msg_namelen = sizeof peers[i];
        }
        int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        for (int i = 0; i < n; i++) {
            if (msgs[i].msg_len == 6 && memcmp(bufs[i], "?count", 6) == 0) {
                char line[32];
                int len = snprintf(line, sizeof line, "%llu", count);
                sendto(fd, line, (size_t)len, 0, (struct sockaddr *)&peers[i],
                       msgs[i].msg_hdr.msg_namelen);
                continue;
            }
            count++;
        }
    }
    close(fd);
    return 0;
}
