/* keel/module.h — the module descriptor, the one symbol a module exports.
 *
 * A module is described by a keel_module_desc named keel_module_<name>,
 * written with KEEL_MODULE:
 *
 *     KEEL_MODULE(echo,
 *                 .version = "1.0.0",
 *                 .load = echo_load,
 *                 .worker_state_size = sizeof(struct echo_worker));
 *
 * The host looks up keel_module_<name> in mod_<name>.so (.dylib, .dll), or
 * takes the descriptor directly from an embedding program through
 * keel_server_add_module().
 */
#ifndef KEEL_MODULE_H
#define KEEL_MODULE_H

#include "config.h"
#include "export.h"
#include "types.h"
#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

struct keel_api;

/* Lifecycle, in order:
 *   load    once per process, on the main thread, after the config is read
 *           and every module this one requires has loaded. Read config,
 *           register protocols/transports, publish and look up services.
 *           The number of workers is already known
 *           (keel_module_worker_count, ABI 1.3), so what the workers will
 *           share can be sized here.
 *   start   on each worker's thread before it accepts connections.
 *           worker_state is this module's zeroed per-worker block.
 *   stop    on each worker's thread after its last connection closed, its
 *           outbound attempts ended and its keel_worker_offload calls
 *           came back (their done ran), and after the posts accepted.
 *   unload  once, on the main thread, after every worker has stopped; the
 *           shared object stays mapped until the process exits.
 * and, outside that order (ABI 1.8; a module built for an older minor
 * never has them):
 *   stopping  on each worker's thread when that worker begins its
 *           graceful stop (SIGTERM, keel_server_stop, or this process
 *           draining after a reload handed over; keel_worker_stopping
 *           says which): its listeners close and its connections get
 *           on_shutdown right after. What a module used to poll
 *           keel_worker_stopping() from a timer for: close idle outbound
 *           connections, stop timers and subscriptions that would keep
 *           the drain waiting, refuse new work. Once per worker, before
 *           stop, and never for a worker whose start failed. The worker
 *           still runs: timers fire and posts run until stop (stop them
 *           here or in stop; see keel_timer_stop).
 *   reopen  once on the main thread when keel is asked to reopen its log
 *           files (SIGUSR1, `keel -s reopen`; POSIX only), after the
 *           error log and the access logs were reopened: open again, by
 *           name, the files the module writes (logrotate renamed them).
 *           The main thread rather than each worker, because such files
 *           are module-wide (opened in load, written under the module's
 *           own lock or from its own thread) and the rotation is one
 *           event; a module with per-worker files posts to its workers
 *           from here (keel_worker_post). Workers serve meanwhile: the
 *           module swaps the file under its own lock.
 * Any callback may be NULL. A negative status from load or start stops the
 * server's start-up with a message naming the module.
 *
 * Failures undo themselves: when load fails, unload is NOT called, so load
 * releases what it allocated (and any module data it set) before
 * returning the error; what it registered (protocols, routes, filters,
 * services) is dropped with the server and needs no undoing. Modules
 * loaded before it did succeed and are unloaded as usual. Likewise when
 * start fails on a worker, stop is not called for that worker: start
 * releases what it took; the workers where it succeeded get their stop.
 *
 * Per-worker state: worker_state_size zeroed bytes per worker, allocated
 * by the core before start and freed by it after stop (the module frees in
 * stop what it hung on the block, not the block). It belongs to that
 * worker's thread: keel hands it out there only (start, stop,
 * keel_worker_state), and another thread (a module's own, the thread pool)
 * may read or write it only under the module's own synchronisation, and
 * never after stop. */
typedef struct keel_module_desc {
    size_t size;        /* sizeof(keel_module_desc) as the module was built */
    uint32_t abi_major; /* KEEL_ABI_MAJOR the module was built against */
    uint32_t abi_minor; /* KEEL_TARGET_ABI_MINOR: the oldest host minor it loads on */
    const char *name;   /* must match the file name: mod_<name> */
    /* Where the host stores its function table before calling load; NULL
     * for code compiled with KEEL_LINKED (it calls libkeel directly), which
     * only a descriptor compiled into the program may be: keel refuses a
     * module file whose slot is NULL.
     * KEEL_MODULE fills the fields up to here; they come first so that the
     * macro's designated initialisers stay in declaration order (C++20). */
    const struct keel_api **api;
    const char *version;
    /* NULL-terminated list of module names that must be loaded first.
     * A name written "?name" (ABI 1.4) is optional: the module uses it
     * when it is loaded (websocket uses deflate), so it must come first
     * if the config lists it, and its absence is no error. (Not called
     * `requires`: that is a C++20 keyword.) */
    const char *const *dependencies;
    /* Bytes of zeroed per-worker state the core allocates for this module. */
    size_t worker_state_size;

    int (*load)(keel_module *module);
    int (*start)(keel_module *module, keel_worker *worker, void *worker_state);
    void (*stop)(keel_module *module, keel_worker *worker, void *worker_state);
    void (*unload)(keel_module *module);

    /* The fields below exist only for the ABI minor a module targets
     * (KEEL_TARGET_ABI_MINOR): setting one a host of that minor does not
     * know is a compile error, never a hook an older host ignores. The
     * descriptor's size says which the module has; a host reads the rest
     * as NULL. */
#if KEEL_TARGET_ABI_MINOR >= 7
    /* ABI 1.7: the module's configuration keys (keel/config.h). The core
     * validates the module's section against them before load and keeps
     * the parsed struct for keel_module_config(). NULL: the module reads
     * its section with the keel_config_* getters. */
    const keel_config_schema *config;
#endif
#if KEEL_TARGET_ABI_MINOR >= 8
    /* ABI 1.8: see the lifecycle above. */
    void (*stopping)(keel_module *module, keel_worker *worker, void *worker_state);
    void (*reopen)(keel_module *module);
#endif
} keel_module_desc;

#define KEEL_MODULE_SYMBOL_PREFIX "keel_module_"

/* In C++ the descriptor needs C linkage to keep its name, and an explicit
 * extern to be exported at all (a const object is internal otherwise).
 * KEEL_EXTERN_DECL_ starts a declaration that is not a definition: in C++
 * `extern "C"` alone says so (`extern "C" extern` is an error). */
#ifdef __cplusplus
#define KEEL_EXTERN_C_    extern "C"
#define KEEL_EXTERN_DECL_ extern "C"
#else
#define KEEL_EXTERN_C_
#define KEEL_EXTERN_DECL_ extern
#endif

#if defined(KEEL_LINKED)
#define KEEL_MODULE_API_SLOT_ NULL
#define KEEL_MODULE_API_DEFINITION_
#else
/* Each module shared object holds its own private pointer to the host's
 * table; KEEL_MODULE defines it and the host fills it before load. */
extern KEEL_HIDDEN const struct keel_api *keel__api;
#define KEEL_MODULE_API_SLOT_ &keel__api
#ifdef __cplusplus
/* The braced form gives C linkage without declaring the variable extern
 * (`extern "C" T x = 0;` is an extern declaration with an initialiser,
 * which g++ warns about). */
#define KEEL_MODULE_API_DEFINITION_                                                                \
    extern "C" {                                                                                   \
    KEEL_HIDDEN const struct keel_api *keel__api = nullptr;                                        \
    }
#else
#define KEEL_MODULE_API_DEFINITION_ KEEL_HIDDEN const struct keel_api *keel__api = 0;
#endif
#endif

/* Declares the descriptor of a module compiled into an embedding program,
 * so it can be passed to keel_server_add_module(). */
#define KEEL_MODULE_DECLARE(ident) KEEL_EXTERN_DECL_ const keel_module_desc keel_module_##ident

/* C leaves the fields a designated initialiser omits zero without a word;
 * g++ and clang++ warn about each one under -Wextra
 * (-Wmissing-field-initializers), although C++20 zero-initialises them
 * too. A descriptor names only the hooks it has, so in C++ the warning is
 * switched off around the definition, and only there. The pop comes after
 * the definition's closing brace, in front of a redeclaration that takes
 * the caller's semicolon. */
#define KEEL_MODULE_DIAG_PUSH_ KEEL_DESIGNATED_BEGIN
#define KEEL_MODULE_DIAG_POP_  KEEL_DESIGNATED_END

/* clang-format off */
/* Defines the module's descriptor. `ident` is the module's name as an
 * identifier; the remaining arguments are designated initialisers for the
 * other fields of keel_module_desc, in declaration order (C++20 requires
 * it; C does not mind). */
#define KEEL_MODULE(ident, ...)                                                                    \
    KEEL_MODULE_API_DEFINITION_                                                                    \
    KEEL_MODULE_DIAG_PUSH_                                                                         \
    KEEL_EXTERN_C_ KEEL_MODULE_EXPORT const keel_module_desc keel_module_##ident = {               \
        .size = sizeof(keel_module_desc),                                                          \
        .abi_major = KEEL_ABI_MAJOR,                                                               \
        .abi_minor = KEEL_TARGET_ABI_MINOR,                                                        \
        .name = #ident,                                                                            \
        .api = KEEL_MODULE_API_SLOT_,                                                              \
        __VA_ARGS__};                                                                              \
    KEEL_MODULE_DIAG_POP_                                                                          \
    KEEL_EXTERN_DECL_ KEEL_MODULE_EXPORT const keel_module_desc keel_module_##ident
/* clang-format on */

#ifdef __cplusplus
}
#endif

#endif
