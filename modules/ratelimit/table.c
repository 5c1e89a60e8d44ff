/* ratelimit/table.c — the shared table: GCRA's theoretical arrival time
 * (limit_req) and a count of requests in progress (limit_conn), one 64-bit
 * word a key. */
#include "table.h"

#include <stdlib.h>

#define VALUE_BITS 48
#define VALUE_MASK ((1ull << VALUE_BITS) - 1)
/* A key's arrival time runs up to now + tolerance + interval, and is kept
 * in 48 bits of microseconds (8.9 years): a tolerance near that wrapped it
 * to a time long past, so the key was never refused (rate = 1, period =
 * 1440m, burst = 3300). 2^46 us (814 days) leaves room for the interval (at
 * most a day) and years of the clock. */
#define TOLERANCE_MAX (1ull << 46)

static uint64_t tag_of(uint64_t hash)
{
    uint64_t tag = hash >> VALUE_BITS; /* the bits the bucket index does not use */
    return tag ? tag : 1;              /* 0 is an empty slot's */
}

static uint64_t pack(uint64_t tag, uint64_t value)
{
    return tag << VALUE_BITS | (value & VALUE_MASK);
}

int rl_table_init(rl_table *t, size_t entries)
{
    size_t buckets = 1;
    while (buckets * RL_BUCKET < entries)
        buckets *= 2;
    t->slots = calloc(buckets * RL_BUCKET, sizeof *t->slots);
    t->mask = buckets - 1;
    return t->slots != NULL ? 0 : -1;
}

void rl_table_free(rl_table *t)
{
    free((void *)t->slots);
    t->slots = NULL;
}

static rl_atomic64 *bucket_of(rl_table *t, uint64_t hash)
{
    return &t->slots[(size_t)(hash & t->mask) * RL_BUCKET];
}

rl_verdict rl_gcra(rl_table *t, uint64_t hash, uint64_t now_us, uint64_t interval_us,
                   uint64_t burst)
{
    rl_atomic64 *b = bucket_of(t, hash);
    uint64_t tag = tag_of(hash), tolerance = burst * interval_us;
    if (tolerance > TOLERANCE_MAX)
        tolerance = TOLERANCE_MAX;
    now_us &= VALUE_MASK;
    for (;;) {
        /* The key's slot, else the one whose arrival time is the oldest: a
         * time already past holds no more than an empty slot does (GCRA
         * treats them alike), so only a table too small for the keys in
         * force loses anything. */
        size_t at = 0;
        uint64_t old = 0, oldest = UINT64_MAX;
        int found = 0;
        for (size_t i = 0; i < RL_BUCKET; i++) {
            uint64_t v = rl_load(&b[i]);
            if (v >> VALUE_BITS == tag) {
                at = i, old = v, found = 1;
                break;
            }
            if ((v & VALUE_MASK) < oldest)
                at = i, old = v, oldest = v & VALUE_MASK;
        }
        uint64_t tat = found ? old & VALUE_MASK : now_us;
        rl_verdict r = {0};
        r.evicted_live = !found && (old & VALUE_MASK) > now_us;
        if (tat < now_us)
            tat = now_us;
        uint64_t early = tat - now_us;
        if (early > tolerance) {
            r.retry_us = early - tolerance;
            return r;
        }
        if (rl_cas(&b[at], &old, pack(tag, tat + interval_us))) {
            r.allowed = 1;
            r.wait_us = early;
            return r;
        }
        /* Another worker changed the bucket: decide again on what it wrote. */
    }
}

size_t rl_conn_acquire(rl_table *t, uint64_t hash, uint64_t limit, int *evicted)
{
    rl_atomic64 *b = bucket_of(t, hash);
    uint64_t tag = tag_of(hash);
    *evicted = 0;
    for (;;) {
        size_t at = RL_BUCKET;
        uint64_t old = 0;
        for (size_t i = 0; i < RL_BUCKET; i++) {
            uint64_t v = rl_load(&b[i]);
            if (v >> VALUE_BITS == tag) {
                at = i, old = v;
                break;
            }
            if (at == RL_BUCKET && (v & VALUE_MASK) == 0)
                at = i, old = v; /* a free slot, kept unless the key has one */
        }
        if (at == RL_BUCKET) {
            *evicted = 1; /* every slot counts another key's requests */
            return SIZE_MAX;
        }
        uint64_t count = old >> VALUE_BITS == tag ? old & VALUE_MASK : 0;
        if (count >= limit)
            return 0;
        if (rl_cas(&b[at], &old, pack(tag, count + 1)))
            return (size_t)(b - t->slots) + at + 1;
    }
}

void rl_conn_release(rl_table *t, size_t ticket)
{
    rl_atomic64 *slot = &t->slots[ticket - 1];
    uint64_t old = rl_load(slot);
    while ((old & VALUE_MASK) > 0 && !rl_cas(slot, &old, old - 1))
        ;
}
