/* core/runtime/settings.h — the [keel] section, parsed and validated. */
#ifndef KEEL_CORE_SETTINGS_H
#define KEEL_CORE_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include <keel/util.h>
#include <uv.h>

#include "platform/platform.h"
#include "runtime/config.h"

typedef struct kl_listen_option {
    char *key;
    char *value; /* "" for a bare word */
} kl_listen_option;

/* A network allowed to send the header: `proxy_from` entries
 * (net/preamble.c matches peers against them), IPv4 held v4-mapped
 * (keel/util.h). */
typedef keel_cidr kl_preamble_net;

/* Parses "10.0.0.0/8", "127.0.0.1", "::1", "fd00::/8". Returns KEEL_OK
 * or KEEL_ERR_CONFIG with the reason in err. */
int kl_preamble_net_parse(const char *text, kl_preamble_net *out, char *err, size_t errlen);

/* What a listener with `proxy_protocol=on` needs (kl_listen_spec.preamble):
 * the sources allowed to send the PROXY protocol header and how long it
 * may take to arrive (net/preamble.h). */
typedef struct kl_preamble_conf {
    kl_preamble_net *from;
    size_t nfrom;
    uint64_t timeout_ms;
} kl_preamble_conf;

/* One `listen = ADDRESS:PORT PROTOCOL [options]` line. */
typedef struct kl_listen_spec {
    char *text; /* the address as written, for messages */
    struct sockaddr_storage addr;
    char *protocol;  /* checked against the registry once modules loaded */
    char *transport; /* NULL for plain TCP */
    kl_listen_option *options;
    size_t noptions;
    const kl_config_value *where; /* the config line, for messages */
    kl_preamble_conf *preamble;   /* proxy_protocol=on; NULL otherwise */
    /* A unix: listener's socket file: mode=0660 owner=NAME group=NAME
     * (owner and group point into options). */
    kl_unix_perms perms;
} kl_listen_spec;

/* The value of a listen line's KEY=VALUE option, or NULL. */
const char *kl_listen_spec_option(const kl_listen_spec *l, const char *key);

typedef struct kl_settings {
    kl_listen_spec *listen;
    size_t nlisten;
    unsigned workers;
    char **modules; /* names in load order */
    size_t nmodules;
    const kl_config_value *modules_where; /* the `modules` line, for messages */
    char **module_path;                   /* the config's directories, then the defaults */
    size_t nmodule_path;
    uint64_t max_connections;
    uint64_t idle_timeout_ms;
    uint64_t write_timeout_ms;
    uint64_t shutdown_timeout_ms;
    int unknown_host;            /* 0: the implicit site; 421 or 404 */
    uint64_t shutdown_delay_ms;  /* still serving after a stop request, before closing listeners */
    uint64_t connect_timeout_ms; /* outbound: resolution plus connect; 0: no deadline */
    uint64_t reload_timeout_ms;  /* a reload's new process must serve within this */
    int backlog;
    int reuseport; /* 1: one socket per worker; 0: one acceptor */
    size_t read_buffer_size;
    size_t read_buffer_max;
    size_t write_high_water;
    char *log_target;
    char *pid_file;                    /* NULL: none */
    char *user;                        /* privileges dropped to it once listening; NULL: none */
    char *group;                       /* NULL: the user's own */
    const kl_config_value *user_where; /* the `user` line, for messages */
    int log_level;
    int log_format;   /* enum kl_log_format */
    int crash_report; /* log one line naming the module when a fatal signal ends keel */
} kl_settings;

/* Reads [keel] from cfg (defaults for what is absent). exe_dir is used for
 * the default module path, which follows the config's module_path
 * directories (relative ones resolved against their config file's folder). On error returns
 * KEEL_ERR_CONFIG with "FILE:LINE: [keel] key: reason" in err; *s is then freed already. */
int kl_settings_load(kl_settings *s, kl_config *cfg, const char *exe_dir, char *err, size_t errlen);
void kl_settings_free(kl_settings *s);

/* Splits a space- or comma-separated list into a NULL-terminated array of
 * newly allocated strings; *count receives its length. NULL if out of memory. */
char **kl_split_words(const char *text, size_t *count);
/* (A comma inside the value of a key=value word stays in it: "alpn=h2,http/1.1".) */
void kl_free_words(char **words, size_t count);

#endif
