/* rot13 — a toy transport that proves the transport layer: bytes from the
 * socket are rot13-decoded before the protocol sees them, bytes the
 * protocol writes are rot13-encoded on the way out, and an orderly close
 * sends a closing record ("#closed\n", encoded) as TLS sends close_notify.
 * Stateless, so it needs no per-connection data. */
#include <keel/keel.h>

#include <stdlib.h>

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

static int rot13_load(keel_module *module)
{
    return keel_transport_register(module, &rot13_transport);
}

KEEL_MODULE(rot13, .version = "1.0.0", .load = rot13_load);
