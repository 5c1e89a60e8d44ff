/* keel/api.h — the host's function table and how module code calls it.
 *
 * Modules never link against keel. The host hands every module a pointer to
 * a `struct keel_api` (a table of function pointers generated from
 * keel/api_list.h) before calling its load function. This header turns each
 * table entry into an ordinary-looking call, keel_<name>(...):
 *
 *   - in a module (the default), keel_<name> is a static inline wrapper
 *     that calls through the module's private table pointer;
 *   - with KEEL_LINKED (an embedding program, or libkeel itself), it is a
 *     real function exported by libkeel.
 *
 * Either way module source code is the same.
 */
#ifndef KEEL_API_H
#define KEEL_API_H

#include <stdarg.h>
#include <string.h>

#include "http.h"
#include "metrics.h"
#include "module.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The table. Its size and version let a module check, should it need to,
 * whether the host it runs on has an entry appended after the module's own
 * minor version (the loader already refuses hosts older than the module). */
/* Entries up to the ABI minor the code targets (keel/version.h): a
 * module built for an older host sees the table as that host has it. libkeel
 * itself and embedding programs (KEEL_LINKED) see everything. */
#if defined(KEEL_LINKED)
#define KEEL__WANT(minor) 1
#else
#define KEEL__WANT(minor) ((minor) <= KEEL_TARGET_ABI_MINOR)
#endif

struct keel_api {
    size_t size;
    uint32_t abi_major;
    uint32_t abi_minor;
#define KEEL_FN(ret, name, params, args) ret(*name) params;
#define KEEL_VFN(name, params, args)     void(*name) params;
#include "api_list.h"
#undef KEEL_FN
#undef KEEL_VFN
};

#if defined(KEEL_LINKED)

#define KEEL_FN(ret, name, params, args) KEEL_EXPORT ret keel_##name params;
#define KEEL_VFN(name, params, args)     KEEL_EXPORT void keel_##name params;
#include "api_list.h"
#undef KEEL_FN
#undef KEEL_VFN

/* printf-style logging; see keel_logv in api_list.h. Any thread. */
KEEL_EXPORT void keel_log(keel_module *module, int level, const char *fmt, ...) KEEL_PRINTF(3, 4);

/* printf-style keel_config_errorv (ABI 1.3). Main thread, from load. */
KEEL_EXPORT int keel_config_error(keel_module *module, const char *key, const char *fmt, ...)
    KEEL_PRINTF(3, 4);

#else /* a module: call through the host's table */

#define KEEL_FN(ret, name, params, args)                                                           \
    static inline ret keel_##name params                                                           \
    {                                                                                              \
        return keel__api->name args;                                                               \
    }
#define KEEL_VFN(name, params, args)                                                               \
    static inline void keel_##name params                                                          \
    {                                                                                              \
        keel__api->name args;                                                                      \
    }
#include "api_list.h"
#undef KEEL_FN
#undef KEEL_VFN

/* printf-style logging; see keel_logv in api_list.h. Any thread. */
static inline KEEL_PRINTF(3, 4) void keel_log(keel_module *module, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    keel__api->logv(module, level, fmt, ap);
    va_end(ap);
}

#if KEEL_TARGET_ABI_MINOR >= 3
/* printf-style keel_config_errorv (ABI 1.3): returns KEEL_ERR_CONFIG.
 * Main thread, from load. */
static inline KEEL_PRINTF(3, 4) int keel_config_error(keel_module *module, const char *key,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = keel__api->config_errorv(module, key, fmt, ap);
    va_end(ap);
    return rc;
}
#endif

/* What the targeted minor lacks is declared but unavailable: a call is a
 * compile error (GCC 12+ and clang: `unavailable`; older GCC: `error`,
 * which fires for any call left in the code; MSVC: a deprecation warning,
 * an error under /WX), never a crash on an older host. */
#undef KEEL__WANT
#define KEEL__WANT(minor) ((minor) > KEEL_TARGET_ABI_MINOR)
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define KEEL__UNAVAILABLE __attribute__((unavailable("newer than KEEL_TARGET_ABI_MINOR")))
#elif defined(__GNUC__)
#define KEEL__UNAVAILABLE __attribute__((error("newer than KEEL_TARGET_ABI_MINOR")))
#elif defined(_MSC_VER)
#define KEEL__UNAVAILABLE __declspec(deprecated("newer than KEEL_TARGET_ABI_MINOR"))
#else
#define KEEL__UNAVAILABLE
#endif
#define KEEL_FN(ret, name, params, args) KEEL__UNAVAILABLE ret keel_##name params;
#define KEEL_VFN(name, params, args)     KEEL__UNAVAILABLE void keel_##name params;
#include "api_list.h"
#undef KEEL_FN
#undef KEEL_VFN
#if KEEL_TARGET_ABI_MINOR < 3
/* The printf-style wrapper too: an unavailable function, not an implicit
 * declaration (a mere warning in C89-minded compilers). */
KEEL__UNAVAILABLE int keel_config_error(keel_module *module, const char *key, const char *fmt, ...);
#endif

#endif

#if defined(KEEL_LINKED) || KEEL_TARGET_ABI_MINOR >= 4
/* keel_metric_register for the common case, a counter or gauge series
 * (type KEEL_METRIC_COUNTER or KEEL_METRIC_GAUGE; labels NULL or as in
 * keel_metric_desc): the descriptor's other fields zero. Same rules,
 * thread and errors as keel_metric_register (ABI 1.4). */
static inline int keel_metric_new(keel_module *module, const char *name, const char *help, int type,
                                  const char *labels, keel_metric **out)
{
    keel_metric_desc d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.name = name;
    d.help = help;
    d.type = type;
    d.labels = labels;
    return keel_metric_register(module, &d, out);
}
#endif

/* Opt-in warnings for what handlers should no longer call (never on by
 * default: a module built with -Werror must keep building). Today that is
 * keel_request_conn (see api_list.h): each call goes through a deprecated
 * wrapper, so the compiler points at it. */
#if defined(KEEL_WARN_DEPRECATED) && (defined(KEEL_LINKED) || KEEL_TARGET_ABI_MINOR >= 1)
#if defined(__GNUC__) || defined(__clang__)
#define KEEL__DEPRECATED(why) __attribute__((deprecated(why)))
#elif defined(_MSC_VER)
#define KEEL__DEPRECATED(why) __declspec(deprecated(why))
#else
#define KEEL__DEPRECATED(why)
#endif
KEEL__DEPRECATED("ask the request instead: keel_request_worker, keel_request_peer_name, ...")
static inline keel_conn *keel__request_conn_deprecated(keel_request *req)
{
    return (keel_request_conn)(req);
}
#define keel_request_conn(req) keel__request_conn_deprecated(req)
#undef KEEL__DEPRECATED
#endif

#ifdef __cplusplus
}
#endif

#endif
