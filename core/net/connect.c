/* Outbound connections (keel_conn_connect): resolve the host on libuv's
 * thread pool, try each address in turn within one deadline, then hand the
 * connected handle to the connection manager, which drives it like an
 * accepted one.
 *
 * An attempt (struct keel_connect) owns up to three things libuv calls
 * back for: its deadline timer, a getaddrinfo request and the connect
 * request of the address being tried. Once the caller has been answered,
 * or has cancelled, the attempt is "ended": whatever is still in flight is
 * stopped, and the attempt is freed when libuv has called back for the
 * last of them (release_if_done), never from inside a keel call. Until
 * then it stays on the worker's list, so that the worker does not stop
 * its modules while an attempt still holds a handle or a request.
 * Everything here runs on the worker's thread.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "net/conn.h"
#include "net/worker.h"

/* What an outbound connection keeps for its whole life, in the tail block
 * kl_conn_new allocates with it: its origin, and the host name the
 * origin's remote_host (keel_conn_remote_host) points to. */
typedef struct outbound_tail {
    kl_origin origin;
    char host[]; /* NUL-terminated */
} outbound_tail;

struct keel_connect {
    keel_worker *worker;
    keel_connect *prev, *next; /* w->connects, until freed */
    kl_origin origin;          /* what each try's connection runs; remote_host is host */
    void *arg;
    keel_connect_error_fn on_error;
    unsigned port;

    uv_timer_t timer; /* the deadline, or a failure found inside keel_conn_connect */
    uv_getaddrinfo_t resolver;
    uv_connect_t connect_req;
    keel_conn *conn; /* the address being tried: connecting, not started */

    struct addrinfo *resolved;            /* getaddrinfo's list, freed with the attempt */
    struct addrinfo literal;              /* a numeric host's one address */
    struct sockaddr_storage literal_addr; /* what literal.ai_addr points to */
    const struct addrinfo *next_addr;     /* the next address to try */
    const struct addrinfo *tried;         /* the one connecting now */
    /* What the last failure was, in words, for keel_connect_error_detail:
     * the resolver's reason or the last address's error. */
    char detail[192];

    struct sockaddr_storage unix_addr; /* a unix: host's address */
    bool unix_connected; /* a unix: host's socket connected at once: the timer answers */

    int failure;         /* how the addresses tried so far failed (0: none did) */
    int deferred_status; /* for the timer to report (0: the deadline passed) */

    /* Connected through a transport that negotiates first (TLS): the
     * caller is answered when its protocol opens, and the handle lives
     * until then (kl_connect_answered). */
    keel_conn *handshaking;
    bool ended;      /* answered or cancelled: no callback of the caller's runs any more */
    bool timer_open; /* until the timer's close callback */
    bool resolving;  /* until the getaddrinfo callback */
    bool connecting; /* until the connect callback */

    size_t host_len;
    char host[]; /* NUL-terminated copy of options->host */
};

static void on_timer(uv_timer_t *timer);
static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res);
static void on_connected(uv_connect_t *req, int status);

/* ---- statuses ------------------------------------------------------------ */

/* One address's failure, as the caller would see it. */
static int status_from_connect(int uv_status)
{
    switch (uv_status) {
    case UV_ECONNREFUSED:
        return KEEL_ERR_REFUSED;
    case UV_ETIMEDOUT: /* the system gave up before our deadline */
        return KEEL_ERR_TIMEOUT;
    case UV_ENOMEM:
        return KEEL_ERR_NOMEM;
    case UV_EMFILE: /* no descriptor for the socket: ours, not the host's */
    case UV_ENFILE:
        return KEEL_ERR_LIMIT;
    default: /* unreachable, no such local address, reset... */
        return KEEL_ERR_IO;
    }
}

static int status_from_resolver(int uv_status)
{
    switch (uv_status) {
    case UV_EAI_NONAME:     /* no such name */
    case UV_EAI_NODATA:     /* a name without addresses */
    case UV_EAI_ADDRFAMILY: /* none in a usable family */
    case UV_EAI_AGAIN:      /* the name server did not answer in time */
    case UV_EAI_FAIL:       /* the name server failed for good */
        return KEEL_ERR_NOTFOUND;
    case UV_EAI_MEMORY:
    case UV_ENOMEM:
        return KEEL_ERR_NOMEM;
    default:
        return KEEL_ERR_IO;
    }
}

/* Every address failed the same way: that is the answer (all refused is
 * KEEL_ERR_REFUSED); mixed failures are KEEL_ERR_IO. */
static void note_failure(keel_connect *a, int status)
{
    a->failure = (a->failure == 0 || a->failure == status) ? status : KEEL_ERR_IO;
}

/* Words for keel_connect_error_detail: libuv's text and the error's name
 * (getaddrinfo's EAI_NONAME, EAI_AGAIN...; connect's ECONNREFUSED...),
 * with the address that failed, if one did. Failures only: never on the
 * path of a connection that succeeds. */
static void note_detail(keel_connect *a, const struct sockaddr *sa, int uv_status)
{
    if (sa == NULL) {
        snprintf(a->detail, sizeof a->detail, "resolving %s: %s (%s)", a->host,
                 uv_strerror(uv_status), uv_err_name(uv_status));
        return;
    }
    if (sa->sa_family == AF_UNIX) {
        snprintf(a->detail, sizeof a->detail, "connecting to %s: %s (%s)", a->host,
                 uv_strerror(uv_status), uv_err_name(uv_status));
        return;
    }
    char ip[64] = "?";
    if (sa->sa_family == AF_INET6)
        uv_ip6_name((const struct sockaddr_in6 *)sa, ip, sizeof ip);
    else
        uv_ip4_name((const struct sockaddr_in *)sa, ip, sizeof ip);
    int v6 = sa->sa_family == AF_INET6;
    snprintf(a->detail, sizeof a->detail, "connecting to %s%s%s:%u: %s (%s)", v6 ? "[" : "", ip,
             v6 ? "]" : "", a->port, uv_strerror(uv_status), uv_err_name(uv_status));
}

/* ---- the attempt's life -------------------------------------------------- */

/* Frees the attempt once it has ended and libuv holds nothing of it. Only
 * ever called from libuv callbacks: end_attempt leaves at least the
 * timer's close pending, so an attempt never disappears under a caller. */
static void release_if_done(keel_connect *a)
{
    if (!a->ended || a->timer_open || a->resolving || a->connecting || a->handshaking != NULL)
        return;
    keel_worker *w = a->worker;
    if (a->prev != NULL)
        a->prev->next = a->next;
    else
        w->connects = a->next;
    if (a->next != NULL)
        a->next->prev = a->prev;
    if (a->resolved != NULL)
        uv_freeaddrinfo(a->resolved);
    free(a);
    kl_worker_try_finish(w);
}

static void on_timer_closed(uv_handle_t *handle)
{
    keel_connect *a = KL_CONTAINER_OF(handle, keel_connect, timer);
    a->timer_open = false;
    release_if_done(a);
}

/* The caller is answered or has cancelled: stop what is in flight. libuv
 * still calls back for each piece, and the last callback frees the
 * attempt: the timer's close; the resolver with UV_EAI_CANCELED, or with
 * its answer if a pool thread had already taken it (uv_cancel then fails
 * with UV_EBUSY: a running getaddrinfo cannot be interrupted); the
 * connect with UV_ECANCELED, which libuv delivers when the handle closes,
 * before the handle's own close callback. */
static void end_attempt(keel_connect *a)
{
    a->ended = true;
    uv_close((uv_handle_t *)&a->timer, on_timer_closed);
    if (a->resolving)
        uv_cancel((uv_req_t *)&a->resolver);
    if (a->conn != NULL) {
        kl_conn_discard(a->conn);
        a->conn = NULL;
    }
}

static void fail(keel_connect *a, int status)
{
    if (status == KEEL_ERR_TIMEOUT) {
        /* The earlier failure goes after the deadline, cut if need be. */
        char before[sizeof a->detail];
        memcpy(before, a->detail, sizeof before);
        snprintf(a->detail, sizeof a->detail, "no connection within the deadline%s%.*s",
                 before[0] ? "; before it, " : "", (int)sizeof a->detail - 48, before);
    } else if (status == KEEL_ERR_SHUTDOWN) {
        snprintf(a->detail, sizeof a->detail, "the worker began a graceful stop");
    }
    kl_log(KEEL_LOG_DEBUG, "connect to %s port %u: %s: %s", a->host, a->port, keel_strerror(status),
           a->detail);
    end_attempt(a);
    keel_worker *w = a->worker;
    w->connect_detail = a->detail; /* the attempt is freed later, from the loop */
    a->on_error(w, status, a->arg);
    w->connect_detail = NULL;
}

const char *keel_connect_error_detail(keel_worker *w)
{
    return w->connect_detail != NULL ? w->connect_detail : "";
}

/* For a failure found inside keel_conn_connect, which must not call back:
 * the timer reports it on the loop's next turn (libuv runs a timer due
 * now from the loop, never from uv_timer_start). */
static void fail_later(keel_connect *a, int status)
{
    a->deferred_status = status;
    uv_timer_start(&a->timer, on_timer, 0, 0);
}

static void succeed(keel_connect *a, keel_conn *c);

static void on_timer(uv_timer_t *timer)
{
    keel_connect *a = KL_CONTAINER_OF(timer, keel_connect, timer);
    if (a->unix_connected) {
        keel_conn *c = a->conn;
        a->conn = NULL;
        succeed(a, c);
        return;
    }
    fail(a, a->deferred_status != 0 ? a->deferred_status : KEEL_ERR_TIMEOUT);
}

/* ---- connecting ---------------------------------------------------------- */

/* A connection for one try. Its origin lives in its own tail, with a copy
 * of the host: the connection may outlive the attempt by far. */
static keel_conn *new_conn(keel_connect *a)
{
    keel_conn *c = kl_conn_new(a->worker, &a->origin, sizeof(outbound_tail) + a->host_len + 1);
    if (c == NULL)
        return NULL;
    outbound_tail *tail = kl_conn_tail(c);
    memcpy(tail->host, a->host, a->host_len + 1);
    tail->origin = a->origin;
    tail->origin.remote_host = tail->host;
    c->origin = &tail->origin;
    return c;
}

/* Starts a connect to the next address TCP can use. KEEL_OK: one is in
 * flight. Otherwise what the caller is to be told: how the addresses
 * failed, or KEEL_ERR_NOTFOUND if there was none to try. */
static int try_next_address(keel_connect *a)
{
    while (a->next_addr != NULL) {
        const struct addrinfo *ai = a->next_addr;
        a->next_addr = ai->ai_next;
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        keel_conn *c = new_conn(a);
        if (c == NULL) {
            note_failure(a, KEEL_ERR_NOMEM);
            continue;
        }
        /* libuv reports a refusal found at once (loopback) through the
         * callback on a later turn; other immediate errors (no route, an
         * IPv6 address on a host without IPv6) come back here. */
        int rc = uv_tcp_connect(&a->connect_req, &c->tcp, ai->ai_addr, on_connected);
        if (rc == 0) {
            kl_conn_read_while_connecting(c);
            a->conn = c;
            a->connecting = true;
            a->tried = ai;
            return KEEL_OK;
        }
        note_detail(a, ai->ai_addr, rc);
        kl_conn_discard(c);
        note_failure(a, status_from_connect(rc));
    }
    return a->failure != 0 ? a->failure : KEEL_ERR_NOTFOUND;
}

/* Connected: the attempt ends and the connection starts like an accepted
 * one (the transport's on_open, then the protocol's on_open(conn, arg)).
 * The attempt outlives this call: its timer's close is still pending. */
static void succeed(keel_connect *a, keel_conn *c)
{
    end_attempt(a);
    /* A transport that refused or closed the connection in its on_open kept
     * the protocol's on_open from running: the caller still gets its one
     * answer. */
    if (!kl_conn_start(c, a->arg, a->on_error)) {
        kl_log(KEEL_LOG_DEBUG, "connect to %s port %u: the transport refused it", a->host, a->port);
        keel_worker *w = a->worker;
        w->connect_detail = "the transport refused the connection in its on_open";
        a->on_error(w, KEEL_ERR_IO, a->arg);
        w->connect_detail = NULL;
        return;
    }
    /* A handshake goes on: the handle must stay valid, and cancellable,
     * until it answers (a proxy's client may leave meanwhile). */
    if (kl_conn_deferred_attach(c, a))
        a->handshaking = c;
}

void kl_connect_answered(keel_connect *a)
{
    a->handshaking = NULL;
    release_if_done(a);
}

static void on_connected(uv_connect_t *req, int uv_status)
{
    keel_connect *a = KL_CONTAINER_OF(req, keel_connect, connect_req);
    keel_conn *c = a->conn;
    a->connecting = false;
    a->conn = NULL;
    if (a->ended) { /* end_attempt closed the handle: UV_ECANCELED */
        release_if_done(a);
        return;
    }
    if (uv_status == 0) {
        succeed(a, c);
        return;
    }
    note_detail(a, a->tried->ai_addr, uv_status);
    kl_log(KEEL_LOG_DEBUG, "connect to %s port %u: one address failed: %s", a->host, a->port,
           a->detail);
    kl_conn_discard(c);
    note_failure(a, status_from_connect(uv_status));
    int status = try_next_address(a);
    if (status != KEEL_OK)
        fail(a, status);
}

/* A unix: host (platform.h kl_unix_connect): the socket connects at once
 * or fails, so there is nothing to wait for; the caller is still answered
 * from the loop (the timer, due now), never from inside keel_conn_connect.
 * KEEL_OK, or what the caller is to be told. */
static int connect_unix(keel_connect *a)
{
    int rc = kl_unix_addr(a->host + 5, &a->unix_addr);
    if (rc != 0) {
        snprintf(a->detail, sizeof a->detail, "%s: %s", a->host,
                 rc == UV_ENOTSUP ? "Unix domain sockets are not supported here"
                                  : "not a Unix socket address (unix:PATH, unix:@NAME)");
        return rc == UV_ENOTSUP ? KEEL_ERR_UNSUPPORTED : KEEL_ERR_INVAL;
    }
    keel_conn *c = new_conn(a);
    if (c == NULL)
        return KEEL_ERR_NOMEM;
    kl_socket sock;
    rc = kl_unix_connect(&a->unix_addr, &sock);
    if (rc == 0 && (rc = uv_tcp_open(&c->tcp, sock)) != 0)
        kl_socket_close(sock);
    if (rc != 0) {
        note_detail(a, (const struct sockaddr *)&a->unix_addr, rc);
        kl_conn_discard(c);
        /* No such file is nobody listening there, as a refusal is. */
        return rc == UV_ENOENT ? KEEL_ERR_REFUSED : status_from_connect(rc);
    }
    a->conn = c;
    a->unix_connected = true;
    return KEEL_OK;
}

/* ---- resolving ----------------------------------------------------------- */

/* A numeric host needs no resolver. uv_ip4_addr and uv_ip6_addr accept
 * what uv_inet_pton does (an IPv6 literal may end in %zone). */
static bool take_literal(keel_connect *a)
{
    struct sockaddr_in *v4 = (struct sockaddr_in *)&a->literal_addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a->literal_addr;
    if (uv_ip4_addr(a->host, (int)a->port, v4) == 0) {
        a->literal.ai_family = AF_INET;
        a->literal.ai_addrlen = sizeof *v4;
    } else if (uv_ip6_addr(a->host, (int)a->port, v6) == 0) {
        a->literal.ai_family = AF_INET6;
        a->literal.ai_addrlen = sizeof *v6;
    } else {
        return false;
    }
    a->literal.ai_socktype = SOCK_STREAM;
    a->literal.ai_addr = (struct sockaddr *)&a->literal_addr;
    a->next_addr = &a->literal;
    return true;
}

/* Both families, in the order getaddrinfo sorts them (RFC 6724). No
 * AI_ADDRCONFIG: it hides loopback-only families on some systems, and an
 * unusable address fails fast here before the next is tried. */
static int start_resolving(keel_connect *a)
{
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = AI_NUMERICSERV;
    char service[8];
    snprintf(service, sizeof service, "%u", a->port);
    int rc = uv_getaddrinfo(&a->worker->loop, &a->resolver, on_resolved, a->host, service, &hints);
    if (rc != 0) { /* out of memory, or a name libuv's IDNA conversion rejects */
        note_detail(a, NULL, rc);
        return status_from_resolver(rc == UV_EINVAL ? UV_EAI_NONAME : rc);
    }
    a->resolving = true;
    return KEEL_OK;
}

static void on_resolved(uv_getaddrinfo_t *req, int uv_status, struct addrinfo *res)
{
    keel_connect *a = KL_CONTAINER_OF(req, keel_connect, resolver);
    a->resolving = false;
    a->resolved = res; /* NULL on failure */
    if (a->ended) {    /* cancelled meanwhile: UV_EAI_CANCELED, or an answer nobody wants */
        release_if_done(a);
        return;
    }
    if (uv_status != 0) {
        note_detail(a, NULL, uv_status);
        fail(a, status_from_resolver(uv_status));
        return;
    }
    a->next_addr = res;
    int status = try_next_address(a);
    if (status != KEEL_OK)
        fail(a, status);
}

/* ---- the API ------------------------------------------------------------- */

/* The options as this host knows them: a module built against a smaller
 * struct gets zero for the fields it lacks (so a missing on_error is
 * refused), a larger one has its newer fields ignored. */
static int read_options(keel_worker *w, const keel_connect_options *in, keel_connect_options *o,
                        const kl_protocol **protocol, const kl_transport **transport)
{
    if (in == NULL)
        return KEEL_ERR_INVAL;
    memset(o, 0, sizeof *o);
    memcpy(o, in, in->size < sizeof *o ? in->size : sizeof *o);
    /* A unix: host has no port: any is ignored. */
    int is_unix = o->host != NULL && strncmp(o->host, "unix:", 5) == 0;
    if (o->host == NULL || o->host[0] == '\0' || (!is_unix && (o->port == 0 || o->port > 65535)) ||
        o->protocol == NULL || o->on_error == NULL)
        return KEEL_ERR_INVAL;
    const kl_registry *r = w->host->registry;
    if ((*protocol = kl_registry_protocol(r, o->protocol)) == NULL)
        return KEEL_ERR_INVAL;
    *transport = NULL;
    if (o->transport != NULL && (*transport = kl_registry_transport(r, o->transport)) == NULL)
        return KEEL_ERR_INVAL;
    return KEEL_OK;
}

int keel_conn_connect(keel_worker *w, const keel_connect_options *options, keel_connect **out)
{
    if (out != NULL)
        *out = NULL;
    keel_connect_options o;
    const kl_protocol *protocol;
    const kl_transport *transport;
    int rc = read_options(w, options, &o, &protocol, &transport);
    if (rc != KEEL_OK)
        return rc;
    if (w->stopping)
        return KEEL_ERR_SHUTDOWN;

    size_t host_len = strlen(o.host);
    keel_connect *a = calloc(1, sizeof *a + host_len + 1);
    if (a == NULL)
        return KEEL_ERR_NOMEM;
    a->worker = w;
    memcpy(a->host, o.host, host_len + 1);
    a->host_len = host_len;
    size_t rb = o.read_buffer_size, max = w->host->settings.read_buffer_max;
    a->origin =
        (kl_origin){protocol, transport, NULL, a->host, (uint32_t)(rb < max ? rb : max), 0, 0};
    a->arg = o.arg;
    a->on_error = o.on_error;
    a->port = o.port;
    uv_timer_init(&w->loop, &a->timer);
    a->timer_open = true;
    a->next = w->connects;
    if (w->connects != NULL)
        w->connects->prev = a;
    w->connects = a;

    /* From here every failure reaches the caller through on_error. */
    int is_unix = strncmp(a->host, "unix:", 5) == 0;
    int status = is_unix           ? connect_unix(a)
                 : take_literal(a) ? try_next_address(a)
                                   : start_resolving(a);
    uint64_t timeout = o.timeout_ms ? o.timeout_ms : w->host->settings.connect_timeout_ms;
    if (status != KEEL_OK)
        fail_later(a, status);
    else if (is_unix)
        uv_timer_start(&a->timer, on_timer, 0, 0);
    else if (timeout > 0)
        uv_timer_start(&a->timer, on_timer, timeout, 0);
    if (out != NULL)
        *out = a;
    return KEEL_OK;
}

void keel_connect_cancel(keel_connect *a)
{
    if (a == NULL)
        return;
    if (a->handshaking != NULL) {
        /* Connected, the transport's handshake in progress: neither the
         * protocol's on_open nor on_error may run now. */
        keel_conn *c = a->handshaking;
        a->handshaking = NULL;
        kl_conn_deferred_cancel(c);
        release_if_done(a);
        return;
    }
    if (!a->ended)
        end_attempt(a);
}

void kl_connects_stop(keel_worker *w)
{
    keel_connect *next;
    for (keel_connect *a = w->connects; a != NULL; a = next) {
        /* on_error may cancel other attempts, which only marks them ended:
         * none is freed before the loop calls back. */
        next = a->next;
        if (!a->ended)
            fail(a, KEEL_ERR_SHUTDOWN);
    }
}

const char *keel_conn_remote_host(keel_conn *conn)
{
    return conn->origin->remote_host;
}

int keel_conn_set_read_size(keel_conn *conn, size_t bytes)
{
    if (conn->origin->spec != NULL)
        return KEEL_ERR_STATE; /* an accepted connection's origin is its listener's */
    size_t max = kl_conn_worker(conn)->host->settings.read_buffer_max;
    outbound_tail *tail = kl_conn_tail(conn);
    tail->origin.read_buffer = (uint32_t)(bytes < max ? bytes : max);
    return KEEL_OK;
}
