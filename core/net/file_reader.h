/* core/net/file_reader.h — a file read in pieces on libuv's thread pool.
 *
 * The one read loop behind every file that cannot go out with sendfile:
 * through a transport or where there is no sendfile (net/output_queue.c), and
 * behind body filters or chunked framing (http/response.c). The owner asks
 * for each piece when the previous one has gone (so a file is read at the
 * peer's pace, never into memory whole), and the loop never waits for the
 * disk: a piece the page cache holds is read at once and handed over from
 * the worker's idle pass (Linux: preadv2 with RWF_NOWAIT, as nginx's aio
 * threads try first), only the rest goes through the thread pool, whose
 * round trip (a futex wake, a context switch and back) cost a 1 MiB file
 * over HTTPS most of its CPU. Worker thread of the loop it reads on.
 */
#ifndef KEEL_CORE_FILE_READER_H
#define KEEL_CORE_FILE_READER_H

#include <stdint.h>

#include <keel/types.h>
#include <uv.h>

#include "net/soon.h"

/* Bytes per read: large enough for the disk, small enough to hold. */
#define KL_FILE_PIECE (64 * 1024)

typedef struct kl_file_reader kl_file_reader;

/* A piece arrived: status KEEL_OK with 1..KL_FILE_PIECE bytes (valid until
 * the next read or kl_file_reader_free), or KEEL_ERR_IO (a read error, or
 * the file ended before the promised length) with none. */
typedef void (*kl_file_piece_fn)(kl_file_reader *r, int status, char *data, size_t len);

struct kl_file_reader {
    uv_fs_t fs;
    kl_soon soon;  /* a piece read from the page cache, handed over soon */
    size_t cached; /* its length */
    kl_file_piece_fn on_piece;
    void *owner;
    char *buf;
    keel_worker *spare_of; /* buf is a full piece from this worker's piece_cache */
    int fd;                /* the caller's; never closed here */
    int reading;           /* a read is on the thread pool */
    uint64_t offset;
    uint64_t left; /* bytes not yet delivered */
};

/* Sets the reader up for bytes [offset, offset + length) of fd. No I/O. */
void kl_file_reader_init(kl_file_reader *r, int fd, uint64_t offset, uint64_t length,
                         kl_file_piece_fn on_piece, void *owner);

/* Reads the next piece; on_piece follows from the loop, never from inside
 * this call. Returns KEEL_ERR_NOMEM or KEEL_ERR_IO if the read cannot
 * start (no callback then), KEEL_ERR_STATE if nothing is left or a read is
 * already in flight. */
int kl_file_reader_next(kl_file_reader *r, uv_loop_t *loop);

/* Releases the buffer. Not while a read is in flight (see `reading`). */
void kl_file_reader_free(kl_file_reader *r);

#endif
