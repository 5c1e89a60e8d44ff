/* ratelimit's shared table (modules/ratelimit/table.c, compiled in): GCRA's
 * burst, delay and Retry-After arithmetic, concurrent updates from several
 * threads losing none, limit_conn's counts, and eviction in a full
 * bucket. */
#include <criterion/criterion.h>
#include <uv.h>

#include "table.h"

#define KEY(n) rl_hash_final(rl_hash(RL_HASH_INIT, &(int){n}, sizeof(int)))

Test(ratelimit_table, burst_delay_and_retry)
{
    rl_table t;
    cr_assert_eq(rl_table_init(&t, 64), 0);
    uint64_t k = KEY(1);
    /* One every 100 us, burst 2: three at once, waiting 0, 100, 200. */
    for (uint64_t i = 0; i < 3; i++) {
        rl_verdict v = rl_gcra(&t, k, 1000, 100, 2);
        cr_expect(v.allowed, "request %llu", (unsigned long long)i);
        cr_expect_eq(v.wait_us, i * 100);
    }
    rl_verdict v = rl_gcra(&t, k, 1000, 100, 2);
    cr_expect(!v.allowed);
    cr_expect_eq(v.retry_us, 100, "retry in %llu", (unsigned long long)v.retry_us);
    /* A refusal changes nothing; 100 us later one conforms again. */
    cr_expect(!rl_gcra(&t, k, 1050, 100, 2).allowed);
    v = rl_gcra(&t, k, 1100, 100, 2);
    cr_expect(v.allowed && v.wait_us == 200);
    /* Another key is not affected. */
    cr_expect(rl_gcra(&t, KEY(2), 1100, 100, 0).allowed);
    rl_table_free(&t);
}

static rl_table shared;

static void hammer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++)
        cr_assert(rl_gcra(&shared, KEY(7), 1, 1, 1000000).allowed);
}

Test(ratelimit_table, concurrent_updates_lose_nothing)
{
    cr_assert_eq(rl_table_init(&shared, 64), 0);
    uv_thread_t th[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(uv_thread_create(&th[i], hammer, NULL), 0);
    for (int i = 0; i < 4; i++)
        uv_thread_join(&th[i]);
    /* 80,000 requests of 1 us each were counted: the next one is that
     * early. A lost update (a store instead of compare-and-swap) shows
     * as less. */
    rl_verdict v = rl_gcra(&shared, KEY(7), 1, 1, 1000000);
    cr_expect_eq(v.wait_us, 80000, "wait %llu", (unsigned long long)v.wait_us);
    rl_table_free(&shared);
}

Test(ratelimit_table, connections_counted_and_given_back)
{
    rl_table t;
    int evicted;
    cr_assert_eq(rl_table_init(&t, 64), 0);
    size_t a = rl_conn_acquire(&t, KEY(1), 2, &evicted);
    size_t b = rl_conn_acquire(&t, KEY(1), 2, &evicted);
    cr_expect(a != 0 && b != 0 && a == b && !evicted);
    cr_expect_eq(rl_conn_acquire(&t, KEY(1), 2, &evicted), 0);
    cr_expect_neq(rl_conn_acquire(&t, KEY(2), 2, &evicted), 0);
    rl_conn_release(&t, a);
    cr_expect_neq(rl_conn_acquire(&t, KEY(1), 2, &evicted), 0);
    rl_table_free(&t);
}

Test(ratelimit_table, a_full_bucket_gives_its_oldest_slot)
{
    rl_table t;
    cr_assert_eq(rl_table_init(&t, 8), 0); /* one bucket */
    for (int i = 0; i < 8; i++)
        cr_expect(!rl_gcra(&t, KEY(i), 1000 + (uint64_t)i, 1000, 0).evicted_live);
    /* A ninth key takes key 0's slot (the oldest), which was still in force. */
    rl_verdict v = rl_gcra(&t, KEY(100), 1010, 1000, 0);
    cr_expect(v.allowed && v.evicted_live);
    cr_expect(!rl_gcra(&t, KEY(7), 1010, 1000, 0).allowed, "key 7 lost its state");
    cr_expect(rl_gcra(&t, KEY(0), 1010, 1000, 0).allowed, "key 0 was not the one evicted");
    /* Long after, nothing in force is lost by taking a slot. */
    cr_expect(!rl_gcra(&t, KEY(200), 100000, 1000, 0).evicted_live);
    /* limit_conn never takes a slot with requests in progress. */
    rl_table c;
    int evicted;
    cr_assert_eq(rl_table_init(&c, 8), 0);
    for (int i = 0; i < 8; i++)
        cr_expect_neq(rl_conn_acquire(&c, KEY(i), 1, &evicted), 0);
    cr_expect_eq(rl_conn_acquire(&c, KEY(100), 1, &evicted), SIZE_MAX);
    cr_expect(evicted);
    rl_table_free(&c);
    rl_table_free(&t);
}
