/* pubsub_redis — the websocket module's pub/sub across keel instances,
 * through Redis pub/sub.
 *
 *     [pubsub_redis]
 *     address = 127.0.0.1:6379   ; HOST:PORT of Redis (a name or a literal; [v6]:port)
 *     username =                 ; Redis 6 ACL user (AUTH user password)
 *     password =                 ; AUTH, if Redis wants one
 *     database = 0               ; SELECT n after AUTH (channels ignore it: see below)
 *     tls = off                  ; on: through the tls module's transport
 *     prefix = keel:             ; Redis channel = prefix + topic
 *     max_pending = 1m           ; PUBLISH bytes waiting for Redis; beyond: dropped
 *     ping_interval = 15s        ; PING an idle link; no answer a whole interval later: reconnect
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
 * connection is down, or while more than max_pending bytes already wait
 * for a Redis that does not read them, is dropped and counted
 * (pubsub_redis_dropped_total, by reason), as is anything Redis loses;
 * local delivery (same instance) never depends on Redis. Lost connections
 * are retried with a doubling back-off and the active topics subscribed
 * again.
 *
 * On the wire each payload is one type byte ('t' text, 'b' binary), the
 * publishing instance's 16-hex-digit id (so an instance skips its own
 * messages, which its subscribers already had locally), then the message.
 */
#include <keel/keel.h>
#include <keel/metrics.h>
#include <keel/tls.h>
#include <keel/websocket.h>

#include <hiredis/hiredis.h>

#include "topics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

KEEL_WEBSOCKET_DEFINE
KEEL_TLS_DEFINE

#define PROTOCOL    "pubsub_redis"
#define ID_LEN      16
#define HEADER_LEN  (1 + ID_LEN)
#define BACKOFF_MIN 100
#define TOPIC_MAX   255
#define CHANNEL_MAX 512

typedef struct link {
    int subscriber;  /* 1: the SUBSCRIBE connection; 0: PUBLISH */
    keel_conn *conn; /* while connected */
    int connecting;  /* keel_conn_connect in flight */
    redisReader *reader;
    /* Replies still owed to AUTH and SELECT, which are sent first; the link
     * is `ready` (counted up, subscribed, publishing) once they all said
     * OK. A refusal closes it and the back-off goes on growing. */
    int handshake_replies;
    int ready;
    int ping_unanswered; /* a PING went out and nothing came back since */
    uint64_t backoff_ms;
    keel_timer *retry;
    int ever_up;
    int warned; /* this outage was logged */
} link;

enum drop_reason { DROP_LINK_DOWN, DROP_QUEUE_FULL, DROP_NOMEM, DROP_REASONS };

/* Everything below `owner` is worker 0's alone. */
static struct {
    keel_module *module;
    char host[256];
    char name[272]; /* "host:port", "[v6]:port" or "unix:PATH": for messages */
    unsigned port;
    const char *username;
    const char *password;
    int64_t database;
    int tls;
    const char *prefix;
    size_t prefix_len;
    uint64_t max_pending;
    uint64_t ping_interval_ms;
    uint64_t reconnect_max_ms;
    char id[ID_LEN + 1];
    keel_metric *dropped[DROP_REASONS], *sent, *received, *reconnects, *up;
    keel_metric *connect_failures, *auth_failures, *queued;

    /* Set by worker 0's start, before any worker accepts (start runs on
     * every worker before any accepts), so the observer's callbacks,
     * which need a connection, always see it. */
    keel_worker *owner;
    int stopping;
    int draining; /* stopping: the links close once no local subscriber is left */
    link sub, pub;
    pr_topics topics; /* active topics */
} pr;

static const char *link_name(const link *l)
{
    return l->subscriber ? "subscribe" : "publish";
}

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

/* SUBSCRIBE or UNSUBSCRIBE prefix+topic, once the subscribe link is ready
 * (until then the topic is only recorded: becoming ready subscribes to
 * every recorded topic). */
static void send_channel_cmd(const char *verb, const char *topic, size_t tlen)
{
    char channel[CHANNEL_MAX];
    if (!pr.sub.ready || pr.prefix_len + tlen > sizeof channel)
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
    if (pr.stopping || keel_worker_stopping(pr.owner))
        return; /* KEEL_ERR_SHUTDOWN: no failure, and nothing to retry */
    keel_metric_add(pr.owner, pr.connect_failures, 1);
    /* Once per outage at warn level: retries say it again in debug. Through
     * TLS a refused certificate is KEEL_ERR_IO here, and the tls module
     * has logged why. */
    keel_log(pr.module, l->warned++ ? KEEL_LOG_DEBUG : KEEL_LOG_WARN,
             "redis %s (%s): cannot connect%s: %s", pr.name, link_name(l), pr.tls ? " (tls)" : "",
             keel_strerror(status));
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
        /* The tls module sends pr.host as SNI and checks the certificate
         * against it and [tls] ca, as it does for the proxy's upstreams. */
        .transport = pr.tls ? "tls" : NULL,
        .on_error = on_connect_error,
    };
    l->connecting = 1;
    int rc = keel_conn_connect(pr.owner, &o, NULL);
    if (rc < 0) {
        l->connecting = 0;
        schedule_retry(l);
    }
}

/* AUTH and SELECT were answered OK (or there were none): the link counts
 * as up from here. */
static void link_ready(link *l)
{
    l->ready = 1;
    l->backoff_ms = 0;
    l->warned = 0;
    if (l->ever_up)
        keel_metric_add(pr.owner, pr.reconnects, 1);
    l->ever_up = 1;
    keel_metric_add(pr.owner, pr.up, 1);
    keel_log(pr.module, KEEL_LOG_INFO, "redis %s (%s): connected%s", pr.name, link_name(l),
             pr.tls ? " (tls)" : "");
    /* Resubscribe: every topic with local subscribers now. */
    if (l->subscriber)
        for (size_t i = 0; i < pr.topics.nbuckets; i++)
            for (pr_topic *t = pr.topics.buckets[i]; t != NULL; t = t->next)
                send_channel_cmd("SUBSCRIBE", t->name, t->len);
}

static int link_open(keel_conn *conn, void *arg)
{
    link *l = arg;
    l->connecting = 0;
    if ((l->reader = redisReaderCreate()) == NULL)
        return KEEL_ERR_NOMEM;
    l->conn = conn;
    keel_conn_set_data(conn, l);
    l->ready = 0;
    l->ping_unanswered = 0;
    l->handshake_replies = 0;
    /* The inactivity timeout doubles as the keep-alive (link_timeout);
     * without it the server's idle_timeout would cut a quiet link. */
    keel_conn_set_timeout(conn, pr.ping_interval_ms);
    /* AUTH [username] password: the two-argument form is Redis 6's ACL
     * login, the one-argument form the requirepass of every version
     * (https://redis.io/commands/auth/). Then SELECT: pub/sub channels are
     * global to the server whatever the database ("Pub/Sub has no relation
     * to the key space", https://redis.io/docs/interact/pubsub/), but a
     * configured database is honoured for whatever else shares the link. */
    if (pr.password[0] != '\0') {
        const char *argv[3] = {"AUTH", pr.username, pr.password};
        size_t lens[3] = {4, strlen(pr.username), strlen(pr.password)};
        if (pr.username[0] != '\0')
            send_argv(l, 3, argv, lens);
        else
            send_argv(l, 2, (const char *[]){"AUTH", pr.password}, (size_t[]){4, lens[2]});
        l->handshake_replies++;
    }
    if (pr.database != 0) {
        char db[24];
        int n = snprintf(db, sizeof db, "%lld", (long long)pr.database);
        send_argv(l, 2, (const char *[]){"SELECT", db}, (size_t[]){6, (size_t)n});
        l->handshake_replies++;
    }
    if (l->handshake_replies == 0)
        link_ready(l);
    return KEEL_OK;
}

/* A message from Redis on the subscribing connection. */
static void on_message(const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") != 0)
        return; /* subscribe / unsubscribe confirmations, PING's "pong" */
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

/* A reply to AUTH or SELECT. Returns KEEL_ERR_PROTOCOL for a refusal
 * (wrong password, unknown user, no such database): the link is closed
 * and tried again after the back-off, which is not reset, so a wrong
 * password costs Redis one attempt per reconnect_max. */
static int handshake_reply(link *l, const redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR) {
        keel_metric_add(pr.owner, pr.auth_failures, 1);
        keel_log(pr.module, l->warned++ ? KEEL_LOG_DEBUG : KEEL_LOG_WARN,
                 "redis %s (%s): refused %s: %s; retrying", pr.name, link_name(l),
                 l->handshake_replies == 1 && pr.database != 0 ? "SELECT" : "AUTH", r->str);
        return KEEL_ERR_PROTOCOL;
    }
    if (--l->handshake_replies == 0)
        link_ready(l);
    return KEEL_OK;
}

static int link_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    link *l = keel_conn_data(conn);
    *consumed = len;
    l->ping_unanswered = 0;
    if (redisReaderFeed(l->reader, data, len) != REDIS_OK)
        return KEEL_ERR_NOMEM;
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(l->reader, &reply) != REDIS_OK) {
            keel_log(pr.module, KEEL_LOG_WARN, "redis: bad reply: %s", l->reader->errstr);
            return KEEL_ERR_PROTOCOL;
        }
        if (reply == NULL)
            break;
        const redisReply *r = reply;
        int rc = KEEL_OK;
        if (!l->ready)
            rc = handshake_reply(l, r);
        else if (r->type == REDIS_REPLY_ERROR)
            keel_log(pr.module, KEEL_LOG_WARN, "redis (%s): %s", link_name(l), r->str);
        else if (l->subscriber)
            on_message(r);
        freeReplyObject(reply);
        if (rc < 0)
            return rc; /* aborts the connection; link_close schedules the retry */
    }
    if (!l->subscriber)
        keel_metric_set(pr.owner, pr.queued, (int64_t)keel_conn_write_queued(conn));
    return KEEL_OK;
}

/* Nothing read or written for ping_interval: PING (allowed in subscribe
 * mode too, https://redis.io/commands/ping/). Still nothing a whole
 * interval after it, or a handshake that took that long: Redis is gone
 * without a word (a dead host, a paused process), so reconnect. */
static void link_timeout(keel_conn *conn)
{
    link *l = keel_conn_data(conn);
    if (!l->ready || l->ping_unanswered) {
        if (!l->warned++)
            keel_log(pr.module, KEEL_LOG_WARN, "redis %s (%s): no answer in %llums, reconnecting",
                     pr.name, link_name(l), (unsigned long long)pr.ping_interval_ms);
        keel_conn_abort(conn);
        return;
    }
    l->ping_unanswered = 1;
    send_argv(l, 1, (const char *[]){"PING"}, (size_t[]){4});
}

/* Draining, the links close once this instance has no subscriber left
 * (queued PUBLISH and UNSUBSCRIBE commands leave first: keel_conn_close
 * flushes). */
static void links_close_if_drained(void)
{
    if (!pr.draining || pr.topics.count > 0)
        return;
    if (pr.sub.conn != NULL)
        keel_conn_close(pr.sub.conn);
    if (pr.pub.conn != NULL)
        keel_conn_close(pr.pub.conn);
}

/* The server is stopping. Closing the links now would drop what the
 * application publishes while its WebSocket connections wind down (the
 * chat example's "leave" of each member, found by tests/cluster): they
 * stay up, without reconnecting, until the last local subscriber has
 * gone; [keel] shutdown_timeout bounds the wait as for any connection. */
static void link_shutdown(keel_conn *conn)
{
    (void)conn;
    pr.stopping = 1;
    pr.draining = 1;
    links_close_if_drained();
}

static void link_close(keel_conn *conn, int status)
{
    link *l = keel_conn_data(conn);
    if (l == NULL)
        return;
    l->conn = NULL;
    redisReaderFree(l->reader);
    l->reader = NULL;
    if (l->ready)
        keel_metric_add(pr.owner, pr.up, -1);
    l->ready = 0;
    if (!l->subscriber)
        keel_metric_set(pr.owner, pr.queued, 0);
    if (!pr.stopping && !keel_worker_stopping(pr.owner) && !l->warned++)
        keel_log(pr.module, KEEL_LOG_WARN, "redis %s (%s): connection lost (%s), retrying", pr.name,
                 link_name(l), status == KEEL_OK ? "closed by Redis" : keel_strerror(status));
    schedule_retry(l);
}

static const keel_protocol link_protocol = {
    .size = sizeof(keel_protocol),
    .name = PROTOCOL,
    .on_open = link_open,
    .on_data = link_data,
    .on_timeout = link_timeout,
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

static void drop(keel_worker *w, enum drop_reason why)
{
    keel_metric_add(w, pr.dropped[why], 1);
}

static void free_command(keel_conn *conn, int status, void *userdata)
{
    (void)conn, (void)status;
    free(userdata);
}

/* Writes a RESP integer's digits; returns their count. */
static size_t put_len(char *at, size_t n)
{
    char digits[24];
    size_t k = 0;
    do
        digits[k++] = (char)('0' + n % 10);
    while ((n /= 10) != 0);
    for (size_t i = 0; i < k; i++)
        at[i] = digits[k - 1 - i];
    return k;
}

/* PUBLISH channel payload as a RESP array of bulk strings
 * (https://redis.io/docs/reference/protocol-spec/: "*3\r\n" then
 * "$LEN\r\nBYTES\r\n" for each), built in one allocation that the write
 * queue takes as it is: the message is copied once, not three times
 * (payload, hiredis's command, the queue's copy). */
static void publish_remote(const op *o)
{
    link *l = &pr.pub;
    size_t clen = pr.prefix_len + o->tlen, plen = HEADER_LEN + o->len;
    if (!l->ready || clen > CHANNEL_MAX) {
        drop(pr.owner, DROP_LINK_DOWN);
        return;
    }
    size_t cap = 4 + 13 + 2 * (1 + 20 + 2) + clen + 2 + plen + 2;
    /* The bound on what waits for Redis: a Redis that stops reading (paused,
     * swapping, a full network) must not make this process grow with every
     * message published meanwhile. */
    size_t queued = keel_conn_write_queued(l->conn);
    if (queued + cap > pr.max_pending) {
        keel_metric_set(pr.owner, pr.queued, (int64_t)queued);
        drop(pr.owner, DROP_QUEUE_FULL);
        return;
    }
    char *cmd = malloc(cap);
    if (cmd == NULL) {
        drop(pr.owner, DROP_NOMEM);
        return;
    }
    size_t at = 0;
    memcpy(cmd, "*3\r\n$7\r\nPUBLISH\r\n$", 18);
    at = 18;
    at += put_len(cmd + at, clen);
    memcpy(cmd + at, "\r\n", 2);
    at += 2;
    memcpy(cmd + at, pr.prefix, pr.prefix_len);
    memcpy(cmd + at + pr.prefix_len, o->bytes, o->tlen);
    at += clen;
    memcpy(cmd + at, "\r\n$", 3);
    at += 3;
    at += put_len(cmd + at, plen);
    memcpy(cmd + at, "\r\n", 2);
    at += 2;
    cmd[at] = o->kind == KEEL_WS_BINARY ? 'b' : 't';
    memcpy(cmd + at + 1, pr.id, ID_LEN);
    memcpy(cmd + at + HEADER_LEN, o->bytes + o->tlen, o->len);
    at += plen;
    memcpy(cmd + at, "\r\n", 2);
    at += 2;
    keel_buf buf = {cmd, at};
    int rc = keel_conn_write(l->conn, &buf, 1, free_command, cmd);
    if (rc != KEEL_OK) {
        free(cmd); /* not queued: free_command will not run */
        drop(pr.owner, DROP_LINK_DOWN);
        return;
    }
    keel_metric_add(pr.owner, pr.sent, 1);
    keel_metric_set(pr.owner, pr.queued, (int64_t)keel_conn_write_queued(l->conn));
}

static void run_op(keel_worker *worker, void *userdata)
{
    op *o = userdata;
    (void)worker;
    if (o->type == OP_ACTIVE) {
        if (pr_topics_add(&pr.topics, o->bytes, o->tlen) == 1)
            send_channel_cmd("SUBSCRIBE", o->bytes, o->tlen);
    } else if (o->type == OP_IDLE) {
        if (pr_topics_remove(&pr.topics, o->bytes, o->tlen))
            send_channel_cmd("UNSUBSCRIBE", o->bytes, o->tlen);
        links_close_if_drained();
    } else
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
    if (o == NULL || pr.owner == NULL) {
        if (type == OP_PUBLISH)
            drop(from, o == NULL ? DROP_NOMEM : DROP_LINK_DOWN);
        free(o);
        return;
    }
    if (from == pr.owner) {
        run_op(from, o); /* worker 0's own: no hop through its queue */
        return;
    }
    if (keel_worker_post(pr.owner, run_op, o) != KEEL_OK) {
        if (type == OP_PUBLISH)
            drop(from, DROP_LINK_DOWN);
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
    if (strncmp(text, "unix:", 5) == 0) {
        /* A Unix socket (keel_conn_connect, ABI 1.9): redis.conf's
         * unixsocket. */
        if (text[5] == '\0' || strlen(text) >= sizeof pr.host)
            return keel_config_error(m, "address", "expected unix:PATH, got '%s'", text);
        snprintf(pr.host, sizeof pr.host, "%s", text);
        snprintf(pr.name, sizeof pr.name, "%s", text);
        pr.port = 0;
        return KEEL_OK;
    }
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
    snprintf(pr.name, sizeof pr.name, "%s", text);
    return KEEL_OK;
}

static int register_metrics(keel_module *m)
{
    static const char *const reasons[DROP_REASONS] = {
        [DROP_LINK_DOWN] = "reason=\"link_down\"",
        [DROP_QUEUE_FULL] = "reason=\"queue_full\"",
        [DROP_NOMEM] = "reason=\"nomem\"",
    };
    int rc;
    for (int i = 0; i < DROP_REASONS; i++)
        if ((rc = keel_metric_new(m, "pubsub_redis_dropped_total",
                                  "messages published here that were not sent to Redis, by reason",
                                  KEEL_METRIC_COUNTER, reasons[i], &pr.dropped[i])) < 0)
            return rc;
    if ((rc = keel_metric_new(m, "pubsub_redis_sent_total", "messages published to Redis",
                              KEEL_METRIC_COUNTER, NULL, &pr.sent)) < 0 ||
        (rc = keel_metric_new(m, "pubsub_redis_received_total",
                              "messages from other instances delivered here", KEEL_METRIC_COUNTER,
                              NULL, &pr.received)) < 0 ||
        (rc = keel_metric_new(m, "pubsub_redis_reconnects_total", "connections to Redis made again",
                              KEEL_METRIC_COUNTER, NULL, &pr.reconnects)) < 0 ||
        (rc = keel_metric_new(
             m, "pubsub_redis_connect_failures_total",
             "attempts to connect to Redis that failed (refused, timed out, TLS refused)",
             KEEL_METRIC_COUNTER, NULL, &pr.connect_failures)) < 0 ||
        (rc = keel_metric_new(m, "pubsub_redis_auth_failures_total",
                              "AUTH or SELECT refused by Redis (the link is closed and retried)",
                              KEEL_METRIC_COUNTER, NULL, &pr.auth_failures)) < 0 ||
        (rc = keel_metric_new(m, "pubsub_redis_links_up", "connections to Redis up (0..2)",
                              KEEL_METRIC_GAUGE, NULL, &pr.up)) < 0 ||
        (rc = keel_metric_new(m, "pubsub_redis_publish_queued_bytes",
                              "bytes of PUBLISH commands waiting for Redis to read them",
                              KEEL_METRIC_GAUGE, NULL, &pr.queued)) < 0)
        return rc;
    return KEEL_OK;
}

/* The [pubsub_redis] section (keel/config.h). */
typedef struct pr_settings {
    const char *address, *username, *password, *prefix;
    int64_t database;
    int tls;
    uint64_t max_pending, ping_interval_ms, reconnect_max_ms;
} pr_settings;

static const keel_config_key pr_keys[] = {
    KEEL_KEY(pr_settings, address, "address", KEEL_CONFIG_ADDRESS, .def = "127.0.0.1:6379",
             .doc = "the Redis server"),
    KEEL_KEY(pr_settings, username, "username", KEEL_CONFIG_STRING, .def = "",
             .doc = "AUTH username (Redis 6 ACLs); needs password"),
    KEEL_KEY(pr_settings, password, "password", KEEL_CONFIG_STRING, .def = "",
             .doc = "AUTH password; empty: no AUTH"),
    KEEL_KEY(pr_settings, database, "database", KEEL_CONFIG_INT, .def = "0", .min = 0,
             .max = INT32_MAX, .doc = "SELECT this database"),
    KEEL_KEY(pr_settings, tls, "tls", KEEL_CONFIG_BOOL, .def = "off",
             .doc = "connect with TLS (needs the tls module listed first)"),
    KEEL_KEY(pr_settings, prefix, "prefix", KEEL_CONFIG_STRING,
             .def = "keel:", .doc = "put before every channel name in Redis (at most 200 bytes)"),
    KEEL_KEY(pr_settings, max_pending, "max_pending", KEEL_CONFIG_SIZE, .def = "1m", .min = 1024,
             .max = (int64_t)1 << 40, .doc = "bytes queued towards Redis before publishes fail"),
    KEEL_KEY(pr_settings, ping_interval_ms, "ping_interval", KEEL_CONFIG_DURATION, .def = "15s",
             .min = 100, .max = 3600000, .doc = "PING after this much silence from Redis"),
    KEEL_KEY(pr_settings, reconnect_max_ms, "reconnect_max", KEEL_CONFIG_DURATION, .def = "5s",
             .min = BACKOFF_MIN, .max = 3600000,
             .doc = "the longest wait between reconnection attempts (exponential backoff)"),
};
KEEL_CONFIG_SCHEMA(pr_schema, pr_settings, pr_keys);

static int pr_load(keel_module *m)
{
    const pr_settings *s = keel_module_config(m);
    int rc;
    pr.module = m;
    if ((rc = parse_address(m, s->address)) < 0)
        return rc;
    pr.username = s->username;
    pr.password = s->password;
    pr.database = s->database;
    pr.tls = s->tls;
    pr.prefix = s->prefix;
    pr.max_pending = s->max_pending;
    pr.ping_interval_ms = s->ping_interval_ms;
    pr.reconnect_max_ms = s->reconnect_max_ms;
    if (pr.username[0] != '\0' && pr.password[0] == '\0')
        return keel_config_error(m, "username", "needs a password (AUTH username password)");
    pr.prefix_len = strlen(pr.prefix);
    if (pr.prefix_len > 200)
        return keel_config_error(m, "prefix", "longer than 200 bytes");
    /* The tls module must be listed before this one ("?tls" below makes it
     * load first when it is): without it, "tls" is no transport at all,
     * and a link that silently went plain would send the password in
     * clear. */
    if (pr.tls && keel_tls_bind(m) != KEEL_OK)
        return keel_config_error(m, "tls",
                                 "needs the tls module: list tls in [keel] modules before "
                                 "pubsub_redis");
    /* An id per process: the current time and the address of a local
     * mixed, good enough to tell instances of one deployment apart. */
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)&rc << 16) ^
                    (uint64_t)keel_time_now() * 0x9e3779b97f4a7c15ull;
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    seed ^= (uint64_t)ts.tv_nsec * 0xbf58476d1ce4e5b9ull;
    snprintf(pr.id, sizeof pr.id, "%016llx", (unsigned long long)seed);
    pr.sub.subscriber = 1;
    if ((rc = register_metrics(m)) < 0)
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
    pr.stopping = pr.draining = 0;
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
    pr_topics_free(&pr.topics);
}

static const char *const deps[] = {"websocket", "?tls", NULL};

KEEL_MODULE(pubsub_redis, .version = "0.2.0", .dependencies = deps, .load = pr_load,
            .start = pr_start, .stop = pr_stop, .config = &pr_schema);
