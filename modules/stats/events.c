/* events.c — the dashboard's Server-Sent Events stream
 * (https://html.spec.whatwg.org/multipage/server-sent-events.html).
 *
 * Each worker keeps its streams on a list and one keel timer for all of
 * them, running only while it has streams. Every events_interval the
 * timer collects once and writes the same bytes to every stream of the
 * worker (one shared, reference-counted event). A stream whose previous
 * event is still on its way (its free_fn has not come) skips a beat: a
 * slow reader is written to at its own pace and never buffered for.
 *
 * How a stream ends:
 *   - the client leaves: the next beat's write says KEEL_ERR_CLOSED (the
 *     core keeps the request until then) and the stream is dropped. A log
 *     filter would notice at once, but it would run for every request of
 *     the server, and this module keeps off the request path;
 *   - the server stops gracefully: http1's on_shutdown lets an exchange in
 *     progress finish, so a stream would hold shutdown up until
 *     shutdown_timeout. The timer ticks at most every 250 ms and, once
 *     keel_worker_stopping says so, ends every stream (a last "bye" event
 *     first, so the page knows not to reconnect at once); the connection
 *     then closes after its response.
 * A stream's memory lives until both the request is gone and its last
 * write's free_fn has come, whichever is later. */
#include "mod.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 250 /* how soon a shutdown is noticed */

struct stats_stream {
    stats_stream *prev, *next;
    stats_worker *ws;
    keel_request *req;
    keel_response *res; /* NULL once the response is ended */
    int in_flight;      /* a write's free_fn is still owed */
    int in_call;        /* inside keel_response_write or _end */
};

/* One event's bytes, shared by the streams it is written to. */
typedef struct stats_event {
    size_t refs;
    size_t len;
    char data[];
} stats_event;

static stats_event *event_of(void *data)
{
    return (stats_event *)((char *)data - offsetof(stats_event, data));
}

static void event_unref(stats_event *ev)
{
    if (--ev->refs == 0)
        free(ev);
}

/* "id: N\nevent: NAME\ndata: JSON\n\n"; the JSON has no newline inside
 * (strings are escaped), so one data line carries it. */
static stats_event *event_make(stats_worker *ws, const char *name, const char *json, size_t len)
{
    stats_buf b;
    stats_buf_init(&b);
    stats_buf_printf(&b, "id: %llu\nevent: %s\ndata: ", (unsigned long long)++ws->event_id, name);
    while (len > 0 && json[len - 1] == '\n')
        len--;
    stats_buf_put(&b, json, len);
    stats_buf_puts(&b, "\n\n");
    stats_event *ev = b.failed ? NULL : malloc(sizeof *ev + b.len);
    if (ev != NULL) {
        ev->refs = 1; /* the maker's, dropped once every stream has its own */
        ev->len = b.len;
        memcpy(ev->data, b.data, b.len);
    }
    stats_buf_free(&b);
    return ev;
}

static stats_event *snapshot_event(const stats *st, stats_worker *ws)
{
    stats_snap snap;
    stats_collect(st, ws->worker, &snap);
    stats_buf b;
    stats_buf_init(&b);
    stats_render_json(&b, &snap);
    stats_event *ev = snap.failed || b.failed ? NULL : event_make(ws, "snapshot", b.data, b.len);
    stats_snap_free(&snap);
    stats_buf_free(&b);
    return ev;
}

/* The server's history of the charts (history.c), or NULL when it keeps
 * none or has none yet. */
static stats_event *history_event(const stats *st, stats_worker *ws)
{
    stats_buf b;
    stats_buf_init(&b);
    size_t n = stats_history_render(&b, st->history, st->interval_ms);
    stats_event *ev = b.failed || n == 0 ? NULL : event_make(ws, "history", b.data, b.len);
    stats_buf_free(&b);
    return ev;
}

static void stream_unlink(stats_stream *s)
{
    stats_worker *ws = s->ws;
    if (s->prev)
        s->prev->next = s->next;
    else if (ws->streams == s)
        ws->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
    ws->nstreams--;
}

static void stream_maybe_free(stats_stream *s)
{
    if (s->req == NULL && !s->in_flight && !s->in_call)
        free(s);
}

/* The request is over for us: off the list, nothing more to write. */
static void stream_detach(stats_stream *s)
{
    if (s->req == NULL)
        return;
    stream_unlink(s);
    s->req = NULL;
}

static void event_released(void *data, void *userdata)
{
    stats_stream *s = userdata;
    event_unref(event_of(data));
    s->in_flight = 0;
    stream_maybe_free(s);
}

/* Writes ev to s, unless its previous event has not left yet. */
static void stream_write(stats_stream *s, stats_event *ev)
{
    if (s->in_flight || s->res == NULL)
        return;
    ev->refs++;
    s->in_flight = 1;
    s->in_call = 1;
    int rc = keel_response_write(s->res, ev->data, ev->len, event_released, s);
    s->in_call = 0;
    if (rc < 0) {
        /* The client left (event_released has run): the response is over
         * and the request released. */
        s->res = NULL;
        stream_detach(s);
    }
    stream_maybe_free(s);
}

static void stream_end(stats_stream *s)
{
    keel_response *res = s->res;
    s->res = NULL;
    stream_detach(s);
    if (res != NULL) {
        s->in_call = 1;
        keel_response_end(res);
        s->in_call = 0;
    }
    stream_maybe_free(s);
}

static void tick(keel_timer *timer, void *userdata)
{
    stats_worker *ws = userdata;
    const stats *st = ws->st;
    if (ws->streams == NULL) {
        keel_timer_stop(timer);
        ws->timer = NULL;
        return;
    }
    if (keel_worker_stopping(ws->worker)) {
        stats_event *bye = event_make(ws, "bye", "{}", 2);
        while (ws->streams != NULL) {
            stats_stream *s = ws->streams;
            if (bye != NULL)
                stream_write(s, bye);
            if (ws->streams == s)
                stream_end(s);
        }
        if (bye != NULL)
            event_unref(bye);
        keel_timer_stop(timer);
        ws->timer = NULL;
        return;
    }
    uint64_t now = keel_worker_now_ms(ws->worker);
    /* A beat may come a little early or late; within half a tick is on
     * time, so an interval of 1 s does not drift to 1.25 s. */
    if (now + TICK_MS / 2 < ws->last_sent_ms + st->interval_ms)
        return;
    ws->last_sent_ms = now;
    stats_event *ev = snapshot_event(st, ws);
    if (ev == NULL)
        return; /* out of memory: try again next beat */
    for (stats_stream *s = ws->streams, *next; s != NULL; s = next) {
        next = s->next;
        stream_write(s, ev);
    }
    event_unref(ev);
}

int stats_events_handler(keel_request *req, keel_response *res, void *userdata)
{
    const stats *st = userdata;
    keel_worker *w = keel_request_worker(req);
    stats_worker *ws = keel_worker_state(w, st->module);
    if (!stats_admit(st, req, res))
        return KEEL_OK;
    keel_str method = keel_request_method(req);
    if (keel_worker_stopping(w) || (int64_t)ws->nstreams >= st->max_streams) {
        keel_response_header_set(res, "Retry-After", "5");
        return keel_response_send_status(res, 503);
    }
    keel_response_header_set(res, "Content-Type", "text/event-stream");
    keel_response_header_set(res, "Cache-Control", "no-store");
    /* Proxies that buffer (nginx) would hold the events back. */
    keel_response_header_set(res, "X-Accel-Buffering", "no");
    if (method.len == 4 && memcmp(method.ptr, "HEAD", 4) == 0)
        return keel_response_send(res, "", 0, NULL, NULL);

    stats_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return KEEL_ERR_NOMEM;
    s->ws = ws;
    s->req = req;
    s->res = res;
    KEEL_LIST_PUSH(ws->streams, s);
    ws->nstreams++;

    if (ws->timer == NULL) {
        ws->st = st;
        ws->last_sent_ms = keel_worker_now_ms(w);
        uint64_t period = st->interval_ms < TICK_MS ? st->interval_ms : TICK_MS;
        ws->timer = keel_timer_start(w, period, period, tick, ws);
        if (ws->timer == NULL) {
            stream_detach(s);
            free(s);
            return KEEL_ERR_NOMEM;
        }
    }
    /* The history first (the charts' last minutes), then a snapshot at
     * once, so the page draws what came before without waiting a beat;
     * "retry" tells the browser how soon to reconnect. */
    stats_event *history = history_event(st, ws);
    stats_event *first = snapshot_event(st, ws);
    if (first != NULL) {
        static const char retry[] = "retry: 2000\n\n";
        size_t hlen = history ? history->len : 0;
        stats_event *hello = malloc(sizeof *hello + sizeof retry - 1 + hlen + first->len);
        if (hello != NULL) {
            hello->refs = 1;
            hello->len = sizeof retry - 1 + hlen + first->len;
            memcpy(hello->data, retry, sizeof retry - 1);
            if (history != NULL)
                memcpy(hello->data + sizeof retry - 1, history->data, hlen);
            memcpy(hello->data + sizeof retry - 1 + hlen, first->data, first->len);
            stream_write(s, hello);
            event_unref(hello);
        }
        event_unref(first);
    }
    if (history != NULL)
        event_unref(history);
    return KEEL_OK;
}

void stats_events_stop(stats_worker *ws)
{
    /* Every connection is closed by now. A stream whose client left
     * between two beats still holds its request (the core keeps it until
     * the handler learns of it): ending the response releases it. */
    while (ws->streams != NULL)
        stream_end(ws->streams);
    if (ws->timer != NULL) {
        keel_timer_stop(ws->timer);
        ws->timer = NULL;
    }
}
