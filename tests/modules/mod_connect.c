/* connect — drives keel_conn_connect, keel_connect_cancel,
 * keel_worker_offload and keel_timer_restart for test_connect.c, through
 * the public headers only.
 *
 * Protocol "connect_ctl" takes one command a line; the answers are lines:
 *
 *   CONNECT HOST PORT [TIMEOUT_MS [TRANSPORT]]
 *       opens a "connect_probe" connection, which sends "ping N" and waits
 *       for the line to come back: "OK host=H peer=P echo=ping N" (H is
 *       keel_conn_remote_host), or "ERR STATUS" from on_error.
 *   HOLD HOST PORT       the same, but the probe stays open afterwards and
 *                        closes when on_shutdown asks it to
 *   STUBBORN HOST PORT   a probe that answers "HELD" once open and ignores
 *                        on_shutdown (the shutdown deadline must abort it)
 *   PENDING HOST PORT TIMEOUT_MS
 *                        answers "STARTED" at once; the outcome is logged
 *   CANCEL HOST PORT     two attempts to the same place: the first is
 *                        cancelled at once ("CANCELLED"), the second
 *                        answers as CONNECT does, prefixed "SENTINEL "
 *   INVALID              bad arguments to connect and offload: "INVALID ok"
 *                        or what went wrong
 *   ACCEPTED_HOST        keel_conn_remote_host of this (accepted)
 *                        connection: "ACCEPTED_HOST null"
 *   OFFLOAD MS           work sleeping MS on the pool; done answers
 *                        "OFFLOADED status=S worker_thread=yes pool_thread=yes"
 *   OFFLOAD_BG MS        answers "QUEUED" at once; the work logs "offload
 *                        work started" and "offload work finished", done
 *                        logs "offload done: S"
 *   TIMER_IN_CB          a one-shot timer restarted from its own callback:
 *                        "TIMER fired=2" on its second firing
 *   TIMER_ONESHOT        a one-shot timer: "TIMER fired=1"; then
 *   TIMER_AGAIN          restarts that fired timer: "TIMER fired=2"
 *   TIMER_PUSHBACK       A (50 ms) pushed back to 300 ms, B at 150 ms:
 *                        "TIMER order=BA"
 *   PING                 "PONG"
 *
 * Transport "refuser" refuses every connection in its on_open.
 *
 * Every callback checks that it does not run inside keel_conn_connect
 * (the answer then ends in " REENTERED"). A cancelled attempt's callback
 * is counted; stop() logs "connect: stop: offload=S timer_restart=S
 * connect=S late_callbacks=N", the first three being what those calls
 * return from stop() (all SHUTDOWN), and the ctl protocol's on_shutdown
 * logs "ctl on_shutdown: connect=S".
 */
#ifndef _WIN32
#define _POSIX_C_SOURCE 200809L
#endif
#include <keel/keel.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <time.h>
#endif

static keel_module *self;

/* Set in start() on each worker thread; NULL on the pool's threads. */
static _Thread_local keel_worker *this_worker;
/* Non-zero while this thread is inside keel_conn_connect. */
static _Thread_local int inside_connect;

struct probe;

struct worker_state {
    int late_callbacks;     /* callbacks of cancelled attempts: must stay 0 */
    struct probe *victims;  /* cancelled attempts' probes, freed in stop() */
    keel_timer *stop_timer; /* exists during stop(), for keel_timer_restart */
    int next_probe;
};

/* One ctl connection; freed when the connection and every probe that
 * answers on it are gone. */
struct ctl {
    keel_conn *conn; /* NULL once closed */
    int refs;
    keel_timer *timer, *other; /* the TIMER_* commands */
    int fired;
    char order[4];
};

enum probe_mode { PROBE_ECHO, PROBE_HOLD, PROBE_STUBBORN, PROBE_PENDING, PROBE_VICTIM };

struct probe {
    struct ctl *ctl; /* NULL for a victim */
    enum probe_mode mode;
    int n;
    const char *prefix; /* of the answer ("SENTINEL ") */
    int answered;
    struct probe *next_victim;
};

static const char *status_name(int status)
{
    switch (status) {
    case KEEL_OK:
        return "OK";
    case KEEL_ERR_NOMEM:
        return "NOMEM";
    case KEEL_ERR_INVAL:
        return "INVAL";
    case KEEL_ERR_NOTFOUND:
        return "NOTFOUND";
    case KEEL_ERR_IO:
        return "IO";
    case KEEL_ERR_CLOSED:
        return "CLOSED";
    case KEEL_ERR_TIMEOUT:
        return "TIMEOUT";
    case KEEL_ERR_SHUTDOWN:
        return "SHUTDOWN";
    case KEEL_ERR_REFUSED:
        return "REFUSED";
    default:
        return "OTHER";
    }
}

static struct worker_state *state_of(keel_worker *w)
{
    return keel_worker_state(w, self);
}

static void ctl_unref(struct ctl *ctl)
{
    if (--ctl->refs == 0)
        free(ctl);
}

static void answer(struct ctl *ctl, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line - 1)
        n = (int)strlen(line);
    line[n++] = '\n';
    if (ctl != NULL && ctl->conn != NULL)
        keel_conn_write_copy(ctl->conn, line, (size_t)n);
}

static const char *reentered(void)
{
    return inside_connect ? " REENTERED" : "";
}

/* ---- probes: the outbound connections ------------------------------------- */

static void probe_free(struct probe *p)
{
    if (p->ctl != NULL)
        ctl_unref(p->ctl);
    free(p);
}

static int probe_open(keel_conn *conn, void *arg)
{
    struct probe *p = arg;
    const char *re = reentered();
    if (p->mode == PROBE_VICTIM) {
        state_of(keel_conn_worker(conn))->late_callbacks++;
        keel_log(self, KEEL_LOG_ERROR, "on_open after cancel");
        return KEEL_ERR_STATE; /* the probe stays on the victims list */
    }
    keel_conn_set_data(conn, p);
    if (p->mode == PROBE_STUBBORN) {
        answer(p->ctl, "%sHELD%s", p->prefix, re);
        p->answered = 1;
        return KEEL_OK;
    }
    char ping[32];
    int n = snprintf(ping, sizeof ping, "ping %d%s\n", p->n, re);
    return keel_conn_write_copy(conn, ping, (size_t)n);
}

static int probe_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    struct probe *p = keel_conn_data(conn);
    const char *nl = memchr(data, '\n', len);
    if (nl == NULL || p->answered) {
        *consumed = p->answered ? len : 0;
        return KEEL_OK;
    }
    *consumed = (size_t)(nl - data) + 1;
    char peer[80];
    if (keel_conn_peer_name(conn, peer, sizeof peer) != KEEL_OK)
        strcpy(peer, "?");
    const char *host = keel_conn_remote_host(conn);
    answer(p->ctl, "%sOK host=%s peer=%s echo=%.*s", p->prefix, host ? host : "null", peer,
           (int)(nl - data), data);
    p->answered = 1;
    if (p->mode == PROBE_ECHO)
        keel_conn_close(conn);
    return KEEL_OK;
}

static void probe_shutdown(keel_conn *conn)
{
    struct probe *p = keel_conn_data(conn);
    keel_log(self, KEEL_LOG_INFO, "probe %d on_shutdown", p->n);
    if (p->mode != PROBE_STUBBORN)
        keel_conn_close(conn);
}

static void probe_close(keel_conn *conn, int status)
{
    struct probe *p = keel_conn_data(conn);
    keel_log(self, KEEL_LOG_INFO, "probe %d closed: %s", p->n, status_name(status));
    if (!p->answered)
        answer(p->ctl, "%sCLOSED %s", p->prefix, status_name(status));
    probe_free(p);
}

static void probe_error(keel_worker *w, int status, void *arg)
{
    struct probe *p = arg;
    if (p->mode == PROBE_VICTIM) {
        state_of(w)->late_callbacks++;
        keel_log(self, KEEL_LOG_ERROR, "on_error after cancel: %s", status_name(status));
        return;
    }
    keel_log(self, KEEL_LOG_INFO, "probe %d error: %s%s", p->n, status_name(status), reentered());
    keel_log(self, KEEL_LOG_INFO, "probe %d detail: %s", p->n, keel_connect_error_detail(w));
    answer(p->ctl, "%sERR %s%s", p->prefix, status_name(status), reentered());
    probe_free(p);
}

static const keel_protocol probe_protocol = {
    .size = sizeof(keel_protocol),
    .name = "connect_probe",
    .on_open = probe_open,
    .on_data = probe_data,
    .on_shutdown = probe_shutdown,
    .on_close = probe_close,
};

static struct probe *probe_new(keel_worker *w, struct ctl *ctl, enum probe_mode mode,
                               const char *prefix)
{
    struct probe *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->mode = mode;
    p->n = ++state_of(w)->next_probe;
    p->prefix = prefix;
    if (mode != PROBE_VICTIM) {
        p->ctl = ctl;
        ctl->refs++;
    }
    return p;
}

static int start_probe(keel_worker *w, struct probe *p, const char *host, unsigned port,
                       uint64_t timeout_ms, const char *transport, keel_connect **handle)
{
    keel_connect_options o = {
        .size = sizeof o,
        .host = host,
        .port = port,
        .protocol = "connect_probe",
        .arg = p,
        .timeout_ms = timeout_ms,
        .transport = transport,
        .on_error = probe_error,
    };
    inside_connect = 1;
    int rc = keel_conn_connect(w, &o, handle);
    inside_connect = 0;
    return rc;
}

/* CONNECT, HOLD, STUBBORN, PENDING */
static void cmd_connect(struct ctl *ctl, enum probe_mode mode, char **args, int nargs)
{
    keel_worker *w = keel_conn_worker(ctl->conn);
    if (nargs < 2) {
        answer(ctl, "USAGE");
        return;
    }
    uint64_t timeout = nargs > 2 ? strtoull(args[2], NULL, 10) : 0;
    const char *transport = nargs > 3 ? args[3] : NULL;
    struct probe *p = probe_new(w, ctl, mode, "");
    if (p == NULL) {
        answer(ctl, "ERR NOMEM");
        return;
    }
    int rc =
        start_probe(w, p, args[0], (unsigned)strtoul(args[1], NULL, 10), timeout, transport, NULL);
    if (rc != KEEL_OK) {
        answer(ctl, "REFUSED %s", status_name(rc));
        probe_free(p);
    } else if (mode == PROBE_PENDING) {
        answer(ctl, "STARTED");
    }
}

static void cmd_cancel(struct ctl *ctl, char **args, int nargs)
{
    keel_worker *w = keel_conn_worker(ctl->conn);
    if (nargs < 2) {
        answer(ctl, "USAGE");
        return;
    }
    unsigned port = (unsigned)strtoul(args[1], NULL, 10);
    struct worker_state *ws = state_of(w);
    struct probe *victim = probe_new(w, ctl, PROBE_VICTIM, "");
    struct probe *sentinel = probe_new(w, ctl, PROBE_ECHO, "SENTINEL ");
    keel_connect *handle = NULL;
    if (victim == NULL || sentinel == NULL ||
        start_probe(w, victim, args[0], port, 0, NULL, &handle) != KEEL_OK || handle == NULL) {
        answer(ctl, "ERR could not start");
        free(victim);
        if (sentinel != NULL)
            probe_free(sentinel);
        return;
    }
    keel_connect_cancel(handle);
    /* A late callback would still find it: freed in stop(). */
    victim->next_victim = ws->victims;
    ws->victims = victim;
    answer(ctl, "CANCELLED");
    if (start_probe(w, sentinel, args[0], port, 0, NULL, NULL) != KEEL_OK) {
        answer(ctl, "SENTINEL ERR could not start");
        probe_free(sentinel);
    }
}

static void never_called(keel_worker *w, int status, void *arg)
{
    (void)w, (void)status, (void)arg;
    keel_log(self, KEEL_LOG_ERROR, "a refused call's callback ran");
}

static void no_work(void *userdata)
{
    (void)userdata;
}

static void cmd_invalid(struct ctl *ctl)
{
    keel_worker *w = keel_conn_worker(ctl->conn);
    const keel_connect_options good = {
        .size = sizeof good,
        .host = "127.0.0.1",
        .port = 9,
        .protocol = "connect_probe",
        .on_error = never_called,
    };
    struct {
        const char *what;
        keel_connect_options o;
    } cases[] = {
        {"no host", good},           {"empty host", good},  {"port 0", good},
        {"port 65536", good},        {"no protocol", good}, {"unknown protocol", good},
        {"unknown transport", good}, {"no on_error", good}, {"size short of on_error", good},
    };
    cases[0].o.host = NULL;
    cases[1].o.host = "";
    cases[2].o.port = 0;
    cases[3].o.port = 65536;
    cases[4].o.protocol = NULL;
    cases[5].o.protocol = "nosuch";
    cases[6].o.transport = "nosuch";
    cases[7].o.on_error = NULL;
    cases[8].o.size = offsetof(keel_connect_options, on_error);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        keel_connect *handle = (keel_connect *)&handle; /* must come back NULL */
        int rc = keel_conn_connect(w, &cases[i].o, &handle);
        if (rc != KEEL_ERR_INVAL || handle != NULL) {
            answer(ctl, "INVALID %s: %s", cases[i].what, status_name(rc));
            return;
        }
    }
    if (keel_conn_connect(w, NULL, NULL) != KEEL_ERR_INVAL) {
        answer(ctl, "INVALID no options");
        return;
    }
    if (keel_worker_offload(w, NULL, never_called, NULL) != KEEL_ERR_INVAL ||
        keel_worker_offload(w, no_work, NULL, NULL) != KEEL_ERR_INVAL) {
        answer(ctl, "INVALID offload");
        return;
    }
    answer(ctl, "INVALID ok");
}

/* ---- offload ----------------------------------------------------------------- */

static void sleep_ms(unsigned ms)
{
#ifdef _WIN32
    Sleep(ms);
#else
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
#endif
}

struct job {
    struct ctl *ctl; /* NULL: log only */
    unsigned ms;
    int ran_on_pool;
};

static void job_work(void *userdata)
{
    struct job *j = userdata;
    j->ran_on_pool = this_worker == NULL;
    if (j->ctl == NULL)
        keel_log(self, KEEL_LOG_INFO, "offload work started");
    sleep_ms(j->ms);
    if (j->ctl == NULL)
        keel_log(self, KEEL_LOG_INFO, "offload work finished");
}

static void job_done(keel_worker *w, int status, void *userdata)
{
    struct job *j = userdata;
    const char *worker_thread = this_worker == w ? "yes" : "no";
    if (j->ctl != NULL) {
        answer(j->ctl, "OFFLOADED status=%s worker_thread=%s pool_thread=%s", status_name(status),
               worker_thread, j->ran_on_pool ? "yes" : "no");
        ctl_unref(j->ctl);
    } else {
        keel_log(self, KEEL_LOG_INFO, "offload done: %s on the worker thread: %s",
                 status_name(status), worker_thread);
    }
    free(j);
}

static void cmd_offload(struct ctl *ctl, char **args, int nargs, int background)
{
    struct job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        answer(ctl, "ERR NOMEM");
        return;
    }
    j->ms = nargs > 0 ? (unsigned)strtoul(args[0], NULL, 10) : 0;
    if (!background) {
        j->ctl = ctl;
        ctl->refs++;
    }
    int rc = keel_worker_offload(keel_conn_worker(ctl->conn), job_work, job_done, j);
    if (rc != KEEL_OK) {
        answer(ctl, "ERR %s", status_name(rc));
        if (!background)
            ctl_unref(ctl);
        free(j);
    } else if (background) {
        answer(ctl, "QUEUED");
    }
}

/* ---- timers ------------------------------------------------------------------- */

static void restart_in_callback(keel_timer *t, void *userdata)
{
    struct ctl *ctl = userdata;
    if (++ctl->fired == 1) {
        int rc = keel_timer_restart(t, 10, 0);
        if (rc != KEEL_OK)
            answer(ctl, "TIMER restart=%s", status_name(rc));
        return;
    }
    answer(ctl, "TIMER fired=%d", ctl->fired);
    keel_timer_stop(t);
    ctl->timer = NULL;
}

static void oneshot_fired(keel_timer *t, void *userdata)
{
    struct ctl *ctl = userdata;
    (void)t;
    answer(ctl, "TIMER fired=%d", ++ctl->fired); /* stays valid until stopped */
}

static void pushback_fired(keel_timer *t, void *userdata)
{
    struct ctl *ctl = userdata;
    size_t n = strlen(ctl->order);
    ctl->order[n] = t == ctl->timer ? 'A' : 'B';
    if (n + 1 == 2)
        answer(ctl, "TIMER order=%s", ctl->order);
}

static void stop_timers(struct ctl *ctl)
{
    if (ctl->timer != NULL)
        keel_timer_stop(ctl->timer);
    if (ctl->other != NULL)
        keel_timer_stop(ctl->other);
    ctl->timer = ctl->other = NULL;
    ctl->fired = 0;
    memset(ctl->order, 0, sizeof ctl->order);
}

static void cmd_timer(struct ctl *ctl, const char *cmd)
{
    keel_worker *w = keel_conn_worker(ctl->conn);
    if (strcmp(cmd, "TIMER_AGAIN") == 0) {
        int rc = ctl->timer ? keel_timer_restart(ctl->timer, 10, 0) : KEEL_ERR_STATE;
        if (rc != KEEL_OK)
            answer(ctl, "TIMER restart=%s", status_name(rc));
        return;
    }
    stop_timers(ctl);
    if (strcmp(cmd, "TIMER_IN_CB") == 0) {
        ctl->timer = keel_timer_start(w, 10, 0, restart_in_callback, ctl);
    } else if (strcmp(cmd, "TIMER_ONESHOT") == 0) {
        ctl->timer = keel_timer_start(w, 10, 0, oneshot_fired, ctl);
    } else {
        /* A is due first, then pushed back behind B: B must fire first. */
        ctl->timer = keel_timer_start(w, 50, 0, pushback_fired, ctl);
        ctl->other = keel_timer_start(w, 150, 0, pushback_fired, ctl);
        if (ctl->timer != NULL && keel_timer_restart(ctl->timer, 300, 0) != KEEL_OK)
            answer(ctl, "TIMER restart failed");
    }
    if (ctl->timer == NULL)
        answer(ctl, "ERR NOMEM");
}

/* ---- the ctl protocol ---------------------------------------------------------- */

static int ctl_open(keel_conn *conn, void *arg)
{
    (void)arg;
    struct ctl *ctl = calloc(1, sizeof *ctl);
    if (ctl == NULL)
        return KEEL_ERR_NOMEM;
    ctl->conn = conn;
    ctl->refs = 1;
    keel_conn_set_data(conn, ctl);
    return KEEL_OK;
}

static void run_command(struct ctl *ctl, char *line)
{
    /* Split in place (strtok's hidden state is shared by the workers). */
    char *words[8];
    int n = 0;
    for (char *at = line; *at != '\0' && n < 8;) {
        while (*at == ' ' || *at == '\r')
            *at++ = '\0';
        if (*at == '\0')
            break;
        words[n++] = at;
        while (*at != '\0' && *at != ' ' && *at != '\r')
            at++;
    }
    if (n == 0)
        return;
    const char *cmd = words[0];
    char **args = words + 1;
    int nargs = n - 1;
    if (strcmp(cmd, "CONNECT") == 0)
        cmd_connect(ctl, PROBE_ECHO, args, nargs);
    else if (strcmp(cmd, "HOLD") == 0)
        cmd_connect(ctl, PROBE_HOLD, args, nargs);
    else if (strcmp(cmd, "STUBBORN") == 0)
        cmd_connect(ctl, PROBE_STUBBORN, args, nargs);
    else if (strcmp(cmd, "PENDING") == 0)
        cmd_connect(ctl, PROBE_PENDING, args, nargs);
    else if (strcmp(cmd, "CANCEL") == 0)
        cmd_cancel(ctl, args, nargs);
    else if (strcmp(cmd, "INVALID") == 0)
        cmd_invalid(ctl);
    else if (strcmp(cmd, "ACCEPTED_HOST") == 0)
        answer(ctl, "ACCEPTED_HOST %s",
               keel_conn_remote_host(ctl->conn) ? keel_conn_remote_host(ctl->conn) : "null");
    else if (strcmp(cmd, "OFFLOAD") == 0)
        cmd_offload(ctl, args, nargs, 0);
    else if (strcmp(cmd, "OFFLOAD_BG") == 0)
        cmd_offload(ctl, args, nargs, 1);
    else if (strncmp(cmd, "TIMER_", 6) == 0)
        cmd_timer(ctl, cmd);
    else if (strcmp(cmd, "PING") == 0)
        answer(ctl, "PONG");
    else
        answer(ctl, "UNKNOWN %s", cmd);
}

static int ctl_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    struct ctl *ctl = keel_conn_data(conn);
    size_t at = 0;
    const char *nl;
    while ((nl = memchr(data + at, '\n', len - at)) != NULL) {
        char line[256];
        size_t n = (size_t)(nl - (data + at));
        if (n >= sizeof line)
            n = sizeof line - 1;
        memcpy(line, data + at, n);
        line[n] = '\0';
        at = (size_t)(nl - data) + 1;
        run_command(ctl, line);
    }
    *consumed = at;
    return KEEL_OK;
}

static void ctl_shutdown(keel_conn *conn)
{
    /* The worker is stopping: a new attempt must be refused at once. */
    keel_connect_options o = {
        .size = sizeof o,
        .host = "127.0.0.1",
        .port = 9,
        .protocol = "connect_probe",
        .on_error = never_called,
    };
    keel_log(self, KEEL_LOG_INFO, "ctl on_shutdown: connect=%s",
             status_name(keel_conn_connect(keel_conn_worker(conn), &o, NULL)));
    keel_conn_close(conn);
}

static void ctl_close(keel_conn *conn, int status)
{
    (void)status;
    struct ctl *ctl = keel_conn_data(conn);
    stop_timers(ctl);
    ctl->conn = NULL;
    ctl_unref(ctl);
}

static const keel_protocol ctl_protocol = {
    .size = sizeof(keel_protocol),
    .name = "connect_ctl",
    .on_open = ctl_open,
    .on_data = ctl_data,
    .on_shutdown = ctl_shutdown,
    .on_close = ctl_close,
};

/* ---- a transport that refuses every connection ---------------------------------- */

static int refuser_open(keel_conn *conn)
{
    (void)conn;
    return KEEL_ERR_PROTOCOL;
}

static const keel_transport refuser = {
    .size = sizeof(keel_transport),
    .name = "refuser",
    .on_open = refuser_open,
};

/* ---- the module ------------------------------------------------------------------ */

static void stop_timer_fired(keel_timer *t, void *userdata)
{
    (void)t, (void)userdata;
}

static void refused_done(keel_worker *w, int status, void *userdata)
{
    (void)w, (void)status, (void)userdata;
    keel_log(self, KEEL_LOG_ERROR, "an offload refused in stop() ran its done");
}

static int connect_start(keel_module *m, keel_worker *w, void *state)
{
    (void)m;
    struct worker_state *ws = state;
    this_worker = w;
    ws->stop_timer = keel_timer_start(w, 3600 * 1000, 0, stop_timer_fired, NULL);
    return ws->stop_timer ? KEEL_OK : KEEL_ERR_NOMEM;
}

static void connect_stop(keel_module *m, keel_worker *w, void *state)
{
    struct worker_state *ws = state;
    keel_connect_options o = {
        .size = sizeof o,
        .host = "127.0.0.1",
        .port = 9,
        .protocol = "connect_probe",
        .on_error = never_called,
    };
    int offload = keel_worker_offload(w, no_work, refused_done, NULL);
    int restart = keel_timer_restart(ws->stop_timer, 10, 0);
    int connect = keel_conn_connect(w, &o, NULL);
    keel_log(m, KEEL_LOG_INFO, "stop: offload=%s timer_restart=%s connect=%s late_callbacks=%d",
             status_name(offload), status_name(restart), status_name(connect), ws->late_callbacks);
    while (ws->victims != NULL) {
        struct probe *p = ws->victims;
        ws->victims = p->next_victim;
        free(p);
    }
}

static int connect_load(keel_module *m)
{
    self = m;
    int rc = keel_protocol_register(m, &ctl_protocol);
    if (rc == KEEL_OK)
        rc = keel_protocol_register(m, &probe_protocol);
    return rc ? rc : keel_transport_register(m, &refuser);
}

KEEL_MODULE(connect, .version = "1.0.0", .load = connect_load, .start = connect_start,
            .stop = connect_stop, .worker_state_size = sizeof(struct worker_state));
