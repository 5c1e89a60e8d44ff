/* Reading a file in pieces on the thread pool (see file_reader.h). */
#include "net/file_reader.h"

#include <stdlib.h>

#include <keel/types.h>

#include "base/util.h"
#include "net/worker.h"
#include "platform/platform.h"

void kl_file_reader_init(kl_file_reader *r, int fd, uint64_t offset, uint64_t length,
                         kl_file_piece_fn on_piece, void *owner)
{
    r->on_piece = on_piece;
    r->owner = owner;
    r->buf = NULL;
    r->spare_of = NULL;
    r->fd = fd;
    r->reading = 0;
    r->offset = offset;
    r->left = length;
}

/* n bytes (or an error, n <= 0) of the read in flight arrived. */
static void deliver(kl_file_reader *r, int64_t n)
{
    r->reading = 0;
    /* 0 before the promised length: the file shrank since it was sized. */
    if (n <= 0) {
        r->on_piece(r, KEEL_ERR_IO, NULL, 0);
        return;
    }
    if ((uint64_t)n > r->left)
        n = (int64_t)r->left;
    r->offset += (uint64_t)n;
    r->left -= (uint64_t)n;
    r->on_piece(r, KEEL_OK, r->buf, (size_t)n);
}

static void on_read(uv_fs_t *fs)
{
    kl_file_reader *r = fs->data;
    int64_t n = fs->result;
    uv_fs_req_cleanup(fs);
    deliver(r, n);
}

static void on_cached(kl_soon *soon)
{
    kl_file_reader *r = KL_CONTAINER_OF(soon, kl_file_reader, soon);
    deliver(r, (int64_t)r->cached);
}

int kl_file_reader_next(kl_file_reader *r, uv_loop_t *loop)
{
    if (r->left == 0 || r->reading)
        return KEEL_ERR_STATE;
    size_t want = r->left < KL_FILE_PIECE ? (size_t)r->left : KL_FILE_PIECE;
    /* Sized by the first read: a small file costs a small buffer; a full
     * piece is one of the worker's spares. */
    if (r->buf == NULL) {
        keel_worker *w = loop->data;
        r->buf = want == KL_FILE_PIECE ? kl_freelist_get(&w->piece_cache, want) : malloc(want);
        if (r->buf == NULL)
            return KEEL_ERR_NOMEM;
        r->spare_of = want == KL_FILE_PIECE ? w : NULL;
    }
    int64_t n = kl_pread_cached(r->fd, r->buf, want, r->offset);
    if (n > 0) {
        r->cached = (size_t)n;
        r->reading = 1;
        r->soon.fn = on_cached;
        kl_worker_soon(loop->data, &r->soon);
        return KEEL_OK;
    }
    uv_buf_t buf = uv_buf_init(r->buf, (unsigned)want);
    r->fs.data = r;
    if (uv_fs_read(loop, &r->fs, r->fd, &buf, 1, (int64_t)r->offset, on_read) != 0)
        return KEEL_ERR_IO;
    r->reading = 1;
    return KEEL_OK;
}

void kl_file_reader_free(kl_file_reader *r)
{
    if (r->spare_of != NULL && r->buf != NULL)
        kl_freelist_put(&r->spare_of->piece_cache, r->buf);
    else
        free(r->buf);
    r->buf = NULL;
    r->spare_of = NULL;
}
