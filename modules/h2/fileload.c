/* fileload.c — small file bodies read on the thread pool, many per job.
 *
 * HTTP/2 frames every body, so a file cannot simply be handed to the socket.
 * Large files still go out with sendfile, frame by frame (a 9-byte header,
 * then the file's bytes: queue.c, output.c). For small ones that costs
 * three system calls and a loop turn each; and the core's own fallback, a
 * thread-pool read per file, costs a thread hand-off each. Here every small
 * file asked for during one turn (100 streams answered from one read, say)
 * is read in one thread-pool job, and the pieces then go out like any
 * response body in memory: batched into one write, as h2o does with its
 * synchronous reads, without ever reading a disk on the loop (the design's
 * rule: the loop never waits for a disk).
 *
 * Streams asking for the same bytes of the same file in one turn (a page's
 * stylesheet on many connections' streams, say) share one read: it is the
 * same data at the same moment.
 *
 * The job holds a reference to each piece, so a stream reset or a
 * connection closed meanwhile only makes the job's results unused. The
 * core keeps each fd open until the piece's callback, which comes after.
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

typedef struct h2_load_item {
    h2_piece *p;
    int32_t stream_id;
    int fd;
    uint64_t off;
    size_t len;
    char *buf;
    int ok;
    size_t same_as; /* 1 + the index of an earlier item reading the same bytes, or 0 */
} h2_load_item;

struct h2_load {
    h2_load *next, *prev; /* the connection's jobs in flight */
    h2_conn *c;           /* NULL once the connection is gone */
    h2_slab *slab;        /* every file's bytes, one after the other */
    size_t n;
    h2_load_item items[];
};

int h2_load_supported(void)
{
#ifdef _WIN32
    return 0; /* no pread: such files go by sendfile's path (the core reads them) */
#else
    return 1;
#endif
}

int h2_load_add(h2_conn *c, h2_stream *s, h2_piece *p)
{
    if (keel_reserve(&c->pending, &c->pending_cap, c->npending + 1, sizeof *c->pending, 16) != 0)
        return KEEL_ERR_NOMEM;
    p->refs++;
    p->loading = 1;
    c->pending_bytes += p->left;
    c->pending[c->npending++] = (h2_load_item){p, s->id, p->fd, p->foff, p->left, NULL, 0, 0};
    return KEEL_OK;
}

/* Thread pool: no keel call here. */
static void load_work(void *userdata)
{
#ifndef _WIN32
    h2_load *job = userdata;
    for (size_t i = 0; i < job->n; i++) {
        h2_load_item *it = &job->items[i];
        if (it->same_as > 0)
            continue; /* read once, below */
        /* Not all of it (a short file, an error): the response cannot be completed. */
        it->ok = keel_pread_all(it->fd, it->buf, it->len, it->off) == 0;
    }
    for (size_t i = 0; i < job->n; i++)
        if (job->items[i].same_as > 0)
            job->items[i].ok = job->items[job->items[i].same_as - 1].ok;
#else
    (void)userdata;
#endif
}

static void piece_loaded(h2_piece *p, h2_slab *slab, char *buf)
{
    p->fd = -1;
    p->loading = 0;
    slab->refs++;
    p->slab = slab;
    p->bufs = p->inline_bufs;
    p->bufs[0] = (keel_buf){buf, p->left};
    p->nbufs = 1;
    p->idx = p->off = 0;
}

static void load_done(keel_worker *worker, int status, void *userdata)
{
    (void)worker;
    h2_load *job = userdata;
    h2_conn *c = job->c;
    if (c != NULL) {
        KEEL_LIST_REMOVE(c->loads, job);
    }
    for (size_t i = 0; i < job->n; i++) {
        h2_load_item *it = &job->items[i];
        h2_piece *p = it->p;
        h2_stream *s = NULL;
        if (c == NULL)
            p->w = NULL; /* as an orphaned batch's (output.c) */
        if (c != NULL && !c->closing)
            s = h2_stream_find(c, it->stream_id);
        /* Still in that stream's queue? Nothing else holds a piece being
         * read (it cannot be sent meanwhile) but the queue and this job. */
        int mine = s != NULL && p->refs > 1;
        if (status == KEEL_OK && it->ok && mine) {
            piece_loaded(p, job->slab, it->buf);
            s->nfiles--;
            h2_ready(s);
        } else {
            p->loading = 0;
            if (mine)
                h2_stream_reset(s, H2_INTERNAL_ERROR); /* the body cannot be complete */
        }
        h2_piece_unref(p, it->ok ? KEEL_OK : KEEL_ERR_IO);
    }
    h2_slab_unref(job->slab); /* the job's reference; pieces hold theirs */
    free(job);
    if (c != NULL)
        h2_pump(c);
}

void h2_load_submit(h2_conn *c)
{
    if (c->npending == 0)
        return;
    size_t n = c->npending;
    c->npending = 0;
    c->pending_bytes = 0;
    /* One buffer for the whole job, allocated (and later freed) on this
     * thread: a buffer per file, malloc'd on a pool thread and freed here,
     * cost more in page faults than the reads themselves. */
    size_t total = 0;
    size_t last_of_fd[16]; /* 1 + the last item read per fd % 16, or 0 */
    memset(last_of_fd, 0, sizeof last_of_fd);
    for (size_t i = 0; i < n; i++) {
        h2_load_item *it = &c->pending[i];
        size_t *slot = &last_of_fd[(unsigned)it->fd % 16];
        const h2_load_item *prev = *slot > 0 ? &c->pending[*slot - 1] : NULL;
        if (prev != NULL && prev->fd == it->fd && prev->off == it->off && prev->len == it->len) {
            it->same_as = *slot;
            continue;
        }
        it->same_as = 0;
        *slot = i + 1;
        total += it->len;
    }
    h2_load *job = malloc(sizeof *job + n * sizeof job->items[0]);
    h2_slab *slab = job != NULL ? malloc(sizeof *slab + total + 1) : NULL;
    int rc = KEEL_ERR_NOMEM;
    if (slab == NULL) {
        free(job);
        job = NULL;
    }
    if (job != NULL) {
        slab->refs = 1;
        job->slab = slab;
        memcpy(job->items, c->pending, n * sizeof job->items[0]);
        for (size_t i = 0, at = 0; i < n; i++) {
            h2_load_item *it = &job->items[i];
            if (it->same_as > 0) {
                it->buf = job->items[it->same_as - 1].buf;
                continue;
            }
            it->buf = slab->data + at;
            at += it->len;
        }
        job->n = n;
        job->c = c;
        rc = keel_worker_offload(c->w->worker, load_work, load_done, job);
    }
    if (rc != KEEL_OK) {
        for (size_t i = 0; i < n; i++) {
            h2_piece *p = c->pending[i].p;
            h2_stream *s = h2_stream_find(c, c->pending[i].stream_id);
            p->loading = 0;
            if (s != NULL && p->refs > 1)
                h2_stream_reset(s, H2_INTERNAL_ERROR);
            h2_piece_unref(p, rc);
        }
        if (job != NULL)
            h2_slab_unref(job->slab);
        free(job);
        return;
    }
    KEEL_LIST_PUSH(c->loads, job);
}

void h2_load_orphan(h2_conn *c)
{
    for (h2_load *job = c->loads; job != NULL; job = job->next)
        job->c = NULL;
    c->loads = NULL;
    /* Collected but not submitted: never will be. */
    for (size_t i = 0; i < c->npending; i++) {
        c->pending[i].p->loading = 0;
        h2_piece_unref(c->pending[i].p, KEEL_ERR_CLOSED);
    }
    c->npending = 0;
    c->pending_bytes = 0;
    free(c->pending);
    c->pending = NULL;
    c->pending_cap = 0;
}
