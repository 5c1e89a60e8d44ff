/* spool.c — a FastCGI request body of unknown length (HTTP/1.1 chunked,
 * HTTP/2 without content-length), held whole before the request leaves.
 *
 * A FastCGI application learns its body's size only from CONTENT_LENGTH,
 * sent before the body (RFC 3875 4.1.2; PHP reads nothing without it).
 * nginx's fastcgi_pass buffers every body for that reason
 * (client_body_buffer_size in memory, then client_body_temp_path); keel
 * streams bodies of known length and buffers only these:
 *
 * - in memory up to [proxy] fastcgi_body_buffer, then in a temporary file
 *   in fastcgi_temp_path (default: the system's temporary directory),
 *   created with mkstemp and unlinked at once (nginx's
 *   ngx_create_temp_file with client_body_in_file_only off), so that
 *   nothing is left behind by a crash and no other process can open it
 *   by name; on Windows, where an open file cannot be unlinked, it is
 *   opened _O_TEMPORARY (deleted on its last close);
 * - bounded by the protocol's max_body (keel_request_body_limit): http1
 *   and h2 answer 413 beyond it before the bytes reach us; the check here
 *   holds a protocol that sets no limit to the same bound when it reports one;
 * - then the request leaves with CONTENT_LENGTH set to the bytes held, and
 *   the body follows as FCGI_STDIN records read back a piece at a time,
 *   never more than [proxy] buffer bytes queued towards the application
 *   (the same back-pressure as a streamed body); a retry on another
 *   server starts again from the first byte.
 *
 * The file is written and read on the worker's thread, as nginx does
 * without aio threads: a temporary file lives in the page cache, and a
 * worker that waits on a full disk waits on its own uploads.
 */
#include "px.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(_WIN32)
#include <io.h>
#include <process.h>
#include <share.h>
#include <windows.h>
#else
#include <unistd.h>
#endif

/* Bytes read back from the file per FCGI_STDIN record. */
#define PX_SPOOL_PIECE 32768

struct px_spool {
    char *mem; /* the body while it fits fastcgi_body_buffer */
    size_t mem_len, mem_cap;
    int fd;         /* the temporary file once it did not, else -1 */
    uint64_t total; /* bytes held */
    uint64_t sent;  /* bytes of it queued to this attempt's application */
    char *piece;    /* PX_SPOOL_PIECE bytes: a piece read back from the file */
    int failed;     /* answered (413, 500): the rest of the body is ignored */
    int sending;    /* px_spool_send is running: no nested call */
};

/* ---- the temporary file ---------------------------------------------------- */

#if defined(_WIN32)
static int temp_open(const char *dir)
{
    static volatile LONG counter;
    char path[1024];
    for (int i = 0; i < 16; i++) {
        unsigned long n = (unsigned long)InterlockedIncrement(&counter);
        snprintf(path, sizeof path, "%s\\keel-body-%lu-%lu-%lu", dir,
                 (unsigned long)GetCurrentProcessId(), n, (unsigned long)GetTickCount());
        int fd = -1;
        errno_t e = _sopen_s(
            &fd, path, _O_CREAT | _O_EXCL | _O_RDWR | _O_BINARY | _O_TEMPORARY | _O_SHORT_LIVED,
            _SH_DENYRW, _S_IREAD | _S_IWRITE);
        if (e == 0)
            return fd;
        if (e != EEXIST)
            return -1;
    }
    return -1;
}

/* _write takes an unsigned count. (Reading back is keel_pread_all's
 * ReadFile at an offset, once every byte is written.) */
static long sys_write(int fd, const char *p, size_t len)
{
    return _write(fd, p, len > (1u << 30) ? 1u << 30 : (unsigned)len);
}

#define temp_close _close
#else
static int temp_open(const char *dir)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/keel-body-XXXXXX", dir);
    if (n < 0 || (size_t)n >= sizeof path)
        return -1;
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    /* The descriptor is the only way to it from now on; and it is not for
     * a program a module starts, nor for a reload's successor. */
    unlink(path);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

static long sys_write(int fd, const char *p, size_t len)
{
    return (long)write(fd, p, len);
}

#define temp_close close
#endif

static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        long w = sys_write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

const char *px_spool_default_dir(void)
{
#if defined(_WIN32)
    static char dir[MAX_PATH + 1];
    DWORD n = GetTempPathA(sizeof dir, dir);
    if (n == 0 || n >= sizeof dir)
        return ".";
    while (n > 1 && (dir[n - 1] == '\\' || dir[n - 1] == '/'))
        dir[--n] = '\0';
    return dir;
#else
    const char *t = getenv("TMPDIR");
    return t != NULL && t[0] == '/' ? t : "/tmp";
#endif
}

int px_spool_dir_ok(const char *dir)
{
    struct stat st;
    return stat(dir, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR;
}

void px_spool_free(px_spool *sp)
{
    if (sp == NULL)
        return;
    if (sp->fd >= 0)
        temp_close(sp->fd);
    free(sp->mem);
    free(sp->piece);
    free(sp);
}

/* ---- holding the body ------------------------------------------------------------ */

/* The body cannot be held: the answer ends the exchange, and the core
 * delivers no more of it. */
static void refuse(px_ex *ex, int status, const char *why)
{
    ex->spool->failed = 1;
    if (ex->req == NULL)
        return;
    if (why != NULL)
        keel_log(ex->route->cfg->module, KEEL_LOG_ERROR, "fastcgi: request body not held: %s", why);
    px_log_exchange(ex, status);
    keel_response_send_status(ex->res, status);
    px_ex_client_gone(ex); /* the request's reference: its response is over */
}

/* Moves what memory holds into a new temporary file. */
static int spill(px_ex *ex)
{
    px_spool *sp = ex->spool;
    sp->fd = temp_open(ex->route->cfg->fcgi_temp_dir);
    if (sp->fd < 0)
        return -1;
    int rc = write_all(sp->fd, sp->mem, sp->mem_len);
    free(sp->mem);
    sp->mem = NULL;
    sp->mem_len = sp->mem_cap = 0;
    return rc;
}

static int hold(px_ex *ex, const char *data, size_t len)
{
    px_spool *sp = ex->spool;
    size_t bound = ex->route->cfg->fcgi_body_buffer;
    if (sp->fd < 0 && sp->mem_len + len > bound && spill(ex) != 0)
        return -1;
    if (sp->fd >= 0)
        return write_all(sp->fd, data, len);
    if (sp->mem_len + len > sp->mem_cap) {
        size_t cap = sp->mem_cap ? sp->mem_cap : 16384;
        while (cap < sp->mem_len + len)
            cap *= 2;
        cap = cap < bound ? cap : bound;
        char *grown = realloc(sp->mem, cap);
        if (grown == NULL)
            return -1;
        sp->mem = grown;
        sp->mem_cap = cap;
    }
    memcpy(sp->mem + sp->mem_len, data, len);
    sp->mem_len += len;
    return 0;
}

static void spool_chunk(keel_request *req, const char *data, size_t len, int last, void *userdata)
{
    px_ex *ex = userdata;
    px_spool *sp = ex->spool;
    if (sp->failed || ex->req == NULL)
        return;
    uint64_t limit = keel_request_body_limit(req);
    if (limit > 0 && sp->total + len > limit) {
        refuse(ex, 413, NULL);
        return;
    }
    if (len > 0 && hold(ex, data, len) != 0) {
        char why[160];
        snprintf(why, sizeof why, "%s in %s", strerror(errno), ex->route->cfg->fcgi_temp_dir);
        refuse(ex, 500, why);
        return;
    }
    sp->total += len;
    if (!last)
        return;
    /* Whole: the request leaves with its length (fastcgi.c). */
    ex->body_kind = sp->total > 0 ? PX_BODY_LENGTH : PX_BODY_NONE;
    px_ex_start(ex);
}

int px_spool_begin(px_ex *ex)
{
    px_spool *sp = calloc(1, sizeof *sp);
    if (sp == NULL)
        return KEEL_ERR_NOMEM;
    sp->fd = -1;
    ex->spool = sp;
    return keel_request_stream_body(ex->req, spool_chunk, ex);
}

uint64_t px_spool_length(const px_ex *ex)
{
    return ex->spool->total;
}

/* ---- sending it ------------------------------------------------------------------ */

void px_spool_rewind(px_ex *ex)
{
    ex->spool->sent = 0;
    ex->body_done = ex->spool->total == 0;
}

void px_spool_send(px_ex *ex)
{
    px_spool *sp = ex->spool;
    size_t bound = ex->route->cfg->buffer;
    if (sp->sending || ex->body_done)
        return;
    sp->sending = 1;
    while (sp->sent < sp->total && ex->up != NULL && ex->up->conn != NULL && ex->up_out <= bound) {
        uint64_t left = sp->total - sp->sent;
        size_t n = left < PX_SPOOL_PIECE ? (size_t)left : PX_SPOOL_PIECE;
        const char *at;
        if (sp->fd < 0) {
            at = sp->mem + sp->sent;
        } else {
            if (sp->piece == NULL && (sp->piece = malloc(PX_SPOOL_PIECE)) == NULL)
                break;
            if (keel_pread_all(sp->fd, sp->piece, n, sp->sent) != 0) {
                keel_log(ex->route->cfg->module, KEEL_LOG_ERROR,
                         "fastcgi: request body's temporary file unreadable: %s", strerror(errno));
                px_up *up = ex->up;
                up->ex = NULL;
                ex->up = NULL;
                keel_conn_abort(up->conn);
                sp->sending = 0;
                px_attempt_failed(ex, PX_FAIL_LOCAL);
                return;
            }
            at = sp->piece;
        }
        sp->sent += n;
        int last = sp->sent == sp->total;
        px_fcgi_body(ex, at, n, last);
        if (last) {
            ex->body_done = 1;
            if (ex->up != NULL && ex->up->conn != NULL)
                keel_conn_set_timeout(ex->up->conn, ex->route->read_timeout_ms);
        }
    }
    sp->sending = 0;
}
