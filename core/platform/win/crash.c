/* Windows side of the crash report (platform.h, runtime/crash.h): an
 * unhandled-exception filter and a SIGABRT handler (abort() goes through
 * the C runtime's signals, not SEH) write the same one line, then hand the
 * crash on to what was there before (Windows Error Reporting, a debugger,
 * the runtime's default), so the process ends as it would have.
 *
 * A stack overflow leaves the filter almost no stack: each thread keel
 * runs module code on asks for a stack guarantee (SetThreadStackGuarantee)
 * so that the filter has room to write its line. */
#include "platform/platform.h"

#include <io.h>
#include <signal.h>
#include <string.h>

#include <windows.h>

#include <keel/types.h>

#define MAX_FRAMES      48
#define STACK_GUARANTEE (64 * 1024)

static LPTOP_LEVEL_EXCEPTION_FILTER previous_filter;
static void (*previous_abort)(int);
static HANDLE out_handles[2];
static int nout_handles;
static volatile LONG reporting;       /* 0, 1 while a thread writes, 2 once written */
static kl_crash_describe_fn describe; /* the report line (kl_crash_platform_install) */

static void write_all(HANDLE h, const char *p, size_t len)
{
    while (len > 0) {
        DWORD n = 0;
        if (!WriteFile(h, p, (DWORD)len, &n, NULL) || n == 0)
            return;
        p += n;
        len -= n;
    }
}

static void report(const char *what, uintptr_t pc)
{
    if (InterlockedCompareExchange(&reporting, 1, 0) != 0) {
        /* Another thread is writing its line: let it finish first. */
        for (int i = 0; i < 200 && reporting != 2; i++)
            Sleep(10);
        return;
    }
    uintptr_t addrs[MAX_FRAMES + 1];
    size_t n = 0, npc = 0;
    if (pc != 0) {
        addrs[n++] = pc;
        npc = 1;
    }
    void *frames[MAX_FRAMES];
    USHORT nframes = CaptureStackBackTrace(0, MAX_FRAMES, frames, NULL);
    for (USHORT i = 0; i < nframes; i++)
        addrs[n++] = (uintptr_t)frames[i];
    char line[640];
    size_t len = describe(line, sizeof line, what, addrs, n, npc);
    for (int i = 0; i < nout_handles; i++)
        write_all(out_handles[i], line, len);
    InterlockedExchange(&reporting, 2);
}

static const char *exception_text(DWORD code)
{
    switch (code) {
    case EXCEPTION_ACCESS_VIOLATION:
        return "EXCEPTION_ACCESS_VIOLATION (segmentation fault)";
    case EXCEPTION_STACK_OVERFLOW:
        return "EXCEPTION_STACK_OVERFLOW (stack overflow)";
    case EXCEPTION_IN_PAGE_ERROR:
        return "EXCEPTION_IN_PAGE_ERROR (bus error)";
    case EXCEPTION_DATATYPE_MISALIGNMENT:
        return "EXCEPTION_DATATYPE_MISALIGNMENT (bus error)";
    case EXCEPTION_ILLEGAL_INSTRUCTION:
    case EXCEPTION_PRIV_INSTRUCTION:
        return "EXCEPTION_ILLEGAL_INSTRUCTION (illegal instruction)";
    case EXCEPTION_INT_DIVIDE_BY_ZERO:
        return "EXCEPTION_INT_DIVIDE_BY_ZERO (arithmetic exception)";
    case EXCEPTION_INT_OVERFLOW:
        return "EXCEPTION_INT_OVERFLOW (arithmetic exception)";
    case EXCEPTION_FLT_DIVIDE_BY_ZERO:
    case EXCEPTION_FLT_INVALID_OPERATION:
        return "floating-point exception (arithmetic exception)";
    default:
        return "unhandled exception";
    }
}

static LONG WINAPI on_exception(EXCEPTION_POINTERS *ep)
{
    const EXCEPTION_RECORD *rec = ep->ExceptionRecord;
    report(exception_text(rec->ExceptionCode), (uintptr_t)rec->ExceptionAddress);
    return previous_filter != NULL ? previous_filter(ep) : EXCEPTION_CONTINUE_SEARCH;
}

static void on_abort(int sig)
{
    report("SIGABRT (abort)", 0);
    /* The runtime reset the handler to SIG_DFL before calling this one;
     * put back the one keel found and raise again. */
    signal(sig, previous_abort != SIG_ERR ? previous_abort : SIG_DFL);
    raise(sig);
}

int kl_crash_platform_install(FILE *log, kl_crash_describe_fn describe_fn)
{
    describe = describe_fn;
    nout_handles = 0;
    HANDLE err = GetStdHandle(STD_ERROR_HANDLE);
    if (log != NULL) {
        intptr_t h = _get_osfhandle(_fileno(log));
        if (h != -1 && (HANDLE)h != err)
            out_handles[nout_handles++] = (HANDLE)h;
    }
    if (err != NULL && err != INVALID_HANDLE_VALUE)
        out_handles[nout_handles++] = err;
    InterlockedExchange(&reporting, 0);
    previous_filter = SetUnhandledExceptionFilter(on_exception);
    previous_abort = signal(SIGABRT, on_abort);
    return KEEL_OK;
}

void kl_crash_platform_uninstall(void)
{
    SetUnhandledExceptionFilter(previous_filter);
    signal(SIGABRT, previous_abort != SIG_ERR ? previous_abort : SIG_DFL);
    nout_handles = 0;
}

void kl_crash_platform_thread_begin(void)
{
    ULONG size = STACK_GUARANTEE;
    SetThreadStackGuarantee(&size);
}

void kl_crash_platform_thread_end(void)
{
    /* The guarantee is part of the thread's stack; nothing to free. */
}

int kl_lib_extent(const void *addr, uintptr_t *base, uintptr_t *lo, uintptr_t *hi)
{
    HMODULE module = NULL;
    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                                GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            (LPCWSTR)addr, &module))
        return -1;
    /* The image's size is in its own PE header, mapped at its base. */
    const IMAGE_DOS_HEADER *dos = (const IMAGE_DOS_HEADER *)module;
    const IMAGE_NT_HEADERS *nt = (const IMAGE_NT_HEADERS *)((const char *)module + dos->e_lfanew);
    *base = *lo = (uintptr_t)module;
    *hi = *lo + nt->OptionalHeader.SizeOfImage;
    return 0;
}

uintptr_t kl_crash_platform_base_of(uintptr_t pc)
{
    HMODULE module = NULL;
    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                                GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            (LPCWSTR)pc, &module))
        return 0;
    return (uintptr_t)module;
}

void kl_crash_platform_now(int64_t *seconds, unsigned *ms)
{
    FILETIME ft;
    GetSystemTimeAsFileTime(&ft);
    /* 100 ns ticks since 1601-01-01. */
    uint64_t ticks = ((uint64_t)ft.dwHighDateTime << 32) | ft.dwLowDateTime;
    uint64_t unix_ms = ticks / 10000 - UINT64_C(11644473600000);
    *seconds = (int64_t)(unix_ms / 1000);
    *ms = (unsigned)(unix_ms % 1000);
}
