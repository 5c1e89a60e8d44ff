/* peer — a protocol that tells the client which address keel sees for it
 * (keel_conn_peer_name): "peer ADDRESS\n" on open, then every byte echoed.
 * Serves test_proxy_protocol.c: behind a PROXY protocol listener the
 * address is the header's, and the bytes that followed the header in the
 * same packets must arrive whole and in order. */
#include <keel/keel.h>

#include <stdio.h>
#include <string.h>

static int peer_open(keel_conn *conn, void *arg)
{
    (void)arg;
    char name[96], line[128];
    if (keel_conn_peer_name(conn, name, sizeof name) != KEEL_OK)
        snprintf(name, sizeof name, "?");
    int n = snprintf(line, sizeof line, "peer %s\n", name);
    return keel_conn_write_copy(conn, line, (size_t)n);
}

static int peer_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    *consumed = len;
    return keel_conn_write_copy(conn, data, len);
}

static const keel_protocol peer = {
    .size = sizeof(keel_protocol),
    .name = "peer",
    .on_open = peer_open,
    .on_data = peer_data,
};

static int peer_load(keel_module *module)
{
    return keel_protocol_register(module, &peer);
}

KEEL_MODULE(peer, .version = "1.0.0", .load = peer_load);
