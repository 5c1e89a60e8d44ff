/* Balancing among upstream servers: weighted round robin (nginx's smooth
 * interleaving), least connections, a hash of the client address, backup
 * servers. Three Python upstreams answer /id with their port. */
#define _GNU_SOURCE
#include "test_proxy.h"

static int which(kh_proc *p, kh_proc **ups, int nups, const char *path)
{
    char url[160];
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, path));
    unsigned port = (unsigned)strtoul(px_body(&rr), NULL, 10);
    ht_run_free(&rr);
    for (int i = 0; i < nups; i++)
        if (kh_port(ups[i], 0) == port)
            return i;
    return -1;
}

Test(proxy_balance, weighted_round_robin, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *ups[3] = {px_upstream(), px_upstream(), px_upstream()};
    char section[512];
    snprintf(section, sizeof section,
             "upstream = g 127.0.0.1:%u weight=3 127.0.0.1:%u 127.0.0.1:%u\npass = / g\n",
             kh_port(ups[0], 0), kh_port(ups[1], 0), kh_port(ups[2], 0));
    kh_proc *p = px_keel(section, 0);
    int count[3] = {0}, seq[10];
    for (int i = 0; i < 10; i++) {
        seq[i] = which(p, ups, 3, "/id");
        kh_assert(p, seq[i] >= 0, "request %d: no known server", i);
        count[seq[i]]++;
    }
    kh_assert(p, count[0] == 6 && count[1] == 2 && count[2] == 2, "3:1:1 over 10: %d %d %d",
              count[0], count[1], count[2]);
    /* smooth: the heavy server never answers three times in a row */
    for (int i = 2; i < 10; i++)
        kh_assert(p, !(seq[i] == 0 && seq[i - 1] == 0 && seq[i - 2] == 0), "not interleaved");
    px_stop(p);
}

Test(proxy_balance, client_hash_is_sticky, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *ups[3] = {px_upstream(), px_upstream(), px_upstream()};
    char section[512];
    snprintf(section, sizeof section,
             "upstream = g balance=hash 127.0.0.1:%u 127.0.0.1:%u 127.0.0.1:%u\npass = / g\n",
             kh_port(ups[0], 0), kh_port(ups[1], 0), kh_port(ups[2], 0));
    kh_proc *p = px_keel(section, 0);
    int first = which(p, ups, 3, "/id");
    kh_assert(p, first >= 0, "no known server");
    for (int i = 0; i < 8; i++)
        kh_assert(p, which(p, ups, 3, "/id") == first, "the same client, the same server");
    px_stop(p);
}

/* Least connections: while a slow request holds one server, the next
 * requests go to the other. */
Test(proxy_balance, least_connections, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *ups[2] = {px_upstream(), px_upstream()};
    char section[512];
    snprintf(section, sizeof section,
             "upstream = g balance=least_conn 127.0.0.1:%u 127.0.0.1:%u\npass = / g\n",
             kh_port(ups[0], 0), kh_port(ups[1], 0));
    kh_proc *p = px_keel(section, 0);
    /* hold one server with a slow request on a raw connection */
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    kh_send_str(fd, "GET /slow?ms=3000 HTTP/1.1\r\nHost: x\r\n\r\n");
    int busy = -1;
    for (int t = 0; t < 100 && busy < 0; t++) {
        kh_sleep_ms(20);
        for (int i = 0; i < 2; i++)
            if (strstr(kh_stderr(ups[i]), "/slow") != NULL)
                busy = i;
    }
    kh_assert(p, busy >= 0, "the slow request reached an upstream");
    for (int i = 0; i < 4; i++)
        kh_assert(p, which(p, ups, 2, "/id") == 1 - busy, "request %d went to the busy server", i);
    close(fd);
    px_stop(p);
}

Test(proxy_balance, backup_only_when_primaries_fail, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *ups[2] = {px_upstream(), px_upstream()};
    char section[512];
    snprintf(section, sizeof section, "upstream = g 127.0.0.1:%u 127.0.0.1:%u backup\npass = / g\n",
             kh_port(ups[0], 0), kh_port(ups[1], 0));
    kh_proc *p = px_keel(section, 0);
    for (int i = 0; i < 4; i++)
        kh_assert(p, which(p, ups, 2, "/id") == 0, "the primary answers");
    kh_signal(ups[0], SIGKILL); /* the primary dies (kh_cleanup_all reaps it) */
    kh_wait_exit(ups[0], 5000);
    for (int i = 0; i < 3; i++)
        kh_assert(p, which(p, ups, 2, "/id") == 1, "the backup answers once the primary is gone");
    px_stop(p);
}

/* Active checks: with passive health off (max_fails=0) and one try, only
 * the checks can keep requests away from a dead server. */
Test(proxy_balance, active_health_checks, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *ups[2] = {px_upstream(), px_upstream()};
    char section[512], needle[128];
    unsigned dead = kh_port(ups[0], 0);
    snprintf(section, sizeof section,
             "upstream = g check=/id check_interval=200ms 127.0.0.1:%u max_fails=0 "
             "127.0.0.1:%u max_fails=0\npass = / g tries=1\n",
             dead, kh_port(ups[1], 0));
    kh_proc *p = px_keel(section, 0);
    kh_assert(p, kh_wait_log(ups[0], "GET /id", 3000), "the first server is checked");
    kh_signal(ups[0], SIGKILL);
    kh_wait_exit(ups[0], 5000);
    snprintf(needle, sizeof needle, "health check of 127.0.0.1:%u: down", dead);
    kh_assert(p, kh_wait_log(p, needle, 3000), "the check takes it out");
    for (int i = 0; i < 6; i++)
        kh_assert(p, which(p, ups, 2, "/id") == 1, "request %d to the live server", i);
    px_stop(p);
}
