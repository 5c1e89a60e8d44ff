/* Unit tests of the worker's heap of connection deadlines
 * (core/net/timeouts.c): the heap's shape after random operations, idle
 * nodes, the order and time of expiry on a real loop (lazy keys included),
 * closing, and the memory the heap keeps. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include <keel/types.h>
#include <uv.h>

#include "net/timeouts.h"

/* A small deterministic generator, so that a failure can be reproduced. */
static uint64_t rng_state;

static void rng_seed(uint64_t seed)
{
    rng_state = seed ? seed : 1;
}

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static uint32_t rng_between(uint32_t lo, uint32_t hi)
{
    return lo + rng() % (hi - lo + 1);
}

/* Time a before time b on a clock of 32 bits that wraps, written apart
 * from the heap's own comparison so that a wrong one shows. */
static int wraps_before(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) < 0;
}

/* The heap's invariants; a message naming the first broken one, or NULL. */
static const char *heap_broken(const kl_timeouts *t, uint32_t *where)
{
    if (t->count > t->cap)
        return "count exceeds cap";
    for (uint32_t i = 0; i < t->count; i++) {
        const kl_tnode *n = t->heap[i];
        *where = i;
        if (n == NULL)
            return "NULL slot inside the heap";
        if (n->index != i)
            return "a node's index does not match its slot";
        if (wraps_before(n->deadline, n->key))
            return "a key later than its node's deadline";
        if (i > 0 && wraps_before(n->key, t->heap[(i - 1) / 2]->key))
            return "a parent's key is later than its child's";
    }
    return NULL;
}

/* `when` names the step, `n` its number (-1: none). */
#define assert_heap(t, when, n)                                                                    \
    do {                                                                                           \
        uint32_t at_ = 0;                                                                          \
        const char *why_ = heap_broken((t), &at_);                                                 \
        cr_assert(why_ == NULL, "heap broken at slot %u: %s (%s %d)", at_, why_ ? why_ : "",       \
                  (when), (n));                                                                    \
    } while (0)

static void no_expiry(kl_timeouts *t, kl_tnode *node)
{
    (void)t;
    (void)node;
}

/* Closes the heap's timer and the loop. */
static void finish_loop(kl_timeouts *t, uv_loop_t *loop)
{
    kl_timeouts_close(t);
    uv_run(loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(loop), 0, "a handle was left open on the loop");
}

/* ---- the heap's shape -------------------------------------------------------- */

#define NODES 600
#define OPS   20000

/* Moves the heap's clock so that it reads `at` now. */
static void clock_at(kl_timeouts *t, uint32_t at)
{
    t->origin = 0;
    t->origin = kl_timeouts_now(t) - at;
    cr_assert_eq(kl_timeouts_now(t), at);
}

/* Random operations with the heap's clock reading `start` at first. */
static void random_operations(uint32_t start)
{
    uv_loop_t loop;
    kl_timeouts t;
    static kl_tnode nodes[NODES];
    cr_assert_eq(uv_loop_init(&loop), 0);
    cr_assert_eq(kl_timeouts_init(&t, &loop, no_expiry), KEEL_OK);
    clock_at(&t, start);
    for (int i = 0; i < NODES; i++)
        kl_tnode_init(&nodes[i]);
    rng_seed(0x5eed1234);

    for (int op = 0; op < OPS; op++) {
        kl_tnode *n = &nodes[rng() % NODES];
        uint32_t what = rng() % 10;
        if (op % 997 == 0)
            uv_update_time(&loop); /* let the clock move now and then */
        if (what < 5) {
            /* Any duration: tiny, ordinary, beyond the clamp, and 0. */
            uint64_t d;
            switch (rng() % 5) {
            case 0:
                d = rng_between(1, 30);
                break;
            case 1:
                d = rng_between(1, 120000);
                break;
            case 2:
                d = (uint64_t)rng() * 4096 + rng(); /* up to ~2^44 */
                break;
            case 3:
                d = UINT64_MAX - rng() % 3;
                break;
            default:
                d = 0;
                break;
            }
            cr_assert_eq(kl_timeouts_set(&t, n, d), KEEL_OK);
            if (d == 0) {
                cr_assert(!kl_tnode_scheduled(n), "set(0) leaves the node idle");
            } else {
                cr_assert(kl_tnode_scheduled(n));
                uint32_t want = d > KL_TIMEOUT_MAX_MS ? KL_TIMEOUT_MAX_MS : (uint32_t)d;
                cr_assert_eq(n->duration, want, "duration %llu kept as %u", (unsigned long long)d,
                             n->duration);
                cr_assert_eq(n->deadline, (uint32_t)(kl_timeouts_now(&t) + want),
                             "deadline is now + duration");
            }
        } else if (what < 8) {
            int was = kl_tnode_scheduled(n);
            uint32_t before = n->deadline;
            kl_timeouts_touch(&t, n);
            cr_assert_eq(kl_tnode_scheduled(n), was, "touch never schedules or removes");
            if (was)
                cr_assert_eq(n->deadline, (uint32_t)(kl_timeouts_now(&t) + n->duration));
            else
                cr_assert_eq(n->deadline, before, "touching an idle node changes nothing");
        } else {
            kl_timeouts_remove(&t, n);
            cr_assert(!kl_tnode_scheduled(n));
        }
        assert_heap(&t, "after operation", op);

        /* Every 100 operations, the heap holds exactly the scheduled nodes. */
        if (op % 100 == 0) {
            uint32_t scheduled = 0;
            for (int i = 0; i < NODES; i++) {
                if (!kl_tnode_scheduled(&nodes[i]))
                    continue;
                scheduled++;
                cr_assert(nodes[i].index < t.count && t.heap[nodes[i].index] == &nodes[i],
                          "node %d says slot %u but is not there", i, nodes[i].index);
            }
            cr_assert_eq(scheduled, t.count, "%u scheduled nodes, %u in the heap", scheduled,
                         t.count);
        }
    }
    finish_loop(&t, &loop);
}

Test(timeouts, heap_invariant_after_random_operations, .timeout = 30)
{
    random_operations(1000);
}

/* The clock's 32 bits wrap a minute in, amid deadlines of up to two
 * minutes: the order holds across it. */
Test(timeouts, heap_invariant_across_the_clocks_wrap, .timeout = 30)
{
    random_operations(UINT32_MAX - 60000);
}

Test(timeouts, removing_an_idle_node_is_a_no_op, .timeout = 10)
{
    uv_loop_t loop;
    kl_timeouts t;
    kl_tnode nodes[8], idle;
    cr_assert_eq(uv_loop_init(&loop), 0);
    cr_assert_eq(kl_timeouts_init(&t, &loop, no_expiry), KEEL_OK);

    /* On an empty heap, that never allocated. */
    kl_tnode_init(&idle);
    kl_timeouts_remove(&t, &idle);
    cr_assert_eq(t.count, 0);
    cr_assert(!kl_tnode_scheduled(&idle));

    for (int i = 0; i < 8; i++) {
        kl_tnode_init(&nodes[i]);
        cr_assert_eq(kl_timeouts_set(&t, &nodes[i], 100 + 10 * (uint64_t)(8 - i)), KEEL_OK);
    }
    kl_tnode *before[8];
    memcpy(before, t.heap, sizeof before);
    uint32_t cap = t.cap;

    kl_timeouts_remove(&t, &idle);
    kl_timeouts_remove(&t, &idle);
    cr_assert_eq(t.count, 8, "an idle node's removal changed the count");
    cr_assert_eq(t.cap, cap);
    cr_assert(memcmp(before, t.heap, sizeof before) == 0, "an idle node's removal moved nodes");

    /* A removed node is idle: removing it again changes nothing either. */
    kl_timeouts_remove(&t, &nodes[3]);
    cr_assert_eq(t.count, 7);
    memcpy(before, t.heap, 7 * sizeof *before);
    kl_timeouts_remove(&t, &nodes[3]);
    cr_assert_eq(t.count, 7);
    cr_assert(memcmp(before, t.heap, 7 * sizeof *before) == 0);
    assert_heap(&t, "after removals", -1);

    /* set(0) on an idle node is a removal too. */
    cr_assert_eq(kl_timeouts_set(&t, &idle, 0), KEEL_OK);
    cr_assert_eq(t.count, 7);
    cr_assert(!kl_tnode_scheduled(&idle));
    finish_loop(&t, &loop);
}

/* ---- expiry on a real loop ------------------------------------------------------ */

#define LOOP_NODES 40

static struct {
    uv_loop_t loop;
    kl_timeouts t;
    kl_tnode nodes[LOOP_NODES];
    uint64_t deadline[LOOP_NODES]; /* when it should expire (loop time) */
    uint64_t original[LOOP_NODES]; /* its first deadline */
    uint64_t fired[LOOP_NODES];    /* when it did, 0 if not yet */
    int nfired[LOOP_NODES];
    int order[LOOP_NODES * 2];
    int norder;
    int rearm_node; /* schedules itself again once from its expiry */
    int expected;   /* expiries to wait for */
    int total;
    uv_timer_t phase, watchdog;
} lp;

static void on_expire(kl_timeouts *t, kl_tnode *node)
{
    int i = (int)(node - lp.nodes);
    uint64_t now = uv_now(&lp.loop);
    cr_assert(i >= 0 && i < LOOP_NODES, "expiry of a node that is not ours");
    cr_assert(!kl_tnode_scheduled(node), "a node is idle when it expires");
    lp.order[lp.norder++] = i;
    lp.fired[i] = now;
    lp.nfired[i]++;
    lp.total++;
    if (i == lp.rearm_node && lp.nfired[i] == 1) {
        /* Scheduled again from its own expiry: it must expire once more. */
        cr_assert_eq(kl_timeouts_set(t, node, 7), KEEL_OK);
        lp.deadline[i] = now + 7;
        lp.expected++;
    }
    if (lp.total == lp.expected)
        uv_stop(&lp.loop);
}

static void on_watchdog(uv_timer_t *timer)
{
    (void)timer;
    uv_stop(&lp.loop);
}

/* 6 ms in: some nodes are touched (their deadline moves later, their key
 * stays), some are set to a longer duration (the same, lazily), some to a
 * shorter one (they move forward in the heap). */
static void on_phase(uv_timer_t *timer)
{
    (void)timer;
    uint64_t now = uv_now(&lp.loop);
    for (int i = 0; i < LOOP_NODES; i++) {
        kl_tnode *n = &lp.nodes[i];
        /* Overdue ones are left to expire (uv_now is this turn's time). */
        if (!kl_tnode_scheduled(n) || i == lp.rearm_node || lp.deadline[i] <= now + 2)
            continue;
        switch (i % 4) {
        case 0: /* touched: now + its own duration */
            kl_timeouts_touch(&lp.t, n);
            lp.deadline[i] = now + n->duration;
            break;
        case 1: { /* set longer than what is left */
            uint64_t d = (lp.deadline[i] - now) + rng_between(5, 20);
            cr_assert_eq(kl_timeouts_set(&lp.t, n, d), KEEL_OK);
            lp.deadline[i] = now + d;
            break;
        }
        case 2: { /* set shorter: moves forward */
            uint64_t d = rng_between(1, (uint32_t)(lp.deadline[i] - now - 1));
            cr_assert_eq(kl_timeouts_set(&lp.t, n, d), KEEL_OK);
            lp.deadline[i] = now + d;
            break;
        }
        default: /* left alone */
            break;
        }
    }
}

/* With the heap's clock reading `start` at first. */
static void expiry_on_a_loop(uint32_t start_clock)
{
    memset(&lp, 0, sizeof lp);
    cr_assert_eq(uv_loop_init(&lp.loop), 0);
    cr_assert_eq(kl_timeouts_init(&lp.t, &lp.loop, on_expire), KEEL_OK);
    rng_seed(0xdead10cc);
    /* The heap's timer does not keep the loop alive: the watchdog does
     * (and ends a run that would otherwise never finish). */
    uv_timer_init(&lp.loop, &lp.watchdog);
    uv_timer_start(&lp.watchdog, on_watchdog, 5000, 0);
    uv_timer_init(&lp.loop, &lp.phase);
    uv_update_time(&lp.loop);
    clock_at(&lp.t, start_clock);
    uint64_t start = uv_now(&lp.loop);
    lp.rearm_node = 5;
    for (int i = 0; i < LOOP_NODES; i++) {
        kl_tnode_init(&lp.nodes[i]);
        /* The ones on_phase changes mostly outlive its 6 ms. */
        uint64_t d = i % 4 == 3 ? rng_between(1, 30) : rng_between(4, 30);
        cr_assert_eq(kl_timeouts_set(&lp.t, &lp.nodes[i], d), KEEL_OK);
        lp.deadline[i] = lp.original[i] = start + d;
    }
    lp.expected = LOOP_NODES;
    uv_timer_start(&lp.phase, on_phase, 6, 0);
    uv_run(&lp.loop, UV_RUN_DEFAULT);

    cr_assert_eq(lp.total, lp.expected, "%d of %d expiries came within 5 s", lp.total, lp.expected);
    int moved_later = 0, moved_earlier = 0;
    for (int i = 0; i < LOOP_NODES; i++) {
        cr_assert_eq(lp.nfired[i], i == lp.rearm_node ? 2 : 1, "node %d expired %d times", i,
                     lp.nfired[i]);
        cr_assert_geq(lp.fired[i], lp.deadline[i],
                      "node %d expired at +%llu ms, before its deadline +%llu ms (first key "
                      "+%llu ms)",
                      i, (unsigned long long)(lp.fired[i] - start),
                      (unsigned long long)(lp.deadline[i] - start),
                      (unsigned long long)(lp.original[i] - start));
        /* Late by a stalled machine, perhaps; never by a lost wake-up. */
        cr_assert_leq(lp.fired[i], lp.deadline[i] + 300, "node %d expired %llu ms late", i,
                      (unsigned long long)(lp.fired[i] - lp.deadline[i]));
        if (i != lp.rearm_node && lp.deadline[i] > lp.original[i])
            moved_later++;
        if (lp.deadline[i] < lp.original[i])
            moved_earlier++;
    }
    cr_assert(moved_later >= 5 && moved_earlier >= 3,
              "the test exercised too few lazy keys (%d later, %d earlier)", moved_later,
              moved_earlier);
    /* No node is left overdue while another expires: whoever's deadline had
     * come when j expired has expired by then (in the same pass or before). */
    for (int a = 0; a < lp.norder; a++) {
        int j = lp.order[a];
        for (int i = 0; i < LOOP_NODES; i++) {
            if (i == lp.rearm_node)
                continue;
            if (lp.deadline[i] <= lp.fired[j])
                cr_assert_leq(lp.fired[i], lp.fired[j],
                              "node %d (deadline +%llu) expired at +%llu, after node %d at +%llu",
                              i, (unsigned long long)(lp.deadline[i] - start),
                              (unsigned long long)(lp.fired[i] - start), j,
                              (unsigned long long)(lp.fired[j] - start));
        }
    }
    uv_close((uv_handle_t *)&lp.watchdog, NULL);
    uv_close((uv_handle_t *)&lp.phase, NULL);
    finish_loop(&lp.t, &lp.loop);
}

Test(timeouts, expiry_follows_deadlines_on_a_loop, .timeout = 20)
{
    expiry_on_a_loop(1000);
}

/* The heap's 32-bit clock wraps 10 ms in, amid deadlines of up to 30 ms. */
Test(timeouts, expiry_follows_deadlines_across_the_clocks_wrap, .timeout = 20)
{
    expiry_on_a_loop(UINT32_MAX - 10);
}

/* A node set to a shorter duration than the one in force moves forward at
 * once: it does not wait for its old key. */
static struct {
    uv_loop_t loop;
    kl_timeouts t;
    kl_tnode a, b;
    kl_tnode *first;
    uint64_t at;
    uv_timer_t watchdog;
} sh;

static void on_short_expire(kl_timeouts *t, kl_tnode *node)
{
    (void)t;
    if (sh.first == NULL) {
        sh.first = node;
        sh.at = uv_now(&sh.loop);
    }
    uv_stop(&sh.loop);
}

static void on_short_watchdog(uv_timer_t *timer)
{
    (void)timer;
    uv_stop(&sh.loop);
}

Test(timeouts, a_shorter_duration_moves_a_node_forward, .timeout = 10)
{
    cr_assert_eq(uv_loop_init(&sh.loop), 0);
    cr_assert_eq(kl_timeouts_init(&sh.t, &sh.loop, on_short_expire), KEEL_OK);
    uv_timer_init(&sh.loop, &sh.watchdog);
    uv_timer_start(&sh.watchdog, on_short_watchdog, 3000, 0);
    kl_tnode_init(&sh.a);
    kl_tnode_init(&sh.b);
    uv_update_time(&sh.loop);
    uint64_t start = uv_now(&sh.loop);
    cr_assert_eq(kl_timeouts_set(&sh.t, &sh.a, 60000), KEEL_OK);
    cr_assert_eq(kl_timeouts_set(&sh.t, &sh.b, 1000), KEEL_OK);
    cr_assert_eq(sh.t.heap[0], &sh.b);
    cr_assert_eq(kl_timeouts_set(&sh.t, &sh.a, 10), KEEL_OK);
    cr_assert_eq(sh.t.heap[0], &sh.a, "the shortened node is not at the top");
    cr_assert_eq(sh.a.key, sh.a.deadline, "the shortened node's key is its new deadline");
    assert_heap(&sh.t, "after shortening", -1);
    uv_run(&sh.loop, UV_RUN_DEFAULT);
    cr_assert_eq(sh.first, &sh.a, "the shortened node did not expire first");
    cr_assert(sh.at >= start + 10 && sh.at < start + 900,
              "the shortened node expired at +%llu ms, not near +10 ms",
              (unsigned long long)(sh.at - start));
    uv_close((uv_handle_t *)&sh.watchdog, NULL);
    finish_loop(&sh.t, &sh.loop);
}

/* ---- closing and memory ------------------------------------------------------------ */

Test(timeouts, close_leaves_nodes_idle, .timeout = 10)
{
    uv_loop_t loop;
    kl_timeouts t;
    static kl_tnode nodes[300];
    cr_assert_eq(uv_loop_init(&loop), 0);
    cr_assert_eq(kl_timeouts_init(&t, &loop, no_expiry), KEEL_OK);
    for (int i = 0; i < 300; i++) {
        kl_tnode_init(&nodes[i]);
        cr_assert_eq(kl_timeouts_set(&t, &nodes[i], 1000 + (uint64_t)i), KEEL_OK);
    }
    kl_timeouts_close(&t);
    for (int i = 0; i < 300; i++)
        cr_assert(!kl_tnode_scheduled(&nodes[i]), "node %d still scheduled after close", i);
    cr_assert_null(t.heap);
    cr_assert_eq(t.count, 0);
    /* A connection torn down afterwards removes its node: a no-op (under
     * ASan this would catch a use of the freed array). */
    for (int i = 0; i < 300; i++)
        kl_timeouts_remove(&t, &nodes[i]);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0, "the heap's timer was not closed");
}

#define MANY 10000

Test(timeouts, memory_shrinks_after_mass_removal, .timeout = 20)
{
    uv_loop_t loop;
    kl_timeouts t;
    kl_tnode *nodes = calloc(MANY, sizeof *nodes);
    cr_assert_not_null(nodes);
    cr_assert_eq(uv_loop_init(&loop), 0);
    cr_assert_eq(kl_timeouts_init(&t, &loop, no_expiry), KEEL_OK);
    rng_seed(42);
    for (int i = 0; i < MANY; i++) {
        kl_tnode_init(&nodes[i]);
        cr_assert_eq(kl_timeouts_set(&t, &nodes[i], rng_between(1, 100000)), KEEL_OK);
    }
    cr_assert_geq(t.cap, MANY);
    uint32_t peak = t.cap;
    /* Remove all but 10, in a scattered order. */
    for (int i = 0; i < MANY - 10; i++)
        kl_timeouts_remove(&t, &nodes[(i * 7919) % (MANY - 10)]);
    assert_heap(&t, "after mass removal", -1);
    cr_assert_eq(t.count, 10);
    cr_assert(t.cap <= 64 || t.cap < 4 * t.count,
              "cap %u for %u nodes after removal (peak %u): memory is not given back", t.cap,
              t.count, peak);
    for (int i = MANY - 10; i < MANY; i++)
        kl_timeouts_remove(&t, &nodes[i]);
    cr_assert_eq(t.count, 0);
    cr_assert_leq(t.cap, 64, "cap %u with an empty heap", t.cap);
    finish_loop(&t, &loop);
    free(nodes);
}

/* The same through expiry: a burst of short timeouts that all expire leaves
 * a small heap behind. */
static struct {
    uv_loop_t loop;
    kl_timeouts t;
    int expired;
} burst;

static void on_burst_expire(kl_timeouts *t, kl_tnode *node)
{
    (void)t;
    (void)node;
    if (++burst.expired == MANY)
        uv_stop(&burst.loop);
}

static void on_burst_watchdog(uv_timer_t *timer)
{
    uv_stop(timer->loop);
}

Test(timeouts, memory_shrinks_after_mass_expiry, .timeout = 20)
{
    kl_tnode *nodes = calloc(MANY, sizeof *nodes);
    uv_timer_t watchdog;
    cr_assert_not_null(nodes);
    cr_assert_eq(uv_loop_init(&burst.loop), 0);
    cr_assert_eq(kl_timeouts_init(&burst.t, &burst.loop, on_burst_expire), KEEL_OK);
    uv_timer_init(&burst.loop, &watchdog);
    uv_timer_start(&watchdog, on_burst_watchdog, 5000, 0);
    rng_seed(7);
    for (int i = 0; i < MANY; i++) {
        kl_tnode_init(&nodes[i]);
        cr_assert_eq(kl_timeouts_set(&burst.t, &nodes[i], rng_between(1, 20)), KEEL_OK);
    }
    uv_run(&burst.loop, UV_RUN_DEFAULT);
    cr_assert_eq(burst.expired, MANY, "%d of %d expired", burst.expired, MANY);
    cr_assert_eq(burst.t.count, 0);
    cr_assert_leq(burst.t.cap, 64, "cap %u after every node expired", burst.t.cap);
    uv_close((uv_handle_t *)&watchdog, NULL);
    finish_loop(&burst.t, &burst.loop);
    free(nodes);
}
