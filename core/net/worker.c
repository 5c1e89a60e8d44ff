/* Workers: a thread each, with its own loop, listeners (or handed-over
 * sockets), connections, module state, timers and graceful stop. */
#include "net/worker.h"

#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

#include "base/atomic.h"
#include "net/conn.h"
#include "net/output.h"
#include "net/udp.h"
#include "base/log.h"
#include "base/util.h"
#include "runtime/crash.h"

#define POOL_MAX_FREE 64

static void on_wakeup(uv_async_t *async);
static void on_idle(uv_idle_t *idle);
static void begin_stop(keel_worker *w);
static void stop_accepting_now(keel_worker *w);

static void abort_for_shutdown(keel_conn *c, void *arg)
{
    (void)arg;
    kl_conn_abort_status(c, KEEL_ERR_SHUTDOWN);
}

static void shutdown_one(keel_conn *c, void *arg)
{
    (void)arg;
    kl_conn_shutdown(c);
}
static void finish(keel_worker *w);

keel_worker *kl_worker_new(kl_host *host, unsigned id)
{
    keel_worker *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->host = host;
    w->id = id;
    w->module_state = calloc(host->nmodules ? host->nmodules : 1, sizeof *w->module_state);
    w->scratch = malloc(KL_SCRATCH_SIZE);
    if (w->module_state == NULL || w->scratch == NULL ||
        kl_bufpool_init(&w->pool, host->settings.read_buffer_size, POOL_MAX_FREE) != KEEL_OK)
        goto fail;
    for (size_t i = 0; i < host->nmodules; i++) {
        size_t size = host->modules[i]->desc.worker_state_size;
        if (size > 0 && (w->module_state[i] = calloc(1, size)) == NULL)
            goto fail;
    }
    for (size_t i = 0; i < KL_SLOT_MAX; i++)
        if (host->slots[i].size > 0) {
            if ((w->slots[i] = calloc(1, host->slots[i].size)) == NULL)
                goto fail;
            if (host->slots[i].init != NULL)
                host->slots[i].init(w->slots[i], host->slots[i].arg);
        }
    /* Everything on the loop is set up here, before the thread exists; from
     * then on only the worker thread touches it (save for the async). */
    if ((w->metrics = kl_metrics_worker_slots(host->metrics)) == NULL ||
        uv_loop_init(&w->loop) != 0)
        goto fail;
    /* keel_worker_loop_idle_seconds_total: the worker thread's time off
     * the CPU, asked when sampled. libuv's own measure of the time spent
     * waiting in the poll (UV_METRICS_IDLE_TIME) is the fallback only: it
     * makes every poll that would wait an epoll_wait with no timeout
     * first, then the waiting one, a system call more per turn of a busy
     * loop. */
    uint64_t cpu_ns;
    w->idle_from_cpu = kl_thread_cpu_ns(uv_thread_self(), &cpu_ns) == 0;
    if (!w->idle_from_cpu)
        uv_loop_configure(&w->loop, UV_METRICS_IDLE_TIME);
    w->loop.data = w;
    uv_mutex_init(&w->lock);
    uv_sem_init(&w->started, 0);
    uv_sem_init(&w->go, 0);
    uv_async_init(&w->loop, &w->wakeup, on_wakeup);
    w->wakeup.data = w;
    uv_idle_init(&w->loop, &w->idle);
    w->idle.data = w;
    uv_timer_init(&w->loop, &w->shutdown_timer);
    w->shutdown_timer.data = w;
    /* libuv keeps a spare descriptor per loop, opened with the loop's first
     * stream handle (for uv_listen's EMFILE trick, which keel does not
     * use): opened now, with the worker, so that a worker's descriptor
     * count does not grow with its first connection. */
    if (uv_tcp_init(&w->loop, &w->first_stream) == 0)
        uv_close((uv_handle_t *)&w->first_stream, NULL);
    kl_timeouts_init(&w->timeouts, &w->loop, kl_conn_on_timeout);
    /* Enough spares for a burst of responses finishing in one turn. */
    w->output_cache.max = w->done_cache.max = 256;
    /* A file read through a transport takes a 64 KiB buffer per response:
     * freed to the allocator, a worker thread's arena gives the pages back
     * (madvise) and the next response faults them in again. */
    w->piece_cache.max = 8;
    return w;
fail:
    kl_worker_free(w);
    return NULL;
}

static void close_any(uv_handle_t *handle, void *arg)
{
    (void)arg;
    if (!uv_is_closing(handle))
        uv_close(handle, NULL);
}

void kl_worker_free(keel_worker *w)
{
    if (w == NULL)
        return;
    if (w->loop.data == w) {
        /* A worker whose thread never ran still has its handles open. */
        uv_walk(&w->loop, close_any, NULL);
        uv_run(&w->loop, UV_RUN_DEFAULT);
        uv_loop_close(&w->loop);
        uv_mutex_destroy(&w->lock);
        uv_sem_destroy(&w->started);
        uv_sem_destroy(&w->go);
    }
    for (size_t i = 0; w->module_state && i < w->host->nmodules; i++)
        free(w->module_state[i]);
    free(w->module_state);
    free(w->scratch);
    free(w->metrics);
    free(w->listeners);
    free(w->handoffs);
    kl_bufpool_free(&w->pool);
    kl_output_cache_free(w);
    kl_freelist_clear(&w->piece_cache);
    for (size_t i = 0; i < KL_SLOT_MAX; i++) {
        if (w->slots[i] != NULL && w->host->slots[i].dispose != NULL)
            w->host->slots[i].dispose(w->slots[i]);
        free(w->slots[i]);
    }
    free(w);
}

/* ---- accepting --------------------------------------------------------- */

/* Takes a max_connections slot for a new connection: a free one
 * (kl_host_admit), or, at the limit, the slot of an idle connection closed
 * to make room (nginx's ngx_drain_connections). The limit is global but a
 * worker can close only its own connections: with SO_REUSEPORT the kernel
 * picks the worker by a hash of the addresses, so a client that lands on a
 * worker with no idle connection is refused even if another worker has
 * some. */
static int admit(keel_worker *w)
{
    if (kl_host_admit(w->host) || kl_conn_reclaim_idle(w))
        return 1;
    w->rejected++;
    kl_metric_add_slot(w->metrics, w->host->core_metrics.conns_rejected->slot, 1);
    return 0;
}

/* Opens a connection on an accepted socket that holds a max_connections
 * slot; if it cannot, closes the socket and gives the slot back. */
static void start_accepted(keel_worker *w, kl_listener *l, kl_socket sock)
{
    keel_conn *c = kl_conn_new(w, &l->origin, kl_conn_accept_tail(&l->origin));
    int rc = c != NULL ? uv_tcp_open(&c->tcp, sock) : UV_ENOMEM;
    if (rc != 0) {
        if (c != NULL)
            kl_conn_discard(c);
        kl_socket_close(sock);
        kl_host_release(w->host);
        kl_log(KEEL_LOG_ERROR, "accept on %s: %s, connection closed", l->spec->text,
               rc == UV_ENOMEM ? "out of memory" : uv_strerror(rc));
        return;
    }
    kl_conn_start(c, NULL, NULL);
}

static void on_acceptable(uv_poll_t *poll, int status, int events);

static void on_accept_retry(uv_timer_t *timer)
{
    kl_worker_listener *wl = timer->data;
    if (!wl->worker->accepting_stopped)
        uv_poll_start(&wl->poll, UV_READABLE, on_acceptable);
}

/* Out of descriptors or memory: the connection stays in the kernel's
 * queue and the socket readable, so the worker stops watching it for
 * KL_ACCEPT_PAUSE_MS and tries again (nginx's ngx_disable_accept_events);
 * queued clients wait rather than be dropped, and are served once
 * descriptors are free. Not uv_listen: libuv answers EMFILE by accepting
 * and closing every queued connection with a reserve descriptor, unseen
 * (uv__emfile_trick), and spins once another thread took the reserve's
 * slot (docs/operations.md, "Descriptors"). */
static void accept_failed(kl_worker_listener *wl, int err)
{
    keel_worker *w = wl->worker;
    const kl_core_metrics *cm = &w->host->core_metrics;
    kl_metric_add_slot(w->metrics, cm->accept_errors[kl_accept_error_reason(err)]->slot, 1);
    char where[300];
    snprintf(where, sizeof where, "%s (worker %u)", wl->listener->spec->text, w->id);
    kl_accept_error_log(&w->accept_log, uv_now(&w->loop), where, err);
    uv_poll_stop(&wl->poll);
    uv_timer_start(&wl->retry, on_accept_retry, KL_ACCEPT_PAUSE_MS, 0);
}

/* One accept per readiness, as nginx with multi_accept off (its
 * default): a connection arriving alone costs one accept4, not a second
 * that answers EAGAIN. More connections waiting keep the socket readable
 * (level-triggered), so the next turn of the loop takes the next one,
 * after the events of the connections already open: a burst of new
 * connections cannot starve those, and with SO_REUSEPORT (a queue per
 * worker) nothing changes between workers. */
static void on_acceptable(uv_poll_t *poll, int status, int events)
{
    kl_worker_listener *wl = poll->data;
    keel_worker *w = wl->worker;
    (void)events;
    if (status < 0) {
        /* libuv stopped the poll (an error condition on the socket):
         * counted, logged and tried again like a failed accept. */
        accept_failed(wl, status);
        return;
    }
    if (w->accepting_stopped)
        return;
    kl_socket sock;
    int rc = kl_accept(wl->sock, &sock);
    if (rc == UV_EAGAIN || kl_accept_error_transient(rc))
        return;
    if (rc != 0) {
        accept_failed(wl, rc);
        return;
    }
    /* Over the limit: closed at once, before any protocol sees it. */
    if (!admit(w)) {
        kl_socket_close(sock);
        return;
    }
    start_accepted(w, wl->listener, sock);
}

/* Worker w accepts on the sockets k of each listener with k % nworkers ==
 * w: one each when the listener made one per worker, more when a reload
 * handed down more than this process has workers (kl_listeners_bind),
 * so that none is left with connections queued that nobody accepts. */
static size_t sockets_of(const keel_worker *w, const kl_listener *l)
{
    size_t n = w->host->nworkers;
    if (l->dgram != NULL)
        return 0; /* a UDP listener's: net/udp.c */
    return l->nsockets > w->id ? (l->nsockets - w->id + n - 1) / n : 0;
}

/* The worker's listener handles, allocated before the start-up barrier
 * (worker_main): out of memory there is a failed start, which stops every
 * worker and keel with an error, rather than a worker that quietly stops
 * after the others began accepting (found by tests/failalloc). */
static int alloc_listeners(keel_worker *w)
{
    kl_host *h = w->host;
    if (!h->settings.reuseport)
        return KEEL_OK;
    size_t count = 0;
    for (size_t i = 0; i < h->nlisteners; i++)
        count += sockets_of(w, &h->listeners[i]);
    w->listeners = calloc(count ? count : 1, sizeof *w->listeners);
    return w->listeners != NULL ? KEEL_OK : KEEL_ERR_NOMEM;
}

static int open_listeners(keel_worker *w)
{
    kl_host *h = w->host;
    if (!h->settings.reuseport)
        return KEEL_OK;
    for (size_t i = 0; i < h->nlisteners; i++) {
        kl_listener *l = &h->listeners[i];
        for (size_t k = w->id; l->dgram == NULL && k < l->nsockets; k += h->nworkers) {
            kl_worker_listener *wl = &w->listeners[w->nlisteners];
            wl->listener = l;
            wl->worker = w;
            wl->sock = l->sockets[k];
            /* listen() again sets `backlog` on a socket handed down by
             * systemd or a reload too (uv_listen did the same). */
            int rc = kl_socket_relisten(wl->sock, h->settings.backlog);
            if (rc == 0)
                rc = uv_poll_init_socket(&w->loop, &wl->poll, wl->sock);
            if (rc == 0) {
                wl->poll.data = wl;
                uv_timer_init(&w->loop, &wl->retry);
                wl->retry.data = wl;
                w->nlisteners++;
                /* The socket now belongs to the worker, closed with its
                 * handles; its number stays in l->sockets for a reload to
                 * hand down while this worker runs. */
                l->given[k] = 1;
                rc = uv_poll_start(&wl->poll, UV_READABLE, on_acceptable);
            }
            if (rc != 0) {
                kl_log(KEEL_LOG_ERROR, "worker %u: cannot listen on %s: %s", w->id, l->spec->text,
                       uv_strerror(rc));
                return KEEL_ERR_IO;
            }
        }
    }
    return KEEL_OK;
}

static void start_handoff(keel_worker *w, kl_handoff *h)
{
    /* The acceptor found no free slot but saw idle connections here; they
     * may have become busy since. */
    if (h->reclaim && !admit(w)) {
        kl_socket_close(h->sock);
        return;
    }
    start_accepted(w, h->listener, h->sock);
}

int kl_worker_handoff(keel_worker *w, kl_socket sock, kl_listener *listener, int reclaim)
{
    int rc = KEEL_OK;
    uv_mutex_lock(&w->lock);
    if (w->closed)
        rc = KEEL_ERR_SHUTDOWN;
    else if ((rc = kl_grow((void **)&w->handoffs, &w->handoffs_cap, w->nhandoffs + 1,
                           sizeof *w->handoffs)) == KEEL_OK)
        w->handoffs[w->nhandoffs++] = (kl_handoff){sock, listener, reclaim};
    /* Sent under the lock: once `closed` is set the handle may be gone. */
    if (rc == KEEL_OK)
        uv_async_send(&w->wakeup);
    uv_mutex_unlock(&w->lock);
    return rc;
}

/* ---- cross-thread wake-ups --------------------------------------------- */

static void on_wakeup(uv_async_t *async)
{
    keel_worker *w = async->data;
    uv_mutex_lock(&w->lock);
    kl_post *posts = w->posts;
    w->posts = w->posts_tail = NULL;
    kl_handoff on_stack[16];
    kl_handoff *handoffs = w->handoffs;
    size_t nhandoffs = w->nhandoffs;
    if (nhandoffs <= KL_ARRAY_SIZE(on_stack)) {
        if (nhandoffs > 0)
            memcpy(on_stack, w->handoffs, nhandoffs * sizeof *on_stack);
        handoffs = on_stack;
    } else {
        w->handoffs = NULL;
        w->handoffs_cap = 0;
    }
    w->nhandoffs = 0;
    int stop = w->stop_requested, force = w->force_requested;
    int stop_accepting = w->accept_stop_requested;
    w->accept_stop_requested = 0;
    uv_mutex_unlock(&w->lock);

    kl_posts_run(w, posts);
    for (size_t i = 0; i < nhandoffs; i++)
        start_handoff(w, &handoffs[i]);
    if (handoffs != on_stack)
        free(handoffs);
    if (stop_accepting)
        stop_accepting_now(w);
    if (stop && !w->stopping)
        begin_stop(w);
    if (force)
        kl_conn_each(w, abort_for_shutdown, NULL);
}

void kl_worker_stop_accepting(keel_worker *w)
{
    uv_mutex_lock(&w->lock);
    w->accept_stop_requested = 1;
    if (!w->closed)
        uv_async_send(&w->wakeup);
    uv_mutex_unlock(&w->lock);
}

void kl_worker_request_stop(keel_worker *w, int force)
{
    uv_mutex_lock(&w->lock);
    w->stop_requested = 1;
    if (force)
        w->force_requested = 1;
    if (!w->closed)
        uv_async_send(&w->wakeup);
    uv_mutex_unlock(&w->lock);
}

/* ---- deferred work ----------------------------------------------------- */

void kl_worker_kick(keel_worker *w)
{
    if (!uv_is_active((uv_handle_t *)&w->idle))
        uv_idle_start(&w->idle, on_idle);
}

void kl_worker_soon(keel_worker *w, kl_soon *soon)
{
    KEEL_QUEUE_APPEND(w->soon, w->soon_tail, soon, next);
    kl_worker_kick(w);
}

/* Runs what was queued before the call; what those queue runs next time. */
static void run_soon(keel_worker *w)
{
    kl_soon *s = w->soon;
    w->soon = w->soon_tail = NULL;
    while (s != NULL) {
        kl_soon *next = s->next;
        s->fn(s);
        s = next;
    }
}

static void on_idle(uv_idle_t *idle)
{
    keel_worker *w = idle->data;
    /* Work added while this runs waits for the next turn of the loop, so a
     * protocol that keeps writing cannot starve I/O. For each connection
     * its deliveries come first, then its completions, as a turn of the
     * loop orders reads and write callbacks. No connection is freed during
     * the pass (teardown runs from libuv's close callbacks), and one that
     * schedules itself again joins the new list: take `next` first. */
    keel_conn *c = w->pending;
    w->pending = NULL;
    while (c != NULL) {
        keel_conn *next = c->pending_next;
        c->flags &= ~KL_CONN_PENDING;
        kl_conn_run_delivery(c);
        kl_conn_run_owed(c);
        c = next;
    }
    run_soon(w);
    if (w->pending == NULL && w->soon == NULL)
        uv_idle_stop(&w->idle);
}

/* ---- stopping ---------------------------------------------------------- */

static void on_shutdown_deadline(uv_timer_t *timer)
{
    keel_worker *w = timer->data;
    if (w->nconns > 0)
        kl_log(KEEL_LOG_WARN, "worker %u: shutdown deadline reached, closing %llu connections",
               w->id, (unsigned long long)w->nconns);
    kl_conn_each(w, abort_for_shutdown, NULL);
}

static void close_listeners(keel_worker *w)
{
    for (size_t i = 0; i < w->nlisteners; i++) {
        kl_worker_listener *wl = &w->listeners[i];
        uv_close((uv_handle_t *)&wl->poll, NULL);
        uv_close((uv_handle_t *)&wl->retry, NULL);
        /* Safe once the poll is closed (libuv's uv_poll_t contract). */
        kl_socket_close(wl->sock);
    }
    w->nlisteners = 0;
    kl_udp_close(w);
    w->accepting_stopped = 1;
}

/* A reload's successor serves: this worker closes its copies of the
 * listening sockets (their queues are the successor's now) while the
 * server still runs, so that nothing it accepted is answered as by a
 * stopping server (a readiness probe's 503, an upgrade refused); the
 * last worker to do so starts the graceful stop. */
static void stop_accepting_now(keel_worker *w)
{
    kl_host *h = w->host;
    if (!w->accepting_stopped)
        close_listeners(w);
    if (kl_atomic_add(&h->workers_not_accepting, 1) == h->nworkers)
        h->stop(h);
}

static void begin_stop(keel_worker *w)
{
    w->stopping = 1;
    /* The modules hear it first (ABI 1.8), in load order, so that what
     * they close or refuse now is not waited for by the drain. */
    kl_host *h = w->host;
    for (size_t i = 0; i < w->modules_started; i++) {
        keel_module *m = h->modules[i];
        if (m->desc.stopping != NULL)
            KL_IN_MODULE(m->name, m->desc.stopping(m, w, w->module_state[i]));
    }
    close_listeners(w);
    kl_connects_stop(w);
    kl_conn_each(w, shutdown_one, NULL);
    uv_timer_start(&w->shutdown_timer, on_shutdown_deadline, w->host->settings.shutdown_timeout_ms,
                   0);
    kl_worker_try_finish(w);
}

void kl_worker_conn_closed(keel_worker *w)
{
    kl_worker_try_finish(w);
}

/* Modules stop only once nothing can call into them any more: no
 * connection is open, no outbound attempt holds a handle or a resolver
 * request, no offloaded work waits for its done. */
void kl_worker_try_finish(keel_worker *w)
{
    if (w->stopping && w->nconns == 0 && w->connects == NULL && w->offloads == 0)
        finish(w);
}

/* The last connection is gone: stop the modules and close every handle so
 * that the loop ends. */
static void finish(keel_worker *w)
{
    if (w->finishing)
        return;
    w->finishing = 1;
    kl_host *h = w->host;

    /* Work queued for the loop (an abandoned request's abort callback)
     * runs before any module stops, as posts do. */
    while (w->soon != NULL)
        run_soon(w);

    /* Posts accepted so far run now, before any module stops (they may use
     * what stop releases); from here on posts are refused. */
    uv_mutex_lock(&w->lock);
    w->closed = 1;
    kl_post *posts = w->posts;
    w->posts = w->posts_tail = NULL;
    uv_mutex_unlock(&w->lock);
    kl_posts_run(w, posts);

    for (size_t i = w->modules_started; i-- > 0;) {
        keel_module *m = h->modules[i];
        if (m->desc.stop != NULL)
            KL_IN_MODULE(m->name, m->desc.stop(m, w, w->module_state[i]));
    }
    kl_timers_close_all(w);
    for (size_t i = 0; i < w->nhandoffs; i++) {
        kl_socket_close(w->handoffs[i].sock);
        if (!w->handoffs[i].reclaim)
            kl_host_release(h);
    }
    w->nhandoffs = 0;
    close_listeners(w);
    uv_close((uv_handle_t *)&w->wakeup, NULL);
    uv_close((uv_handle_t *)&w->idle, NULL);
    uv_close((uv_handle_t *)&w->shutdown_timer, NULL);

    kl_timeouts_close(&w->timeouts);
}

/* ---- the thread -------------------------------------------------------- */

static int start_modules(keel_worker *w)
{
    kl_host *h = w->host;
    kl_crash_worker_thread(w->id);
    kl_log_thread_worker((int)w->id);
    for (size_t i = 0; i < h->nmodules; i++) {
        keel_module *m = h->modules[i];
        if (m->desc.start != NULL) {
            int rc;
            KL_IN_MODULE(m->name, rc = m->desc.start(m, w, w->module_state[i]));
            if (rc < 0) {
                kl_log(KEEL_LOG_ERROR, "module '%s': start failed on worker %u: %s", m->name, w->id,
                       keel_strerror(rc));
                return rc;
            }
        }
        w->modules_started = i + 1;
    }
    return KEEL_OK;
}

static void worker_main(void *arg)
{
    keel_worker *w = arg;
    int rc = start_modules(w);
    if (rc == KEEL_OK && (rc = alloc_listeners(w)) != KEEL_OK)
        kl_log(KEEL_LOG_ERROR, "worker %u: out of memory", w->id);
    w->start_status = rc;
    uv_sem_post(&w->started);
    /* Accept only once every worker's modules have started, so that a
     * failing worker never makes others drop connections they took. */
    uv_sem_wait(&w->go);
    if (rc == KEEL_OK)
        rc = w->go_status;
    if (rc == KEEL_OK &&
        ((rc = open_listeners(w)) != KEEL_OK || (rc = kl_udp_open(w)) != KEEL_OK)) {
        /* Its listening sockets would take connections nobody accepts:
         * the whole server stops, and keel_server_run reports it. */
        w->start_status = rc;
        w->host->stop(w->host);
    }
    /* The ordinary stop: whatever a module's start() began (an outbound
     * attempt, an offload) ends before the modules stop. */
    if (rc != KEEL_OK)
        begin_stop(w);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    kl_log(KEEL_LOG_INFO, "worker %u stopped: %llu connections, %llu rejected", w->id,
           (unsigned long long)w->accepted, (unsigned long long)w->rejected);
    w->host->worker_done(w->host);
}

int kl_worker_start(keel_worker *w)
{
    w->start_ns = uv_hrtime();
    if (uv_thread_create(&w->thread, worker_main, w) != 0) {
        kl_log(KEEL_LOG_ERROR, "worker %u: cannot create thread", w->id);
        return KEEL_ERR_NOMEM;
    }
    w->thread_started = 1;
    uv_sem_wait(&w->started);
    return w->start_status;
}

void kl_worker_go(keel_worker *w, int status)
{
    w->go_status = status;
    uv_sem_post(&w->go);
}

void kl_worker_join(keel_worker *w)
{
    if (w->thread_started) {
        uv_thread_join(&w->thread);
        w->thread_started = 0;
    }
}

/* The time the worker's loop has waited, from any thread: its thread's
 * time since it started less its CPU time (time spent runnable but off a
 * busy core counts as waiting too), or libuv's measure of its polls. */
uint64_t kl_worker_loop_idle_ns(keel_worker *w)
{
    if (!w->idle_from_cpu)
        return uv_metrics_idle_time(&w->loop);
    uint64_t cpu_ns, wall_ns = uv_hrtime() - w->start_ns;
    if (!w->thread_started || kl_thread_cpu_ns(w->thread, &cpu_ns) != 0)
        return 0;
    return wall_ns > cpu_ns ? wall_ns - cpu_ns : 0;
}

/* ---- the worker and timer API ------------------------------------------ */

void *keel_worker_state(keel_worker *w, keel_module *m)
{
    return w->module_state[m->index];
}

unsigned keel_worker_id(keel_worker *w)
{
    return w->id;
}

unsigned keel_worker_count(keel_worker *w)
{
    return (unsigned)w->host->nworkers;
}

uint64_t keel_worker_now_ms(keel_worker *w)
{
    return uv_now(&w->loop);
}

int keel_worker_stopping(keel_worker *w)
{
    return w->host->stopping(w->host);
}
