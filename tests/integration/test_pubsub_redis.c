/* The pubsub_redis module: keel instances (two workers each) bridged
 * through a redis-server the test starts on a free loopback port.
 *
 * - Redis is down when they start (they retry), then up; a message
 *   published on one instance reaches the other's subscribers, and the
 *   publisher's own instance delivers it once (not again from Redis); Redis
 *   is killed (the messages meanwhile are counted as dropped, local
 *   delivery goes on) and restarted on the same port, and delivery across
 *   instances resumes.
 * - AUTH: a requirepass password with SELECT, a Redis 6 ACL user, and a
 *   wrong password (refused, logged, counted, retried with back-off).
 * - A Redis paused with SIGSTOP while a publisher floods: what waits for it
 *   stays under max_pending, the rest is dropped and counted, and delivery
 *   resumes after SIGCONT.
 * - A Redis that goes silent is found by PING and reconnected to.
 * - 300 topics (the table grows several times): one Redis subscription
 *   each, all reachable, all unsubscribed once their subscribers leave.
 * - Settings that cannot work refused at start-up.
 * Skipped where redis-server is not installed or the module not built. */
#define _GNU_SOURCE
#include "test_http.h"
#include "ws_test.h"

#include "test_pubsub_redis.h"

static kh_proc *start_keel(unsigned redis_port)
{
    return pr_start_keel(PR_MODULES, "", "127.0.0.1", redis_port, NULL);
}

/* redis-cli PUBSUB what arg against the Redis on port (its output in rr). */
static ht_run_result redis_pubsub(unsigned port, const char *what, const char *arg)
{
    char p[16];
    snprintf(p, sizeof p, "%u", port);
    const char *argv[] = {"redis-cli", "-h", "127.0.0.1", "-p", p, "PUBSUB", what, arg, NULL};
    return ht_run(argv, 5000);
}

/* Subscribers of `channel` Redis counts (PUBSUB NUMSUB), or -1. */
static int redis_numsub(unsigned port, const char *channel)
{
    ht_run_result rr = redis_pubsub(port, "NUMSUB", channel);
    const char *nl = rr.status == 0 ? strchr(rr.out, '\n') : NULL; /* "CHANNEL\nN\n" */
    int n = nl != NULL ? atoi(nl + 1) : -1;
    ht_run_free(&rr);
    return n;
}

Test(pubsub_redis, across_instances_and_a_redis_restart, .timeout = 120, .fini = kh_cleanup_all)
{
    PR_REQUIRE();
    unsigned rport = kh_free_port();
    /* Redis down at start: both instances start anyway and retry. */
    kh_proc *k1 = start_keel(rport), *k2 = start_keel(rport);
    kh_assert(k1, kh_wait_log(k1, "cannot connect", 5000), "k1 says Redis is not there");
    kh_assert(k1, pr_wait_metric(k1, "pubsub_redis_connect_failures_total", 1, 5000) >= 1,
              "the failed attempts are counted");

    wsc *a = pr_subscriber(k1, "room"); /* on k1, with the publisher */
    wsc *b = pr_subscriber(k2, "room"); /* on k2 */
    wsc *pub1 = wsc_open(kh_port(k1, 0), "/t/app", NULL);
    wsc *pub2 = wsc_open(kh_port(k2, 0), "/t/app", NULL);

    /* Local delivery works with Redis down; the message is dropped for
     * the other instance and counted. */
    wsc_send_text(pub1, "pub room while-down");
    kh_assert(k1, pr_receives(a, "while-down", 5000), "local delivery with Redis down");
    kh_assert(k2, !pr_receives(b, "while-down", 300), "nothing can cross without Redis");
    kh_assert(k1, pr_metric(k1, "pubsub_redis_dropped_total{reason=\"link_down\"}") >= 1,
              "the drop is counted, as link_down");

    kh_proc *redis = pr_start_redis(rport);
    kh_assert(k1, kh_wait_log(k1, "(subscribe): connected", 10000), "k1 connects");
    kh_assert(k2, kh_wait_log(k2, "(subscribe): connected", 10000), "k2 connects");
    kh_assert(k2, pr_publish_until_received(pub1, b, "room", "k1-to-k2", 10000),
              "a message from k1 reaches k2's subscriber");
    kh_assert(k1, pr_publish_until_received(pub2, a, "room", "k2-to-k1", 10000),
              "a message from k2 reaches k1's subscriber");
    kh_assert(k1, pr_metric(k1, "pubsub_redis_links_up") == 2, "both links up");

    /* Exactly once on each side, the publisher's instance included
     * (its own message coming back from Redis is skipped). */
    pr_count_frames(a, "", 300);
    pr_count_frames(b, "", 300);
    wsc_send_text(pub1, "pub room once");
    kh_assert(k1, pr_count_frames(a, "once", 700) == 1, "k1's subscriber got it once");
    kh_assert(k2, pr_count_frames(b, "once", 300) == 1, "k2's subscriber got it once");

    /* Redis killed and restarted on the same port: resubscribed, and
     * delivery resumes. */
    kh_stop(redis);
    kh_assert(k1, kh_wait_log(k1, "connection lost", 5000), "k1 saw Redis go");
    double before = pr_metric(k1, "pubsub_redis_dropped_total");
    wsc_send_text(pub1, "pub room lost");
    kh_assert(k1, pr_receives(a, "lost", 5000), "local delivery while Redis restarts");
    kh_assert(k1, pr_wait_metric(k1, "pubsub_redis_dropped_total", before + 1, 5000) > before,
              "counted as dropped");
    redis = pr_start_redis(rport);
    kh_assert(k2, pr_publish_until_received(pub1, b, "room", "after-restart", 15000),
              "delivery k1 -> k2 resumes after the restart");
    kh_assert(k1, pr_publish_until_received(pub2, a, "room", "after-restart-2", 15000),
              "delivery k2 -> k1 resumes after the restart");
    kh_assert(k1, pr_metric(k1, "pubsub_redis_reconnects_total") >= 2, "reconnects counted");

    /* The last subscriber leaving unsubscribes in Redis: k2's message no
     * longer reaches k1 at all (Redis has no subscriber from k1). */
    wsc_close(a);
    kh_assert(k1, kh_wait_log(k1, "wstest topic idle room", 5000), "topic idle on k1");
    kh_assert(k1, KH_WAIT_UNTIL(redis_numsub(rport, "t:room") == 1, 5000),
              "k1 did not unsubscribe in Redis: %d subscribers", redis_numsub(rport, "t:room"));
    kh_assert(k1, pr_metric(k1, "pubsub_redis_received_total") >= 1, "received counted");
    double received = pr_metric(k1, "pubsub_redis_received_total");
    wsc_send_text(pub2, "pub room nobody-on-k1");
    kh_assert(k2, pr_receives(b, "nobody-on-k1", 5000), "k2's own subscriber");
    kh_sleep_ms(300); /* what must not come: a wait for it is a time */
    kh_assert(k1, pr_metric(k1, "pubsub_redis_received_total") == received,
              "k1 still received messages for a topic it left");

    wsc_close(b);
    wsc_close(pub1);
    wsc_close(pub2);
    kh_signal(k1, SIGTERM);
    kh_signal(k2, SIGTERM);
    kh_assert(k1, kh_wait_exit(k1, 10000) == 0, "k1 exits cleanly");
    kh_assert(k2, kh_wait_exit(k2, 10000) == 0, "k2 exits cleanly");
    kh_stop(redis);
    kh_stop(k1);
    kh_stop(k2);
}

/* requirepass for the default user, and an ACL user of Redis 6 that may
 * only use channels under t: (so the module's prefix is all it needs). */
Test(pubsub_redis, auth_password_acl_user_and_a_wrong_password, .timeout = 120,
     .fini = kh_cleanup_all)
{
    PR_REQUIRE();
    unsigned rport = kh_free_port();
    const char *auth[] = {"--requirepass", "s3cret", "--user",   "alice", "on",      ">alicepw",
                          "resetchannels", "&t:*",   "+@pubsub", "+ping", "+select", NULL};
    kh_proc *redis = pr_start_redis_args(rport, auth);

    /* The default user with its password, in database 3 (SELECT after
     * AUTH); alice with hers. Both must meet on the same channels:
     * pub/sub ignores the database. */
    kh_proc *k1 =
        pr_start_keel(PR_MODULES, "", "127.0.0.1", rport, "password = s3cret\ndatabase = 3\n");
    kh_proc *k2 =
        pr_start_keel(PR_MODULES, "", "127.0.0.1", rport, "username = alice\npassword = alicepw\n");
    kh_assert(k1, kh_wait_log(k1, "(publish): connected", 10000), "k1 authenticated");
    kh_assert(k2, kh_wait_log(k2, "(publish): connected", 10000), "k2 (alice) authenticated");
    wsc *a = pr_subscriber(k1, "room"), *b = pr_subscriber(k2, "room");
    wsc *pub1 = wsc_open(kh_port(k1, 0), "/t/app", NULL);
    wsc *pub2 = wsc_open(kh_port(k2, 0), "/t/app", NULL);
    kh_assert(k2, pr_publish_until_received(pub1, b, "room", "k1-to-alice", 10000),
              "k1 (password, database 3) reaches k2 (ACL user)");
    kh_assert(k1, pr_publish_until_received(pub2, a, "room", "alice-to-k1", 10000),
              "k2 (ACL user) reaches k1");
    kh_assert(k1, pr_metric(k1, "pubsub_redis_auth_failures_total") == 0, "no refusal");

    /* A wrong password: refused, logged (once at warn), counted, and tried
     * again after a back-off (reconnect_max = 300ms: several tries in 2s,
     * but not hundreds); the link never counts as up, and local delivery
     * goes on. */
    kh_proc *k3 = pr_start_keel(PR_MODULES, "", "127.0.0.1", rport, "password = wrong\n");
    kh_assert(k3, kh_wait_log(k3, "refused AUTH", 5000), "the refusal is logged");
    kh_assert(k3, strstr(kh_stderr(k3), "WRONGPASS") != NULL, "with Redis's reason");
    kh_sleep_ms(2000); /* the rate of tries over time is the test */
    double fails = pr_metric(k3, "pubsub_redis_auth_failures_total");
    kh_assert(k3, fails >= 4 && fails <= 60, "retried with back-off: %.0f refusals in 2s", fails);
    kh_assert(k3, kh_count_log(k3, "refused AUTH") <= 2, "logged once per link per outage");
    kh_assert(k3, pr_metric(k3, "pubsub_redis_links_up") == 0, "never up");
    wsc *c = pr_subscriber(k3, "room");
    wsc *pub3 = wsc_open(kh_port(k3, 0), "/t/app", NULL);
    wsc_send_text(pub3, "pub room k3-local");
    kh_assert(k3, pr_receives(c, "k3-local", 5000), "local delivery without Redis");
    kh_assert(k1, !pr_receives(a, "k3-local", 300), "nothing crossed");
    kh_assert(k3, pr_metric(k3, "pubsub_redis_dropped_total{reason=\"link_down\"}") >= 1,
              "its publish counted as dropped");

    wsc_close(a);
    wsc_close(b);
    wsc_close(c);
    wsc_close(pub1);
    wsc_close(pub2);
    wsc_close(pub3);
    kh_signal(k3, SIGTERM);
    kh_assert(k3, kh_wait_exit(k3, 10000) == 0, "k3 exits cleanly while retrying");
    kh_stop(k1);
    kh_stop(k2);
    kh_stop(redis);
}

/* Sends "pub TOPIC <n> <padding>" n times; reads what comes back now and
 * then, so the publisher's own connection never stalls on its answers. */
static void flood(wsc *pub, const char *topic, int n)
{
    long long end = kh_now_ms() + 10000;
    char cmd[300];
    char pad[241];
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    for (int i = 0; i < n; i++) {
        snprintf(cmd, sizeof cmd, "pub %s %d %s", topic, i, pad);
        if (wsc_send_text(pub, cmd) != 0 || kh_now_ms() > end)
            break; /* keel stopped reading us: the assertions will say */
        if (i % 256 == 255)
            pr_count_frames(pub, "", 1);
    }
    pr_count_frames(pub, "", 50);
}

Test(pubsub_redis, bounded_queue_for_a_paused_redis, .timeout = 120, .fini = kh_cleanup_all)
{
    PR_REQUIRE();
    unsigned rport = kh_free_port();
    kh_proc *redis = pr_start_redis(rport);
    /* ping_interval long enough that the pause does not look like a dead
     * Redis: what is measured here is the queue, not a reconnect. */
    kh_proc *k1 = pr_start_keel(PR_MODULES, "", "127.0.0.1", rport,
                                "max_pending = 64k\nping_interval = 60s\n");
    kh_proc *k2 = pr_start_keel(PR_MODULES, "", "127.0.0.1", rport, NULL);
    wsc *b = pr_subscriber(k2, "room");
    wsc *pub = wsc_open(kh_port(k1, 0), "/t/app", NULL);
    kh_assert(k2, pr_publish_until_received(pub, b, "room", "before", 10000), "link works");

    kill(redis->pid, SIGSTOP);
    /* From here on the assertions leave keel's log out (cr_assert, not
     * kh_assert): wstest logs every publish it observes, megabytes of it.
     * The flood goes to a topic nobody subscribes to: every publish still
     * goes to Redis (the instance cannot know who listens elsewhere), and
     * what Redis reads after SIGCONT is not delivered anywhere. The
     * kernel's socket buffers take the first megabytes; then the queue
     * reaches max_pending and publishes are dropped. */
    double full = 0;
    long long give_up = kh_now_ms() + 40000;
    for (int round = 0; round < 30 && full < 1000 && kh_now_ms() < give_up; round++) {
        flood(pub, "void", 2000);
        full = pr_metric(k1, "pubsub_redis_dropped_total{reason=\"queue_full\"}");
    }
    cr_assert(full >= 1000, "publishes beyond max_pending are dropped (%.0f)", full);
    double sent = pr_metric(k1, "pubsub_redis_sent_total");
    double queued = pr_metric(k1, "pubsub_redis_publish_queued_bytes");
    cr_assert(queued > 0 && queued <= 64 * 1024, "the queue is bounded: %.0f bytes", queued);
    flood(pub, "void", 5000);
    cr_assert(pr_metric(k1, "pubsub_redis_sent_total") == sent,
              "nothing more is queued while Redis reads nothing");
    cr_assert(pr_metric(k1, "pubsub_redis_publish_queued_bytes") <= 64 * 1024, "still bounded");
    kh_assert(k1,
              pr_wait_metric(k1, "pubsub_redis_dropped_total{reason=\"queue_full\"}", full + 5000,
                             5000) >= full + 5000,
              "each further publish dropped and counted");
    cr_assert(pr_metric(k1, "pubsub_redis_links_up") == 2, "the links stay up");

    /* Redis resumes: it reads the backlog and delivery goes on. */
    kill(redis->pid, SIGCONT);
    cr_assert(pr_publish_until_received(pub, b, "room", "after-pause", 20000),
              "delivery resumes after SIGCONT");
    cr_assert(pr_wait_metric(k1, "pubsub_redis_sent_total", sent + 1, 5000) > sent,
              "sending again");

    wsc_close(b);
    wsc_close(pub);
    kh_signal(k1, SIGTERM);
    kh_assert(k1, kh_wait_exit(k1, 10000) == 0, "k1 exits cleanly");
    kh_stop(k2);
    kh_stop(redis);
}

/* A Redis that stops answering without closing anything (a paused
 * process, a host gone behind a firewall) is seen by PING: quiet links
 * answered PINGs for a while without a reconnect, then, paused, a PING
 * unanswered for ping_interval ends them; they come back after SIGCONT. */
Test(pubsub_redis, a_silent_redis_is_found_by_ping, .timeout = 60, .fini = kh_cleanup_all)
{
    PR_REQUIRE();
    unsigned rport = kh_free_port();
    const char *auth[] = {"--requirepass", "pw", NULL};
    kh_proc *redis = pr_start_redis_args(rport, auth);
    kh_proc *k1 =
        pr_start_keel(PR_MODULES, "", "127.0.0.1", rport, "password = pw\nping_interval = 300ms\n");
    kh_proc *k2 = pr_start_keel(PR_MODULES, "", "127.0.0.1", rport, "password = pw\n");
    kh_assert(k1, kh_wait_log(k1, "(subscribe): connected", 10000), "k1 connects");
    wsc *a = pr_subscriber(k1, "room");
    kh_sleep_ms(1500); /* time for several PINGs each way (the test: none cuts the link) */
    kh_assert(k1, pr_metric(k1, "pubsub_redis_reconnects_total") == 0,
              "answered PINGs cut nothing");
    kh_assert(k1, pr_metric(k1, "pubsub_redis_links_up") == 2, "both links up");

    kill(redis->pid, SIGSTOP);
    kh_assert(k1, kh_wait_log(k1, "no answer in 300ms, reconnecting", 5000), "the silence is seen");
    /* The kernel still accepts connections for the paused Redis, but AUTH
     * gets no answer: never up, for as long as we look. */
    kh_sleep_ms(700);
    kh_assert(k1, pr_metric(k1, "pubsub_redis_links_up") == 0, "no link counts as up");
    kill(redis->pid, SIGCONT);
    wsc *pub2 = wsc_open(kh_port(k2, 0), "/t/app", NULL);
    kh_assert(k1, pr_publish_until_received(pub2, a, "room", "back", 15000),
              "delivery resumes once Redis answers again");
    kh_assert(k1, pr_metric(k1, "pubsub_redis_reconnects_total") >= 1, "by reconnecting");
    wsc_close(a);
    wsc_close(pub2);
    kh_stop(k1);
    kh_stop(k2);
    kh_stop(redis);
}

/* Redis's own count of the channels matching pattern that have
 * subscribers (PUBSUB NUMSUB would need the names), through redis-cli;
 * -1 if it cannot be asked. */
static int redis_channels(unsigned port, const char *pattern)
{
    ht_run_result rr = redis_pubsub(port, "CHANNELS", pattern);
    int n = -1;
    if (rr.status == 0) { /* one name a line; an empty array prints an empty line */
        n = 0;
        for (const char *l = rr.out; *l; l++)
            n += *l == '\n' && l > rr.out && l[-1] != '\n';
    }
    ht_run_free(&rr);
    return n;
}

static int wait_channels(unsigned port, const char *pattern, int want, int timeout_ms)
{
    int n;
    KH_WAIT_UNTIL((n = redis_channels(port, pattern)) == want, timeout_ms);
    return n;
}

/* Enough topics to make the table grow several times: each is subscribed
 * in Redis once, reachable, and unsubscribed when its last subscriber
 * leaves (found again after the rehashes). */
Test(pubsub_redis, many_topics, .timeout = 60, .fini = kh_cleanup_all)
{
    PR_REQUIRE();
    if (access("/usr/bin/redis-cli", X_OK) != 0)
        cr_skip_test("redis-cli is not installed");
    unsigned rport = kh_free_port();
    kh_proc *redis = pr_start_redis(rport);
    kh_proc *k1 = start_keel(rport), *k2 = start_keel(rport);
    kh_assert(k1, kh_wait_log(k1, "(subscribe): connected", 10000), "k1 connects");
    wsc *c = wsc_open(kh_port(k1, 0), "/t/app", NULL);
    char cmd[64];
    for (int i = 0; i < 300; i++) {
        snprintf(cmd, sizeof cmd, "sub topic-%d", i);
        wsc_send_text(c, cmd);
        wsc_frame f;
        cr_assert(wsc_read(c, &f, 5000) == 0 && strncmp((char *)f.data, "subscribed", 10) == 0,
                  "sub %d", i);
        wsc_frame_free(&f);
    }
    /* a second subscriber to a few of them changes nothing in Redis */
    wsc *d = pr_subscriber(k1, "topic-7");
    cr_assert(wait_channels(rport, "t:topic-*", 300, 10000) == 300,
              "one Redis subscription per topic: %d", redis_channels(rport, "t:topic-*"));
    wsc *pub2 = wsc_open(kh_port(k2, 0), "/t/app", NULL);
    kh_assert(k1, pr_publish_until_received(pub2, c, "topic-299", "last", 10000), "topic-299");
    kh_assert(k1, pr_publish_until_received(pub2, c, "topic-0", "first", 10000), "topic-0");
    wsc_close(c);
    cr_assert(wait_channels(rport, "t:topic-*", 1, 10000) == 1,
              "all unsubscribed but the one still held: %d", redis_channels(rport, "t:topic-*"));
    wsc_close(d);
    cr_assert(wait_channels(rport, "t:topic-*", 0, 10000) == 0, "none left");
    wsc_close(pub2);
    kh_stop(k1);
    kh_stop(k2);
    kh_stop(redis);
}

/* Settings that cannot work are refused at start-up, naming the key. */
Test(pubsub_redis, config_errors, .timeout = 30, .fini = kh_cleanup_all)
{
    PR_REQUIRE();
    static const struct {
        const char *lines, *key, *says;
    } cases[] = {
        {"username = alice\n", "[pubsub_redis] username", "needs a password"},
        {"max_pending = 100\n", "[pubsub_redis] max_pending", "expected a size between 1k and"},
        {"ping_interval = 10ms\n", "[pubsub_redis] ping_interval",
         "expected a duration between 100ms and 1h"},
        {"database = -1\n", "[pubsub_redis] database", ""},
        {"tls = maybe\n", "[pubsub_redis] tls", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char conf[1024];
        snprintf(conf, sizeof conf,
                 "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n"
                 "modules = http1 websocket pubsub_redis\n" KH_MODULE_PATH
                 "[pubsub_redis]\naddress = 127.0.0.1:1\n%s",
                 cases[i].lines);
        kh_proc *p = kh_spawn(conf, NULL);
        kh_assert(p, kh_wait_exit(p, 10000) != 0, "refused: %s", cases[i].lines);
        kh_assert(p, strstr(kh_stderr(p), cases[i].key) && strstr(kh_stderr(p), cases[i].says),
                  "names %s: %s", cases[i].key, cases[i].says);
        kh_stop(p);
    }
}
