/* crash — crashes on request, for test_crash.c (the crash report). The
 * protocol "crash" reads one command a line:
 *
 *   segv       writes through a bad pointer, in on_data
 *   abort      calls abort(), in on_data (the faulting code is libc's)
 *   overflow   recurses until the stack runs out, in on_data
 *   timer      answers "worker N", then writes through a bad pointer from
 *              a timer 20 ms later
 *
 * With `[crash] in_load = on` it writes through a bad pointer in load, on
 * the main thread. Never load it anywhere else. */
#include <keel/keel.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Not NULL: a null store may be diagnosed before it faults (UBSan); the
 * first page is never mapped all the same. volatile keeps the compiler
 * from proving anything about it. */
static volatile uintptr_t bad_address = 16;

static void write_bad_pointer(void)
{
    *(volatile int *)bad_address = 1;
}

/* A frame the compiler can neither drop nor turn into a loop: its bytes
 * are used after the call returns. `limit` is never reached. */
static volatile unsigned limit = UINT32_MAX;

static unsigned recurse(unsigned depth)
{
    volatile char frame[1024];
    frame[0] = (char)depth;
    frame[sizeof frame - 1] = (char)(depth >> 8);
    if (depth >= limit)
        return frame[0];
    return recurse(depth + 1) + (unsigned)frame[sizeof frame - 1];
}

static void crash_later(keel_timer *timer, void *userdata)
{
    (void)timer;
    (void)userdata;
    write_bad_pointer();
}

static int crash_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    const char *nl = memchr(data, '\n', len);
    *consumed = nl ? (size_t)(nl - data) + 1 : 0;
    if (nl == NULL)
        return KEEL_OK;
    size_t n = (size_t)(nl - data);
    if (n == 4 && memcmp(data, "segv", 4) == 0)
        write_bad_pointer();
    else if (n == 5 && memcmp(data, "abort", 5) == 0)
        abort();
    else if (n == 8 && memcmp(data, "overflow", 8) == 0)
        recurse(0); /* never returns */
    else if (n == 5 && memcmp(data, "timer", 5) == 0) {
        keel_worker *worker = keel_conn_worker(conn);
        char line[32];
        int len_out = snprintf(line, sizeof line, "worker %u\n", keel_worker_id(worker));
        keel_conn_write_copy(conn, line, (size_t)len_out);
        return keel_timer_start(worker, 20, 0, crash_later, NULL) ? KEEL_OK : KEEL_ERR_NOMEM;
    }
    return keel_conn_write_copy(conn, "?\n", 2);
}

static const keel_protocol crash_protocol = {
    .size = sizeof(keel_protocol),
    .name = "crash",
    .on_data = crash_data,
};

static int crash_load(keel_module *module)
{
    int in_load;
    int rc = keel_config_bool(module, "in_load", 0, &in_load);
    if (rc != KEEL_OK)
        return rc;
    if (in_load)
        write_bad_pointer();
    return keel_protocol_register(module, &crash_protocol);
}

KEEL_MODULE(crash, .version = "1.0.0", .load = crash_load);
