/* core/base/atomic.h — the few atomic operations the core needs, on every
 * compiler keel builds with (C11 <stdatomic.h> is missing from MSVC's C). */
#ifndef KEEL_CORE_ATOMIC_H
#define KEEL_CORE_ATOMIC_H

#include <stdint.h>

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
static inline uint64_t kl_atomic_add(volatile uint64_t *p, uint64_t v)
{
    return (uint64_t)_InterlockedExchangeAdd64((volatile __int64 *)p, (__int64)v) + v;
}
static inline uint64_t kl_atomic_load(volatile uint64_t *p)
{
    return (uint64_t)_InterlockedOr64((volatile __int64 *)p, 0);
}
static inline void kl_atomic_store(volatile uint64_t *p, uint64_t v)
{
    _InterlockedExchange64((volatile __int64 *)p, (__int64)v);
}
#else
/* Returns the new value. */
static inline uint64_t kl_atomic_add(volatile uint64_t *p, uint64_t v)
{
    return __atomic_add_fetch(p, v, __ATOMIC_SEQ_CST);
}
static inline uint64_t kl_atomic_load(volatile uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}
static inline void kl_atomic_store(volatile uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}
#endif

static inline uint64_t kl_atomic_sub(volatile uint64_t *p, uint64_t v)
{
    return kl_atomic_add(p, (uint64_t)0 - v);
}

/* Relaxed 64-bit loads and stores: a value one thread writes and others
 * read (per-worker metrics). Not a read-modify-write: on x86-64 and arm64
 * both are plain moves, yet the reader never sees a torn value. */
#if defined(_MSC_VER) && !defined(__clang__)
static inline int64_t kl_relaxed_load64(const int64_t *p)
{
    return *(const volatile int64_t *)p; /* aligned 64-bit accesses are atomic on x64/arm64 */
}
static inline void kl_relaxed_store64(int64_t *p, int64_t v)
{
    *(volatile int64_t *)p = v;
}
#else
static inline int64_t kl_relaxed_load64(const int64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
static inline void kl_relaxed_store64(int64_t *p, int64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
#endif

#endif
