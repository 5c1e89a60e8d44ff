/* ratelimit/atomic64.h — the one atomic the shared table needs: a 64-bit
 * word read and compare-and-swapped by every worker. keel/ offers modules
 * no atomics (core/base/atomic.h is the core's own): C11 <stdatomic.h>,
 * or MSVC's Interlocked functions where it has no <stdatomic.h>. */
#ifndef RATELIMIT_ATOMIC64_H
#define RATELIMIT_ATOMIC64_H

#include <stdint.h>

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
typedef volatile int64_t rl_atomic64;
static inline uint64_t rl_load(rl_atomic64 *p)
{
    return (uint64_t)*p; /* aligned 64-bit loads are atomic on x64 and arm64 */
}
static inline int rl_cas(rl_atomic64 *p, uint64_t *expected, uint64_t desired)
{
    int64_t seen = _InterlockedCompareExchange64(p, (int64_t)desired, (int64_t)*expected);
    if ((uint64_t)seen == *expected)
        return 1;
    *expected = (uint64_t)seen;
    return 0;
}
#else
#include <stdatomic.h>
typedef _Atomic uint64_t rl_atomic64;
static inline uint64_t rl_load(rl_atomic64 *p)
{
    return atomic_load_explicit(p, memory_order_relaxed);
}
/* Relaxed: a slot is one self-contained word; nothing else is published
 * through it. */
static inline int rl_cas(rl_atomic64 *p, uint64_t *expected, uint64_t desired)
{
    return atomic_compare_exchange_weak_explicit(p, expected, desired, memory_order_relaxed,
                                                 memory_order_relaxed);
}
#endif

#endif
