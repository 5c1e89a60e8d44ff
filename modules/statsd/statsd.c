/* statsd — a statsd-compatible receiver (docs/udp.md, README.md): a
 * datagram protocol (ABI 1.9) that reads the etsy statsd line protocol,
 * with DogStatsD tags as labels, into a fixed table of series that
 * keel_metrics_collect hands to the stats module's /metrics like any
 * registered series (a metrics source, keel/metrics.h).
 *
 *     [keel]
 *     listen = 127.0.0.1:8125 statsd udp
 *     modules = http1 stats statsd
 *     [statsd]
 *     max_metrics = 1000
 *     prefix = app_
 */
#include <keel/keel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "table.h"

typedef struct statsd_conf {
    int64_t max_metrics;
    const char *prefix;
} statsd_conf;

/* The prefix must keep names valid: [a-zA-Z_:][a-zA-Z0-9_:]*. */
static int check_prefix(const char *value, char *why, size_t whylen)
{
    char clean[STATSD_NAME_MAX + 2];
    size_t n = strlen(value);
    if (n > 64 || (statsd_sanitize(value, n, clean), strcmp(clean, value) != 0)) {
        snprintf(why, whylen,
                 "a prefix is up to 64 of a-z, A-Z, 0-9, '_', ':', "
                 "not starting with a digit");
        return 1;
    }
    return 0;
}

static const keel_config_key statsd_keys[] = {
    KEEL_KEY(statsd_conf, max_metrics, "max_metrics", KEEL_CONFIG_INT, .def = "1000", .min = 1,
             .max = 100000,
             .doc = "series kept (name and tags); lines for new ones beyond it are dropped and "
                    "counted"),
    KEEL_KEY(statsd_conf, prefix, "prefix", KEEL_CONFIG_STRING, .def = "",
             .doc = "put before every name (after sanitising), e.g. app_", .check = check_prefix),
};
KEEL_CONFIG_SCHEMA(statsd_schema, statsd_conf, statsd_keys);

typedef struct statsd {
    statsd_table table;
    const char *prefix;
    size_t prefix_len;
    keel_metric *lines;                    /* statsd_lines_total */
    keel_metric *invalid[STATSD_NREASONS]; /* statsd_lines_invalid_total{reason} */
    keel_metric *reserved;                 /* ... {reason="reserved"} */
    keel_metric *conflict;                 /* ... {reason="type_conflict"} */
    keel_metric *dropped;                  /* statsd_series_dropped_total */
} statsd;

/* Names the module's own families and the core's could take: a line for
 * one is refused rather than exposed twice. */
static int reserved(const char *name)
{
    return strncmp(name, "statsd_", 7) == 0 || strncmp(name, "keel_", 5) == 0;
}

/* The prefix before the sanitised name, and "_total" after a counter's
 * (Prometheus' naming rule, which promtool checks), if it fits. */
static int finish_name(const statsd *sd, statsd_metric *m)
{
    static const char total[] = "_total";
    size_t n = strlen(m->name), t = sizeof total - 1;
    int add_total = m->type == STATSD_COUNTER && !(n >= t && strcmp(m->name + n - t, total) == 0);
    if (sd->prefix_len + n + (add_total ? t : 0) >= sizeof m->name)
        return 0;
    memmove(m->name + sd->prefix_len, m->name, n + 1);
    memcpy(m->name, sd->prefix, sd->prefix_len);
    if (add_total)
        memcpy(m->name + sd->prefix_len + n, total, t + 1);
    return 1;
}

static void statsd_datagram(keel_dgram *dgram, const char *data, size_t len,
                            const keel_dgram_peer *peer)
{
    (void)peer;
    statsd *sd = keel_module_data(keel_dgram_module(dgram));
    keel_worker *w = keel_dgram_worker(dgram);
    const char *cursor = data, *end = data + len, *line;
    size_t line_len;
    statsd_metric m;
    int64_t ok = 0;
    /* Parsed outside the lock; applied under it, one line at a time: a
     * datagram holds up to 64 KiB of lines, and a collector waits for the
     * lock too. */
    while (statsd_next_line(&cursor, end, &line, &line_len)) {
        int rc = statsd_parse_line(line, line_len, &m);
        if (rc == STATSD_OK && !finish_name(sd, &m))
            rc = STATSD_BAD_NAME;
        if (rc != STATSD_OK) {
            keel_metric_add(w, sd->invalid[rc], 1);
            continue;
        }
        if (reserved(m.name)) {
            keel_metric_add(w, sd->reserved, 1);
            continue;
        }
        keel_mutex_lock(&sd->table.lock);
        rc = statsd_table_apply(&sd->table, &m);
        keel_mutex_unlock(&sd->table.lock);
        if (rc == STATSD_TABLE_FULL)
            keel_metric_add(w, sd->dropped, 1);
        else if (rc == STATSD_TYPE_CONFLICT)
            keel_metric_add(w, sd->conflict, 1);
        else
            ok++;
    }
    keel_metric_add(w, sd->lines, ok);
}

static const keel_dgram_protocol statsd_protocol = {
    .size = sizeof(keel_dgram_protocol),
    .name = "statsd",
    .on_datagram = statsd_datagram,
};

static int reg(keel_module *m, const char *name, const char *help, const char *labels,
               keel_metric **out)
{
    keel_metric_desc d = {.size = sizeof d,
                          .name = name,
                          .help = help,
                          .type = KEEL_METRIC_COUNTER,
                          .labels = labels};
    return keel_metric_register(m, &d, out);
}

static void statsd_unload(keel_module *m);

static int statsd_load(keel_module *m)
{
    const statsd_conf *conf = keel_module_config(m);
    statsd *sd = calloc(1, sizeof *sd);
    if (sd == NULL)
        return KEEL_ERR_NOMEM;
    keel_module_set_data(m, sd);
    sd->prefix = conf->prefix ? conf->prefix : "";
    sd->prefix_len = strlen(sd->prefix);
    int rc = statsd_table_init(&sd->table, (size_t)conf->max_metrics, keel_module_name(m));
    static const char *const invalid_help = "statsd lines refused, by reason";
    if (rc == KEEL_OK)
        rc = reg(m, "statsd_lines_total", "statsd lines applied to a series", NULL, &sd->lines);
    static char labels[STATSD_NREASONS][48];
    for (int r = 1; rc == KEEL_OK && r < STATSD_NREASONS; r++) {
        snprintf(labels[r], sizeof labels[r], "reason=\"%s\"", statsd_reason_name(r));
        rc = reg(m, "statsd_lines_invalid_total", invalid_help, labels[r], &sd->invalid[r]);
    }
    if (rc == KEEL_OK)
        rc = reg(m, "statsd_lines_invalid_total", invalid_help, "reason=\"reserved\"",
                 &sd->reserved);
    if (rc == KEEL_OK)
        rc = reg(m, "statsd_lines_invalid_total", invalid_help, "reason=\"type_conflict\"",
                 &sd->conflict);
    if (rc == KEEL_OK)
        rc = reg(m, "statsd_series_dropped_total",
                 "statsd lines dropped: a new series beyond max_metrics", NULL, &sd->dropped);
    if (rc == KEEL_OK)
        rc = keel_metrics_source_register(m, statsd_table_emit, &sd->table);
    if (rc == KEEL_OK)
        rc = keel_dgram_protocol_register(m, &statsd_protocol);
    if (rc != KEEL_OK)
        statsd_unload(m);
    return rc;
}

static void statsd_unload(keel_module *m)
{
    statsd *sd = keel_module_data(m);
    if (sd == NULL)
        return;
    statsd_table_free(&sd->table);
    free(sd);
    keel_module_set_data(m, NULL);
}

KEEL_MODULE(statsd, .version = "1.0.0", .load = statsd_load, .unload = statsd_unload,
            .config = &statsd_schema);
