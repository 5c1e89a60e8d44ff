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

#include "http.h"
#include "module.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The table. Its size and version let a module check, should it need to,
 * whether the host it runs on has an entry appended after the module's own
 * minor version (the loader already refuses hosts older than the module). */
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

#endif

#ifdef __cplusplus
}
#endif

#endif
