/* px.h — what the proxy module's files share: the parsed [proxy] section
 * (groups, servers, routes, the CONNECT policy), the per-worker state
 * (peers: balancing, passive health and the keep-alive pool of each
 * server), the upstream connection and the proxied exchange.
 *
 * Ownership in one paragraph: the config is built in load and read-only on
 * the workers. Each worker owns its peers and the upstream connections it
 * opened. An exchange (px_ex) lives from the handler until the client's
 * response is over and the upstream connection is detached and every piece
 * of body handed to either side has been released: it is reference
 * counted, one reference per holder (request, upstream, each block in
 * flight).
 */
#ifndef KEEL_PROXY_PX_H
#define KEEL_PROXY_PX_H

#include <keel/keel.h>
#include <keel/util.h>

#include <llhttp.h>

#include "fasthead.h"
#include "fcgi.h"

#include <stddef.h>
#include <stdint.h>

/* ---- configuration -------------------------------------------------------- */

enum { PX_BALANCE_RR = 0, PX_BALANCE_LEAST, PX_BALANCE_HASH };
enum { PX_HOST_CLIENT = 0, PX_HOST_UPSTREAM, PX_HOST_FIXED };

/* A group holds at most this many servers (a bit each in an exchange's
 * "already tried" mask). */
#define PX_MAX_SERVERS 64

typedef struct px_server {
    char *host;      /* name or address literal, without brackets */
    unsigned port;   /* 1..65535; 0 for unix: */
    char *authority; /* "host:port" / "[v6]:port" / "unix:PATH" as written: logs */
    /* What Host says for host=upstream, and what a Location naming the
     * upstream is recognised by: authority, or "localhost" for a unix:
     * server (nginx's $proxy_host there). */
    const char *host_field;
    unsigned weight; /* >= 1 */
    int backup;      /* only used when every primary server is down */
    unsigned max_fails;
    uint64_t fail_timeout_ms;
    /* Written by the worker that runs active health checks (worker 0),
     * read by all: 1 while the last check failed. */
    int check_down; /* read and written atomically (px_flag_load) */
} px_server;

typedef struct px_group {
    char *name;
    px_server *servers;
    size_t nservers;
    int balance;           /* PX_BALANCE_* */
    const char *transport; /* NULL: plain TCP; "tls": through the tls module */
    char *check_path;      /* active health check: GET this path (NULL: none) */
    uint64_t check_interval_ms;
    size_t index; /* in px_config.groups */
    int fastcgi;  /* its servers speak FastCGI (fastcgi.c), not HTTP */
} px_group;

typedef struct px_config px_config;

typedef struct px_route {
    char *prefix;
    px_group *group;
    px_config *cfg;
    int host_mode; /* PX_HOST_* */
    char *host_value;
    uint64_t connect_timeout_ms, read_timeout_ms, send_timeout_ms;
    unsigned tries; /* attempts in all (first + retries), >= 1 */
    /* Protocols an Upgrade request may ask the upstream for (lower case;
     * "name" matches any version, "name/v" that one): [proxy] upgrade, or
     * the route's upgrade= / websocket=. Never h2 or h2c (headers.c). */
    char **upgrades;
    size_t nupgrades;
    int rewrite_location;
    /* FastCGI routes (pass's root=, script=, index=, split=): fastcgi.c */
    char *fcgi_root;   /* DOCUMENT_ROOT; SCRIPT_FILENAME is root + SCRIPT_NAME */
    char *fcgi_script; /* a fixed SCRIPT_NAME (a front controller), or NULL */
    char *fcgi_index;  /* appended to a SCRIPT_NAME ending in '/' (fastcgi_index) */
    char *fcgi_split;  /* the script's extension for PATH_INFO splitting, or NULL */
} px_route;

typedef struct px_fcgi_param {
    char *name, *value;
} px_fcgi_param;

typedef keel_cidr px_cidr; /* keel/util.h: IPv4 as ::ffff:a.b.c.d */

struct px_config {
    keel_module *module;
    px_group *groups;
    size_t ngroups;
    px_route *routes;
    size_t nroutes;
    /* defaults for routes */
    uint64_t connect_timeout_ms, read_timeout_ms, send_timeout_ms;
    unsigned tries;
    /* keep-alive pool, per worker and server */
    unsigned keepalive;
    uint64_t keepalive_timeout_ms;
    /* back-pressure: bytes in flight towards either side before the other
     * side's reading pauses */
    size_t buffer;
    size_t client_buffer; /* response bytes one client connection's exchanges hold together */
    size_t read_buffer;   /* bytes one read of an upstream connection may take */
    size_t max_header;    /* an upstream response head larger than this is a 502 */
    int via, forwarded, x_forwarded, keep_server, keep_date;
    const keel_prepared_field *via_field; /* "Via: 1.1 keel"; NULL: built per response */
    /* upstream_addr, upstream_status, upstream_response_time: the log
     * fields each exchange sets (forward.c), their names prepared once */
    const keel_log_name *log_addr, *log_status, *log_time;
    char **upgrades; /* [proxy] upgrade: what routes pass unless they say */
    size_t nupgrades;
    uint64_t tunnel_idle_ms;
    /* CONNECT (forward proxy) */
    int connect;
    px_cidr *connect_clients;
    size_t nconnect_clients;
    unsigned *connect_ports;
    size_t nconnect_ports;
    char **connect_hosts;
    size_t nconnect_hosts;
    int connect_private;
    uint64_t connect_header_timeout_ms; /* the CONNECT head, from the connection's start */
    keel_appender *log;
    px_fcgi_param *fcgi_params; /* fastcgi_param NAME VALUE, in order */
    size_t nfcgi_params;
    /* a FastCGI body of unknown length, held (spool.c) */
    size_t fcgi_body_buffer; /* in memory up to this, then in a file */
    char *fcgi_temp_dir;     /* where that file is made */
    /* metrics */
    keel_metric *m_requests, *m_failures, *m_retries, *m_connects, *m_reused, *m_tunnels;
    keel_metric *m_buffered; /* gauge: body bytes held in flight, both ways */
};

/* ---- per worker ------------------------------------------------------------- */

typedef struct px_up px_up;

typedef struct px_peer {
    px_server *srv;
    px_group *group;
    px_up *idle_head; /* keep-alive pool, most recently used first */
    unsigned nidle;
    unsigned active; /* exchanges using this server now (least connections) */
    unsigned fails;
    uint64_t down_until_ms;
    int64_t current_weight; /* smooth weighted round robin (nginx) */
} px_peer;

typedef struct px_ex px_ex;
typedef struct px_spool px_spool;

/* An HTTP/2 client connection's exchanges and the response bytes they
 * hold for it (share.c). */
typedef struct px_client px_client;
struct px_client {
    uint64_t conn_id;
    px_client *next;               /* the worker's hash chain */
    unsigned nexch;                /* its exchanges alive */
    size_t buffered;               /* their response bytes the client has not taken */
    px_ex *waiting, *waiting_tail; /* exchanges whose upstreams wait for room */
};

typedef fcgi_field px_field; /* offsets into px_ex.hbuf */

typedef struct px_worker {
    keel_worker *worker;
    px_config *cfg;
    px_peer **peers; /* [group][server] */
    keel_timer *check_timer;
    uint64_t *check_next; /* per group: when its next round of checks is due */
    px_client **buckets;  /* HTTP/2 clients by connection id (share.c) */
    size_t nbuckets, nclients;
    /* FastCGI stderr lines logged this second, and those dropped */
    uint64_t stderr_window_ms, stderr_lines, stderr_dropped;
    struct px_conn_names *conn_names; /* fastcgi.c: the connections' addresses, cached */
    struct px_block *free_blocks;     /* response.c: gathering blocks kept for reuse */
    unsigned nfree_blocks;
    struct px_block *free_small; /* response.c: blocks of a small response kept for reuse */
    unsigned nfree_small;
    struct px_block *free_heads; /* forward.c: request heads' blocks kept for reuse */
    unsigned nfree_heads;
    px_ex *free_ex; /* exchange.c: exchanges kept for reuse (linked by share_next) */
    unsigned nfree_ex;
    char *spare_hbuf; /* response.c: a response head's buffers kept for the next head */
    size_t spare_hcap;
    px_field *spare_fields;
    size_t spare_fields_cap;
    int blocks_closed; /* the worker stopped: blocks given back go to free() */
} px_worker;

/* ---- an upstream connection ------------------------------------------------- */

/* framing.c: an upstream response's line ends and chunked framing,
 * checked beside loose llhttp, across reads. */
typedef struct px_framing {
    unsigned char head_lines, head_status, chunk;
    uint64_t chunk_left; /* of the chunk being read */
} px_framing;
void px_framing_reset(px_framing *f);
/* 0, or -1 at a bare CR in a head (RFC 9112 2.2). *body_at: where in data
 * the final head ended (0 if before it, len if not yet). */
int px_head_lines_check(px_framing *f, const char *data, size_t len, size_t *body_at);
/* 0, or -1 where a chunked body's framing is not RFC 9112 7.1's. */
int px_chunks_check(px_framing *f, const char *data, size_t len);

struct px_up {
    keel_conn *conn;       /* NULL until open */
    keel_connect *attempt; /* while connecting: keel_connect_cancel's handle */
    px_worker *pw;
    px_peer *peer;
    px_ex *ex;          /* the exchange using it; NULL while idle */
    px_up *prev, *next; /* in the peer's idle list */
    int idle;
    int reused;
    llhttp_t parser;
    int parser_fed;     /* llhttp was given bytes since px_response_init */
    px_framing framing; /* framing.c's checks beside llhttp */
    fcgi_reader fcgi;   /* a FastCGI group's records (fastcgi.c) */
    int cgi_head_done;  /* its CGI head was relayed */
};

/* ---- one proxied exchange ---------------------------------------------------- */

enum { PX_BODY_NONE = 0, PX_BODY_LENGTH, PX_BODY_CHUNKED };

/* Why an attempt failed: decides retry, passive health and the status. */
enum {
    PX_FAIL_CONNECT = 1,
    PX_FAIL_TIMEOUT,
    PX_FAIL_RESET,
    PX_FAIL_INVALID,
    PX_FAIL_CLIENT,
    PX_FAIL_LOCAL /* keel itself was short (descriptors, memory): not the server's fault */
};

struct px_ex {
    int refs;
    keel_request *req; /* NULL once the client's response is over or gone */
    keel_response *res;
    px_route *route;
    px_worker *pw;
    px_peer *peer;
    px_up *up;
    int peer_held;     /* counted in peer->active */
    int up_was_reused; /* the attempt's connection came from the pool */
    int sent;          /* this attempt's request head was queued to the upstream */
    uint64_t tried;    /* servers tried (bit = index in the group) */
    unsigned attempts;
    int idempotent;
    int body_kind;       /* PX_BODY_* of the request body */
    int body_started;    /* keel_request_stream_body called */
    int body_done;       /* the whole body went to the upstream */
    int expect_continue; /* the client sent Expect: 100-continue */
    keel_timer *continue_timer;
    keel_timer *flush_timer; /* hands gathered body bytes over (response.c) */
    int upgrade;             /* an Upgrade request passed through */
    int is_head;
    size_t up_out;     /* request body bytes queued to the upstream */
    int client_paused; /* the request body paused by us (keel_request_body_pause) */
    size_t client_out; /* response body bytes not yet taken by the client */
    int up_paused;     /* the upstream's reading paused by us */
    px_client *share;  /* an HTTP/2 client's connection whose budget this shares */
    px_ex *share_next; /* in share->waiting */
    int share_waiting;
    int read_grown;    /* the upstream's reads are px_ex_read_size's (forward.c) */
    int head_relayed;  /* the final response head went to the client */
    int response_done; /* the upstream response was complete */
    int in_value;      /* llhttp: in a header value */
    int skip_value;    /* llhttp: in the value of a field not kept (response.c) */
    size_t hdropped;   /* the head's bytes not kept, counted against max_header */
    int in_trailers;
    int status; /* the upstream's status */
    char *hbuf; /* response head fields, copied (they may span reads) */
    size_t hlen, hcap;
    px_field *fields;
    size_t nfields, cap_fields;
    void *pend; /* body bytes parsed from this read, to hand over as one piece */
    size_t plen, pcap;
    size_t pcap_flushed; /* the capacity of the block being flushed (response.c) */
    int interim;         /* llhttp: parsing a 1xx */
    size_t trailer_from; /* fields from here on are trailers */
    uint64_t start_ms;
    uint64_t bytes_out;
    /* Copied while the client's exchange is alive: the connection may be
     * gone when they are needed (keel_request_on_abort). */
    const char *scheme; /* "https" or "http": how the client reached us */
    char client_ip[64];
    /* FastCGI's REMOTE_PORT, SERVER_ADDR and SERVER_PORT: "" if unknown */
    char peer_name[64], local_name[64];
    /* FastCGI: a body of unknown length held before the request leaves
     * (spool.c); NULL otherwise */
    px_spool *spool;
};

/* A body piece copied once, handed to a connection or a response, and
 * freed by its completion. */
typedef struct px_block {
    union {
        px_ex *ex;
        struct px_block *next_free; /* in the worker's kept blocks (response.c) */
    };
    size_t len;
    size_t cap; /* what data holds: response.c's gathering blocks, request heads (else 0) */
    char data[];
} px_block;

/* ---- a tunnel: bytes both ways between two connections -------------------------- */

enum { PX_SIDE_CLIENT = 0, PX_SIDE_UPSTREAM = 1 };

typedef struct px_tunnel px_tunnel;
struct px_tunnel {
    px_config *cfg;
    keel_worker *worker;
    int refs;           /* the creator's, one per open side, one per write in flight */
    int expect;         /* the side the next on_open is */
    keel_conn *side[2]; /* NULL until open, and again once closed */
    size_t out[2];      /* bytes queued towards each side */
    int paused[2];      /* each side's reading paused by us */
    int waiting[2];     /* paused until the other side opens */
    /* CONNECT: the client still speaks the "proxy" protocol while the
     * upstream connects; connect.c decides on the upstream's on_open */
    keel_conn *pending_client;
    int (*on_upstream_open)(px_tunnel *t, keel_conn *up);
};

/* ---- functions shared between files ------------------------------------------ */

/* proxy.c */
px_worker *px_worker_of(keel_worker *w, keel_module *m);

/* upstream.c: balancing and passive health */
px_peer *px_pick(px_worker *pw, px_group *g, uint64_t tried, const char *client_ip);
void px_peer_failed(px_worker *pw, px_peer *p);
void px_peer_ok(px_peer *p);
int px_peers_init(px_worker *pw);
void px_peers_free(px_worker *pw);

/* pool.c: the keep-alive pool and connecting */
px_up *px_pool_take(px_peer *p);
void px_pool_put(px_up *up);
void px_pool_close_all(px_worker *pw);
int px_up_connect(px_worker *pw, px_peer *p, px_ex *ex, uint64_t timeout_ms);
void px_up_detach(px_up *up, int reusable);
/* The exchange gives the attempt up mid-way (its client left): a connect
 * in progress is cancelled, an open connection closed. */
void px_up_abandon(px_up *up);
extern const keel_protocol px_upstream_protocol;

/* forward.c: the handler, the request towards the upstream, retries */
int px_handler(keel_request *req, keel_response *res, void *userdata);
void px_ex_ref(px_ex *ex);
void px_ex_unref(px_ex *ex);
px_ex *px_ex_new(px_worker *pw); /* zeroed but for pw (exchange.c) */
void px_ex_free_kept(px_worker *pw);
void px_up_ready(px_ex *ex, px_up *up);
void px_attempt_failed(px_ex *ex, int why);
void px_ex_finish(px_ex *ex);
void px_ex_client_gone(px_ex *ex);
void px_ex_start(px_ex *ex);
void px_body_chunk(keel_request *req, const char *data, size_t len, int last, void *userdata);
void px_resume_client(px_ex *ex);
int px_ex_write_upstream(px_ex *ex, const char *a, size_t alen, const char *b, size_t blen,
                         const char *c, size_t clen);

/* response.c: the upstream's response, parsed with llhttp, to the client */
void px_response_init(px_up *up);
int px_response_data(px_up *up, const char *data, size_t len, size_t *consumed);
void px_response_eof(px_up *up);
void px_continue(px_ex *ex);
/* what fastcgi.c relays as an HTTP response's is relayed */
int px_bodiless(const px_ex *ex, int status);
int px_response_head(px_ex *ex, int status);
int px_head_append(px_ex *ex, const char *at, size_t len);
int px_body_reserve(px_ex *ex, size_t len);
int px_body_add(px_ex *ex, const char *at, size_t len);
void px_body_flush_soon(px_ex *ex);
void px_body_drop(px_ex *ex);
/* Frees the gathering blocks kept for reuse; later ones are freed as they
 * come back (proxy_stop). */
void px_body_blocks_free(px_worker *pw);
void px_response_complete(px_ex *ex, px_up *up, int upstream_keeps);
void px_response_client_gone(px_ex *ex);

/* fastcgi.c: FastCGI towards a group's servers */
void px_fcgi_names(px_ex *ex, keel_request *req);
void px_fcgi_worker_free(px_worker *pw);
char *px_fcgi_request_head(px_ex *ex, size_t *len);
void px_fcgi_body(px_ex *ex, const char *data, size_t len, int last);
void px_fcgi_records(px_ex *ex, px_up *up, const char *data, size_t len);

/* spool.c: a FastCGI body of unknown length, held whole first */
int px_spool_begin(px_ex *ex);
uint64_t px_spool_length(const px_ex *ex);
void px_spool_rewind(px_ex *ex);
void px_spool_send(px_ex *ex);
void px_spool_free(px_spool *sp);
const char *px_spool_default_dir(void);
int px_spool_dir_ok(const char *dir);

/* headers.c */
/* name's token is keel_header_token's (the caller classified it). */
int px_hop_by_hop(keel_str name, unsigned token, keel_str connection_value);
int px_token_in_list(keel_str list, const char *token);
int px_request_refusal(keel_request *req);
int px_field_ok(keel_str name, keel_str value);
int px_upgrade_requested(const px_route *r, keel_request *req);
int px_upgrade_accepted(const px_ex *ex);
int px_upgrade_name_ok(const char *name);
/* The head goes in a block of PX_HEAD_BLOCK bytes (px_block and data)
 * kept per worker, grown only for a larger head. */
#define PX_HEAD_BLOCK 1024
char *px_build_request_head(px_ex *ex, size_t *len);
void px_heads_free(px_worker *pw);
void px_response_headers(px_ex *ex);
keel_str px_field_name(const px_ex *ex, size_t i);
keel_str px_field_value(const px_ex *ex, size_t i);

/* share.c: one client connection's budget across its exchanges */
px_client *px_client_join(px_worker *pw, uint64_t conn_id);
void px_client_leave(px_ex *ex);
void px_clients_free(px_worker *pw);
size_t px_ex_share(const px_ex *ex);     /* response bytes the exchange may hold */
size_t px_ex_read_size(const px_ex *ex); /* what one read of its upstream may take */
/* What the first read of an exchange's upstream may take: [keel]
 * read_buffer_size's default, the size of the core's pooled buffers. */
#define PX_FIRST_READ (16 * 1024)
void px_upstream_hold(px_ex *ex);    /* stops reading the upstream if over */
void px_upstream_release(px_ex *ex); /* the client took bytes: reading goes on */
void px_upstream_unhold(px_ex *ex);  /* the exchange is done with its upstream */

/* health.c: active checks, run by worker 0 */
void px_checks_start(px_worker *pw);
void px_checks_stop(px_worker *pw);
extern const keel_protocol px_check_protocol;
#if defined(_MSC_VER)
#define px_flag_load(p) (*(const volatile int *)(p))
#else
#define px_flag_load(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#endif

/* tunnel.c */
px_tunnel *px_tunnel_new(px_config *cfg, keel_worker *w);
void px_tunnel_expect(px_tunnel *t, int side);
void px_tunnel_release(px_tunnel *t);
extern const keel_protocol px_tunnel_protocol;

/* connect.c: the forward-proxy listener */
extern const keel_protocol px_connect_protocol;
/* The [proxy] CONNECT keys as the core parsed them (proxy.c's table). */
typedef struct px_connect_settings {
    int on, private_ok;
    const char *clients, *ports, *hosts;
    uint64_t header_timeout_ms;
} px_connect_settings;

int px_connect_config(px_config *cfg, keel_module *m, const px_connect_settings *s);
int px_ip_parse(const char *s, uint8_t out[16]);

/* the access log line */
void px_log_exchange(px_ex *ex, int status);

#endif
