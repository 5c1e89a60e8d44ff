/* core/net/udp.h — UDP listeners and their datagram protocols (ABI 1.9,
 * docs/udp.md): the sockets bound for a `udp` listen line, and each
 * worker's keel_dgram, which receives batches (recvmmsg through libuv)
 * and sends with a bounded queue. */
#ifndef KEEL_CORE_UDP_H
#define KEEL_CORE_UDP_H

#include "net/host.h"

/* Datagrams one receive may bring: libuv's recvmmsg takes at most 20 per
 * call (UV__MMSG_MAXWIDTH), each in a 64 KiB slot of the buffer. */
#define KL_UDP_BATCH_MAX          20
#define KL_UDP_BATCH_DEFAULT      16
#define KL_UDP_SLOT               (64 * 1024)
#define KL_UDP_SEND_QUEUE_DEFAULT (1024 * 1024)

/* Opens worker w's sockets of every UDP listener (its own one with
 * reuseport, else worker 0 the only one) and starts receiving; each
 * protocol's on_open runs first. KEEL_OK or an error, logged. Worker
 * thread. */
int kl_udp_open(keel_worker *w);

/* Stops w's UDP sockets: each protocol's on_close runs now, the handles
 * close (queued sends are cancelled), the memory goes with them. Worker
 * thread; again is a no-op. */
void kl_udp_close(keel_worker *w);

#endif
