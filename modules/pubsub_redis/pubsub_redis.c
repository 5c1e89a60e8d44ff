/* pubsub_redis — the websocket module's pub/sub across keel instances,
 * through Redis pub/sub.
 *
 *     [pubsub_redis]
 *     address = 127.0.0.1:6379   ; HOST:PORT of Redis (a name or a literal; [v6]:port)
 *     password =                 ; AUTH, if Redis wants one
 *     prefix = keel:             ; Redis channel = prefix + topic
 *     reconnect_max = 5s         ; back-off doubles from 100ms up to this
 *
 * A message published on any instance (keel_ws_publish) reaches the
 * subscribers of every instance. Each instance subscribes in Redis only to
 * the topics it has local subscribers for (the websocket module's observer
 * says when a topic becomes active or idle), on one Redis connection for
 * subscriptions, and publishes on a second (a subscribed Redis connection
 * cannot publish). Both belong to worker 0 and are keel's own outbound
 * connections (keel_conn_connect); hiredis only parses RESP (its reader
 * API) and formats commands, so nothing blocks a loop. Other workers hand
 * their events to worker 0 with keel_worker_post.
 *
 * Redis pub/sub is at-most-once: a message published while the publishing
 * connection is down is dropped and counted (pubsub_redis_dropped_total),
 * as is anything Redis loses; local delivery (same instance) never depends
 * on Redis. Lost connections are retried with a doubling back-off and the
 * active topics subscribed again.
 *
 * On the wire each payload is one type byte ('t' text, 'b' binary), the
 * publishing instance's 16-hex-digit id (so an instance skips its own
 * messages, which its subscribers already had locally), then the message.
 */
#include <keel/keel.h>
#include <keel/metrics.h>
#include <keel/websocket.h>

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

KEEL_WEBSOCKET_DEFINE

#define PROTOCOL    "pubsub_redis"
#define ID_LEN      16
#define HEADER_LEN  (1 + ID_LEN)
#define BACKOFF_MIN 100
#define TOPIC_MAX   255

typedef struct link {
    int subscriber;  /* 1: the SUBSCRIBE connection; 0: PUBLISH */
    keel_conn *conn; /* while connected */
    int connecting;  /* keel_conn_connect in flight */
    redisReader *reader;
    uint64_t backoff_ms;
    keel_timer *retry;
    int ever_up;
    int warned; /* this outage was logged */
} link;

/* Everything below `owner` is worker 0's alone. */
static struct {
    keel_module *module;
    char host[256];
    unsigned port;
    const char *password;
    const char *prefix;
    size_t prefix_len;
    uint64_t reconnect_max_ms;
    char id[ID_LEN + 1];
    keel_metric *dropped, *sent, *received, *reconnects, *up;

    /* Set by worker 0's start, before any worker accepts (start runs on
     * every worker before any accepts), so the observer's callbacks,
     * which need a connection, always see it. */
    keel_worker *owner;
    int stopping;
    link sub, pub;
    char **topics; /* active topics */
    size_t ntopics, cap;
} pr;

/* ---- commands --------------------------------------------------------------- */

static int send_argv(link *l, int argc, const char **argv, const size_t *lens)
{
    if (l->conn == NULL)
        return KEEL_ERR_CLOSED;
    char *cmd = NULL;
    int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (n < 0)
        return KEEL_ERR_NOMEM;
    int rc = keel_conn_write_copy(l->conn, cmd, (size_t)n);
    redisFreeCommand(cmd);
    return rc;
}

/* SUBSCRIBE or UNSUBSCRIBE prefix+topic. */
static void send_channel_cmd(const char *verb, const char *topic, size_t tlen)
{
    char channel[512];
    if (pr.prefix_len + tlen > sizeof channel)
        return;
    memcpy(channel, pr.prefix, pr.prefix_len);
    memcpy(channel + pr.prefix_len, topic, tlen);
    const char *argv[2] = {verb, channel};
    size_t lens[2] = {strlen(verb), pr.prefix_len + tlen};
    send_argv(&pr.sub, 2, argv, lens);
}

/* ---- the connections ----------------------------------------------------------- */

static void connect_link(link *l);

static void on_retry(keel_timer *timer, void *userdata)
{
    link *l = userdata;
    keel_timer_stop(timer);
    l->retry = NULL;
    connect_link(l);
}

static void schedule_retry(link *l)
{
    if (pr.stopping || keel_worker_stopping(pr.owner) || l->retry != NULL)
        return;
    uint64_t delay = l->backoff_ms ? l->backoff_ms : BACKOFF_MIN;
    l->backoff_ms = delay * 2 > pr.reconnect_max_ms ? pr.reconnect_max_ms : delay * 2;
    l->retry = keel_timer_start(pr.owner, delay, 0, on_retry, l);
}

static void on_connect_error(keel_worker *worker, int status, void *arg)
{
    link *l = arg;
    (void)worker;
    l->connecting = 0;
    /* Once per outage at warn level: retries say it again in debug. */
    if (!pr.stopping)
        keel_log(pr.module, l->warned++ ? KEEL_LOG_DEBUG : KEEL_LOG_WARN,
                 "redis %s:%u (%s): cannot connect: %s", pr.host, pr.port,
                 l->subscriber ? "subscribe" : "publish", keel_strerror(status));
    schedule_retry(l);
}

static void connect_link(link *l)
{
    if (pr.stopping || l->conn != NULL || l->connecting)
        return;
    keel_connect_options o = {
        .size = sizeof o,
        .host = pr.host,
        .port = pr.port,
        .protocol = PROTOCOL,
        .arg = l,
        .on_error = on_connect_error,
    };
    l->connecting = 1;
    int rc = keel_conn_connect(pr.owner, &o, NULL);
    if (rc < 0) {
        l->connecting = 0;
        schedule_retry(l);
    }
}

static int link_open(keel_conn *conn, void *arg)
{
    link *l = arg;
    l->connecting = 0;
    if ((l->reader = redisReaderCreate()) == NULL)
        return KEEL_ERR_NOMEM;
    l->conn = conn;
    keel_conn_set_data(conn, l);
    l->backoff_ms = 0;
    l->warned = 0;
    if (l->ever_up)
        keel_metric_add(pr.owner, pr.reconnects, 1);
    l->ever_up = 1;
    keel_metric_add(pr.owner, pr.up, 1);
    keel_log(pr.module, KEEL_LOG_INFO, "redis %s:%u (%s): connected", pr.host, pr.port,
             l->subscriber ? "subscribe" : "publish");
    if (pr.password[0] != '\0') {
        const char *argv[2] = {"AUTH", pr.password};
        size_t lens[2] = {4, strlen(pr.password)};
        send_argv(l, 2, argv, lens);
    }
    /* Resubscribe: every topic with local subscribers now. */
    if (l->subscriber)
        for (size_t i = 0; i < pr.ntopics; i++)
            send_channel_cmd("SUBSCRIBE", pr.topics[i], strlen(pr.topics[i]));
    return KEEL_OK;
}

/* A message from Redis on the subscribing connection. */
static void on_message(const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") != 0)
        return; /* subscribe / unsubscribe confirmations */
    const redisReply *ch = r->element[1], *body = r->element[2];
    if (ch->type != REDIS_REPLY_STRING || body->type != REDIS_REPLY_STRING ||
        ch->len < pr.prefix_len || memcmp(ch->str, pr.prefix, pr.prefix_len) != 0 ||
        body->len < HEADER_LEN || ch->len - pr.prefix_len > TOPIC_MAX)
        return;
    if (memcmp(body->str + 1, pr.id, ID_LEN) == 0)
        return; /* ours: our subscribers had it when it was published */
    char topic[TOPIC_MAX + 1];
    size_t tlen = ch->len - pr.prefix_len;
    memcpy(topic, ch->str + pr.prefix_len, tlen);
    topic[tlen] = '\0';
    int kind = body->str[0] == 'b' ? KEEL_WS_BINARY : KEEL_WS_TEXT;
    keel_metric_add(pr.owner, pr.received, 1);
    keel_ws_publish_local(pr.owner, topic, kind, body->str + HEADER_LEN, body->len - HEADER_LEN);
}

static int link_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    link *l = keel_conn_data(conn);
    *consumed = len;
    if (redisReaderFeed(l->reader, data, len) != REDIS_OK)
        return KEEL_ERR_NOMEM;
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(l->reader, &reply) != REDIS_OK) {
            keel_log(pr.module, KEEL_LOG_WARN, "redis: bad reply: %s", l->reader->errstr);
            return KEEL_ERR_PROTOCOL;
        }
        if (reply == NULL)
            return KEEL_OK;
        const redisReply *r = reply;
        if (r->type == REDIS_REPLY_ERROR)
            keel_log(pr.module, KEEL_LOG_WARN, "redis (%s): %s",
                     l->subscriber ? "subscribe" : "publish", r->str);
        else if (l->subscriber)
            on_message(r);
        freeReplyObject(reply);
    }
}

static void link_shutdown(keel_conn *conn)
{
    pr.stopping = 1;
    keel_conn_close(conn);
}

static void link_close(keel_conn *conn, int status)
{
    link *l = keel_conn_data(conn);
    if (l == NULL)
        return;
    l->conn = NULL;
    redisReaderFree(l->reader);
    l->reader = NULL;
    keel_metric_add(pr.owner, pr.up, -1);
    if (!pr.stopping && !keel_worker_stopping(pr.owner) && !l->warned++)
        keel_log(pr.module, KEEL_LOG_WARN, "redis %s:%u (%s): connection lost (%s), retrying",
                 pr.host, pr.port, l->subscriber ? "subscribe" : "publish",
                 status == KEEL_OK ? "closed by Redis" : keel_strerror(status));
    schedule_retry(l);
}

static const keel_protocol link_protocol = {
    .size = sizeof(keel_protocol),
    .name = PROTOCOL,
    .on_open = link_open,
    .on_data = link_data,
    .on_shutdown = link_shutdown,
    .on_close = link_close,
};

/* ---- events from every worker, run on worker 0 ------------------------------- */

enum op_type { OP_ACTIVE, OP_IDLE, OP_PUBLISH };

typedef struct op {
    int type, kind;
    size_t tlen, len;
    char bytes[]; /* topic, then the message */
} op;

static size_t topic_index(const char *topic, size_t tlen)
{
    for (size_t i = 0; i < pr.ntopics; i++)
        if (strlen(pr.topics[i]) == tlen && memcmp(pr.topics[i], topic, tlen) == 0)
            return i;
    return (size_t)-1;
}

static void topic_add(const char *topic, size_t tlen)
{
    if (topic_index(topic, tlen) != (size_t)-1)
        return;
    if (pr.ntopics == pr.cap) {
        size_t cap = pr.cap ? pr.cap * 2 : 16;
        char **grown = realloc(pr.topics, cap * sizeof *grown);
        if (grown == NULL)
            return;
        pr.topics = grown;
        pr.cap = cap;
    }
    char *copy = malloc(tlen + 1);
    if (copy == NULL)
        return;
    memcpy(copy, topic, tlen);
    copy[tlen] = '\0';
    pr.topics[pr.ntopics++] = copy;
    send_channel_cmd("SUBSCRIBE", topic, tlen);
}

static void topic_remove(const char *topic, size_t tlen)
{
    size_t i = topic_index(topic, tlen);
    if (i == (size_t)-1)
        return;
    free(pr.topics[i]);
    pr.topics[i] = pr.topics[--pr.ntopics];
    send_channel_cmd("UNSUBSCRIBE", topic, tlen);
}

static void publish_remote(const op *o)
{
    if (pr.pub.conn == NULL || pr.prefix_len + o->tlen > 512) {
        keel_metric_add(pr.owner, pr.dropped, 1);
        return;
    }
    char channel[512];
    memcpy(channel, pr.prefix, pr.prefix_len);
    memcpy(channel + pr.prefix_len, o->bytes, o->tlen);
    char *payload = malloc(HEADER_LEN + o->len);
    if (payload == NULL) {
        keel_metric_add(pr.owner, pr.dropped, 1);
        return;
    }
    payload[0] = o->kind == KEEL_WS_BINARY ? 'b' : 't';
    memcpy(payload + 1, pr.id, ID_LEN);
    memcpy(payload + HEADER_LEN, o->bytes + o->tlen, o->len);
    const char *argv[3] = {"PUBLISH", channel, payload};
    size_t lens[3] = {7, pr.prefix_len + o->tlen, HEADER_LEN + o->len};
    int rc = send_argv(&pr.pub, 3, argv, lens);
    free(payload);
    keel_metric_add(pr.owner, rc == KEEL_OK ? pr.sent : pr.dropped, 1);
}

static void run_op(keel_worker *worker, void *userdata)
{
    op *o = userdata;
    (void)worker;
    if (o->type == OP_ACTIVE)
        topic_add(o->bytes, o->tlen);
    else if (o->type == OP_IDLE)
        topic_remove(o->bytes, o->tlen);
    else
        publish_remote(o);
    free(o);
}

static void post_op(keel_worker *from, int type, const char *topic, size_t tlen, int kind,
                    const void *data, size_t len)
{
    op *o = malloc(sizeof *o + tlen + len);
    if (o != NULL) {
        *o = (op){type, kind, tlen, len};
        memcpy(o->bytes, topic, tlen);
        if (len)
            memcpy(o->bytes + tlen, data, len);
    }
    if (o == NULL || pr.owner == NULL || keel_worker_post(pr.owner, run_op, o) != KEEL_OK) {
        if (type == OP_PUBLISH)
            keel_metric_add(from, pr.dropped, 1);
        free(o);
    }
}

static void topic_active(keel_worker *w, const char *topic, size_t tlen, void *ud)
{
    (void)ud;
    post_op(w, OP_ACTIVE, topic, tlen, 0, NULL, 0);
}

static void topic_idle(keel_worker *w, const char *topic, size_t tlen, void *ud)
{
    (void)ud;
    post_op(w, OP_IDLE, topic, tlen, 0, NULL, 0);
}

static void published(keel_worker *w, const char *topic, size_t tlen, int kind, const void *data,
                      size_t len, void *ud)
{
    (void)ud;
    post_op(w, OP_PUBLISH, topic, tlen, kind, data, len);
}

static const keel_ws_observer observer = {
    .size = sizeof observer,
    .on_topic_active = topic_active,
    .on_topic_idle = topic_idle,
    .on_publish = published,
};

/* ---- the module ----------------------------------------------------------------- */

static int parse_address(keel_module *m, const char *text)
{
    const char *colon = strrchr(text, ':');
    const char *host = text, *end = colon;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':')
            return keel_config_error(m, "address", "expected [IPV6]:PORT, got '%s'", text);
        host = text + 1;
        end = close;
        colon = close + 1;
    }
    if (colon == NULL || end == host || (size_t)(end - host) >= sizeof pr.host)
        return keel_config_error(m, "address", "expected HOST:PORT, got '%s'", text);
    char *stop;
    long port = strtol(colon + 1, &stop, 10);
    if (*stop != '\0' || port < 1 || port > 65535)
        return keel_config_error(m, "address", "bad port in '%s'", text);
    memcpy(pr.host, host, (size_t)(end - host));
    pr.host[end - host] = '\0';
    pr.port = (unsigned)port;
    return KEEL_OK;
}

static int metric(keel_module *m, const char *name, const char *help, int type, keel_metric **out)
{
    keel_metric_desc d = {.size = sizeof d, .name = name, .help = help, .type = type};
    return keel_metric_register(m, &d, out);
}

static int pr_load(keel_module *m)
{
    const char *address;
    int rc;
    pr.module = m;
    if ((rc = keel_config_string(m, "address", "127.0.0.1:6379", &address)) < 0 ||
        (rc = parse_address(m, address)) < 0 ||
        (rc = keel_config_string(m, "password", "", &pr.password)) < 0 ||
        (rc = keel_config_string(m, "prefix", "keel:", &pr.prefix)) < 0 ||
        (rc = keel_config_duration_ms(m, "reconnect_max", 5000, &pr.reconnect_max_ms)) < 0)
        return rc;
    if (pr.reconnect_max_ms < BACKOFF_MIN)
        return keel_config_error(m, "reconnect_max", "must be at least 100ms");
    pr.prefix_len = strlen(pr.prefix);
    if (pr.prefix_len > 200)
        return keel_config_error(m, "prefix", "longer than 200 bytes");
    /* An id per process: the current time and the address of a local
     * mixed, good enough to tell instances of one deployment apart. */
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)&rc << 16) ^
                    (uint64_t)keel_time_now() * 0x9e3779b97f4a7c15ull;
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    seed ^= (uint64_t)ts.tv_nsec * 0xbf58476d1ce4e5b9ull;
    snprintf(pr.id, sizeof pr.id, "%016llx", (unsigned long long)seed);
    pr.sub.subscriber = 1;
    if ((rc = metric(m, "pubsub_redis_dropped_total",
                     "messages published here that could not be sent to Redis (link down)",
                     KEEL_METRIC_COUNTER, &pr.dropped)) < 0 ||
        (rc = metric(m, "pubsub_redis_sent_total", "messages published to Redis",
                     KEEL_METRIC_COUNTER, &pr.sent)) < 0 ||
        (rc = metric(m, "pubsub_redis_received_total",
                     "messages from other instances delivered here", KEEL_METRIC_COUNTER,
                     &pr.received)) < 0 ||
        (rc = metric(m, "pubsub_redis_reconnects_total", "connections to Redis made again",
                     KEEL_METRIC_COUNTER, &pr.reconnects)) < 0 ||
        (rc = metric(m, "pubsub_redis_links_up", "connections to Redis up (0..2)",
                     KEEL_METRIC_GAUGE, &pr.up)) < 0)
        return rc;
    if ((rc = keel_ws_bind(m)) < 0 || (rc = keel_protocol_register(m, &link_protocol)) < 0 ||
        (rc = keel_ws_observer_add(m, &observer)) < 0)
        return rc;
    return KEEL_OK;
}

static int pr_start(keel_module *m, keel_worker *w, void *state)
{
    (void)m, (void)state;
    if (keel_worker_id(w) != 0)
        return KEEL_OK;
    pr.owner = w;
    pr.stopping = 0;
    connect_link(&pr.sub);
    connect_link(&pr.pub);
    return KEEL_OK;
}

static void pr_stop(keel_module *m, keel_worker *w, void *state)
{
    (void)m, (void)state;
    if (w != pr.owner)
        return;
    pr.stopping = 1;
    /* Timers are the worker's and freed with it; the connections closed
     * before stop (a module stops after its worker's last connection). */
    pr.sub.retry = pr.pub.retry = NULL;
    for (size_t i = 0; i < pr.ntopics; i++)
        free(pr.topics[i]);
    free(pr.topics);
    pr.topics = NULL;
    pr.ntopics = pr.cap = 0;
}

static const char *const deps[] = {"websocket", NULL};

KEEL_MODULE(pubsub_redis, .version = "0.1.0", .dependencies = deps, .load = pr_load,
            .start = pr_start, .stop = pr_stop);
