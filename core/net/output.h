/* core/net/output.h — a connection's output: the one unit that owns
 * everything queued on a connection and the completions owed for it.
 *
 * Bytes go to the socket at once when libuv's queue is empty (uv_try_write:
 * most small responses leave with no allocation), else through libuv's
 * queue; through a transport they are handed to it and paced (a write's
 * completion waits until libuv's queue is down to KL_PACE_BYTES). A write
 * of pieces that holds file ranges (net/output_queue.c; a file is one) and
 * every write made after it wait in order in the unit's one queue of ops. Completions never run
 * inside the call that queued the bytes: they are owed, on the connection's own list, and run from
 * the worker's idle pass (or, failed, when the connection is torn down) — no per-worker list to
 * search when a connection closes.
 *
 * The unit tells the connection what happened (kl_conn_output_progress,
 * _grew, _settled; an unrepairable failure aborts it) and asks nothing
 * else of it. Its state is allocated while anything is queued or owed and
 * returned to the worker's cache once drained: an idle connection keeps
 * none. Worker thread only.
 */
#ifndef KEEL_CORE_OUTPUT_H
#define KEEL_CORE_OUTPUT_H

#include <keel/types.h>
#include <uv.h>

#include "net/conn.h"

/* A write through a transport completes for its caller once libuv's queue
 * holds no more than this: the transport takes the bytes at once, and a
 * caller that writes again on completion must still be paced by the peer
 * (a file's pieces, a streamed response). */
#define KL_PACE_BYTES (64 * 1024)

/* ---- for the connection and the rest of the core ---------------------------- */

/* Queues bytes in order (behind an op of pieces, if any). With copy the
 * bytes are copied (keel_conn_write_copy), else they are borrowed until
 * cb. cb (may be NULL) is owed exactly once if this returns KEEL_OK. */
int kl_output_write(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud,
                    int copy);

/* Writes now, past the ops queue, through the transport if there is one.
 * On KEEL_ERR_IO the connection is aborted. cb is owed only on KEEL_OK. */
int kl_output_send(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud);

/* A transport's encoded bytes, copied, straight to the socket. */
int kl_output_send_raw(keel_conn *c, const void *data, size_t len);

/* Checks pieces as keel_conn_write_pieces does: KEEL_OK with their total
 * length and whether a file range is among them, or KEEL_ERR_INVAL. */
int kl_pieces_check(const keel_piece *pieces, size_t n, uint64_t *total, int *files);

/* Owes cb(conn, status, ud) from the loop, not from inside the caller
 * (KEEL_ERR_NOMEM if the record cannot be made). */
int kl_output_owe(keel_conn *c, keel_write_cb cb, void *ud, int status);

/* Bytes waiting: libuv's queue plus held bytes and file bytes not sent. */
uint64_t kl_output_queued(const keel_conn *c);

/* Output is waiting to leave (the write timeout applies). */
int kl_output_busy(const keel_conn *c);

/* Ops of pieces, or writes held behind one, are still queued (a close waits). */
int kl_output_held(const keel_conn *c);

/* libuv write requests are in flight (the write side cannot shut yet). */
int kl_output_in_flight(const keel_conn *c);

/* Runs the completions owed (the worker's idle pass). */
void kl_output_run_owed(keel_conn *c);

/* The handle is being closed: stop watching the socket for a file. */
void kl_output_abort(keel_conn *c);

/* A thread-pool read still uses a file: teardown must wait for it (the
 * file's owner may close it from its completion). */
int kl_output_reading_file(const keel_conn *c);

/* Teardown: completions already owed run with their status, then every
 * op still queued and every held completion fails (KEEL_ERR_CLOSED, or
 * the error that ended a file); the state goes back to the worker. */
void kl_output_finish(keel_conn *c);

/* Frees the worker's caches (when the worker is freed). */
void kl_output_cache_free(keel_worker *w);

/* ---- shared by output.c and output_queue.c only ------------------------------ */

/* A completion owed or held. */
typedef struct kl_done {
    struct kl_done *next; /* first: the link in the worker's cache too */
    keel_write_cb cb;
    void *userdata;
    int status;
} kl_done;

typedef struct kl_done_list {
    kl_done *head, *tail;
} kl_done_list;

/* A write of pieces with file ranges, or a write held behind one. */
typedef struct kl_op kl_op;

struct kl_output {
    kl_op *head, *tail;  /* ops of pieces and held writes, in order (first: the cache's link) */
    uint64_t held_bytes; /* bytes of the ops not yet sent */
    uint32_t in_flight;  /* libuv write requests */
    int file_active;     /* the op of pieces at the head is being sent */
    int in_write_file;   /* inside the call that queued it */
    kl_done_list owed;   /* to run from the loop */
    kl_done_list paced;  /* transport completions held for libuv's queue */
};

/* The state, made on first need. NULL if out of memory. */
kl_output *kl_output_get(keel_conn *c);

/* Gives the state back once nothing is queued, in flight or owed. */
void kl_output_trim(keel_conn *c);

/* A completion record (from the worker's cache); NULL if out of memory. */
kl_done *kl_done_new(keel_conn *c, keel_write_cb cb, void *ud, int status);
void kl_done_push(kl_done_list *list, kl_done *d);
/* Moves a record to the owed list and schedules the connection. */
void kl_output_owe_record(keel_conn *c, kl_done *d);

/* output_queue.c: starts what waits at the head of the ops queue. */
void kl_ops_run(keel_conn *c);
/* output_queue.c: holds a write behind the op in progress. */
int kl_ops_hold(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud,
                int copy);
/* output_queue.c: frees every op, calling their completions with an error. */
void kl_ops_fail(keel_conn *c);
/* output_queue.c: stops the socket watcher of the op at the head. */
void kl_ops_abort(keel_conn *c);
/* output_queue.c: a thread-pool read is in flight. */
int kl_ops_reading(const keel_conn *c);

#endif
