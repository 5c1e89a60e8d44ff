/* keel/export.h — symbol visibility for the host library and for modules.
 *
 * KEEL_EXPORT marks the functions libkeel exports to embedding programs.
 * KEEL_MODULE_EXPORT marks the one symbol a module exports (its descriptor).
 * KEEL_HIDDEN keeps a module's private globals out of the dynamic symbol table.
 *
 * Defines an embedder may set (the CMake targets and pkg-config files set
 * them for you):
 *   KEEL_LINKED   code calls libkeel directly instead of through the host table
 *   KEEL_STATIC   libkeel is linked statically (no dllimport on Windows)
 *   KEEL_BUILDING defined only while libkeel itself is compiled
 */
#ifndef KEEL_EXPORT_H
#define KEEL_EXPORT_H

#if defined(_WIN32) || defined(__CYGWIN__)
#define KEEL_MODULE_EXPORT __declspec(dllexport)
#define KEEL_HIDDEN
#if defined(KEEL_STATIC)
#define KEEL_EXPORT
#elif defined(KEEL_BUILDING)
#define KEEL_EXPORT __declspec(dllexport)
#else
#define KEEL_EXPORT __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define KEEL_MODULE_EXPORT __attribute__((visibility("default")))
#define KEEL_EXPORT        __attribute__((visibility("default")))
#define KEEL_HIDDEN        __attribute__((visibility("hidden")))
#else
#define KEEL_MODULE_EXPORT
#define KEEL_EXPORT
#define KEEL_HIDDEN
#endif

#if defined(__MINGW32__)
/* keel_log formats in the host, whose printf is C99's on every Windows
 * build (UCRT, or mingw-w64's own with __USE_MINGW_ANSI_STDIO): check
 * against that, not against old msvcrt's (GCC's "printf" there), which
 * rejects %zu and %lld. */
#define KEEL_PRINTF(fmt, args) __attribute__((format(gnu_printf, fmt, args)))
#elif defined(__GNUC__) || defined(__clang__)
#define KEEL_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define KEEL_PRINTF(fmt, args)
#endif

/* Every sized struct a module fills (keel_protocol, keel_http_filter,
 * keel_metric_desc, keel_connect_options...) names only the fields it
 * uses: C leaves the rest zero without a word, and so does C++20, but g++
 * and clang++ warn about each omitted field under -Wextra
 * (-Wmissing-field-initializers), and -Werror makes that fatal. In C++,
 * put such definitions between these two (no-ops in C):
 *
 *     KEEL_DESIGNATED_BEGIN
 *     static const keel_protocol proto = {.size = sizeof(keel_protocol),
 *                                         .name = "x", .on_data = on_data};
 *     KEEL_DESIGNATED_END
 *
 * or value-initialise and assign (`keel_protocol proto{}; proto.size =
 * ...`). Default member initialisers in the headers would silence the
 * warning too, but they make the structs non-trivial in C++, and every
 * memset of one would then trip -Wclass-memaccess instead. */
#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#define KEEL_DESIGNATED_BEGIN                                                                      \
    _Pragma("GCC diagnostic push")                                                                 \
        _Pragma("GCC diagnostic ignored \"-Wmissing-field-initializers\"")
#define KEEL_DESIGNATED_END _Pragma("GCC diagnostic pop")
#else
#define KEEL_DESIGNATED_BEGIN
#define KEEL_DESIGNATED_END
#endif

#endif
