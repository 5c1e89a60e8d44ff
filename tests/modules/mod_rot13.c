/* rot13 — a toy transport that proves the transport layer: bytes from the
 * socket are rot13-decoded before the protocol sees them, bytes the
 * protocol writes are rot13-encoded on the way out, and an orderly close
 * sends a closing record ("#closed\n", encoded) as TLS sends close_notify.
 * Stateless, so it needs no per-connection data.
 *
 * A second transport, "gate", stands in for TLS with ALPN (ABI 1.4): its
 * on_open defers the protocol, and the first line from the peer is the
 * "handshake": "open NAME" opens protocol NAME ("-": the connection's own)
 * with keel_transport_open_protocol, after which bytes pass unchanged; an
 * unknown NAME is answered "unknown NAME" and closed. A peer that sends no
 * line within 1 s is timed out, as a stalled handshake is. */
#include <keel/keel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void rot13(char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if ((c >= 'a' && c <= 'm') || (c >= 'A' && c <= 'M'))
            p[i] = (char)(c + 13);
        else if ((c >= 'n' && c <= 'z') || (c >= 'N' && c <= 'Z'))
            p[i] = (char)(c - 13);
    }
}

static int on_read(keel_conn *conn, const char *data, size_t len)
{
    char *plain = malloc(len ? len : 1);
    if (plain == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < len; i++)
        plain[i] = data[i];
    rot13(plain, len);
    int rc = keel_transport_deliver(conn, plain, len);
    free(plain);
    return rc;
}

static int on_write(keel_conn *conn, const keel_buf *bufs, size_t nbufs)
{
    for (size_t i = 0; i < nbufs; i++) {
        char *coded = malloc(bufs[i].len ? bufs[i].len : 1);
        if (coded == NULL)
            return KEEL_ERR_NOMEM;
        const char *src = bufs[i].base;
        for (size_t k = 0; k < bufs[i].len; k++)
            coded[k] = src[k];
        rot13(coded, bufs[i].len);
        int rc = keel_transport_send(conn, coded, bufs[i].len);
        free(coded);
        if (rc < 0)
            return rc;
    }
    return KEEL_OK;
}

static void on_shutdown(keel_conn *conn)
{
    static const char closing[] = "#pybfrq\n"; /* "#closed\n", encoded */
    keel_transport_send(conn, closing, sizeof closing - 1);
}

static const keel_transport rot13_transport = {
    .size = sizeof(keel_transport),
    .name = "rot13",
    .on_read = on_read,
    .on_write = on_write,
    .on_shutdown = on_shutdown,
};

/* ---- gate ------------------------------------------------------------------ */

typedef struct gate {
    int open;
    size_t n;
    char line[64];
} gate;

static int gate_open(keel_conn *conn)
{
    gate *g = calloc(1, sizeof *g);
    if (g == NULL)
        return KEEL_ERR_NOMEM;
    keel_conn_set_transport_data(conn, g);
    keel_conn_set_timeout(conn, 1000); /* the "handshake" timeout */
    return KEEL_TRANSPORT_DEFER;
}

static int gate_handshake(keel_conn *conn, gate *g)
{
    g->line[g->n - 1] = '\0';
    const char *name = strncmp(g->line, "open ", 5) == 0 ? g->line + 5 : NULL;
    if (name == NULL)
        return KEEL_ERR_PROTOCOL;
    int rc = keel_transport_open_protocol(conn, strcmp(name, "-") == 0 ? NULL : name);
    if (rc == KEEL_ERR_NOTFOUND) {
        char answer[96];
        int n = snprintf(answer, sizeof answer, "unknown %s\n", name);
        keel_transport_send(conn, answer, (size_t)n);
        keel_conn_close(conn);
        return KEEL_OK;
    }
    if (rc == KEEL_OK) {
        g->open = 1;
        keel_conn_set_timeout(conn, 0);
    }
    return rc;
}

static int gate_read(keel_conn *conn, const char *data, size_t len)
{
    gate *g = keel_conn_transport_data(conn);
    while (!g->open && len > 0) {
        if (g->n == sizeof g->line)
            return KEEL_ERR_PROTOCOL;
        char c = *data++;
        len--;
        g->line[g->n++] = c;
        if (c == '\n') {
            int rc = gate_handshake(conn, g);
            if (rc != KEEL_OK || !g->open)
                return rc;
        }
    }
    return len ? keel_transport_deliver(conn, data, len) : KEEL_OK;
}

static int gate_write(keel_conn *conn, const keel_buf *bufs, size_t nbufs)
{
    for (size_t i = 0; i < nbufs; i++) {
        int rc = keel_transport_send(conn, bufs[i].base, bufs[i].len);
        if (rc < 0)
            return rc;
    }
    return KEEL_OK;
}

static void gate_close(keel_conn *conn)
{
    free(keel_conn_transport_data(conn));
}

static const keel_transport gate_transport = {
    .size = sizeof(keel_transport),
    .name = "gate",
    .on_open = gate_open,
    .on_read = gate_read,
    .on_write = gate_write,
    .on_close = gate_close,
};

static int rot13_load(keel_module *module)
{
    int rc = keel_transport_register(module, &rot13_transport);
    return rc ? rc : keel_transport_register(module, &gate_transport);
}

KEEL_MODULE(rot13, .version = "1.0.0", .load = rot13_load);
