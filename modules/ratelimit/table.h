/* ratelimit/table.h — the table every worker shares: buckets of 8 slots,
 * each slot one 64-bit word (a 16-bit tag of the key's hash and a 48-bit
 * value) updated with compare-and-swap, so the hot path takes no lock.
 * Memory is fixed at load: 8 bytes a slot. No keel calls: the unit test
 * compiles table.c as it is. */
#ifndef RATELIMIT_TABLE_H
#define RATELIMIT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "atomic64.h"

#define RL_BUCKET 8

typedef struct rl_table {
    rl_atomic64 *slots;
    size_t mask; /* buckets - 1 (a power of two) */
} rl_table;

/* At least `entries` slots (rounded up to a power of two of buckets). */
int rl_table_init(rl_table *t, size_t entries);
void rl_table_free(rl_table *t);

/* What rl_gcra decided. */
typedef struct rl_verdict {
    int allowed;
    uint64_t wait_us;  /* allowed: how early the request is (the delay without nodelay) */
    uint64_t retry_us; /* refused: when a request would conform again */
    int evicted_live;  /* a slot of another key still in force was taken */
} rl_verdict;

/* GCRA (the generic cell rate algorithm, ITU-T I.371; what nginx's
 * limit_req computes as "excess"): one request for key `hash` at now_us,
 * one allowed every interval_us, tolerance burst * interval_us. */
rl_verdict rl_gcra(rl_table *t, uint64_t hash, uint64_t now_us, uint64_t interval_us,
                   uint64_t burst);

/* limit_conn: counts one more request in progress for `hash` unless
 * `limit` are. Returns the slot's index + 1 (for rl_conn_release), 0 when
 * refused, or SIZE_MAX when no slot was free (the request goes
 * uncounted). */
size_t rl_conn_acquire(rl_table *t, uint64_t hash, uint64_t limit, int *evicted);
void rl_conn_release(rl_table *t, size_t ticket);

/* FNV-1a 64, continued from h (start with RL_HASH_INIT). */
#define RL_HASH_INIT 0xcbf29ce484222325ull
static inline uint64_t rl_hash(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* FNV-1a's last byte reaches the high bits (the tag) only through carries:
 * MurmurHash3's finalizer spreads every bit over all 64. */
static inline uint64_t rl_hash_final(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

#endif
