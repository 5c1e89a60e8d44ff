/* The dashboard's Server-Sent Events stream through the real binary:
 * events arrive on time and well-formed, a client that leaves frees its
 * place at once, a stream over max_event_streams is refused, and a
 * graceful shutdown with a dashboard connected ends the stream (a "bye"
 * event, then the chunked body's end) and exits long before
 * shutdown_timeout; a new stream gets the server's history first. */
#define _GNU_SOURCE
#include "test_stats.h"

/* Opens the stream; returns the connection with the response head read
 * (checked: 200, text/event-stream, chunked). */
static ht_conn *open_stream(kh_proc *p)
{
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET /__stats/events HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n");
    ht_resp r = {0};
    kh_assert(p, ht_read_head(c, &r, 5000) == 0, "head: %s", r.err);
    kh_assert(p, r.status == 200, "status %d", r.status);
    cr_assert_str_eq(ht_header(&r, "Content-Type"), "text/event-stream");
    cr_assert(r.chunked, "a stream of unknown length is chunked");
    ht_resp_free(&r);
    return c;
}

/* How many times needle occurs in what c has received so far. */
static int count(const ht_conn *c, const char *needle)
{
    int n = 0;
    for (const char *s = c->buf; (s = strstr(s, needle)) != NULL; s += strlen(needle))
        n++;
    return n;
}

/* Reads until needle has come `times` times, or timeout_ms passed. */
static int wait_count(ht_conn *c, const char *needle, int times, int timeout_ms)
{
    long long deadline = kh_now_ms() + timeout_ms;
    while (count(c, needle) < times) {
        long long left = deadline - kh_now_ms();
        if (left <= 0 || ht_fill(c, (int)left) <= 0)
            return count(c, needle) >= times;
    }
    return 1;
}

Test(stats_events, snapshots_arrive, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = st_start(2, "events_interval = 200ms\n", NULL);
    ht_conn *c = open_stream(p);
    long long t0 = kh_now_ms();
    kh_assert(p, wait_count(c, "event: snapshot\n", 3, 5000), "3 events in 5 s; got:\n%s", c->buf);
    long long took = kh_now_ms() - t0;
    /* The first at once, then one every 200 ms: about 400 ms for three. */
    cr_assert(took >= 250 && took < 3000, "three events took %lld ms", took);
    cr_assert(strstr(c->buf, "retry: 2000\n"), "%s", c->buf);
    cr_assert(strstr(c->buf, "event: snapshot\ndata: {\"version\":\"0.1.0\""), "%s", c->buf);
    /* The server's history, when it has a sample yet, comes before it. */
    const char *history = strstr(c->buf, "event: history\n");
    cr_assert(history == NULL || history < strstr(c->buf, "event: snapshot\n"), "%s", c->buf);
    cr_assert(strstr(c->buf, "\"keel_connections_open\":{\"type\":\"gauge\""), "%s", c->buf);
    ht_close(c);
}

Test(stats_events, a_client_that_leaves_frees_its_place, .timeout = 60, .fini = kh_cleanup_all)
{
    /* One worker, one stream: a second stream is refused while the first
     * is open, and accepted once it left. */
    kh_proc *p = st_start(1, "events_interval = 200ms\nmax_event_streams = 1\n", NULL);
    ht_conn *a = open_stream(p);
    kh_assert(p, wait_count(a, "event: snapshot\n", 1, 5000), "first event");
    cr_assert_eq(st_fetch(p, "/__stats/events", NULL), 503, "over max_event_streams");
    ht_close(a);
    /* The next beat's write finds the client gone (200 ms here) and frees
     * the place. */
    int status = 0;
    for (int i = 0; i < 50 && status != 200; i++) {
        kh_sleep_ms(20);
        ht_conn *b = ht_connect(kh_port(p, 0));
        ht_send_str(b, "GET /__stats/events HTTP/1.1\r\nHost: t\r\n\r\n");
        ht_resp r = {0};
        kh_assert(p, ht_read_head(b, &r, 5000) == 0, "head: %s", r.err);
        status = r.status;
        ht_resp_free(&r);
        ht_close(b);
    }
    kh_assert(p, status == 200, "the stream's place was not freed (last status %d)", status);
    /* Streams that come and go leave the server as it was. */
    cr_assert_eq(st_fetch(p, "/__stats", NULL), 200);
}

Test(stats_events, graceful_shutdown_ends_the_stream, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", "keel.shutdown_timeout=20s", NULL};
    kh_proc *p = st_start(2, NULL, args);
    ht_conn *c = open_stream(p);
    kh_assert(p, wait_count(c, "event: snapshot\n", 1, 5000), "first event");
    long long t0 = kh_now_ms();
    kh_signal(p, SIGTERM);
    kh_assert(p, wait_count(c, "event: bye\n", 1, 5000), "a bye event; got:\n%s", c->buf);
    /* Then the chunked body ends and the connection closes. */
    kh_assert(p, wait_count(c, "\r\n0\r\n\r\n", 1, 5000), "the last chunk");
    cr_assert_eq(ht_fill(c, 5000), 0, "the connection closes after the response");
    ht_close(c); /* as a browser does on EOF (keel lingers until then, 2 s at most) */
    int rc = kh_wait_exit(p, 10000);
    long long took = kh_now_ms() - t0;
    kh_assert(p, rc == 0, "exit status %d", rc);
    /* Within a tick (250 ms) and the exit, far from shutdown_timeout. */
    kh_assert(p, took < 1500, "shutdown took %lld ms with a dashboard connected", took);
    kh_assert(p, strstr(kh_stderr(p), "shutdown deadline") == NULL, "no connection was cut");
}

Test(stats_events, shutdown_right_after_a_client_left, .timeout = 60, .fini = kh_cleanup_all)
{
    /* The client leaves between two beats and the server stops long before
     * the next: the stream still holds its request, which the stopping
     * beat (or, failing that, stop()) must release. Under ASan a leak makes
     * the exit status non-zero. */
    kh_proc *p = st_start(1, "events_interval = 60s\n", NULL);
    ht_conn *c = open_stream(p);
    kh_assert(p, wait_count(c, "event: snapshot\n", 1, 5000), "first event");
    /* Over loopback the FIN is in keel's socket when close returns; keel
     * learns of it only when it next writes (the next beat, 60 s away). */
    ht_close(c);
    kh_signal(p, SIGTERM);
    int rc = kh_wait_exit(p, 10000);
    kh_assert(p, rc == 0, "exit status %d", rc);
}

/* The samples in a "history" event's data (the length of its mono_ms
 * array), or -1 when the stream's first event is not one. (Event ids are
 * per worker: a stream's first is not always 1.) */
static int history_samples(const ht_conn *c)
{
    const char *h = strstr(c->buf, "event: history\ndata: {\"interval_ms\":200,\"mono_ms\":[");
    const char *snapshot = strstr(c->buf, "event: snapshot\n");
    if (h == NULL || (snapshot != NULL && snapshot < h))
        return -1;
    h = strchr(h, '[');
    int n = h[1] == ']' ? 0 : 1;
    for (h++; *h && *h != ']'; h++)
        n += *h == ',';
    return n;
}

/* The last value of the history's 2xx array. */
static long last_2xx(const ht_conn *c)
{
    const char *a = strstr(c->buf, "\"2xx\":[");
    const char *end = a ? strchr(a, ']') : NULL;
    if (end == NULL)
        return -1;
    const char *v = end;
    while (v > a && v[-1] != ',' && v[-1] != '[')
        v--;
    return strtol(v, NULL, 10);
}

Test(stats_events, a_new_stream_gets_the_history_first, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = st_start(2, "events_interval = 200ms\nhistory = 2s\n", NULL);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(st_fetch(p, "/__stats.json", NULL), 200);
    /* Worker 0 samples every 200 ms, the ring holding 2 s: once a stream
     * has had 11 beats at that rate, the ring is full, with the requests
     * above counted in it. */
    ht_conn *c = open_stream(p);
    kh_assert(p, wait_count(c, "event: snapshot\n", 11, 10000), "11 snapshots: %s", c->buf);
    ht_close(c);
    c = open_stream(p);
    kh_assert(p, wait_count(c, "event: snapshot\n", 1, 5000), "first snapshot: %s", c->buf);
    int samples = history_samples(c);
    cr_assert_eq(samples, 10, "2 s at 200 ms: the ring holds 10, got %d", samples);
    /* Every array has one value per sample; the requests made before the
     * stream opened are in it, by status class. */
    cr_assert(strstr(c->buf, "\"keel_http_requests_total\":{\"1xx\":["), "%s", c->buf);
    cr_assert(strstr(c->buf, "\"keel_http_request_duration_seconds\":{\"le\":[0.0001,"), "%s",
              c->buf);
    cr_assert(strstr(c->buf, "\"keel_worker_loop_idle_seconds_total\":[["), "%s", c->buf);
    cr_assert_geq(last_2xx(c), 5, "%s", c->buf);
    cr_assert(strstr(c->buf, "event: history") < strstr(c->buf, "event: snapshot"));
    ht_close(c);
    /* A page that polls asks the JSON page for the same. */
    char *body = NULL;
    cr_assert_eq(st_fetch(p, "/__stats.json?history=1", &body), 200);
    cr_assert(strncmp(body, "{\"interval_ms\":200,\"mono_ms\":[", 30) == 0, "%s", body);
    free(body);
}

Test(stats_events, history_off_sends_none, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = st_start(1, "events_interval = 200ms\nhistory = 0\n", NULL);
    ht_conn *c = open_stream(p);
    kh_assert(p, wait_count(c, "event: snapshot\n", 2, 5000), "two snapshots: %s", c->buf);
    cr_assert_null(strstr(c->buf, "event: history"), "%s", c->buf);
    cr_assert(strstr(c->buf, "id: 1\nevent: snapshot\n"), "%s", c->buf);
    ht_close(c);
}
