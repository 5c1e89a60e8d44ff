/* The connection core's writes, in process (conn_harness.h): completions
 * that are never called back from inside the call and come in order, a
 * write from a completion, writes refused after close, a file with a write
 * queued behind it, and the same through a transport (pacing, the file
 * read in pieces, its buffer kept for the next file). */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <keel/embed.h>

#include "conn_harness.h"
#include "net/file_reader.h"
#include "net/worker.h"

/* ---- writes that complete at once, and a write from a queued write's callback ----------- */

#define QUICK_WRITES 200
static char quick_text[QUICK_WRITES + 1][8];

static void on_chain(keel_conn *c, int status, void *ud)
{
    on_written(c, status, ud);
    write_rec(c, "end\n", 4);
    record_close(c);
}

static int quick_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (rec.ndata++ > 0)
        return KEEL_OK;
    for (int i = 0; i < QUICK_WRITES; i++) {
        snprintf(quick_text[i], sizeof quick_text[i], "w%04d\n", i);
        write_rec(c, quick_text[i], 6);
    }
    /* Two buffers in one call, and an empty write: one callback each. */
    int i = rec.nw++;
    keel_buf two[2] = {{"tw", 2}, {"o\n", 2}};
    STORE(rec.in_call, 1);
    rec.rc[i] = keel_conn_write(c, two, 2, on_written, (void *)(uintptr_t)i);
    STORE(rec.in_call, 0);
    rec.at_once[i] = rec.rc[i] == KEEL_OK && keel_conn_write_queued(c) == 0;
    /* The empty write's callback writes once more and closes: from the
     * loop's idle pass, whose callback must not come from inside either. */
    i = rec.nw++;
    keel_buf none = {"", 0};
    STORE(rec.in_call, 1);
    rec.rc[i] = keel_conn_write(c, &none, 1, on_chain, (void *)(uintptr_t)i);
    STORE(rec.in_call, 0);
    rec.at_once[i] = rec.rc[i] == KEEL_OK && keel_conn_write_queued(c) == 0;
    STORE(rec.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_quick = {
    .size = sizeof(keel_protocol),
    .name = "quick",
    .on_open = common_open,
    .on_data = quick_data,
    .on_close = common_close,
};

/* A write from the callback of a write that went through libuv's queue
 * (called back from libuv's write completion), when that write was the
 * last one in flight: the common "write the next piece when the previous
 * one has left" pattern. */
static int chain_index = -1, chain_rc = -1000;

static void on_chain_written(keel_conn *c, int status, void *ud)
{
    on_written(c, status, ud);
    if ((int)(uintptr_t)ud != chain_index)
        return;
    chain_rc = keel_conn_write_copy(c, "after\n", 6);
    record_close(c);
}

static int qchain_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (rec.ndata++ > 0)
        return KEEL_OK;
    while (keel_conn_write_queued(c) == 0 && rec.nw < MAXW - 8) {
        int i = rec.nw++;
        keel_buf b = {pattern + rec.total % PERIOD, CHUNK};
        STORE(rec.in_call, 1);
        rec.rc[i] = keel_conn_write(c, &b, 1, on_chain_written, (void *)(uintptr_t)i);
        STORE(rec.in_call, 0);
        if (rec.rc[i] != KEEL_OK)
            break;
        rec.total += CHUNK;
        chain_index = i;
    }
    rec.queued_after = keel_conn_write_queued(c);
    STORE(rec.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_qchain = {
    .size = sizeof(keel_protocol),
    .name = "qchain",
    .on_open = common_open,
    .on_data = qchain_data,
    .on_close = common_close,
};

Test(conn, writes_that_complete_at_once_call_back_from_the_loop, .timeout = 30)
{
    server_start("quick");
    int fd = cl_connect(0);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&rec.phase1, 1, 5000), "on_data did not run");
    int n = QUICK_WRITES + 3; /* and the one from a callback */
    cr_assert(wait_for(&rec.ncb, n, 5000), "%d of %d callbacks came", LOAD(rec.ncb), n);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(rec.rc[i], KEEL_OK, "write %d: %d", i, rec.rc[i]);
        cr_assert(rec.at_once[i], "write %d did not leave at once (the test needs it to)", i);
    }
    char want[QUICK_WRITES * 6 + 16];
    size_t wl = 0;
    for (int i = 0; i < QUICK_WRITES; i++)
        wl += (size_t)snprintf(want + wl, sizeof want - wl, "w%04d\n", i);
    memcpy(want + wl, "two\nend\n", 8);
    wl += 8;
    expect e = {0, 0, want, wl};
    rd r = cl_read(fd, &e, UINT64_MAX, 5000);
    cr_assert(r.err == 0 && r.good == wl && r.total == wl,
              "got %llu bytes (%llu as written) then %s", (unsigned long long)r.total,
              (unsigned long long)r.good, err_name(r.err));
    close(fd);
    cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come");
    worker_sync(); /* a second callback would have come by now */
    cr_assert_eq(rec.close_status, KEEL_OK);
    check_callbacks(NULL);
    server_stop();
}

Test(conn, a_write_from_a_queued_write_callback, .timeout = 30)
{
    server_start("qchain");
    int fd = cl_connect(16 * 1024);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&rec.phase1, 1, 10000), "on_data did not run");
    cr_assert_gt(rec.queued_after, 0, "nothing was queued (the test needs a queued write)");
    expect e = {0, rec.total, "after\n", 6};
    rd r = cl_read(fd, &e, UINT64_MAX, 20000);
    uint64_t want = rec.total + 6;
    cr_assert(r.err == 0 && r.total == want && r.good == want,
              "got %llu bytes (%llu as written) of %llu, then %s", (unsigned long long)r.total,
              (unsigned long long)r.good, (unsigned long long)want, err_name(r.err));
    close(fd);
    cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come");
    cr_assert_eq(chain_rc, KEEL_OK, "keel_conn_write_copy from the callback: %d", chain_rc);
    cr_assert_eq(rec.close_status, KEEL_OK);
    check_callbacks(all_ok);
    server_stop();
}

/* ---- a write after close ---------------------------------------------------------------- */

/* What the writes after keel_conn_close returned. */
static struct {
    int write_rc, copy_rc, file_rc;
} after_close;

static int after_close_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (rec.ndata++ > 0)
        return KEEL_OK;
    write_rec(c, "bye\n", 4);
    record_close(c);
    keel_buf b = {"late\n", 5};
    after_close.write_rc = keel_conn_write(c, &b, 1, never_called, NULL);
    after_close.copy_rc = keel_conn_write_copy(c, "late\n", 5);
    after_close.file_rc = keel_conn_write_file(c, 0, 0, 1, never_called, NULL);
    keel_conn_close(c); /* idempotent */
    STORE(rec.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_after_close = {
    .size = sizeof(keel_protocol),
    .name = "after_close",
    .on_open = common_open,
    .on_data = after_close_data,
    .on_close = common_close,
};

Test(conn, a_write_after_close_is_refused_without_callback, .timeout = 30)
{
    server_start("after_close");
    int fd = cl_connect(0);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&rec.phase1, 1, 5000));
    cr_assert_eq(after_close.write_rc, KEEL_ERR_CLOSED, "keel_conn_write after close: %d",
                 after_close.write_rc);
    cr_assert_eq(after_close.copy_rc, KEEL_ERR_CLOSED, "keel_conn_write_copy after close: %d",
                 after_close.copy_rc);
    cr_assert_eq(after_close.file_rc, KEEL_ERR_CLOSED, "keel_conn_write_file after close: %d",
                 after_close.file_rc);
    expect e = {0, 0, "bye\n", 4};
    rd r = cl_read(fd, &e, 1 << 20, 5000);
    cr_assert(r.err == 0 && r.total == 4 && r.good == 4, "got %llu bytes then %s",
              (unsigned long long)r.total, err_name(r.err));
    close(fd);
    cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come");
    worker_sync(); /* a late callback would have run by now */
    cr_assert_eq(LOAD(rec.late_cb), 0, "a refused write's callback ran");
    cr_assert_eq(rec.close_status, KEEL_OK);
    check_callbacks(NULL);
    server_stop();
}

/* ---- a file, then a write, then close ---------------------------------------------------- */

static int file_fd = -1;
static uint64_t file_offset, file_len;
static const char file_tail[] = "TAIL-AFTER-FILE\n";

static int file_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (rec.ndata++ > 0)
        return KEEL_OK;
    write_file_rec(c, file_fd, file_offset, file_len);
    rec.queued_after = keel_conn_write_queued(c);
    write_rec(c, file_tail, sizeof file_tail - 1);
    record_close(c);
    STORE(rec.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_file = {
    .size = sizeof(keel_protocol),
    .name = "file",
    .on_open = common_open,
    .on_data = file_data,
    .on_close = common_close,
};

static void make_file(uint64_t size)
{
    char path[] = "/tmp/keel-conn-file-XXXXXX";
    file_fd = mkstemp(path);
    cr_assert(file_fd >= 0, "mkstemp: %s", strerror(errno));
    unlink(path);
    uint64_t done = 0;
    while (done < size) {
        size_t n = size - done < CHUNK ? (size_t)(size - done) : CHUNK;
        ssize_t w = write(file_fd, pattern + done % PERIOD, n);
        cr_assert(w > 0, "write: %s", strerror(errno));
        done += (uint64_t)w;
    }
}

static void file_then_write_then_close(uint64_t size, uint64_t offset, uint64_t len, int rcvbuf)
{
    server_start("file"); /* also fills the pattern */
    make_file(size);
    file_offset = offset;
    file_len = len;
    int fd = cl_connect(rcvbuf);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&rec.phase1, 1, 5000), "on_data did not run");
    cr_assert_eq(rec.rc[0], KEEL_OK, "keel_conn_write_file: %d", rec.rc[0]);
    cr_assert_eq(rec.rc[1], KEEL_OK, "keel_conn_write after the file: %d", rec.rc[1]);
    expect e = {offset, len, file_tail, sizeof file_tail - 1};
    rd r = cl_read(fd, &e, UINT64_MAX, 30000);
    uint64_t want = len + sizeof file_tail - 1;
    cr_assert_eq(r.err, 0, "the stream ended with %s after %llu bytes", err_name(r.err),
                 (unsigned long long)r.total);
    cr_assert_eq(r.total, want, "got %llu of %llu bytes", (unsigned long long)r.total,
                 (unsigned long long)want);
    cr_assert_eq(r.good, want, "byte %llu differs", (unsigned long long)r.good);
    close(fd);
    cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come");
    cr_assert_eq(rec.close_status, KEEL_OK);
    check_callbacks(all_ok);
    close(file_fd);
    server_stop();
}

Test(conn, file_then_write_then_close_in_order, .timeout = 60)
{
    /* 3 MiB through a small receive window: the file is still being sent
     * when the write and the close come. */
    file_then_write_then_close(3u << 20, 0, 3u << 20, 16 * 1024);
    cr_assert_gt(rec.queued_after, 0, "the file left at once (the test needs it queued)");
}

Test(conn, small_file_sent_inside_the_call_still_calls_back_later, .timeout = 30)
{
    /* Small enough to leave inside keel_conn_write_file: its callback is
     * owed, not called from inside. A part of the file, by offset. */
    file_then_write_then_close(8192, 1000, 5000, 0);
    cr_assert_eq(rec.queued_after, 0, "the small file did not leave at once");
}

/* ---- through a transport: pacing, a file read in pieces ---------------------------------- */

/* An identity transport: the client reads plain bytes, but every write,
 * file piece and completion takes the transport's path (pacing, the
 * thread-pool file reader). */
static int ident_read(keel_conn *c, const char *data, size_t len)
{
    return keel_transport_deliver(c, data, len);
}

static int ident_write(keel_conn *c, const keel_buf *bufs, size_t nbufs)
{
    for (size_t i = 0; i < nbufs; i++) {
        int rc = keel_transport_send(c, bufs[i].base, bufs[i].len);
        if (rc < 0)
            return rc;
    }
    return KEEL_OK;
}

static const keel_transport transport_ident = {
    .size = sizeof(keel_transport),
    .name = "ident",
    .on_read = ident_read,
    .on_write = ident_write,
};

static int tfile_abort; /* the variant: abort instead of close */

/* Past the pacing threshold (the client does not read yet), then a file,
 * then a write held behind it; then close or abort. */
static int tfile_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (rec.ndata++ > 0)
        return KEEL_OK;
    write_until_queued(c, 2 * HIGH_WATER, 256u << 20);
    write_file_rec(c, file_fd, file_offset, file_len);
    write_rec(c, file_tail, sizeof file_tail - 1);
    rec.queued_after = keel_conn_write_queued(c);
    if (tfile_abort)
        keel_conn_abort(c);
    else
        record_close(c);
    STORE(rec.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_tfile = {
    .size = sizeof(keel_protocol),
    .name = "tfile",
    .on_open = common_open,
    .on_data = tfile_data,
    .on_close = common_close,
};

/* Statuses in write order: some KEEL_OK, then only KEEL_ERR_CLOSED. */
static int ok_then_closed(int i)
{
    static int first_closed = -1;
    if (first_closed < 0) {
        first_closed = rec.nw;
        for (int k = 0; k < rec.nw; k++)
            if (rec.cb_status[k] != KEEL_OK) {
                first_closed = k;
                break;
            }
    }
    return i < first_closed ? KEEL_OK : KEEL_ERR_CLOSED;
}

static void transport_file_case(int abort_it)
{
    tfile_abort = abort_it;
    server_start("tfile ident");
    make_file(8192);
    file_offset = 100;
    file_len = 6000;
    int fd = cl_connect(16 * 1024);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&rec.phase1, 1, 10000), "on_data did not run");
    cr_assert_gt(rec.queued_after, HIGH_WATER, "only %zu bytes queued", rec.queued_after);
    int nfile = rec.nw - 2;
    cr_assert_eq(rec.rc[nfile], KEEL_OK, "keel_conn_write_file: %d", rec.rc[nfile]);
    cr_assert_eq(rec.rc[nfile + 1], KEEL_OK, "the write after the file: %d", rec.rc[nfile + 1]);
    if (abort_it) {
        cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come after the abort");
        rd r = cl_read(fd, NULL, UINT64_MAX, 10000);
        cr_assert(r.err == 0 || r.err == ECONNRESET, "after the abort the client saw %s",
                  err_name(r.err));
        worker_sync();
        cr_assert_eq(rec.close_status, KEEL_ERR_CLOSED);
        cr_assert_eq(rec.cb_status[nfile], KEEL_ERR_CLOSED, "the file's callback: %d",
                     rec.cb_status[nfile]);
        check_callbacks(ok_then_closed);
    } else {
        /* Pattern chunks, the file's part, the tail, EOF. */
        rd r = cl_read(fd, NULL, rec.total, 30000);
        cr_assert_eq(r.total, rec.total, "got %llu of the %llu written bytes then %s",
                     (unsigned long long)r.total, (unsigned long long)rec.total, err_name(r.err));
        expect e = {file_offset, file_len, file_tail, sizeof file_tail - 1};
        r = cl_read(fd, &e, UINT64_MAX, 30000);
        uint64_t want = file_len + sizeof file_tail - 1;
        cr_assert(r.err == 0 && r.total == want && r.good == want,
                  "after the writes: %llu bytes (%llu as expected of %llu) then %s",
                  (unsigned long long)r.total, (unsigned long long)r.good, (unsigned long long)want,
                  err_name(r.err));
        close(fd);
        cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come");
        cr_assert_eq(rec.close_status, KEEL_OK);
        check_callbacks(all_ok);
    }
    close(fd);
    close(file_fd);
    server_stop();
}

Test(conn, transport_file_then_write_then_close_in_order, .timeout = 60)
{
    transport_file_case(0);
}

Test(conn, transport_abort_fails_paced_writes_file_and_held_write_in_order, .timeout = 60)
{
    transport_file_case(1);
}

/* ---- through a transport: one piece buffer for file after file ------------------------- */

/* Files read through a transport reuse the worker's spare piece buffer:
 * freed to the allocator, a worker thread's arena hands the pages back
 * and the next file faults them in again. */
#define SPARE_FILE_LEN (3 * KL_FILE_PIECE + 100)
#define SPARE_FILES    3
static unsigned spares_after;

static int tspare_data(keel_conn *c, const char *data, size_t len, size_t *consumed)
{
    (void)data;
    *consumed = len;
    if (rec.ndata++ > 0)
        return KEEL_OK;
    for (int i = 0; i < SPARE_FILES; i++)
        write_file_rec(c, file_fd, 0, SPARE_FILE_LEN);
    record_close(c);
    STORE(rec.phase1, 1);
    return KEEL_OK;
}

static const keel_protocol proto_tspare = {
    .size = sizeof(keel_protocol),
    .name = "tspare",
    .on_open = common_open,
    .on_data = tspare_data,
    .on_close = common_close,
};

static void count_spares(void)
{
    spares_after = rec.worker->piece_cache.count;
}

Test(conn, transport_files_one_after_another_share_one_piece_buffer, .timeout = 60)
{
    server_start("tspare ident");
    make_file(SPARE_FILE_LEN);
    int fd = cl_connect(0);
    cl_send(fd, "go", 2);
    cr_assert(wait_for(&rec.phase1, 1, 10000), "on_data did not run");
    rd r = cl_read(fd, NULL, UINT64_MAX, 30000);
    uint64_t want = (uint64_t)SPARE_FILES * SPARE_FILE_LEN;
    cr_assert(r.err == 0 && r.total == want, "got %llu of %llu bytes then %s",
              (unsigned long long)r.total, (unsigned long long)want, err_name(r.err));
    close(fd);
    cr_assert(wait_for(&rec.nclose, 1, 5000), "on_close did not come");
    check_callbacks(all_ok);
    worker_sync_then(count_spares);
    /* Each file took the spare the one before gave back: one buffer. */
    cr_assert_eq(spares_after, 1, "%u spare piece buffers after %d files (want 1)", spares_after,
                 SPARE_FILES);
    close(file_fd);
    server_stop();
}

/* ---- what the server offers (conn_harness.h) -------------------------------------------- */

const keel_protocol *const conn_test_protocols[] = {
    &proto_quick, &proto_qchain, &proto_after_close, &proto_file, &proto_tfile, &proto_tspare, NULL,
};
const keel_transport *const conn_test_transports[] = {&transport_ident, NULL};
