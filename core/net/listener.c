/* Listeners: binding the sockets of each `listen` line, and the single
 * acceptor used where the kernel cannot balance one port over several
 * sockets (Windows, macOS): the main loop accepts and hands each socket to
 * a worker, round robin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/log.h"
#include "net/host.h"
#include "net/worker.h"

static void set_port(struct sockaddr_storage *addr, unsigned port)
{
    if (addr->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)addr)->sin6_port = htons((uint16_t)port);
    else if (addr->ss_family == AF_INET)
        ((struct sockaddr_in *)addr)->sin_port = htons((uint16_t)port);
}

/* The port the kernel chose for a socket bound to port 0. */
static unsigned bound_port(kl_socket sock)
{
    struct sockaddr_storage addr;
    socklen_t len = sizeof addr;
    memset(&addr, 0, sizeof addr);
    if (getsockname(sock, (struct sockaddr *)&addr, &len) != 0)
        return 0;
    return kl_sockaddr_port(&addr);
}

static int cannot_listen(const kl_listener *l, int uv_error)
{
    char where[300];
    kl_log(KEEL_LOG_ERROR, "%s: cannot listen on %s: %s",
           kl_config_where(l->spec->where, where, sizeof where), l->spec->text,
           uv_strerror(uv_error));
    return KEEL_ERR_IO;
}

/* The sockets handed down for this listen line, if any (net/inherit.h).
 * In single-acceptor mode one is enough: the others would only keep
 * connections queued that nobody accepts. */
static void adopt(kl_host *h, kl_listener *l, size_t cap, struct sockaddr_storage *addr)
{
    int owned = 0;
    l->nsockets = kl_inherit_take(&h->inherited, addr, l->dgram != NULL, l->sockets, cap, &owned);
    if (l->nsockets == 0)
        return;
    l->inherited = l->nsockets;
    if (addr->ss_family == AF_UNIX && owned && kl_unix_file_of(l->sockets[0], addr, &l->file) == 0)
        l->file_owner = KL_FILE_HANDED_DOWN;
    l->port = bound_port(l->sockets[0]);
    set_port(addr, l->port);
    if (!h->settings.reuseport && l->nsockets > 1) {
        kl_log(KEEL_LOG_WARN, "%s: %zu inherited sockets, one acceptor: keeping one", l->spec->text,
               l->nsockets);
        for (size_t k = 1; k < l->nsockets; k++)
            kl_socket_close(l->sockets[k]);
        l->nsockets = l->inherited = 1;
    }
}

/* A unix: listener's one socket (platform.h kl_unix_listen: the stale
 * file rule, mode and owner). Logs its reason on failure. */
static int listen_unix(kl_listener *l, const struct sockaddr_storage *addr, int backlog,
                       kl_socket *out)
{
    char err[512], where[300];
    int rc = kl_unix_listen(addr, backlog, &l->spec->perms, out, &l->file, err, sizeof err);
    if (rc != 0) {
        kl_log(KEEL_LOG_ERROR, "%s: cannot listen on %s: %s",
               kl_config_where(l->spec->where, where, sizeof where), l->spec->text, err);
        return rc;
    }
    l->file_owner = KL_FILE_BOUND_HERE;
    return 0;
}

int kl_listeners_bind(kl_host *h)
{
    const kl_settings *cfg = &h->settings;
    size_t want = cfg->reuseport ? h->nworkers : 1;
    for (size_t i = 0; i < h->nlisteners; i++) {
        kl_listener *l = &h->listeners[i];
        l->origin = (kl_origin){l->protocol, l->transport, l->spec, NULL, 0, 0, 0};
        /* Room for every inherited socket: a reload may hand down more
         * than this process has workers (worker.c spreads them). */
        size_t cap = want + h->inherited.count;
        l->sockets = malloc(cap * sizeof *l->sockets);
        l->given = calloc(cap, 1);
        if (l->sockets == NULL || l->given == NULL)
            return KEEL_ERR_NOMEM;
        struct sockaddr_storage addr = l->spec->addr;
        /* UDP sockets too: a reload's successor reads the very sockets
         * the old process did, so that what waits in their buffers when
         * the old workers close their copies is read, not dropped with a
         * closed socket (docs/udp.md). */
        adopt(h, l, cap, &addr);
        /* SO_REUSEPORT would let this join another process's group on the
         * same port and silently split its traffic: a socket without it
         * must be able to bind first (a stale instance is an error). */
        if (l->inherited == 0 && l->dgram == NULL && cfg->reuseport &&
            kl_sockaddr_port(&addr) != 0) {
            kl_socket probe;
            int rc = kl_listen_socket((struct sockaddr *)&addr, 0, 1, &probe);
            if (rc != 0)
                return cannot_listen(l, rc);
            kl_socket_close(probe);
        }
        while (l->nsockets < want) {
            kl_socket sock;
            int rc;
            if (addr.ss_family == AF_UNIX) {
                /* No SO_REUSEPORT for Unix sockets (Linux balances TCP and
                 * UDP only): one socket, each worker accepting from its
                 * queue through a descriptor of its own. */
                if (l->nsockets > 0)
                    rc = kl_socket_dup(l->sockets[0], &sock);
                else if ((rc = listen_unix(l, &addr, cfg->backlog, &sock)) != 0)
                    return KEEL_ERR_IO;
                if (rc != 0)
                    return cannot_listen(l, rc);
                l->sockets[l->nsockets++] = sock;
                continue;
            }
            rc = l->dgram != NULL ? kl_udp_socket((struct sockaddr *)&addr, cfg->reuseport, &sock)
                                  : kl_listen_socket((struct sockaddr *)&addr, cfg->reuseport,
                                                     cfg->backlog, &sock);
            /* An inherited socket made without SO_REUSEPORT (a systemd
             * .socket unit without ReusePort=yes) admits no siblings: the
             * workers then share its one queue, each through a descriptor
             * of its own, as before reuseport existed. */
            if (rc != 0 && l->inherited > 0)
                rc = kl_socket_dup(l->sockets[l->nsockets % l->inherited], &sock);
            if (rc != 0)
                return cannot_listen(l, rc);
            l->sockets[l->nsockets++] = sock;
            /* With port 0 the first socket picks the port and the others
             * (one per worker) join it. */
            if (l->nsockets == 1) {
                l->port = bound_port(sock);
                set_port(&addr, l->port);
            }
        }
        /* Set on each of the listener's sockets, handed down ones too:
         * what they accept then needs no setsockopt of its own. */
        int nodelay = l->dgram == NULL && addr.ss_family != AF_UNIX;
        for (size_t k = 0; nodelay && k < l->nsockets; k++)
            nodelay = kl_listen_nodelay(l->sockets[k]);
        l->origin.nodelay_inherited = (uint8_t)nodelay;
    }
    kl_inherit_release(&h->inherited);
    return KEEL_OK;
}

/* ---- accept errors ---------------------------------------------------------- */

int kl_accept_error_transient(int uv_error)
{
    switch (uv_error) {
    /* Linux passes a connection's pending network errors on through
     * accept, to be treated like EAGAIN (accept(2)). */
    case UV_ECONNABORTED:
    case UV_EINTR:
    case UV_EPERM: /* a firewall rule (Linux) */
    case UV_EPROTO:
    case UV_ENOPROTOOPT:
    case UV_ENETDOWN:
    case UV_ENETUNREACH:
    case UV_EHOSTDOWN:
    case UV_EHOSTUNREACH:
    case UV_ENONET:
        return 1;
    default:
        return 0;
    }
}

int kl_accept_error_reason(int uv_error)
{
    switch (uv_error) {
    case UV_EMFILE:
        return KL_ACCEPT_EMFILE;
    case UV_ENFILE:
        return KL_ACCEPT_ENFILE;
    case UV_ENOMEM:
    case UV_ENOBUFS:
        return KL_ACCEPT_ENOMEM;
    default:
        return KL_ACCEPT_OTHER;
    }
}

void kl_accept_error_log(kl_log_limit *limit, uint64_t now_ms, const char *where, int uv_error)
{
    uint64_t held;
    if (!kl_log_limit_pass(limit, now_ms, &held))
        return;
    const char *what;
    switch (uv_error) {
    case UV_EMFILE:
        what = "out of file descriptors: the process's limit (RLIMIT_NOFILE, docs/operations.md)";
        break;
    case UV_ENFILE:
        what = "out of file descriptors: the system's limit (fs.file-max)";
        break;
    case UV_ENOMEM:
    case UV_ENOBUFS:
        what = "the kernel is out of memory";
        break;
    default:
        what = uv_strerror(uv_error);
        break;
    }
    char more[64] = "";
    if (held > 0)
        snprintf(more, sizeof more, " (%llu more since the last line)", (unsigned long long)held);
    kl_log(KEEL_LOG_ERROR, "accept on %s: %s [%s]; accepting pauses for %d ms%s", where, what,
           uv_err_name(uv_error), KL_ACCEPT_PAUSE_MS, more);
}

/* ---- the single acceptor ------------------------------------------------------ */

static void on_acceptable(uv_poll_t *poll, int status, int events);

/* At max_connections: the next worker, round robin, that had idle
 * connections a moment ago (each worker publishes its count), or NULL. */
static keel_worker *worker_with_idle(kl_host *h, kl_listener *l)
{
    for (size_t i = 0; i < h->nworkers; i++) {
        keel_worker *w = h->workers[l->next_worker++ % h->nworkers];
        if (kl_relaxed_load64(&w->nidle) > 0)
            return w;
    }
    return NULL;
}

static void on_retry(uv_timer_t *timer)
{
    kl_listener *l = timer->data;
    if (l->polling)
        uv_poll_start(&l->poll, UV_READABLE, on_acceptable);
}

/* Out of descriptors or memory: the connection stays queued and the poll
 * would fire again at once, so accepting pauses. */
static void pause_accepting(kl_listener *l, int err)
{
    kl_host *h = l->host;
    kl_atomic_add(&h->acceptor_errors[kl_accept_error_reason(err)], 1);
    kl_accept_error_log(&l->accept_log, uv_now(h->loop), l->spec->text, err);
    uv_poll_stop(&l->poll);
    uv_timer_start(&l->retry, on_retry, KL_ACCEPT_PAUSE_MS, 0);
}

static void on_acceptable(uv_poll_t *poll, int status, int events)
{
    kl_listener *l = poll->data;
    kl_host *h = l->host;
    (void)events;
    if (status < 0) {
        /* libuv stopped the poll (an error condition on the socket):
         * counted, logged and tried again like a failed accept. */
        pause_accepting(l, status);
        return;
    }
    /* Bounded so one busy listener cannot starve the others. */
    for (int n = 0; n < 64; n++) {
        kl_socket sock;
        int rc = kl_accept(l->sockets[0], &sock);
        if (rc == UV_EAGAIN)
            return;
        if (kl_accept_error_transient(rc))
            continue; /* that one connection failed, not the listener */
        if (rc != 0) {
            pause_accepting(l, rc);
            return;
        }
        if (!kl_host_admit(h)) {
            /* A worker with idle connections may close one to make room
             * (kl_conn_reclaim_idle); it refuses the socket if it cannot. */
            keel_worker *w = worker_with_idle(h, l);
            if (w == NULL || kl_worker_handoff(w, sock, l, 1) != KEEL_OK) {
                kl_atomic_add(&h->acceptor_rejected, 1);
                kl_socket_close(sock);
            }
            continue;
        }
        keel_worker *w = h->workers[l->next_worker++ % h->nworkers];
        if (kl_worker_handoff(w, sock, l, 0) != KEEL_OK) {
            kl_host_release(h);
            kl_socket_close(sock);
        }
    }
}

int kl_listeners_start_acceptor(kl_host *h)
{
    if (h->settings.reuseport)
        return KEEL_OK;
    for (size_t i = 0; i < h->nlisteners; i++) {
        kl_listener *l = &h->listeners[i];
        if (l->dgram != NULL)
            continue; /* worker 0 receives on it (net/udp.c) */
        int rc = uv_poll_init_socket(h->loop, &l->poll, l->sockets[0]);
        if (rc == 0) {
            l->poll.data = l;
            l->polling = 1;
            uv_timer_init(h->loop, &l->retry);
            l->retry.data = l;
            rc = uv_poll_start(&l->poll, UV_READABLE, on_acceptable);
        }
        if (rc != 0) {
            kl_log(KEEL_LOG_ERROR, "cannot accept on %s: %s", l->spec->text, uv_strerror(rc));
            return KEEL_ERR_IO;
        }
    }
    return KEEL_OK;
}

void kl_listeners_stop_acceptor(kl_host *h)
{
    for (size_t i = 0; i < h->nlisteners; i++) {
        kl_listener *l = &h->listeners[i];
        if (l->polling) {
            uv_close((uv_handle_t *)&l->poll, NULL);
            uv_close((uv_handle_t *)&l->retry, NULL);
            l->polling = 0;
        }
    }
}

/* Closes the sockets no worker took over (all of them in single-acceptor
 * mode, once the poll handles are closed). */
void kl_listeners_close(kl_host *h)
{
    kl_inherit_release(&h->inherited); /* start-up failed before adopting them all */
    for (size_t i = 0; i < h->nlisteners; i++) {
        kl_listener *l = &h->listeners[i];
        for (size_t k = 0; k < l->nsockets; k++)
            if (!l->given[k])
                kl_socket_close(l->sockets[k]);
        free(l->sockets);
        free(l->given);
        l->sockets = NULL;
        l->given = NULL;
        l->nsockets = 0;
    }
}

void kl_listeners_remove_files(kl_host *h, int served)
{
    for (size_t i = 0; i < h->nlisteners; i++) {
        kl_listener *l = &h->listeners[i];
        if (l->file_owner == KL_FILE_NOT_OURS || (l->file_owner == KL_FILE_HANDED_DOWN && !served))
            continue;
        int rc = kl_unix_remove(&l->spec->addr, &l->file);
        if (rc != 0)
            kl_log(KEEL_LOG_WARN, "cannot remove the socket file of %s: %s", l->spec->text,
                   uv_strerror(rc));
        l->file_owner = KL_FILE_NOT_OURS;
    }
}
