/* core/net/inherit.h — listening sockets handed to this process: by a
 * service manager (systemd's socket activation: LISTEN_PID, LISTEN_FDS,
 * sd_listen_fds(3)) or by the keel a reload replaces (KEEL_LISTEN_FDS and
 * KEEL_READY_FD, server/reload.c). Both put the sockets at descriptors
 * 3, 4, ...; listeners adopt them by address instead of binding. */
#ifndef KEEL_CORE_INHERIT_H
#define KEEL_CORE_INHERIT_H

#include <stddef.h>

#include "platform/platform.h"

typedef struct kl_inherited {
    kl_socket sock;
    struct sockaddr_storage addr; /* what it is bound to */
    int taken;                    /* a listener adopted it */
    int dgram;                    /* a bound datagram socket (a udp listener's), not a stream one */
    int owned;                    /* a Unix socket whose file the keel that handed it down made */
} kl_inherited;

typedef struct kl_inheritance {
    kl_inherited *sockets;
    size_t count;
    int ready_fd;  /* a reload: written to once this process serves; -1 */
    int from_keel; /* handed down by a reload, not a service manager */
} kl_inheritance;

/* Reads the variables above (and KEEL_LISTEN_OWNED), checks each
 * descriptor is a listening TCP or Unix stream socket or a bound UDP one
 * (others are left alone, with a warning), and removes the variables so that programs keel
 * or a module starts do not see them. Once per process: a second call
 * finds nothing. Main thread, before anything binds. KEEL_OK or
 * KEEL_ERR_NOMEM. */
int kl_inherit_read(kl_inheritance *inh);

/* An IPv4 or IPv6 address's port; 0 for a Unix socket, which has none. */
unsigned kl_sockaddr_port(const struct sockaddr_storage *addr);

/* Adopts the not yet taken sockets bound to addr, of the kind asked
 * (datagram or stream: a udp and a tcp listener may share a port), up to
 * max, into out, and returns how many; sets *owned if one of them is `owned`. A port of
 * 0 in addr stands for any port on the same host: the first such socket's
 * port, then every other one on it (the reuseport group of a listener
 * that asked for an ephemeral port). A Unix address matches its own name. */
size_t kl_inherit_take(kl_inheritance *inh, const struct sockaddr_storage *addr, int dgram,
                       kl_socket *out, size_t max, int *owned);

/* Closes the sockets no listener adopted (their listen line is gone from
 * the config, or the service manager passes one keel has no line for),
 * each with a warning, and frees the list. */
void kl_inherit_release(kl_inheritance *inh);

#endif
