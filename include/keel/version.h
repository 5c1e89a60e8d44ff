/* keel/version.h — release and ABI version numbers.
 *
 * The ABI version is what decides whether a module loads: a host accepts a
 * module built against the same ABI major and an ABI minor no greater than
 * its own. The release version is informational only.
 */
#ifndef KEEL_VERSION_H
#define KEEL_VERSION_H

#define KEEL_VERSION_MAJOR  0
#define KEEL_VERSION_MINOR  1
#define KEEL_VERSION_PATCH  0
#define KEEL_VERSION_STRING "0.1.0"

/* Bumped only for a change that breaks modules already built (never done
 * lightly: the tables and structs are designed to grow instead). */
#define KEEL_ABI_MAJOR 1
/* Bumped whenever a function is appended to the host table or a field to a
 * sized struct. */
#define KEEL_ABI_MINOR 13

/* The ABI minor a module is built for. A module that must also load on
 * older hosts defines it before including keel/keel.h (Node-API's
 * NAPI_VERSION is the precedent):
 *
 *     #define KEEL_TARGET_ABI_MINOR 2   // loads on any host with ABI >= 1.2
 *     #include <keel/keel.h>
 *
 * Its descriptor then says 1.2, and calling a function that came later
 * does not compile. Defaults to the headers' own minor. */
#ifndef KEEL_TARGET_ABI_MINOR
#define KEEL_TARGET_ABI_MINOR KEEL_ABI_MINOR
#endif
#if KEEL_TARGET_ABI_MINOR > KEEL_ABI_MINOR || KEEL_TARGET_ABI_MINOR < 0
#error "KEEL_TARGET_ABI_MINOR must be between 0 and KEEL_ABI_MINOR"
#endif

#endif
