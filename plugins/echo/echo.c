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
 *
 * It also registers `udp_echo`, a datagram protocol (ABI 1.9) that sends
 * every datagram back to its sender:
 *
 *     listen = 127.0.0.1:7001 udp_echo udp
 *
 * A few datagrams are commands the tests use: "whoami" answers
 * "peer ADDRESS PORT" (the address as the core handed it over), "stats"
 * answers "batches=B datagrams=D max_batch=M" for this worker's socket,
 * "stall MS" keeps the worker busy that long (datagrams queue in the
 * kernel meanwhile, to be received in batches), and "flood N SIZE" sends N
 * datagrams of SIZE bytes and then "flooded ok=A limit=L inval=I other=O",
 * the results of keel_dgram_send.
 *
 * And `udp_discard`, for the benchmark (tests/bench/udp.sh): it counts the
 * datagrams it receives and answers "?count" with the number.
 */
#include <keel/keel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* ---- udp_echo ---------------------------------------------------------- */

/* One per worker's socket (keel_dgram_set_data). */
struct udp_echo_state {
    uint64_t batches, datagrams, in_batch, max_batch;
};

static int udp_echo_open(keel_dgram *dgram)
{
    struct udp_echo_state *st = calloc(1, sizeof *st);
    if (!st)
        return KEEL_ERR_NOMEM;
    keel_dgram_set_data(dgram, st);
    return KEEL_OK;
}

static int is_command(const char *data, size_t len, const char *word)
{
    size_t n = strlen(word);
    return len >= n && memcmp(data, word, n) == 0 && (len == n || data[n] == ' ');
}

/* "a.b.c.d" for an IPv4-mapped address, else eight hexadecimal groups. */
static void peer_text(const keel_dgram_peer *peer, char *out, size_t size)
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    const unsigned char *a = peer->addr;
    if (memcmp(a, mapped, sizeof mapped) == 0) {
        snprintf(out, size, "%u.%u.%u.%u", a[12], a[13], a[14], a[15]);
        return;
    }
    snprintf(out, size, "%x:%x:%x:%x:%x:%x:%x:%x", a[0] << 8 | a[1], a[2] << 8 | a[3],
             a[4] << 8 | a[5], a[6] << 8 | a[7], a[8] << 8 | a[9], a[10] << 8 | a[11],
             a[12] << 8 | a[13], a[14] << 8 | a[15]);
}

static void udp_echo_flood(keel_dgram *dgram, const keel_dgram_peer *peer, const char *args)
{
    unsigned long n = 0, size = 0, ok = 0, limit = 0, inval = 0, other = 0;
    if (sscanf(args, "%lu %lu", &n, &size) != 2 || n > 100000 || size > 1000000)
        return;
    char *bytes = calloc(1, size ? size : 1);
    if (!bytes)
        return;
    memset(bytes, 'x', size);
    for (unsigned long i = 0; i < n; i++) {
        int rc = keel_dgram_send(dgram, peer, bytes, size);
        if (rc == KEEL_OK)
            ok++;
        else if (rc == KEEL_ERR_LIMIT)
            limit++;
        else if (rc == KEEL_ERR_INVAL)
            inval++;
        else
            other++;
    }
    free(bytes);
    char line[128];
    int len = snprintf(line, sizeof line, "flooded ok=%lu limit=%lu inval=%lu other=%lu", ok, limit,
                       inval, other);
    keel_dgram_send(dgram, peer, line, (size_t)len);
}

static void udp_echo_datagram(keel_dgram *dgram, const char *data, size_t len,
                              const keel_dgram_peer *peer)
{
    struct udp_echo_state *st = keel_dgram_data(dgram);
    st->datagrams++;
    st->in_batch++;
    char line[160], args[64];
    size_t alen = len < sizeof args - 1 ? len : sizeof args - 1;
    memcpy(args, data, alen);
    args[alen] = '\0';
    if (is_command(data, len, "whoami")) {
        char addr[64];
        peer_text(peer, addr, sizeof addr);
        int n = snprintf(line, sizeof line, "peer %s %u", addr, (unsigned)peer->port);
        keel_dgram_send(dgram, peer, line, (size_t)n);
    } else if (is_command(data, len, "stats")) {
        int n = snprintf(line, sizeof line, "batches=%llu datagrams=%llu max_batch=%llu",
                         (unsigned long long)st->batches, (unsigned long long)st->datagrams,
                         (unsigned long long)st->max_batch);
        keel_dgram_send(dgram, peer, line, (size_t)n);
    } else if (is_command(data, len, "stall")) {
        /* A busy worker, for the tests: datagrams queue in the kernel. */
        long ms = atol(args + 5);
        clock_t end = clock() + (clock_t)(ms > 0 && ms < 5000 ? ms : 0) * CLOCKS_PER_SEC / 1000;
        while (clock() < end)
            ;
        keel_dgram_send(dgram, peer, "stalled", 7);
    } else if (is_command(data, len, "flood")) {
        udp_echo_flood(dgram, peer, args + 5);
    } else {
        keel_dgram_send(dgram, peer, data, len);
    }
}

static void udp_echo_batch_end(keel_dgram *dgram)
{
    struct udp_echo_state *st = keel_dgram_data(dgram);
    st->batches++;
    if (st->in_batch > st->max_batch)
        st->max_batch = st->in_batch;
    st->in_batch = 0;
}

static void udp_echo_close(keel_dgram *dgram)
{
    free(keel_dgram_data(dgram));
    keel_dgram_set_data(dgram, NULL);
}

static const keel_dgram_protocol udp_echo_protocol = {
    .size = sizeof(keel_dgram_protocol),
    .name = "udp_echo",
    .on_open = udp_echo_open,
    .on_datagram = udp_echo_datagram,
    .on_batch_end = udp_echo_batch_end,
    .on_close = udp_echo_close,
};

static void udp_discard_datagram(keel_dgram *dgram, const char *data, size_t len,
                                 const keel_dgram_peer *peer)
{
    /* The count itself is the per-socket pointer: nothing to free. */
    uintptr_t count = (uintptr_t)keel_dgram_data(dgram);
    if (len == 6 && memcmp(data, "?count", 6) == 0) {
        char line[32];
        int n = snprintf(line, sizeof line, "%llu", (unsigned long long)count);
        keel_dgram_send(dgram, peer, line, (size_t)n);
        return;
    }
    keel_dgram_set_data(dgram, (void *)(count + 1));
}

static const keel_dgram_protocol udp_discard_protocol = {
    .size = sizeof(keel_dgram_protocol),
    .name = "udp_discard",
    .on_datagram = udp_discard_datagram,
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
        (rc = keel_protocol_register(module, &echo_protocol)) < 0 ||
        (rc = keel_dgram_protocol_register(module, &udp_echo_protocol)) < 0 ||
        (rc = keel_dgram_protocol_register(module, &udp_discard_protocol)) < 0) {
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
