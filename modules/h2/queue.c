/* queue.c — a stream's response body queue: the pieces the core handed
 * over (borrowed; output.c keeps their pool and releases them), and what a
 * DATA frame takes from it into the batch (send.c decides when, as the
 * peer's windows allow).
 *
 * Response: send_head encodes the head, which leaves at the next h2_pump
 * (sink.c); each body piece is queued, borrowed, and send.c takes from
 * the queue. A piece is released once the write that carried its last
 * byte completed (output.c), which is what paces a streaming handler or
 * the core's file reader.
 */
#include "scheduler.h"

#include <stdint.h>

size_t h2_stream_sendable(const h2_stream *s)
{
    const h2_piece *head = s->queue;
    if (head == NULL || head->loading)
        return 0; /* a small file's bytes are still being read (fileload.c) */
    /* A DATA frame's payload comes from one file piece or from memory
     * pieces, never both (a file goes out with sendfile, memory with
     * writev): stop at the boundary. */
    if (head->fd >= 0)
        return head->left;
    uint64_t n = 0;
    for (const h2_piece *p = head; p != NULL && p->fd < 0 && !p->loading; p = p->next) {
        n += p->left;
        if (n >= H2_BATCH_MAX || s->nfiles == 0)
            break;
    }
    if (s->nfiles == 0)
        n = s->queued;
    return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

int h2_stream_take_file(h2_stream *s, const uint8_t *framehd, size_t length)
{
    h2_piece *p = s->queue;
    if (p == NULL || p->fd < 0 || length > p->left)
        return -1;
    if (h2_out_file(s->c, framehd, 9, p, length) != KEEL_OK)
        return -1;
    p->foff += length;
    p->left -= length;
    s->queued -= length;
    if (p->left == 0) {
        s->queue = p->next;
        if (s->queue == NULL)
            s->queue_tail = NULL;
        s->nfiles--;
        h2_piece_unref(p, KEEL_OK); /* the queue's reference */
    }
    return 0;
}

int h2_stream_take(h2_stream *s, size_t length)
{
    h2_conn *c = s->c;
    while (length > 0) {
        h2_piece *p = s->queue;
        if (p == NULL)
            return -1;
        const keel_buf *b = &p->bufs[p->idx];
        size_t k = b->len - p->off < length ? b->len - p->off : length;
        /* A few bytes are copied after their frame header instead of
         * borrowed: as an iovec of their own they cost the kernel more
         * than the copy (a small response was two iovecs of a 200-iovec
         * writev). The piece is still held until the write completes. */
        const char *at = (const char *)b->base + p->off;
        int rc = k <= H2_COPY_MAX ? h2_out_copy(c, at, k) : h2_out_borrow(c, at, k);
        if (rc != KEEL_OK || h2_out_hold(c, p) != KEEL_OK)
            return -1;
        p->off += k;
        p->left -= k;
        s->queued -= k;
        length -= k;
        if (p->off == b->len) {
            p->idx++;
            p->off = 0;
        }
        if (p->left == 0) {
            s->queue = p->next;
            if (s->queue == NULL)
                s->queue_tail = NULL;
            h2_piece_unref(p, KEEL_OK); /* the queue's reference */
        }
    }
    return 0;
}

void h2_stream_release_queue(h2_stream *s, int status)
{
    h2_piece *p = s->queue;
    s->queue = s->queue_tail = NULL;
    s->queued = 0;
    s->nfiles = 0;
    while (p != NULL) {
        h2_piece *next = p->next;
        h2_piece_unref(p, status);
        p = next;
    }
}
