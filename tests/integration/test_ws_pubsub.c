/* Pub/sub across workers: subscribers on both workers of a 2-worker keel
 * receive what any connection publishes, exactly once; the observer hears
 * of a topic's first subscriber anywhere and of its last one leaving,
 * once each. */
#define _GNU_SOURCE
#include "ws_test.h"

#define NCONN 16

Test(ws_pubsub, across_workers, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = wt_start_modules(2, NULL, NULL);
    wsc *c[NCONN];
    int worker[NCONN], seen[2] = {0, 0};
    int n = 0;
    /* The kernel spreads connections over the workers' sockets; open
     * until both have subscribers (16 all on one: about 1 in 32768). */
    while (n < NCONN && !(seen[0] >= 2 && seen[1] >= 2)) {
        c[n] = wsc_open(kh_port(p, 0), "/t/app", NULL);
        wsc_send_text(c[n], "sub news");
        wsc_frame f;
        kh_assert(p, wsc_read(c[n], &f, 5000) == 0, "no answer to sub");
        unsigned w = 9;
        kh_assert(p, sscanf((char *)f.data, "subscribed news 0 worker %u", &w) == 1 && w < 2,
                  "'%s'", f.data);
        worker[n] = (int)w;
        seen[w]++;
        wsc_frame_free(&f);
        n++;
    }
    kh_assert(p, seen[0] && seen[1], "all %d connections landed on one worker", n);
    kh_assert(p, kh_wait_log(p, "wstest topic active news", 5000), "no topic-active call");

    /* Publish from a connection on worker 0, then from one on worker 1. */
    for (int from = 0; from < 2; from++) {
        int pub = 0;
        while (worker[pub] != from)
            pub++;
        char msg[64];
        snprintf(msg, sizeof msg, "pub news hello from %d", from);
        wsc_send_text(c[pub], msg);
        char want[64];
        snprintf(want, sizeof want, "hello from %d", from);
        for (int i = 0; i < n; i++) {
            wsc_frame f;
            int rc = wsc_read(c[i], &f, 5000);
            kh_assert(p, rc == 0, "connection %d (worker %d): no message (%d)", i, worker[i], rc);
            if (i == pub && strncmp((char *)f.data, "published", 9) == 0) {
                int local = -1;
                sscanf((char *)f.data, "published %d", &local);
                kh_assert(p, local == seen[from], "published to %d local subscribers, not %d",
                          local, seen[from]);
                wsc_frame_free(&f);
                rc = wsc_read(c[i], &f, 5000);
                kh_assert(p, rc == 0, "the publisher's own copy");
            }
            kh_assert(p, strcmp((char *)f.data, want) == 0, "connection %d got '%s'", i, f.data);
            wsc_frame_free(&f);
            if (i == pub) { /* its "published" may come after its copy */
                if (wsc_read(c[i], &f, 200) == 0) {
                    kh_assert(p, strncmp((char *)f.data, "published", 9) == 0, "'%s'", f.data);
                    wsc_frame_free(&f);
                }
            }
        }
        for (int i = 0; i < n; i++) {
            wsc_frame f;
            kh_assert(p, wsc_read(c[i], &f, 50) == -1, "connection %d: a second delivery '%s'", i,
                      f.data);
        }
    }
    /* The observer saw both publications, once each. */
    kh_assert(p,
              kh_count_log(p, "wstest observed news: hello from 0") == 1 &&
                  kh_count_log(p, "wstest observed news: hello from 1") == 1,
              "on_publish calls");
    /* publish_local: delivered everywhere, not shown to the observers. */
    wsc_send_text(c[0], "local news from elsewhere");
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 1 + (i == 0); k++) {
            wsc_frame f;
            kh_assert(p, wsc_read(c[i], &f, 5000) == 0, "connection %d: no local delivery", i);
            kh_assert(p,
                      strcmp((char *)f.data, "from elsewhere") == 0 ||
                          (i == 0 && strncmp((char *)f.data, "published", 9) == 0),
                      "connection %d got '%s'", i, f.data);
            wsc_frame_free(&f);
        }
    }
    kh_assert(p, kh_count_log(p, "wstest observed news: from elsewhere") == 0,
              "publish_local was shown to the observer");
    /* Unsubscribe one explicitly, close the rest: idle exactly once. */
    wsc_send_text(c[0], "unsub news");
    wt_expect_text(p, c[0], "unsubscribed news 0");
    kh_assert(p, kh_count_log(p, "wstest topic idle news") == 0, "idle too early");
    int closes = kh_count_log(p, "wstest close code=");
    for (int i = 0; i < n; i++)
        wsc_close(c[i]);
    kh_assert(p, kh_wait_log(p, "wstest topic idle news", 5000), "no topic-idle call");
    /* Every close seen (on_close): a second idle or active call would
     * have come with one of them. */
    kh_assert(p, kh_wait_log_count(p, "wstest close code=", closes + n, 5000),
              "keel saw %d of %d closes", kh_count_log(p, "wstest close code=") - closes, n);
    kh_assert(p, kh_count_log(p, "wstest topic active news") == 1, "active called %d times",
              kh_count_log(p, "wstest topic active news"));
    kh_assert(p, kh_count_log(p, "wstest topic idle news") == 1, "idle called %d times",
              kh_count_log(p, "wstest topic idle news"));
    wt_finish(p);
}
