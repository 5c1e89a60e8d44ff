/* auth_basic — HTTP Basic authentication (RFC 7617) from htpasswd files,
 * per scope:
 *
 *     [auth_basic]
 *     file = staff /etc/keel/staff.htpasswd     ; NAME PATH, as many as needed
 *     [site api.example.com]
 *     auth_basic.users = staff
 *     auth_basic.realm = "API"
 *     [site api.example.com /health]
 *     auth_basic.users = off                    ; exempt
 *
 * Passwords are checked with the system's crypt_r (libxcrypt) on the
 * thread pool: a bcrypt costs milliseconds, which the event loop must not
 * spend. A success is remembered per worker for cache_ttl under a keyed
 * digest of the credentials (AES-128-CMAC, or SipHash-1-3-128 without AES
 * instructions: mac.h; never the password), so a page and its 50 assets
 * cost one bcrypt. README.md lists the files and why.
 */
#define _GNU_SOURCE
#include <keel/keel.h>
#include <keel/util.h>

#include <crypt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/random.h>
#endif

#include "auth_basic.h"
#include "htpasswd.h"
#include "mac.h"
#include "ws.h" /* websocket's base64.c, compiled in: ws_base64_decode */

typedef struct ab_conf {
    keel_config_list file;
    int allow_weak_hashes;
    uint64_t cache_ttl_ms;
    int64_t cache_size;
    const char *users;
    const char *realm;
} ab_conf;

static const keel_config_key ab_keys[] = {
    KEEL_KEY(ab_conf, file, "file", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .doc = "NAME PATH: a user file in htpasswd format (user:hash lines) that scopes "
                    "name with `users`"),
    KEEL_KEY(ab_conf, allow_weak_hashes, "allow_weak_hashes", KEEL_CONFIG_BOOL, .def = "off",
             .doc = "accept plain-text, DES and MD5-crypt ($1$) entries (cracked in minutes "
                    "from a leaked file)"),
    KEEL_KEY(ab_conf, cache_ttl_ms, "cache_ttl", KEEL_CONFIG_DURATION, .def = "60s", .max = 3600000,
             .doc = "how long a worker remembers a verified user and password (0: check each "
                    "request)"),
    KEEL_KEY(ab_conf, cache_size, "cache_size", KEEL_CONFIG_INT, .def = "1024", .min = 1,
             .max = 1048576, .doc = "verified credentials each worker remembers"),
    KEEL_KEY(ab_conf, users, "users", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY,
             .doc = "the `file` whose users may enter this scope; off: no authentication here"),
    KEEL_KEY(ab_conf, realm, "realm", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY,
             .def = "restricted", .doc = "the realm the browser shows (RFC 7617 2)"),
};
KEEL_CONFIG_SCHEMA(ab_schema, ab_conf, ab_keys);

typedef struct ab_file {
    char *name;
    ab_users users;
    ab_mac mac; /* keyed with random bytes, per process and file */
} ab_file;

typedef struct ab_entry {
    unsigned char digest[AB_MAC_OUT];
    const ab_user *user;
    uint64_t expires_ms;
} ab_entry;

typedef struct ab_worker {
    ab_entry *cache;
    int told_unknown_file; /* the error below is logged once per worker */
} ab_worker;

struct ab_module;

/* A scope's struct that asks for users, with the file it names (NULL: no
 * `file` of that name), found once at load (keel_http_filter.scope). */
typedef struct ab_scope {
    struct ab_module *am;
    const ab_conf *conf;
    const ab_file *file;
    struct ab_scope *next; /* the module's list, freed at unload */
} ab_scope;

typedef struct ab_module {
    keel_http_filter filter;
    keel_module *module;
    ab_file *files;
    size_t nfiles;
    uint64_t ttl_ms;
    size_t cache_size;
    keel_metric *verified, *cache_hits, *refused;
    auth_basic_service service;
    ab_scope *scopes;
} ab_module;

/* One check on the thread pool. The password is copied here and wiped
 * before the memory is freed. */
typedef struct ab_job {
    ab_module *am;
    keel_response *res;
    const ab_conf *conf;
    const ab_user *user; /* NULL: unknown user, checked against a decoy */
    const char *hash;
    unsigned char digest[AB_MAC_OUT];
    int ok;
    size_t pass_len;
    char pass[];
} ab_job;

static void wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

/* ---- the answers ----------------------------------------------------------- */

/* 401 with the challenge (RFC 7617 2, RFC 9110 11.6.1): the realm quoted
 * (RFC 9110 5.6.4) and charset="UTF-8" (RFC 7617 2.1), the only charset
 * allowed. */
static int challenge(ab_module *am, keel_request *req, keel_response *res, const ab_conf *c)
{
    char value[600];
    size_t o = (size_t)snprintf(value, sizeof value, "Basic realm=\"");
    for (const char *r = c->realm ? c->realm : ""; *r && o < sizeof value - 24; r++) {
        if (*r == '"' || *r == '\\')
            value[o++] = '\\';
        value[o++] = *r;
    }
    snprintf(value + o, sizeof value - o, "\", charset=\"UTF-8\"");
    keel_metric_add(keel_request_worker(req), am->refused, 1);
    /* keel_response_send_status would drop the field: the body by hand. */
    static const char text[] = "401 Unauthorized\n";
    keel_response_set_status(res, 401);
    keel_response_header_set(res, "Content-Type", "text/plain; charset=utf-8");
    keel_response_header_set(res, "WWW-Authenticate", value);
    return keel_response_send(res, text, sizeof text - 1, NULL, NULL);
}

/* ---- the cache ------------------------------------------------------------- */

/* Two digests compared in constant time, a word at a time. */
static int digest_equal(const unsigned char *a, const unsigned char *b)
{
    uint64_t x[2], y[2];
    memcpy(x, a, sizeof x);
    memcpy(y, b, sizeof y);
    return ((x[0] ^ y[0]) | (x[1] ^ y[1])) == 0;
}

static ab_entry *cache_slot(const ab_module *am, ab_worker *w, const unsigned char *digest)
{
    uint32_t h = (uint32_t)digest[0] | (uint32_t)digest[1] << 8 | (uint32_t)digest[2] << 16 |
                 (uint32_t)digest[3] << 24;
    return &w->cache[h % am->cache_size];
}

/* ---- the check off the loop ------------------------------------------------- */

static void verify_work(void *ud)
{
    ab_job *job = ud;
    struct crypt_data *data = calloc(1, sizeof *data);
    if (data != NULL) {
        /* crypt_r, never crypt(): the pool runs several checks at once. */
        const char *out = crypt_r(job->pass, job->hash, data);
        job->ok = job->user != NULL && out != NULL && out[0] != '*' &&
                  ab_equal_ct(out, strlen(out), job->hash, strlen(job->hash));
        wipe(data, sizeof *data);
        free(data);
    }
    wipe(job->pass, job->pass_len);
}

static void authenticated(ab_module *am, keel_request *req, const ab_user *u)
{
    keel_request_set_data(req, am->module, (void *)(uintptr_t)u);
}

static void verify_done(keel_request *req, int status, void *ud)
{
    ab_job *job = ud;
    ab_module *am = job->am;
    if (status == KEEL_OK) {
        keel_worker *worker = keel_request_worker(req);
        keel_metric_add(worker, am->verified, 1);
        if (job->ok) {
            if (am->ttl_ms > 0) {
                ab_entry *e = cache_slot(am, keel_worker_state(worker, am->module), job->digest);
                memcpy(e->digest, job->digest, sizeof e->digest);
                e->user = job->user;
                e->expires_ms = keel_worker_now_ms(worker) + am->ttl_ms;
            }
            authenticated(am, req, job->user);
            keel_request_continue(req);
        } else {
            challenge(am, req, job->res, job->conf);
        }
    }
    free(job);
}

/* ---- the request filter ----------------------------------------------------- */

static const ab_file *find_file(const ab_module *am, const char *name)
{
    for (size_t i = 0; i < am->nfiles; i++)
        if (strcmp(am->files[i].name, name) == 0)
            return &am->files[i];
    return NULL;
}

/* The filter's part in a scope: none without `users` or with `users =
 * off`; else the scope's struct with the file it names. */
static int ab_scope_of(const void *conf, void *ud, void **scope_ud)
{
    ab_module *am = ud;
    const ab_conf *c = conf;
    if (c->users == NULL || strcmp(c->users, "off") == 0)
        return 0;
    ab_scope *sc = malloc(sizeof *sc);
    if (sc == NULL)
        return KEEL_ERR_NOMEM;
    *sc = (ab_scope){am, c, find_file(am, c->users), am->scopes};
    am->scopes = sc;
    *scope_ud = sc;
    return 1;
}

static int ab_on_request(keel_request *req, keel_response *res, void *ud)
{
    const ab_scope *sc = ud;
    ab_module *am = sc->am;
    const ab_conf *c = sc->conf;
    keel_worker *worker = keel_request_worker(req);
    ab_worker *w = keel_worker_state(worker, am->module);
    const ab_file *file = sc->file;
    if (file == NULL) {
        /* The scopes are built after load: keel -t cannot see this. */
        if (!w->told_unknown_file++)
            keel_log(am->module, KEEL_LOG_ERROR,
                     "users = %s: no `file` of that name in [auth_basic]: answering 500", c->users);
        return KEEL_ERR_CONFIG;
    }

    /* credentials = auth-scheme [ 1*SP token68 ] (RFC 9110 11.4); a
     * scheme other than Basic is no credentials for this realm: 401. */
    keel_str h = keel_request_header_token(req, KEEL_HDR_AUTHORIZATION);
    if (h.ptr == NULL || h.len < 6 || h.ptr[5] != ' ' ||
        /* The scheme is case-insensitive (RFC 9110 11.1); every client
         * writes "Basic", which one compare settles. */
        (memcmp(h.ptr, "Basic", 5) != 0 && !keel_ascii_iequal(h.ptr, 5, "Basic", 5)))
        return challenge(am, req, res, c);
    size_t at = 6;
    while (at < h.len && h.ptr[at] == ' ')
        at++;
    keel_str token = {h.ptr + at, h.len - at};

    /* The cache is keyed by the token as received (the digest, under the
     * file's own key, of the base64 text): a token verified before needs
     * neither decoding nor a user lookup. Base64 as the decoder accepts it
     * is canonical, so one token is one user:password. */
    unsigned char digest[AB_MAC_OUT];
    ab_mac_digest(&file->mac, token.ptr, token.len, digest);
    if (am->ttl_ms > 0) {
        ab_entry *e = cache_slot(am, w, digest);
        if (e->user != NULL && e->expires_ms > keel_worker_now_ms(worker) &&
            digest_equal(e->digest, digest)) {
            keel_metric_add(worker, am->cache_hits, 1);
            authenticated(am, req, e->user);
            return KEEL_HTTP_NEXT;
        }
    }

    /* A Basic token that is not base64 (RFC 4648 4, padded), lacks the
     * colon or holds a control character (RFC 7617 2) is a malformed
     * request, not wrong credentials: 400 (RFC 9110 15.5.1). */
    char cred[1024];
    long n = ws_base64_decode(token.ptr, token.len, (uint8_t *)cred, sizeof cred);
    const char *colon = n > 0 ? memchr(cred, ':', (size_t)n) : NULL;
    int bad = colon == NULL;
    for (long i = 0; !bad && i < n; i++)
        bad = (unsigned char)cred[i] < 0x20 || cred[i] == 0x7f;
    if (bad) {
        wipe(cred, sizeof cred);
        return keel_response_send_status(res, 400);
    }
    size_t user_len = (size_t)(colon - cred), pass_len = (size_t)n - user_len - 1;
    const ab_user *u = ab_users_find(&file->users, cred, user_len);

    if (u != NULL && u->kind == AB_HASH_PLAIN) {
        int ok = ab_equal_ct(colon + 1, pass_len, u->hash, u->hash_len);
        wipe(cred, (size_t)n);
        if (!ok)
            return challenge(am, req, res, c);
        authenticated(am, req, u);
        return KEEL_HTTP_NEXT;
    }

    ab_job *job = malloc(sizeof *job + pass_len + 1);
    if (job == NULL) {
        wipe(cred, (size_t)n);
        return KEEL_ERR_NOMEM;
    }
    *job = (ab_job){.am = am, .res = res, .conf = c, .user = u, .pass_len = pass_len};
    /* An unknown user costs a hash of the file's first entry too, so that
     * the time taken does not tell which users exist. */
    job->hash = u != NULL ? u->hash : file->users.users[0].hash;
    memcpy(job->digest, digest, sizeof digest);
    memcpy(job->pass, colon + 1, pass_len);
    job->pass[pass_len] = '\0';
    wipe(cred, (size_t)n);
    int rc = keel_offload(req, verify_work, verify_done, job);
    if (rc != KEEL_OK) {
        wipe(job->pass, pass_len);
        free(job);
        return rc;
    }
    return KEEL_HTTP_DONE;
}

/* ---- the service -------------------------------------------------------------- */

static ab_module *the_module; /* the service's function has no userdata */

static keel_str ab_user_of(keel_request *req)
{
    const ab_user *u = the_module ? keel_request_data(req, the_module->module) : NULL;
    return u ? (keel_str){u->name, u->name_len} : (keel_str){NULL, 0};
}

/* ---- load ------------------------------------------------------------------------ */

static int load_files(ab_module *am, const ab_conf *c)
{
    am->files = calloc(c->file.count ? c->file.count : 1, sizeof *am->files);
    if (am->files == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < c->file.count; i++) {
        const char *item = c->file.items[i], *sp = strchr(item, ' ');
        if (sp == NULL || sp == item)
            return keel_config_error(am->module, "file", "expected NAME PATH, got '%s'", item);
        size_t name_len = (size_t)(sp - item);
        while (*sp == ' ')
            sp++;
        char path[4096], err[1024];
        if (keel_config_path(am->module, "file", i, sp, path, sizeof path) != KEEL_OK)
            return keel_config_error(am->module, "file", "path too long: %s", sp);
        ab_file *f = &am->files[am->nfiles];
        if ((f->name = malloc(name_len + 1)) == NULL)
            return KEEL_ERR_NOMEM;
        memcpy(f->name, item, name_len);
        f->name[name_len] = '\0';
        am->nfiles++;
        if (find_file(am, f->name) != f || strcmp(f->name, "off") == 0)
            return keel_config_error(am->module, "file", "the name '%s' is %s", f->name,
                                     find_file(am, f->name) != f ? "given twice" : "reserved");
        unsigned char key[AB_MAC_KEY];
        if (getentropy(key, sizeof key) != 0)
            return keel_config_error(am->module, "file", "no random bytes for the cache's key");
        ab_mac_init(&f->mac, key, 1);
        wipe(key, sizeof key);
        if (ab_users_load(&f->users, path, c->allow_weak_hashes, err, sizeof err) != 0)
            return keel_config_error(am->module, "file", "%s", err);
    }
    return KEEL_OK;
}

static void ab_free(ab_module *am)
{
    while (am->scopes != NULL) {
        ab_scope *next = am->scopes->next;
        free(am->scopes);
        am->scopes = next;
    }
    for (size_t i = 0; i < am->nfiles; i++) {
        free(am->files[i].name);
        ab_users_free(&am->files[i].users);
        ab_mac_wipe(&am->files[i].mac);
    }
    free(am->files);
    free(am);
}

static int ab_load(keel_module *module)
{
    const ab_conf *c = keel_module_config(module);
    ab_module *am = calloc(1, sizeof *am);
    if (am == NULL)
        return KEEL_ERR_NOMEM;
    am->module = module;
    am->ttl_ms = c->cache_ttl_ms;
    am->cache_size = (size_t)c->cache_size;
    keel_module_set_data(module, am);
    int rc = load_files(am, c);
    if (rc == KEEL_OK) {
        if ((rc = keel_metric_new(module, "auth_basic_verifications_total",
                                  "passwords checked with crypt_r on the thread pool",
                                  KEEL_METRIC_COUNTER, NULL, &am->verified)) == KEEL_OK &&
            (rc = keel_metric_new(module, "auth_basic_cache_hits_total",
                                  "requests let in by a remembered verification",
                                  KEEL_METRIC_COUNTER, NULL, &am->cache_hits)) == KEEL_OK)
            rc = keel_metric_new(module, "auth_basic_refused_total",
                                 "401 answers: no, another scheme's or wrong credentials",
                                 KEEL_METRIC_COUNTER, NULL, &am->refused);
    }
    if (rc == KEEL_OK) {
        am->service = (auth_basic_service){sizeof am->service, ab_user_of};
        the_module = am;
        rc = keel_service_publish(module, AUTH_BASIC_SERVICE, 1, &am->service);
    }
    if (rc == KEEL_OK) {
        am->filter = (keel_http_filter){
            .size = sizeof(keel_http_filter),
            .name = "auth_basic",
            .order = KEEL_ORDER_FIRST,
            /* The scope whose `users` hold is the one a rewrite chose. */
            .after = "rewrite",
            .userdata = am,
            .on_request = ab_on_request,
            .scope = ab_scope_of,
        };
        rc = keel_http_filter_add(module, &am->filter);
    }
    if (rc != KEEL_OK) {
        the_module = NULL;
        keel_module_set_data(module, NULL);
        ab_free(am); /* unload runs only after a successful load */
    }
    return rc;
}

static void ab_unload(keel_module *module)
{
    ab_module *am = keel_module_data(module);
    if (am != NULL) {
        the_module = NULL;
        ab_free(am);
    }
}

static int ab_start(keel_module *module, keel_worker *worker, void *state)
{
    ab_module *am = keel_module_data(module);
    ab_worker *w = state;
    (void)worker;
    w->cache = calloc(am->cache_size, sizeof *w->cache);
    return w->cache != NULL ? KEEL_OK : KEEL_ERR_NOMEM;
}

static void ab_stop(keel_module *module, keel_worker *worker, void *state)
{
    ab_module *am = keel_module_data(module);
    ab_worker *w = state;
    (void)worker;
    if (w->cache != NULL) {
        wipe(w->cache, am->cache_size * sizeof *w->cache);
        free(w->cache);
        w->cache = NULL;
    }
}

KEEL_MODULE(auth_basic, .version = "1.0.0", .load = ab_load, .unload = ab_unload, .start = ab_start,
            .stop = ab_stop, .worker_state_size = sizeof(ab_worker), .config = &ab_schema);
