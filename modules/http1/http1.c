/* http1.c — the http1 module: its configuration, the "http1" protocol's
 * connection callbacks and the per-connection state machine.
 *
 * One exchange at a time per connection (RFC 9112 9.3.2: responses to
 * pipelined requests go out in order). A request head is parsed straight
 * from the connection's read buffer; while its exchange is in flight the
 * connection is paused and the head's bytes are left unconsumed, so the
 * views the core holds stay valid. When the exchange ends, reading resumes,
 * the core delivers the same bytes again, the part already parsed is
 * skipped (c->skip) and the next pipelined request follows. A response that
 * completes during dispatch lets the next request be parsed in the same
 * on_data call, and all those responses leave in one write at its end.
 */
#include "h1.h"

#include <stdlib.h>
#include <string.h>

/* ---- small helpers used across the module ---------------------------------- */

void h1_set_timeout(h1_conn *c, uint64_t ms)
{
    if (ms != c->timeout_ms && !c->closing) {
        c->timeout_ms = ms;
        keel_conn_set_timeout(c->conn, ms);
    }
}

void h1_pause(h1_conn *c)
{
    if (!c->paused) {
        c->paused = 1;
        keel_conn_pause(c->conn);
    }
}

void h1_resume(h1_conn *c)
{
    if (c->paused) {
        c->paused = 0;
        keel_conn_resume(c->conn);
    }
}

void h1_close(h1_conn *c)
{
    if (c->closing)
        return;
    h1_out_flush(c);
    c->closing = 1;
    keel_conn_close(c->conn);
}

static uint64_t now_ms(h1_conn *c)
{
    return keel_worker_now_ms(c->w->worker);
}

/* Between requests (or before the first, as nginx counts a new connection
 * reusable too) nothing is lost if the connection closes: a client retries
 * a request on a keep-alive connection that closed (RFC 9112 9.3.1). At
 * max_connections the core may close it, least recently idle first, to
 * admit a new client (keel_conn_set_idle). The core clears the mark when
 * it hands us bytes. */
static void mark_idle(h1_conn *c)
{
    if (!c->idle_marked && !c->closing && !c->handed_over && !c->shutdown) {
        c->idle_marked = 1;
        keel_conn_set_idle(c->conn, 1);
    }
}

/* The inactivity timeout that brings a head's deadline back: exactly what
 * is left (the core's timeouts take any duration at the same cost); the
 * deadline itself is also checked on each delivery and in on_timeout. */
static uint64_t head_timeout_left(h1_conn *c)
{
    uint64_t now = now_ms(c);
    return now >= c->exch->head_deadline_ms ? 1 : c->exch->head_deadline_ms - now;
}

/* body_timeout alone bounds the pause between two reads, so a body
 * trickled at one byte per body_timeout would never be cut off. As Apache's
 * mod_reqtimeout (RequestReadTimeout body=20,MinRate=500), the body gets
 * body_timeout to get going plus one second per body_min_rate bytes
 * received (data and chunked framing alike), so it must keep an average
 * rate; the pause limit stays. Time the handler takes before it asks for
 * the body is its own: the clock starts when reading does. */
void h1_body_clock_start(h1_conn *c)
{
    if (c->exch != NULL && c->exch->body_start_ms == 0)
        c->exch->body_start_ms = now_ms(c) | 1; /* never 0, even at loop time 0 */
}

static uint64_t body_deadline(h1_conn *c)
{
    const h1_config *cfg = c->w->cfg;
    if (cfg->body_min_rate == 0 || c->exch == NULL || c->exch->body_start_ms == 0)
        return UINT64_MAX;
    uint64_t got = c->exch->body_seen + c->exch->overhead;
    uint64_t secs = got / cfg->body_min_rate;
    uint64_t grace = secs > UINT64_MAX / 2000
                         ? UINT64_MAX / 2
                         : secs * 1000 + got % cfg->body_min_rate * 1000 / cfg->body_min_rate;
    uint64_t base = c->exch->body_start_ms + cfg->body_timeout_ms;
    return base > UINT64_MAX - grace ? UINT64_MAX : base + grace;
}

int h1_body_late(h1_conn *c)
{
    return now_ms(c) >= body_deadline(c);
}

uint64_t h1_body_timeout(h1_conn *c)
{
    uint64_t deadline = body_deadline(c), now = now_ms(c);
    uint64_t left = deadline > now ? deadline - now : 1;
    return left < c->w->cfg->body_timeout_ms ? left : c->w->cfg->body_timeout_ms;
}

/* ---- the state machine ------------------------------------------------------- */

/* RFC 9113 3.4: the client connection preface of HTTP/2, which opens a
 * connection whose client knows the server speaks HTTP/2 (3.3). */
static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define H2_PREFACE_LEN (sizeof h2_preface - 1)

/* A connection that opens with the HTTP/2 preface goes, preface and all, to
 * the protocol registered as "h2" if there is one; HTTP/1 parsing answers
 * it with 505 otherwise (RFC 9110 15.6.6). Only the very first bytes of a
 * connection count: later, "PRI" is just an unknown method. H1_NEED_MORE:
 * the bytes so far begin the preface; H1_READY: parse them as HTTP/1;
 * H1_FAILED: the connection is no longer ours, or is closing. */
static int h2_preface_check(h1_conn *c)
{
    size_t n = c->len < H2_PREFACE_LEN ? c->len : H2_PREFACE_LEN;
    if (c->nrequests != 0 || c->pos != 0 || memcmp(c->data, h2_preface, n) != 0)
        return H1_READY;
    if (n < H2_PREFACE_LEN)
        return H1_NEED_MORE;
    int rc = h1_hand_over(c, "h2", NULL);
    if (rc == KEEL_ERR_NOTFOUND)
        return H1_READY;
    if (rc != KEEL_OK)
        c->closing = 1; /* the core is closing the connection already */
    return H1_FAILED;
}

/* A head that did not come whole in one read runs on the core's deadline
 * (from its first byte, renewed by none: slowloris), which also lets a
 * worker at max_connections close it to admit a new client. Heads that
 * arrive whole, nearly all of them, never set one. */
static void head_unfinished(h1_conn *c)
{
    if (!c->deadline_set) {
        c->deadline_set = 1;
        keel_conn_set_deadline(c->conn, head_timeout_left(c));
    }
}

static void head_finished(h1_conn *c)
{
    if (c->deadline_set) {
        c->deadline_set = 0;
        keel_conn_set_deadline(c->conn, 0);
    }
}

void h1_process(h1_conn *c)
{
    c->in_process = 1;
    while (!c->closing && !c->handed_over) {
        int r;
        switch (c->read_state) {
        case H1_READ_HEAD:
            if (c->pos == c->len)
                goto out;
            if (c->exch == NULL && (c->exch = h1_exch_get(c->w)) == NULL) {
                keel_conn_abort(c->conn);
                c->closing = 1;
                goto out;
            }
            if (!c->head_started) {
                /* A new message. The header timeout runs from its first
                 * byte and is not renewed by later ones (slowloris). */
                c->head_started = 1;
                c->head_base = c->pos;
                c->exch->head_deadline_ms = now_ms(c) + c->w->cfg->header_timeout_ms;
                h1_parse_init(c, c->exch);
            }
            if ((r = h2_preface_check(c)) != H1_READY) {
                /* An incomplete preface waits, its deadline running. */
                if (r == H1_NEED_MORE && now_ms(c) >= c->exch->head_deadline_ms)
                    h1_fail(c, 408);
                goto out;
            }
            if ((r = h1_parse_head(c)) != H1_READY) {
                /* The core's deadline may not have fired yet in the turn
                 * the last bytes came: checked here too. */
                if (r == H1_NEED_MORE && now_ms(c) >= c->exch->head_deadline_ms)
                    h1_fail(c, 408);
                goto out;
            }
            head_finished(c);
            h1_exchange_start(c);
            break;
        case H1_READ_HOLD:
            /* The handler has not asked for the body (yet). */
            if (c->exch_state == H1_EXCH_ACTIVE || h1_body_unwanted(c) < 0)
                goto out;
            break;
        case H1_READ_BODY:
        case H1_READ_DISCARD:
            if (c->read_state == H1_READ_BODY && c->exch_state == H1_EXCH_FINISHED &&
                h1_body_unwanted(c) < 0)
                goto out;
            if (h1_body_held(c) || c->pos == c->len)
                goto out; /* paused: the bytes wait unconsumed until resumed */
            if ((r = h1_parse_body(c)) != H1_READY) {
                /* A trickle keeps the inactivity timer alive: the body's
                 * total time is checked on each delivery too (not while
                 * the handler holds it: that time is not the client's). */
                if (r == H1_NEED_MORE && !h1_body_held(c) && h1_body_late(c)) {
                    if (c->read_state == H1_READ_BODY && c->exch_state == H1_EXCH_ACTIVE)
                        h1_fail(c, 408);
                    else
                        h1_close(c);
                }
                goto out;
            }
            if (c->read_state == H1_READ_BODY && c->exch_state == H1_EXCH_ACTIVE) {
                c->read_state = H1_READ_DONE;
                if (c->body_paused)
                    c->end_owed = 1; /* paused by the last piece's call: told on resume */
                else
                    h1_body_end(c);
            } else {
                c->read_state = H1_READ_DONE;
            }
            break;
        case H1_READ_DONE:
            if (c->exch_state == H1_EXCH_ACTIVE)
                goto out; /* wait for the response */
            if (h1_exchange_next(c) < 0)
                goto out;
            break;
        default:
            goto out;
        }
    }
out:
    c->in_process = 0;
}

/* After h1_process: how many bytes are done with, whether to pause, which
 * timeout applies; then the batched output leaves in one write. */
static size_t settle(h1_conn *c)
{
    if (c->closing)
        return c->len;
    size_t keep = c->pos;
    uint64_t timeout = 0;
    int wait = 0, idle = 0;
    switch (c->read_state) {
    case H1_READ_HEAD:
        if (c->head_started) {
            /* Incomplete head: keep it whole, parse on from here next time. */
            keep = c->head_base;
            timeout = head_timeout_left(c);
            head_unfinished(c);
        } else {
            timeout =
                c->had_request ? c->w->cfg->keepalive_timeout_ms : c->w->cfg->header_timeout_ms;
            if (c->exch != NULL) {
                h1_exch_put(c->w, c->exch); /* idle: hold nothing */
                c->exch = NULL;
            }
            idle = 1;
        }
        break;
    case H1_READ_HOLD:
        wait = 1;
        break;
    case H1_READ_BODY:
    case H1_READ_DISCARD:
        if (h1_body_held(c))
            wait = 1; /* the handler's time, as while it answers: the server's idle timeout */
        else
            timeout = h1_body_timeout(c);
        break;
    case H1_READ_DONE:
        /* In flight: a head without a body is still referenced by the core
         * in the buffer. */
        wait = 1;
        keep = c->head_copied ? c->pos : c->head_base;
        break;
    default:
        break;
    }
    c->skip = c->pos - keep;
    if (wait)
        h1_pause(c); /* the handler's time is its own: the server's idle timeout */
    h1_out_flush(c);
    h1_set_timeout(c, timeout);
    h1_out_release(c);
    if (idle) {
        mark_idle(c);
        h1_idle(c);
    }
    return keep;
}

void h1_after_exchange(h1_conn *c)
{
    if (c->closing)
        return;
    switch (c->read_state) {
    case H1_READ_DONE:
        if (h1_exchange_next(c) < 0)
            return;
        h1_out_flush(c);
        h1_set_timeout(c, c->w->cfg->keepalive_timeout_ms);
        int idle = c->skip == 0 && c->pos == c->len;
        if (idle && c->exch != NULL) {
            /* Nothing left for the core to deliver again: idle now. */
            h1_exch_put(c->w, c->exch);
            c->exch = NULL;
        }
        h1_out_release(c);
        h1_resume(c);
        if (idle) {
            mark_idle(c);
            h1_idle(c);
        }
        break;
    case H1_READ_HOLD:
    case H1_READ_BODY:
        if (h1_body_unwanted(c) < 0)
            return;
        h1_out_flush(c);
        h1_set_timeout(c, h1_body_timeout(c));
        h1_resume(c);
        break;
    default:
        h1_out_flush(c);
        break;
    }
}

/* ---- protocol callbacks --------------------------------------------------------- */

static int h1_on_open(keel_conn *conn, void *arg)
{
    (void)arg;
    h1_conn *c = h1_conn_start(conn);
    if (c == NULL)
        return KEEL_ERR_NOMEM;
    h1_set_timeout(c, c->w->cfg->header_timeout_ms);
    mark_idle(c);
    h1_idle(c); /* until its first byte */
    return KEEL_OK;
}

static int h1_on_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    h1_conn *c = h1_conn_of(conn);
    if (c == NULL)
        return KEEL_ERR_NOMEM;
    if (c->closing) {
        *consumed = len;
        return KEEL_OK;
    }
    c->idle_marked = 0; /* the core cleared it: bytes came */
    if (c->skip > len)
        return KEEL_ERR_STATE; /* the core lost bytes we left: cannot go on */
    c->data = data;
    c->len = len;
    c->pos = c->skip;
    c->skip = 0;
    if (c->head_started)
        c->head_base = 0; /* the kept head is at the start again */
    h1_process(c);
    if (c->handed_over) {
        /* The bytes up to pos were ours; the core gives the rest to the new
         * protocol right after this returns. */
        *consumed = c->pos;
        h1_conn_free(c);
        return KEEL_OK;
    }
    *consumed = settle(c);
    return KEEL_OK;
}

int h1_hand_over(h1_conn *c, const char *protocol, void *arg)
{
    /* Outside on_data the bytes of the finished request are still in the
     * connection's buffer (they stayed unconsumed while its exchange was
     * in flight): drop them, or the new protocol would be given the
     * request itself. */
    if (!c->in_process && c->skip > 0) {
        if (keel_conn_consume(c->conn, c->skip) != KEEL_OK)
            return KEEL_ERR_CLOSED; /* our count is off: hand over nothing */
        c->skip = 0;
    }
    /* The new protocol starts from the server's idle timeout, not from
     * one of ours; it sets its own in on_open if it wants. */
    h1_set_timeout(c, 0);
    int rc = keel_conn_set_protocol(c->conn, protocol, arg);
    if (rc == KEEL_ERR_NOTFOUND || rc == KEEL_ERR_CLOSED)
        return rc; /* still ours, unchanged but for the timeout */
    /* Ours no longer, even if the new protocol's on_open refused it (the
     * core then aborts it without an on_close for anyone). */
    c->handed_over = 1;
    if (!c->in_process)
        h1_conn_free(c);
    return KEEL_OK;
}

static void h1_on_timeout(keel_conn *conn)
{
    h1_conn *c = h1_conn_of(conn);
    if (c == NULL) {
        keel_conn_abort(conn);
        return;
    }
    switch (c->read_state) {
    case H1_READ_HEAD:
        c->deadline_set = 0; /* if it was the deadline, it is spent */
        if (!c->head_started) {
            h1_close(c); /* idle keep-alive connection: close silently */
        } else if (now_ms(c) >= c->exch->head_deadline_ms) {
            h1_fail(c, 408);
        } else {
            c->timeout_ms = head_timeout_left(c);
            keel_conn_set_timeout(conn, c->timeout_ms);
        }
        break;
    case H1_READ_BODY:
        if (h1_body_held(c))
            break; /* the handler holds its body: as a handler at work, re-armed */
        /* RFC 9110 15.5.9: 408 (if nothing was answered yet), then close:
         * a pause of body_timeout, or the body's total time is up. */
        if (c->exch_state == H1_EXCH_ACTIVE)
            h1_fail(c, 408);
        else
            h1_close(c);
        break;
    case H1_READ_DISCARD:
        h1_close(c);
        break;
    default:
        /* A handler at work: the core re-arms the timeout. */
        break;
    }
}

static void h1_on_shutdown(keel_conn *conn)
{
    h1_conn *c = h1_conn_of(conn);
    if (c == NULL) {
        keel_conn_abort(conn);
        return;
    }
    c->shutdown = 1;
    if (c->exch_state == H1_EXCH_ACTIVE) {
        /* Let it finish; its response says Connection: close if its head
         * has not gone yet, and the connection closes after it. */
        c->close_after = 1;
        return;
    }
    if (c->read_state == H1_READ_HEAD && c->w->cfg->shutdown_idle_timeout_ms > 0) {
        /* Between requests, or before the first: a request may already be
         * on its way, and closing now would reset it (the client cannot
         * tell it was not processed, RFC 9112 9.3.1, and a load generator
         * counts an error). For a short while a request that comes is
         * answered with Connection: close (c->shutdown above); a head
         * already begun keeps its own deadline. nginx and Go close idle
         * connections at once; Envoy's drain does as here. */
        if (!c->head_started &&
            (c->timeout_ms == 0 || c->timeout_ms > c->w->cfg->shutdown_idle_timeout_ms))
            h1_set_timeout(c, c->w->cfg->shutdown_idle_timeout_ms);
        return;
    }
    h1_close(c);
}

void h1_conn_free(h1_conn *c)
{
    h1_conn_unwarm(c);
    h1_exchange_abort(c);
    if (c->exch != NULL)
        h1_exch_put(c->w, c->exch);
    if (c->out != NULL) {
        c->out->len = 0;
        h1_obuf_free(c->w, c->out);
    }
    h1_conn_put(c->w, c);
}

static void h1_on_close(keel_conn *conn, int status)
{
    (void)status;
    h1_conn *c = h1_conn_parked(conn) ? NULL : keel_conn_data(conn);
    keel_conn_set_data(conn, NULL);
    if (c != NULL)
        h1_conn_free(c);
}

static const keel_protocol h1_protocol = {
    .size = sizeof(keel_protocol),
    .name = "http1",
    .on_open = h1_on_open,
    .on_data = h1_on_data,
    .on_timeout = h1_on_timeout,
    .on_shutdown = h1_on_shutdown,
    .on_close = h1_on_close,
};

/* ---- module life cycle ---------------------------------------------------------- */

/* The [http1] section (keel/config.h): the core validates it and fills an
 * h1_config with these fields before load; load adds what follows from
 * them. Offsets within a head are 32-bit, hence the 1g bounds. */
static const keel_config_key h1_keys[] = {
    KEEL_KEY(h1_config, max_request_line, "max_request_line", KEEL_CONFIG_SIZE, .def = "8k",
             .min = 64, .max = 1 << 30, .doc = "longest request line; 414 above it"),
    KEEL_KEY(h1_config, max_header_bytes, "max_header_bytes", KEEL_CONFIG_SIZE, .def = "16k",
             .min = 256, .max = 1 << 30, .doc = "longest head (request line and fields); 431"),
    KEEL_KEY(h1_config, max_headers, "max_headers", KEEL_CONFIG_INT, .def = "100", .min = 1,
             .max = 65535, .doc = "most header fields in a request; 431 above it"),
    KEEL_KEY(h1_config, max_body, "max_body", KEEL_CONFIG_SIZE, .def = "1m",
             .doc = "largest request body a handler reads whole; 413 above it"),
    KEEL_KEY(h1_config, header_timeout_ms, "header_timeout", KEEL_CONFIG_DURATION, .def = "10s",
             .min = 1, .max = 86400000,
             .doc = "time to receive a whole head, from its first byte (no byte renews it); 408"),
    KEEL_KEY(h1_config, body_timeout_ms, "body_timeout", KEEL_CONFIG_DURATION, .def = "30s",
             .min = 1, .max = 86400000,
             .doc = "longest wait for the next piece of a body; 408 after it"),
    KEEL_KEY(h1_config, body_min_rate, "body_min_rate", KEEL_CONFIG_SIZE, .def = "1k",
             .doc = "bytes a second a body must average once body_timeout has passed; 0: none"),
    KEEL_KEY(h1_config, keepalive_timeout_ms, "keepalive_timeout", KEEL_CONFIG_DURATION,
             .def = "5s", .doc = "how long an idle connection waits for its next request"),
    KEEL_KEY(h1_config, shutdown_idle_timeout_ms, "shutdown_idle_timeout", KEEL_CONFIG_DURATION,
             .def = "1s", .doc = "how long idle connections stay open once keel stops"),
    KEEL_KEY(h1_config, max_requests, "max_requests", KEEL_CONFIG_INT, .def = "1000", .min = 0,
             .max = INT64_MAX, .doc = "requests per connection before it closes; 0: unlimited"),
    KEEL_KEY(h1_config, server, "server", KEEL_CONFIG_STRING, .def = "keel",
             .doc = "the Server field of every response; empty: none"),
};
KEEL_CONFIG_SCHEMA(h1_schema, h1_config, h1_keys);

/* What follows from the declared keys. */
static int finish_config(keel_module *m, h1_config *cfg)
{
    const char *server = cfg->server;
    /* A chunked body's framing (sizes, extensions, line ends, trailers)
     * gets an eighth of max_body beyond its data, at least 1 KiB (an empty
     * body's "0\r\n\r\n" with a few trailer fields): 1 MiB of data in
     * 8 KiB chunks needs under 1 KiB of it, and no encoding of a body
     * makes keel read more than 1.125 times max_body plus 1 KiB. */
    uint64_t allowance = cfg->max_body / 8 > 1024 ? cfg->max_body / 8 : 1024;
    cfg->max_chunked =
        cfg->max_body > UINT64_MAX - allowance ? UINT64_MAX : cfg->max_body + allowance;

    /* RFC 9110 10.2.4: Server = product *( RWS ( product / comment ) ):
     * visible characters and spaces only, so it cannot split a response. */
    size_t len = strlen(server);
    if (len > 200)
        return keel_config_error(m, "server", "longer than 200 characters (%zu)", len);
    size_t bad = keel_field_value_check(server, len);
    if (bad < len)
        return keel_config_error(m, "server", "control character 0x%02x at %zu",
                                 (unsigned char)server[bad], bad);
    if (len > 0) {
        memcpy(cfg->server_line, "Server: ", 8);
        memcpy(cfg->server_line + 8, server, len);
        memcpy(cfg->server_line + 8 + len, "\r\n", 2);
        cfg->server_line_len = len + 10;
    }
    return KEEL_OK;
}

static int h1_load(keel_module *m)
{
    h1_config *cfg = calloc(1, sizeof *cfg);
    if (cfg == NULL)
        return KEEL_ERR_NOMEM;
    *cfg = *(const h1_config *)keel_module_config(m);
    int rc = finish_config(m, cfg);
    if (rc == KEEL_OK)
        rc = h1_status_lines_build(cfg);
    if (rc == KEEL_OK)
        rc = keel_protocol_register(m, &h1_protocol);
    if (rc != KEEL_OK) {
        free(cfg->status_text);
        free(cfg);
        return rc;
    }
    keel_module_set_data(m, cfg);
    return KEEL_OK;
}

static void h1_unload(keel_module *m)
{
    h1_config *cfg = keel_module_data(m);
    if (cfg != NULL)
        free(cfg->status_text);
    free(cfg);
}

static int h1_start(keel_module *m, keel_worker *worker, void *state)
{
    h1_worker *w = state;
    w->worker = worker;
    w->module = m;
    w->cfg = keel_module_data(m);
    return KEEL_OK;
}

static void h1_stop(keel_module *m, keel_worker *worker, void *state)
{
    (void)m;
    (void)worker;
    h1_pool_free(state);
}

KEEL_MODULE(http1, .version = "1.0.0", .worker_state_size = sizeof(h1_worker), .load = h1_load,
            .start = h1_start, .stop = h1_stop, .unload = h1_unload, .config = &h1_schema);
