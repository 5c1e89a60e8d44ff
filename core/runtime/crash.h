/* core/runtime/crash.h — the one line keel writes when a fatal signal (or,
 * on Windows, an unhandled exception) ends the process:
 *
 *   2026-11-29T22:36:42.045Z [error] crash: SIGSEGV (segmentation fault) on
 *       worker 1 in module 'x' (mod_x.so+0x1139)
 *
 * (one line), then the process dies by the same signal as it would have
 * without keel. Which module: first the code that faulted and the frames
 * of its stack, matched against the address ranges of the modules' shared
 * objects (recorded when they load); failing that, what the core says the
 * thread is running (KL_IN_MODULE / KL_IN_CALLBACK around each call into a
 * module's hooks, timers and posts). The catching, unwinding and writing
 * are per platform (platform/posix/crash.c, platform/win/crash.c); this
 * part is portable and what it offers the handler is async-signal-safe.
 *
 * Installed by keel_server_run and keel_server_check unless [keel]
 * crash_report = off; removed (the previous handlers restored) when they
 * return.
 */
#ifndef KEEL_CORE_CRASH_H
#define KEEL_CORE_CRASH_H

#include <stddef.h>
#include <stdint.h>

#if defined(_MSC_VER) && !defined(__clang__)
#define KL_THREAD_LOCAL __declspec(thread)
#else
#define KL_THREAD_LOCAL _Thread_local
#endif

/* Which module's code the calling thread entered last. */
typedef struct kl_crash_scope {
    const char *module; /* the module whose hook runs (load, start...), or NULL */
    uintptr_t code;     /* else a callback's address, which names its module */
} kl_crash_scope;

enum kl_thread_role { KL_THREAD_OTHER = 0, KL_THREAD_MAIN, KL_THREAD_WORKER };

typedef struct kl_crash_thread {
    kl_crash_scope scope;
    int role; /* enum kl_thread_role; zero for threads keel did not mark */
    unsigned worker;
} kl_crash_thread;

/* The calling thread's. volatile: a signal handler on the same thread reads
 * it at any instruction. */
extern KL_THREAD_LOCAL volatile kl_crash_thread kl_crash_self;

static inline kl_crash_scope kl_crash_enter(const char *module, uintptr_t code)
{
    kl_crash_scope saved = {kl_crash_self.scope.module, kl_crash_self.scope.code};
    kl_crash_self.scope.module = module;
    kl_crash_self.scope.code = code;
    return saved;
}

static inline void kl_crash_leave(kl_crash_scope saved)
{
    kl_crash_self.scope.module = saved.module;
    kl_crash_self.scope.code = saved.code;
}

/* Runs `stmt`, a call into module `name`'s hook, with the crash report
 * knowing it: KL_IN_MODULE(m->name, rc = m->desc.load(m)). Nests. */
#define KL_IN_MODULE(name, stmt)                                                                   \
    do {                                                                                           \
        kl_crash_scope kl_crash_saved_ = kl_crash_enter((name), 0);                                \
        stmt;                                                                                      \
        kl_crash_leave(kl_crash_saved_);                                                           \
    } while (0)

/* The same for a callback whose module the core does not record (timers,
 * posts): its address tells, should it be needed. */
#define KL_IN_CALLBACK(fn, stmt)                                                                   \
    do {                                                                                           \
        kl_crash_scope kl_crash_saved_ = kl_crash_enter(NULL, (uintptr_t)(fn));                    \
        stmt;                                                                                      \
        kl_crash_leave(kl_crash_saved_);                                                           \
    } while (0)

/* Installs the handlers (the first call; later ones count) and marks the
 * calling thread as the main one. KEEL_OK or KEEL_ERR_IO. Main thread. */
int kl_crash_enable(void);

/* Undoes one kl_crash_enable; the last restores the previous handlers.
 * Main thread, the one that enabled. */
void kl_crash_disable(void);

/* Marks the calling thread as worker `id` (and gives it what a report of
 * a stack overflow needs). Worker thread, before its modules start. */
void kl_crash_worker_thread(unsigned id);

/* Records the shared object holding `addr` (a module's descriptor) as
 * module `name` loaded from `path`. Main thread, while modules load. */
void kl_crash_add_module(const char *name, const char *path, const void *addr);

/* Names the module file the main thread is opening (the dynamic loader
 * maps and relocates it, and runs its constructors), or NULL once that is
 * over: a fault in there (a truncated file gives SIGBUS when the loader
 * touches the part that is missing) is reported against the file, before
 * any module is recorded. `path` stays valid until the NULL call. Main
 * thread. */
void kl_crash_opening(const char *path);

/* For the platform's handler: writes the report line (timestamp to "\n")
 * into buf and returns its length. `what` names the signal ("SIGSEGV
 * (segmentation fault)"); addrs are code addresses, innermost first, of
 * which the first npc are exact (the faulting instruction) and the rest
 * return addresses. Async-signal-safe: no allocation, no locks, no stdio. */
size_t kl_crash_describe(char *buf, size_t cap, const char *what, const uintptr_t *addrs,
                         size_t naddrs, size_t npc);

/* Formats a number for the handler (async-signal-safe): decimal or hex
 * ("0x1f"), NUL-terminated in buf (24 bytes are enough). */
void kl_crash_format_dec(char *buf, uint64_t value);
void kl_crash_format_hex(char *buf, uint64_t value);

/* "2026-11-29T22:36:42.045Z" (the log's timestamps) for a Unix time, into
 * buf (32 bytes); async-signal-safe, unlike gmtime. */
void kl_crash_format_time(char *buf, int64_t seconds, unsigned ms);

#endif
