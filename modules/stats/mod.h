/* mod.h — what the module's keel-facing files share: the module-wide
 * configuration (stats.c), the per-worker state of the event streams
 * (events.c) and the collection (collect.c). */
#ifndef KEEL_STATS_MOD_H
#define KEEL_STATS_MOD_H

#include <keel/keel.h>

#include "stats.h"

/* Made in load, read-only afterwards, shared by every worker. */
typedef struct stats {
    keel_module *module;
    stats_allow allow;
    const char *text_path, *json_path, *metrics_path, *dashboard_path;
    const char *ready_path; /* readiness for a balancer: 200, or 503 while draining */
    char *events_path;
    uint64_t interval_ms;
    int64_t max_streams;    /* event streams per worker */
    int64_t loaded_at;      /* Unix seconds: uptime until the core's metric exists */
    stats_history *history; /* the dashboard's last minutes (history.c: its own lock) */
    stats_buf page;         /* the dashboard, paths filled in (stats.c) */
} stats;

typedef struct stats_stream stats_stream;

/* Each worker's event streams and the one timer that feeds them. */
typedef struct stats_worker {
    keel_worker *worker;
    keel_module *module;
    const stats *st; /* set when the first stream comes */
    stats_stream *streams;
    unsigned nstreams;
    keel_timer *timer;
    uint64_t last_sent_ms;
    uint64_t event_id;
    keel_timer *sampler; /* worker 0: fills st->history every interval */
} stats_worker;

/* collect.c: fills snap (stats_snap_init included) with the host's versions,
 * the loaded modules and every metric. worker: the calling worker (for
 * its clock). */
void stats_collect(const stats *st, keel_worker *worker, stats_snap *snap);

/* events.c */
int stats_events_handler(keel_request *req, keel_response *res, void *userdata);
void stats_events_stop(stats_worker *ws);

/* stats.c: 1 if the client may see the pages; otherwise it has answered
 * 403. */
int stats_admit(const stats *st, keel_request *req, keel_response *res);

#endif
