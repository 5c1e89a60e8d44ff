/* pubsub.c — topics, subscriptions and publishing across workers.
 *
 * Each worker has its own topic table (a chained hash map in its ws_worker
 * block): only that worker's connections are in it, so subscribing,
 * unsubscribing and delivering take no lock. publish() delivers to its own
 * worker's subscribers at once and posts a copy of the message to every
 * other worker (keel_worker_post: one post per worker and message, no lock
 * per message), which delivers it to its own. A worker frames a message
 * once: every subscriber's write is [shared header, shared payload]
 * (scatter-gather, no copy), released when the last write completes. With
 * permessage-deflate, subscribers whose server side has no context takeover
 * share one compressed frame per window size (a message compressed from an
 * empty window decodes the same for all of them, RFC 7692 7.1.1.1); the
 * others get the uncompressed frame (an uncompressed message leaves a
 * peer's inflate history alone, RFC 7692 6), so no per-subscriber work.
 *
 * Observers (a Redis bridge) must learn when the server as a whole gains
 * its first subscriber to a topic or loses its last. Each topic has a home
 * worker (its hash modulo the worker count) that owns the count of workers
 * having subscribers to it; a worker whose local count goes 0 → 1 or 1 → 0
 * posts +1 / -1 to the home worker (or applies it directly when it is the
 * home). Why not an atomic counter per topic: it would need a topic table
 * shared between threads (a lock to find or insert an entry) and the
 * observer's calls for one topic could race on different threads; with a
 * home worker the count has one owner, the calls for a topic come in order
 * on one thread, and nothing is done at all when no observer is
 * registered. Posts from one worker to another run in order, so a worker's
 * +1 always precedes its -1.
 */
#include "ws.h"

#include <stdlib.h>
#include <string.h>

struct ws_topic {
    ws_topic *next; /* hash chain */
    uint32_t hash;
    uint32_t nsubs, cap;
    uint32_t workers_active; /* on the home worker: workers having subscribers */
    keel_ws **subs;
    uint8_t len;
    char name[];
};

static uint32_t hash_of(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static ws_worker *worker_of(keel_worker *worker)
{
    return keel_worker_state(worker, ws_g->module);
}

static ws_topic *find(ws_worker *w, const char *name, size_t len, uint32_t h)
{
    if (!w->nbuckets)
        return NULL;
    for (ws_topic *t = w->buckets[h & (w->nbuckets - 1)]; t; t = t->next)
        if (t->hash == h && t->len == len && memcmp(t->name, name, len) == 0)
            return t;
    return NULL;
}

static int grow(ws_worker *w)
{
    size_t n = w->nbuckets ? w->nbuckets * 2 : 16;
    ws_topic **b = calloc(n, sizeof *b);
    if (!b)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < w->nbuckets; i++)
        for (ws_topic *t = w->buckets[i], *next; t; t = next) {
            next = t->next;
            t->next = b[t->hash & (n - 1)];
            b[t->hash & (n - 1)] = t;
        }
    free(w->buckets);
    w->buckets = b;
    w->nbuckets = n;
    return KEEL_OK;
}

static ws_topic *find_or_add(ws_worker *w, const char *name, size_t len, uint32_t h)
{
    ws_topic *t = find(w, name, len, h);
    if (t)
        return t;
    if (w->ntopics >= w->nbuckets && grow(w) != KEEL_OK)
        return NULL;
    t = calloc(1, sizeof *t + len + 1);
    if (!t)
        return NULL;
    t->hash = h;
    t->len = (uint8_t)len;
    memcpy(t->name, name, len);
    t->next = w->buckets[h & (w->nbuckets - 1)];
    w->buckets[h & (w->nbuckets - 1)] = t;
    w->ntopics++;
    return t;
}

static void maybe_free(ws_worker *w, ws_topic *t)
{
    if (t->nsubs || t->workers_active)
        return;
    ws_topic **pp = &w->buckets[t->hash & (w->nbuckets - 1)];
    while (*pp != t)
        pp = &(*pp)->next;
    *pp = t->next;
    w->ntopics--;
    free(t->subs);
    free(t);
}

/* ---- Topic activity for observers --------------------------------------------------- */

static void home_apply(ws_worker *w, const char *name, size_t len, int delta)
{
    uint32_t h = hash_of(name, len);
    ws_topic *t = find_or_add(w, name, len, h);
    if (!t)
        return;
    if (delta < 0 && t->workers_active == 0)
        return;
    t->workers_active = (uint32_t)((int)t->workers_active + delta);
    int became = delta > 0 && t->workers_active == 1, gone = delta < 0 && t->workers_active == 0;
    for (ws_observer *o = ws_g->observers; o; o = o->next) {
        if (became && o->obs.on_topic_active)
            o->obs.on_topic_active(w->worker, t->name, t->len, o->obs.userdata);
        if (gone && o->obs.on_topic_idle)
            o->obs.on_topic_idle(w->worker, t->name, t->len, o->obs.userdata);
    }
    maybe_free(w, t);
}

typedef struct activity {
    int delta;
    uint8_t len;
    char name[];
} activity;

static void activity_post(keel_worker *worker, void *ud)
{
    activity *a = ud;
    home_apply(worker_of(worker), a->name, a->len, a->delta);
    free(a);
}

/* Tells the topic's home worker that this worker gained its first
 * subscriber (+1) or lost its last (-1). Takes the name, not the topic:
 * applying the change here may free the topic. */
static void topic_delta(ws_worker *w, const char *name, size_t len, uint32_t hash, int delta)
{
    if (!ws_g->observers)
        return;
    unsigned home = ws_g->nworkers ? hash % ws_g->nworkers : 0;
    keel_worker *hw = ws_g->workers[home];
    if (!hw || hw == w->worker) {
        home_apply(w, name, len, delta);
        return;
    }
    activity *a = malloc(sizeof *a + len);
    if (!a)
        return;
    a->delta = delta;
    a->len = (uint8_t)len;
    memcpy(a->name, name, len);
    if (keel_worker_post(hw, activity_post, a) != KEEL_OK)
        free(a);
}

/* ---- Subscriptions --------------------------------------------------------------------- */

int ws_subscribe(keel_ws *ws, const char *topic)
{
    if (!ws || !topic)
        return KEEL_ERR_INVAL;
    size_t len = strlen(topic);
    if (len > 255)
        return KEEL_ERR_INVAL;
    if (ws->dead || (ws->flags & WS_APP_CLOSED) || !ws->conn)
        return KEEL_ERR_CLOSED;
    ws_worker *w = worker_of(keel_conn_worker(ws->conn));
    uint32_t h = hash_of(topic, len);
    ws_topic *t = find(w, topic, len, h);
    if (t)
        for (uint32_t i = 0; i < ws->nsubs; i++)
            if (ws->subs[i] == t)
                return KEEL_OK; /* idempotent */
    if (ws->nsubs == ws->capsubs) {
        uint32_t cap = ws->capsubs ? ws->capsubs * 2 : 2;
        ws_topic **s = realloc(ws->subs, cap * sizeof *s);
        if (!s)
            return KEEL_ERR_NOMEM;
        ws->subs = s;
        ws->capsubs = cap;
    }
    if (!t && !(t = find_or_add(w, topic, len, h)))
        return KEEL_ERR_NOMEM;
    if (t->nsubs == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 4;
        keel_ws **s = realloc(t->subs, cap * sizeof *s);
        if (!s) {
            maybe_free(w, t);
            return KEEL_ERR_NOMEM;
        }
        t->subs = s;
        t->cap = cap;
    }
    t->subs[t->nsubs++] = ws;
    ws->subs[ws->nsubs++] = t;
    if (t->nsubs == 1)
        topic_delta(w, t->name, t->len, t->hash, +1);
    return KEEL_OK;
}

static void drop(ws_worker *w, keel_ws *ws, ws_topic *t)
{
    for (uint32_t i = 0; i < t->nsubs; i++)
        if (t->subs[i] == ws) {
            t->subs[i] = t->subs[--t->nsubs];
            break;
        }
    if (t->nsubs == 0) {
        char name[256];
        size_t len = t->len;
        uint32_t hash = t->hash;
        memcpy(name, t->name, len);
        free(t->subs);
        t->subs = NULL;
        t->cap = 0;
        maybe_free(w, t); /* t may be gone from here on */
        topic_delta(w, name, len, hash, -1);
    }
}

int ws_unsubscribe(keel_ws *ws, const char *topic)
{
    if (!ws || !topic)
        return KEEL_ERR_INVAL;
    if (!ws->conn || ws->dead)
        return KEEL_ERR_CLOSED;
    size_t len = strlen(topic);
    if (len > 255)
        return KEEL_ERR_INVAL;
    ws_worker *w = worker_of(keel_conn_worker(ws->conn));
    ws_topic *t = find(w, topic, len, hash_of(topic, len));
    for (uint32_t i = 0; t && i < ws->nsubs; i++)
        if (ws->subs[i] == t) {
            ws->subs[i] = ws->subs[--ws->nsubs];
            drop(w, ws, t);
            return KEEL_OK;
        }
    return KEEL_ERR_NOTFOUND;
}

void ws_unsubscribe_all(keel_ws *ws)
{
    if (!ws->nsubs || !ws->conn)
        return;
    ws_worker *w = worker_of(keel_conn_worker(ws->conn));
    for (uint32_t i = 0; i < ws->nsubs; i++)
        drop(w, ws, ws->subs[i]);
    ws->nsubs = 0;
    free(ws->subs);
    ws->subs = NULL;
    ws->capsubs = 0;
}

/* ---- Delivery ------------------------------------------------------------------------------ */

/* One worker's copy of a published message: the topic, then the payload.
 * Its count is touched on that worker only (every worker has its own
 * copy), so it needs no atomic. */
typedef struct posted {
    int kind;
    uint8_t tlen;
    size_t len;
    uint32_t refs; /* frames holding the payload + 1 while delivering */
    char bytes[];
} posted;

static void posted_unref(posted *p)
{
    if (--p->refs == 0)
        free(p);
}

typedef struct frame { /* one encoding of a message on one worker */
    uint32_t refs;     /* writes in flight + 1 while delivering */
    size_t hlen;
    const void *payload;
    size_t plen;
    uint8_t *owned; /* compressed bytes, or NULL */
    posted *src;    /* the uncompressed payload's owner, or NULL */
    uint8_t hdr[10];
} frame;

static void frame_unref(frame *f)
{
    if (--f->refs)
        return;
    free(f->owned);
    if (f->src)
        posted_unref(f->src);
    free(f);
}

static void frame_done(keel_conn *conn, int status, void *ud)
{
    (void)conn, (void)status;
    frame_unref(ud);
}

/* Builds the frame for one encoding: bits 0 is the plain frame, else the
 * compressed one for that window (NULL if compressing did not pay). */
static frame *make_frame(posted *p, int bits)
{
    frame *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->refs = 1;
    if (bits) {
        f->owned = ws_pmd_deflate_shared(bits, p->bytes + p->tlen, p->len, &f->plen);
        if (!f->owned) {
            free(f);
            return NULL;
        }
        f->payload = f->owned;
    } else {
        f->payload = p->bytes + p->tlen;
        f->plen = p->len;
        f->src = p;
        p->refs++;
    }
    f->hlen = ws_frame_header(f->hdr, 1, bits != 0, p->kind, f->plen);
    return f;
}

/* Delivers a message to this worker's subscribers; how many it was queued
 * for. */
static int deliver(ws_worker *w, posted *p)
{
    ws_topic *t = find(w, p->bytes, p->tlen, hash_of(p->bytes, p->tlen));
    if (!t || !t->nsubs)
        return 0;
    frame *plain = NULL, *packed[16] = {0};
    uint16_t failed = 0; /* window sizes whose compression did not pay */
    int count = 0;
    /* The subscriber list does not change during the loop: a peer dropped
     * over its queue limit is closed later, from the loop. */
    for (uint32_t i = 0; i < t->nsubs; i++) {
        keel_ws *ws = t->subs[i];
        int bits = ws->pmd && p->len >= ws_g->cfg.threshold ? ws_pmd_shared_bits(ws->pmd) : 0;
        frame *f = NULL;
        if (bits && !(failed & (1u << bits))) {
            if (!packed[bits] && !(packed[bits] = make_frame(p, bits)))
                failed |= (uint16_t)(1u << bits);
            f = packed[bits];
        }
        if (!f) {
            if (!plain && !(plain = make_frame(p, 0)))
                continue;
            f = plain;
        }
        keel_buf bufs[2] = {{f->hdr, f->hlen}, {f->payload, f->plen}};
        if (ws_send_shared(ws, bufs, f->plen ? 2 : 1, frame_done, f) == KEEL_OK) {
            f->refs++;
            count++;
        }
    }
    if (plain)
        frame_unref(plain);
    for (int b = 0; b < 16; b++)
        if (packed[b])
            frame_unref(packed[b]);
    return count;
}

static posted *make_posted(const char *topic, size_t tlen, int kind, const void *data, size_t len)
{
    posted *p = malloc(sizeof *p + tlen + len + 1);
    if (!p)
        return NULL;
    p->kind = kind;
    p->tlen = (uint8_t)tlen;
    p->len = len;
    p->refs = 1;
    memcpy(p->bytes, topic, tlen);
    if (len)
        memcpy(p->bytes + tlen, data, len);
    return p;
}

static void delivery_post(keel_worker *worker, void *ud)
{
    posted *p = ud;
    deliver(worker_of(worker), p);
    posted_unref(p);
}

int ws_publish_local(keel_worker *worker, const char *topic, int kind, const void *data, size_t len)
{
    if (!worker || !topic || (kind != KEEL_WS_TEXT && kind != KEEL_WS_BINARY) || (!data && len))
        return KEEL_ERR_INVAL;
    size_t tlen = strlen(topic);
    if (tlen > 255)
        return KEEL_ERR_INVAL;
    for (unsigned i = 0; i < ws_g->nworkers; i++) {
        keel_worker *other = ws_g->workers[i];
        if (!other || other == worker)
            continue;
        posted *p = make_posted(topic, tlen, kind, data, len);
        if (!p)
            return KEEL_ERR_NOMEM;
        if (keel_worker_post(other, delivery_post, p) != KEEL_OK)
            free(p);
    }
    posted *p = make_posted(topic, tlen, kind, data, len);
    if (!p)
        return KEEL_ERR_NOMEM;
    int n = deliver(worker_of(worker), p);
    posted_unref(p);
    return n;
}

int ws_publish(keel_worker *worker, const char *topic, int kind, const void *data, size_t len)
{
    if (!worker || !topic || (kind != KEEL_WS_TEXT && kind != KEEL_WS_BINARY) || (!data && len) ||
        strlen(topic) > 255)
        return KEEL_ERR_INVAL;
    for (ws_observer *o = ws_g->observers; o; o = o->next)
        if (o->obs.on_publish)
            o->obs.on_publish(worker, topic, strlen(topic), kind, data, len, o->obs.userdata);
    return ws_publish_local(worker, topic, kind, data, len);
}

void ws_pubsub_stop(ws_worker *w)
{
    for (size_t i = 0; i < w->nbuckets; i++)
        for (ws_topic *t = w->buckets[i], *next; t; t = next) {
            next = t->next;
            free(t->subs);
            free(t);
        }
    free(w->buckets);
    w->buckets = NULL;
    w->nbuckets = w->ntopics = 0;
}
