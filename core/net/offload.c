/* Work off the loop that is not tied to a request (keel_worker_offload).
 *
 * The work runs on libuv's thread pool (uv_queue_work); libuv calls the
 * after-work callback on the loop's own thread, which is where the
 * module's done runs. The worker counts the calls in flight: a graceful
 * stop does not stop the modules until every done has run
 * (kl_worker_try_finish), since done may use what stop() releases. */
#include <stdlib.h>

#include "base/util.h"
#include "net/worker.h"

typedef struct kl_offload {
    uv_work_t req;
    keel_worker *worker;
    keel_offload_fn work;
    keel_work_done_fn done;
    void *userdata;
} kl_offload;

/* On a thread of the pool. */
static void run_work(uv_work_t *req)
{
    kl_offload *o = KL_CONTAINER_OF(req, kl_offload, req);
    o->work(o->userdata);
}

/* Back on the worker's thread. The status from libuv is always 0: these
 * requests are never uv_cancel()ed, so the work has run, whatever done is
 * told about the worker's state. */
static void work_done(uv_work_t *req, int uv_status)
{
    kl_offload *o = KL_CONTAINER_OF(req, kl_offload, req);
    keel_worker *w = o->worker;
    (void)uv_status;
    o->done(w, w->stopping ? KEEL_ERR_SHUTDOWN : KEEL_OK, o->userdata);
    free(o);
    /* Counted down only after done: an offload queued from done keeps the
     * count above zero, so the stop keeps waiting for it too. */
    w->offloads--;
    kl_worker_try_finish(w);
}

int keel_worker_offload(keel_worker *w, keel_offload_fn work, keel_work_done_fn done,
                        void *userdata)
{
    if (work == NULL || done == NULL)
        return KEEL_ERR_INVAL;
    /* Once finishing, the modules are stopping: a done would run after
     * their stop(). While merely stopping, connections that are finishing
     * their work may still need the pool. */
    if (w->finishing)
        return KEEL_ERR_SHUTDOWN;
    kl_offload *o = malloc(sizeof *o);
    if (o == NULL)
        return KEEL_ERR_NOMEM;
    *o = (kl_offload){.worker = w, .work = work, .done = done, .userdata = userdata};
    /* Fails only for a NULL work callback, which run_work never is. */
    if (uv_queue_work(&w->loop, &o->req, run_work, work_done) != 0) {
        free(o);
        return KEEL_ERR_IO;
    }
    w->offloads++;
    return KEEL_OK;
}
