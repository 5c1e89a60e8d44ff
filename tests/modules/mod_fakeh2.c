/* fakeh2 — a stand-in for an HTTP/2 module: it registers the protocol "h2"
 * so that http1 hands it connections that open with the HTTP/2 preface
 * (RFC 9113 3.3). It checks that the preface reached it whole and first,
 * answers with a fixed frame (an empty SETTINGS, RFC 9113 6.5), and then
 * echoes every byte it gets, so a test can tell that each byte the client
 * sent arrived once and in order. A connection that does not start with the
 * preface gets "bad preface\n" and is closed. */
#include <keel/keel.h>

#include <string.h>

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN (sizeof preface - 1)

/* length 0 (3 bytes), type SETTINGS (4), flags 0, stream 0 (4 bytes) */
static const char settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};

/* Per connection: whether the preface has been seen. One bit, but the
 * core's protocol data is a pointer: a non-NULL marker will do. */
static char seen_marker;

static int h2_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    if (keel_conn_data(conn) == NULL) {
        size_t n = len < PREFACE_LEN ? len : PREFACE_LEN;
        if (memcmp(data, preface, n) != 0) {
            *consumed = len;
            keel_conn_write_copy(conn, "bad preface\n", 12);
            keel_conn_close(conn);
            return KEEL_OK;
        }
        if (n < PREFACE_LEN) {
            *consumed = 0; /* wait for the rest */
            return KEEL_OK;
        }
        keel_conn_set_data(conn, &seen_marker);
        int rc = keel_conn_write_copy(conn, settings, sizeof settings);
        if (rc != KEEL_OK)
            return rc;
        data += PREFACE_LEN;
        len -= PREFACE_LEN;
        *consumed = PREFACE_LEN;
    } else {
        *consumed = 0;
    }
    if (len == 0)
        return KEEL_OK;
    *consumed += len;
    return keel_conn_write_copy(conn, data, len);
}

static const keel_protocol h2 = {
    .size = sizeof(keel_protocol),
    .name = "h2",
    .on_data = h2_data,
};

static int fakeh2_load(keel_module *module)
{
    return keel_protocol_register(module, &h2);
}

KEEL_MODULE(fakeh2, .version = "1.0.0", .load = fakeh2_load);
