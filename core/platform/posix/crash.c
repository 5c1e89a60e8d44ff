/* POSIX side of the crash report (platform.h, runtime/crash.h): a handler
 * for the fatal signals that runs on an alternate stack (so that a stack
 * overflow is reported too), collects the faulting instruction and the
 * stack's return addresses, writes the line with write(2) and gives the
 * signal back to whatever handled it before keel (the default: the process
 * dies by it, with a core dump where enabled).
 *
 * Everything the handler does is async-signal-safe, save backtrace(),
 * which is safe once it has run once (its first call may load libgcc's
 * unwinder): install calls it. */
#define _GNU_SOURCE /* glibc: REG_RIP & co., dl_iterate_phdr, dladdr */
#include "platform/platform.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__APPLE__)
#include <sys/ucontext.h>
#else
#include <link.h> /* dl_iterate_phdr: Linux, the BSDs */
#define KL_HAVE_PHDR 1
#endif
#if defined(__GLIBC__) || defined(__APPLE__)
#include <execinfo.h>
#define KL_HAVE_BACKTRACE 1
#endif

#include <keel/types.h>

#define MAX_FRAMES 48
#define ALT_STACK  (128 * 1024)
/* A fault this close to the stack pointer hit the stack's guard page. */
#define NEAR_SP (64 * 1024)

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NSIGNALS (sizeof fatal_signals / sizeof fatal_signals[0])

static struct sigaction previous[NSIGNALS];
static int out_fds[2];
static int nout_fds;
static int reporting;                 /* 0, 1 while a thread writes the line, 2 once written */
static kl_crash_describe_fn describe; /* the report line (kl_crash_platform_install) */

/* ---- the handler ---------------------------------------------------------- */

static void context_regs(const void *context, uintptr_t *pc, uintptr_t *sp)
{
    *pc = *sp = 0;
#if defined(__linux__) && defined(__x86_64__)
    const ucontext_t *uc = context;
    *pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    *sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__linux__) && defined(__i386__)
    const ucontext_t *uc = context;
    *pc = (uintptr_t)uc->uc_mcontext.gregs[REG_EIP];
    *sp = (uintptr_t)uc->uc_mcontext.gregs[REG_ESP];
#elif defined(__linux__) && defined(__aarch64__)
    const ucontext_t *uc = context;
    *pc = (uintptr_t)uc->uc_mcontext.pc;
    *sp = (uintptr_t)uc->uc_mcontext.sp;
#elif defined(__APPLE__) && defined(__x86_64__)
    const ucontext_t *uc = context;
    *pc = (uintptr_t)uc->uc_mcontext->__ss.__rip;
    *sp = (uintptr_t)uc->uc_mcontext->__ss.__rsp;
#elif defined(__APPLE__) && defined(__aarch64__)
    const ucontext_t *uc = context;
    *pc = (uintptr_t)__darwin_arm_thread_state64_get_pc(uc->uc_mcontext->__ss);
    *sp = (uintptr_t)__darwin_arm_thread_state64_get_sp(uc->uc_mcontext->__ss);
#elif defined(__FreeBSD__) && defined(__x86_64__)
    const ucontext_t *uc = context;
    *pc = (uintptr_t)uc->uc_mcontext.mc_rip;
    *sp = (uintptr_t)uc->uc_mcontext.mc_rsp;
#else
    (void)context; /* the frames from backtrace() still tell */
#endif
}

static const char *signal_text(int sig, const siginfo_t *info, uintptr_t sp)
{
    switch (sig) {
    case SIGSEGV: {
        uintptr_t fault = (uintptr_t)info->si_addr;
        if (sp != 0 && fault != 0 && fault < sp + NEAR_SP && fault + NEAR_SP > sp)
            return "SIGSEGV (stack overflow)";
        return "SIGSEGV (segmentation fault)";
    }
    case SIGBUS:
        return "SIGBUS (bus error)";
    case SIGFPE:
        return "SIGFPE (arithmetic exception)";
    case SIGILL:
        return "SIGILL (illegal instruction)";
    case SIGABRT:
        return "SIGABRT (abort)";
    default:
        return "fatal signal";
    }
}

static void write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        p += n;
        len -= (size_t)n;
    }
}

static void report(int sig, const siginfo_t *info, void *context)
{
    uintptr_t addrs[MAX_FRAMES + 1];
    size_t n = 0, npc = 0;
    uintptr_t pc, sp;
    context_regs(context, &pc, &sp);
    if (pc != 0) {
        addrs[n++] = pc;
        npc = 1;
    }
#if KL_HAVE_BACKTRACE
    void *frames[MAX_FRAMES];
    int nframes = backtrace(frames, MAX_FRAMES);
    for (int i = 0; i < nframes; i++)
        addrs[n++] = (uintptr_t)frames[i];
#endif
    char line[640];
    size_t len = describe(line, sizeof line, signal_text(sig, info, sp), addrs, n, npc);
    for (int i = 0; i < nout_fds; i++)
        write_all(out_fds[i], line, len);
}

/* Another thread crashed too and is writing its line: give it time to
 * finish, since whichever hands its signal back first ends the process. */
static void wait_for_report(void)
{
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 200 && __atomic_load_n(&reporting, __ATOMIC_SEQ_CST) != 2; i++)
        nanosleep(&tick, NULL);
}

/* A fault the instruction raised (as opposed to kill, raise or abort). */
static int from_the_instruction(int sig, const siginfo_t *info)
{
    if (sig == SIGABRT || info->si_code <= 0 || info->si_code == SI_USER ||
        info->si_code == SI_QUEUE)
        return 0;
#ifdef SI_TKILL
    if (info->si_code == SI_TKILL)
        return 0;
#endif
    return 1;
}

static void on_fatal(int sig, siginfo_t *info, void *context)
{
    int saved_errno = errno;
    if (__atomic_exchange_n(&reporting, 1, __ATOMIC_SEQ_CST) == 0) {
        report(sig, info, context);
        __atomic_store_n(&reporting, 2, __ATOMIC_SEQ_CST);
    } else {
        wait_for_report();
    }
    /* Give the signal back to the disposition keel found. A fault the
     * instruction raised happens again when the handler returns, now
     * under that disposition, with its real address and registers (what
     * a core dump or another crash handler wants); a sent one is sent
     * again (it is blocked until this handler returns). */
    for (size_t i = 0; i < NSIGNALS; i++)
        if (fatal_signals[i] == sig)
            sigaction(sig, &previous[i], NULL);
    if (!from_the_instruction(sig, info))
        raise(sig);
    errno = saved_errno;
}

/* ---- installing ------------------------------------------------------------ */

int kl_crash_platform_install(FILE *log, kl_crash_describe_fn describe_fn)
{
    describe = describe_fn;
#if KL_HAVE_BACKTRACE
    void *warm[2];
    backtrace(warm, 2);
#endif
    nout_fds = 0;
    int log_fd = log != NULL ? fileno(log) : -1;
    if (log_fd >= 0 && log_fd != STDERR_FILENO)
        out_fds[nout_fds++] = log_fd;
    out_fds[nout_fds++] = STDERR_FILENO;
    __atomic_store_n(&reporting, 0, __ATOMIC_SEQ_CST);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NSIGNALS; i++) {
        if (sigaction(fatal_signals[i], &sa, &previous[i]) != 0) {
            while (i-- > 0)
                sigaction(fatal_signals[i], &previous[i], NULL);
            return KEEL_ERR_IO;
        }
    }
    return KEEL_OK;
}

void kl_crash_platform_uninstall(void)
{
    for (size_t i = 0; i < NSIGNALS; i++)
        sigaction(fatal_signals[i], &previous[i], NULL);
    nout_fds = 0;
}

/* ---- per thread: the alternate stack -------------------------------------- */

typedef struct alt_stack {
    stack_t old; /* what the thread had before (usually none) */
    void *memory;
} alt_stack;

static pthread_key_t alt_key;
static pthread_once_t alt_once = PTHREAD_ONCE_INIT;

static void alt_release(void *p)
{
    alt_stack *a = p;
    sigaltstack(&a->old, NULL);
    free(a->memory);
    free(a);
}

static void alt_key_create(void)
{
    /* The destructor frees the stack of a thread that exits without
     * kl_crash_platform_thread_end (workers). */
    pthread_key_create(&alt_key, alt_release);
}

void kl_crash_platform_thread_begin(void)
{
    pthread_once(&alt_once, alt_key_create);
    if (pthread_getspecific(alt_key) != NULL)
        return;
    alt_stack *a = calloc(1, sizeof *a);
    size_t size = ALT_STACK;
    if ((size_t)SIGSTKSZ * 4 > size)
        size = (size_t)SIGSTKSZ * 4;
    if (a == NULL || (a->memory = malloc(size)) == NULL) {
        free(a);
        return; /* reported all the same, except a stack overflow */
    }
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = a->memory;
    ss.ss_size = size;
    if (sigaltstack(&ss, &a->old) != 0 || pthread_setspecific(alt_key, a) != 0) {
        sigaltstack(&a->old, NULL);
        free(a->memory);
        free(a);
    }
}

void kl_crash_platform_thread_end(void)
{
    pthread_once(&alt_once, alt_key_create);
    alt_stack *a = pthread_getspecific(alt_key);
    if (a == NULL)
        return;
    pthread_setspecific(alt_key, NULL);
    alt_release(a);
}

/* ---- where modules are ------------------------------------------------------ */

#if KL_HAVE_PHDR
typedef struct object_search {
    uintptr_t addr;
    uintptr_t base, lo, hi;
    int found;
} object_search;

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    object_search *s = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int holds = 0;
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
        uintptr_t end = start + (uintptr_t)ph->p_memsz;
        lo = start < lo ? start : lo;
        hi = end > hi ? end : hi;
        holds |= s->addr >= start && s->addr < end;
    }
    if (!holds)
        return 0;
    s->base = (uintptr_t)info->dlpi_addr;
    s->lo = lo;
    s->hi = hi;
    s->found = 1;
    return 1;
}
#endif

int kl_lib_extent(const void *addr, uintptr_t *base, uintptr_t *lo, uintptr_t *hi)
{
#if KL_HAVE_PHDR
    object_search s = {(uintptr_t)addr, 0, 0, 0, 0};
    dl_iterate_phdr(find_object, &s);
    if (!s.found)
        return -1;
    *base = s.base;
    *lo = s.lo;
    *hi = s.hi;
    return 0;
#else
    /* No program headers to read (macOS): the base only; the handler asks
     * dladdr() which object holds each frame. */
    Dl_info info;
    if (dladdr(addr, &info) == 0 || info.dli_fbase == NULL)
        return -1;
    *base = *lo = (uintptr_t)info.dli_fbase;
    *hi = 0;
    return 0;
#endif
}

uintptr_t kl_crash_platform_base_of(uintptr_t pc)
{
    Dl_info info;
    if (dladdr((void *)pc, &info) == 0)
        return 0;
    return (uintptr_t)info.dli_fbase;
}

void kl_crash_platform_now(int64_t *seconds, unsigned *ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    *seconds = (int64_t)ts.tv_sec;
    *ms = (unsigned)(ts.tv_nsec / 1000000);
}
