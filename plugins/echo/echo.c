/* echo — the smallest real keel module: a line-echo protocol over raw TCP.
 *
 * It is written strictly as a third party would write one: it includes only
 * <keel/keel.h> and the C library, links against nothing, and is built by
 * its own CMakeLists.txt through find_package(keel). Load it with
 *
 *     [keel]
 *     listen = 127.0.0.1:7000 echo
 *     modules = echo
 *     [echo]
 *     greeting = hello       ; sent as "hello\n" on connect (default: none)
 *     max_line = 8k          ; longer lines get an error and a close
 *     delay = 0              ; echo each batch of lines after this long
 *
 * `delay` simulates in-flight work (a slow backend, say): the tests use it
 * to check that a graceful shutdown lets a pending answer go out first.
 */
#include <keel/keel.h>

#include <stdlib.h>
#include <string.h>

/* The [echo] section, parsed once in load and shared read-only by every
 * worker (keel_module_set_data). */
struct echo_config {
    const char *greeting; /* NULL: send none */
    uint64_t max_line;
    uint64_t delay_ms;
};

/* One per connection (keel_conn_set_data). */
struct echo_conn {
    const struct echo_config *cfg;
    keel_timer *timer; /* the delayed echo, while one is pending */
    const char *batch; /* the lines it will echo: borrowed, see on_data */
    size_t batch_len;
    size_t echoed;     /* leading bytes already echoed, consumed next time */
    int shutting_down; /* on_shutdown came while an echo was pending */
};

/* Connection callbacks reach the module's config through the module that
 * registered the protocol: no global needed. */
static const struct echo_config *echo_config_of(keel_conn *conn)
{
    return keel_module_data(keel_conn_module(conn));
}

static int echo_open(keel_conn *conn, void *arg)
{
    (void)arg;
    struct echo_conn *ec = calloc(1, sizeof *ec);
    if (!ec)
        return KEEL_ERR_NOMEM; /* the core closes the connection */
    ec->cfg = echo_config_of(conn);

    if (ec->cfg->greeting) {
        /* Both pieces outlive the write (the config string lives until
         * unload), so they leave without a copy, in one write. */
        keel_buf line[2] = {{ec->cfg->greeting, strlen(ec->cfg->greeting)}, {"\n", 1}};
        int rc = keel_conn_write(conn, line, 2, NULL, NULL);
        if (rc < 0) {
            free(ec); /* a failed open gets no on_close */
            return rc;
        }
    }
    keel_conn_set_data(conn, ec);
    return KEEL_OK;
}

static void echo_delayed(keel_timer *timer, void *userdata)
{
    keel_conn *conn = userdata;
    struct echo_conn *ec = keel_conn_data(conn);

    keel_timer_stop(timer);
    ec->timer = NULL;

    /* The batch points into the core's read buffer, which stays put only
     * while reading is paused. Copying it now (rather than queueing it with
     * keel_conn_write and staying paused until the write completes) lets us
     * resume at once and keeps the connection's state simple. */
    keel_conn_write_copy(conn, ec->batch, ec->batch_len);
    ec->echoed += ec->batch_len;
    ec->batch = NULL;

    if (ec->shutting_down)
        keel_conn_close(conn); /* flushes the echo first */
    else
        keel_conn_resume(conn); /* the core presents the bytes again */
}

static int echo_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    struct echo_conn *ec = keel_conn_data(conn);
    const struct echo_config *cfg = ec->cfg;

    /* Skip what the last delayed echo already sent: it was left unconsumed
     * so that the buffer would not move while we were paused. */
    size_t start = ec->echoed;
    ec->echoed = 0;

    /* Find the end of the last complete line, checking each line's length. */
    size_t end = start, line = start;
    for (size_t i = start; i < len; i++) {
        if (data[i] != '\n')
            continue;
        if (i - line > cfg->max_line)
            break;
        line = i + 1;
        end = i + 1;
    }
    int too_long = (end < len && len - end > cfg->max_line);

    if (end > start && !too_long && cfg->delay_ms > 0) {
        /* Keep every byte unconsumed and stop reading: the core then leaves
         * `data` where it is until we resume, so the timer can echo straight
         * from it. */
        ec->batch = data + start;
        ec->batch_len = end - start;
        ec->echoed = start;
        ec->timer = keel_timer_start(keel_conn_worker(conn), cfg->delay_ms, 0, echo_delayed, conn);
        if (!ec->timer)
            return KEEL_ERR_NOMEM;
        keel_conn_pause(conn);
        *consumed = 0;
        return KEEL_OK;
    }

    if (end > start)
        keel_conn_write_copy(conn, data + start, end - start);
    if (too_long) {
        static const char msg[] = "error: line too long\n";
        keel_conn_write_copy(conn, msg, sizeof msg - 1);
        keel_conn_close(conn);
        *consumed = len;
        return KEEL_OK;
    }
    *consumed = end; /* a partial line waits for the rest */
    return KEEL_OK;
}

static void echo_shutdown(keel_conn *conn)
{
    struct echo_conn *ec = keel_conn_data(conn);
    if (ec->timer)
        ec->shutting_down = 1; /* echo_delayed closes once it has answered */
    else
        keel_conn_close(conn);
}

static void echo_close(keel_conn *conn, int status)
{
    (void)status;
    struct echo_conn *ec = keel_conn_data(conn);
    if (!ec)
        return;
    if (ec->timer)
        keel_timer_stop(ec->timer);
    free(ec);
    keel_conn_set_data(conn, NULL);
}

static const keel_protocol echo_protocol = {
    .size = sizeof(keel_protocol),
    .name = "echo",
    .on_open = echo_open,
    .on_data = echo_data,
    .on_shutdown = echo_shutdown,
    .on_close = echo_close,
};

static int echo_load(keel_module *module)
{
    struct echo_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return KEEL_ERR_NOMEM;

    int rc;
    if ((rc = keel_config_string(module, "greeting", NULL, &cfg->greeting)) < 0 ||
        (rc = keel_config_size(module, "max_line", 8192, &cfg->max_line)) < 0 ||
        (rc = keel_config_duration_ms(module, "delay", 0, &cfg->delay_ms)) < 0 ||
        (rc = keel_protocol_register(module, &echo_protocol)) < 0) {
        free(cfg); /* a bad value: the getter has logged FILE:LINE and why */
        return rc;
    }
    keel_module_set_data(module, cfg);
    return KEEL_OK;
}

static void echo_unload(keel_module *module)
{
    free(keel_module_data(module));
}

KEEL_MODULE(echo, .version = "1.0.0", .load = echo_load, .unload = echo_unload);
