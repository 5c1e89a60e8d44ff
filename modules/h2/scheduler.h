/* scheduler.h — the scheduler and output: what leaves when (send.c: the pump,
 * held heads, the DATA scheduler within the peer's windows), a stream's
 * response body queue (queue.c), small files read on the thread pool
 * (fileload.c), the last head kept encoded (headcache.c). Above the
 * connection's state (state.h), below the module (h2.h).
 */
#ifndef KEEL_H2_SCHEDULER_H
#define KEEL_H2_SCHEDULER_H

#include "state.h"

/* ---- send.c ------------------------------------------------------------- */

/* Sends what is due (resets, held heads, DATA as the windows allow) and
 * writes the batch, unless inside input or another pump (then it happens
 * when that returns); then closes the connection if it is finished. */
void h2_pump(h2_conn *c);
/* Closes the connection after what is batched (keel_conn_close). */
void h2_close(h2_conn *c);
/* Queues the encoded final head (block in the stream) to go at the next
 * h2_pump, in the order heads came (they leave so). Inline: every
 * response's head comes here. */
static inline void h2_stream_hold(h2_stream *s)
{
    h2_conn *c = s->c;
    s->held = 1;
    s->held_next = NULL;
    *(c->held != NULL ? &c->held_tail->held_next : &c->held) = s;
    c->held_tail = s;
}
/* Takes s off that list. */
void h2_stream_unhold(h2_stream *s);
/* Puts s on the list of streams whose DATA may go (if it has some). */
void h2_ready(h2_stream *s);
/* The peer's window grew: s's, or (NULL) every stream's (ev->window). */
void h2_window_grew(h2_conn *c, h2_stream *s);
/* The scheduler lets go of s: its held head, its place on the ready list,
 * its queued pieces (released with status). Most streams have none of
 * them by the time they close: no call then. */
void h2_sched_release(h2_stream *s, int status);
static inline void h2_sched_forget(h2_stream *s, int status)
{
    if (s->ready || s->held || s->queue != NULL)
        h2_sched_release(s, status);
}

/* ---- queue.c: a stream's response body queue --------------------------- */

/* Appends p (its bufs set, len bytes in all) to s's queue, which holds
 * one reference to it until its bytes are in a batch. Inline: every
 * response body piece comes here. */
static inline void h2_stream_queue(h2_stream *s, h2_piece *p, size_t len)
{
    p->left = len;
    p->refs = 1; /* the queue's */
    if (s->queue == NULL)
        s->progress_ms = keel_worker_now_ms(s->c->w->worker); /* the stall clock starts */
    if (s->queue_tail != NULL)
        s->queue_tail->next = p;
    else
        s->queue = p;
    s->queue_tail = p;
    s->queued += len;
}

/* The bytes of s's queue that may go in one DATA frame now: never across
 * a file piece's edge, nothing while a small file is being read. */
size_t h2_stream_sendable(const h2_stream *s);
/* The same from the file piece at the head of the queue (never more than
 * it holds): header and file range leave as one write of their own. */
int h2_stream_take_file(h2_stream *s, const uint8_t *framehd, size_t length);
/* Moves `length` body bytes of s into the batch. */
int h2_stream_take(h2_stream *s, size_t length);

/* Releases every piece queued (their callbacks get status). */
void h2_stream_release_queue(h2_stream *s, int status);

/* ---- headcache.c -------------------------------------------------------- */

/* The encoded block of the connection's last final head if this one
 * (status, fields as given, content length, date) is the same; NULL if not.
 * The date is known by the second it shows (the worker's date cache, whose
 * value is a function of it). Valid until the next store. */
const uint8_t *h2_headcache_find(h2_conn *c, int status, const keel_header *h, size_t n,
                                 int64_t content_length, int64_t date_sec, size_t *len);
/* Keeps this head and its block as the connection's last (not if larger
 * than H2_HEADCACHE_MAX, or out of memory: then nothing matches). */
void h2_headcache_store(h2_conn *c, int status, const keel_header *h, size_t n,
                        int64_t content_length, int64_t date_sec, const uint8_t *block, size_t len);
void h2_headcache_free(h2_conn *c);

/* ---- fileload.c --------------------------------------------------------- */

/* Files up to this size are read on the thread pool, many per job, instead
 * of going out frame by frame with sendfile. */
#define H2_LOAD_MAX (64 * 1024)

int h2_load_supported(void);
/* Queues the file piece p of s for the next job. */
int h2_load_add(h2_conn *c, h2_stream *s, h2_piece *p);
/* Starts one job for everything queued (from h2_pump). */
void h2_load_submit(h2_conn *c);
/* The connection goes: jobs in flight forget it. */
void h2_load_orphan(h2_conn *c);

#endif
