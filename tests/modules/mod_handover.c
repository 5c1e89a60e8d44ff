/* handover — two protocols that prove keel_conn_set_protocol: "lobby" echoes
 * lines until it reads "upgrade", answers "ok", and hands the connection to
 * "shout", which answers every line uppercased. Bytes that arrived together
 * with the "upgrade" line reach "shout" without being copied or lost. A
 * line "later" switches from outside on_data (from a timer). */
#include <keel/keel.h>

#include <string.h>

static size_t line_end(const char *data, size_t len)
{
    const char *nl = memchr(data, '\n', len);
    return nl ? (size_t)(nl - data) + 1 : 0;
}

static void switch_later(keel_timer *timer, void *userdata)
{
    keel_conn *conn = userdata;
    keel_timer_stop(timer);
    keel_conn_write_copy(conn, "ok\n", 3);
    keel_conn_set_protocol(conn, "shout", NULL);
    keel_conn_resume(conn);
}

static int lobby_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    size_t at = 0, n;
    while ((n = line_end(data + at, len - at)) > 0) {
        const char *line = data + at;
        at += n;
        if (n == 8 && memcmp(line, "upgrade\n", 8) == 0) {
            *consumed = at;
            keel_conn_write_copy(conn, "ok\n", 3);
            return keel_conn_set_protocol(conn, "shout", NULL);
        }
        if (n == 6 && memcmp(line, "later\n", 6) == 0) {
            /* Switch in 20 ms from a timer: what follows waits, paused. */
            *consumed = at;
            keel_conn_pause(conn);
            return keel_timer_start(keel_conn_worker(conn), 20, 0, switch_later, conn)
                       ? KEEL_OK
                       : KEEL_ERR_NOMEM;
        }
        keel_conn_write_copy(conn, line, n);
    }
    *consumed = at;
    return KEEL_OK;
}

static int shout_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    char out[256];
    size_t at = 0, n;
    while ((n = line_end(data + at, len - at)) > 0 && n <= sizeof out) {
        for (size_t i = 0; i < n; i++) {
            char c = data[at + i];
            out[i] = (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
        }
        keel_conn_write_copy(conn, out, n);
        at += n;
    }
    *consumed = at;
    return KEEL_OK;
}

static const keel_protocol lobby = {
    .size = sizeof(keel_protocol), .name = "lobby", .on_data = lobby_data};
static const keel_protocol shout = {
    .size = sizeof(keel_protocol), .name = "shout", .on_data = shout_data};

static int handover_load(keel_module *module)
{
    int rc = keel_protocol_register(module, &lobby);
    return rc ? rc : keel_protocol_register(module, &shout);
}

KEEL_MODULE(handover, .version = "1.0.0", .load = handover_load);
