/* static.h — the static module's internal types, shared by its files.
 *
 * One request's path through the module (static.c): find the mount (longest
 * prefix), check the rest of the path lexically (pathcheck.c), open it
 * confined to the mount's root (resolve.c / resolve_win.c), then either
 * redirect, list or serve: MIME type (mime.c), validators and preconditions
 * (conditional.c), content coding (encoding.c), ranges (range.c, and
 * multipart.c for several). Everything here runs on a worker thread; the
 * configuration is read-only after load and shared by every worker.
 */
#ifndef KEEL_STATIC_H
#define KEEL_STATIC_H

#include <keel/keel.h>
#include <keel/util.h>

#include <stddef.h>
#include <stdint.h>

/* ---- configuration -------------------------------------------------------- */

enum st_symlinks {
    ST_LINKS_OFF = 0,    /* no symbolic link anywhere in the path */
    ST_LINKS_INSIDE = 1, /* links followed while they stay under the root */
    ST_LINKS_FOLLOW = 2  /* any link followed (a trusted docroot, nginx's default) */
};

enum st_resolver {
    ST_RESOLVE_AUTO = 0, /* openat2(RESOLVE_BENEATH) where the kernel has it, else the walk */
    ST_RESOLVE_WALK = 1  /* the portable openat walk, component by component */
};

#define ST_MAX_INDEX 4

typedef struct st_mount {
    const char *line; /* the config's text of the line (keel_config_value_error) */
    char *prefix;     /* URL prefix without a trailing slash ("" for "/") */
    size_t prefix_len;
    char *root;     /* directory, absolute or as written (relative: to the working directory) */
    int root_fd;    /* POSIX: the root directory, opened once at load; -1 on Windows */
    void *platform; /* Windows: the root's full and final paths (resolve_win.c) */
    char *index[ST_MAX_INDEX];
    size_t nindex;
    int listing;
    int dotfiles;
    int symlinks;
    int resolver;
    int precompressed;
    char *cache_control; /* NULL: none */
    /* Cache-Control as a field prepared at load (keel_field_prepare):
     * added by pointer on every response; NULL without cache_control or
     * for a value the core refuses (then set as text, which fails the same). */
    const keel_prepared_field *cache_control_field;
} st_mount;

/* A media type as the module answers with it: the text (multipart's part
 * heads) and the Content-Type field prepared at load, or NULL for a
 * configured type the core refuses to prepare (then set as text). */
typedef struct st_ctype {
    const char *text;
    const keel_prepared_field *field;
} st_ctype;

typedef struct st_type {
    char *ext; /* lower case, without the dot */
    st_ctype type;
} st_type;

/* One scope's mount lines, parsed and their roots opened once at load;
 * scopes that inherit a list share it (the same items pointer). */
typedef struct st_table {
    const char *const *items; /* the config's list: the key */
    st_mount *mounts;
    size_t nmounts;
} st_table;

/* A scope's struct of the module and the table it serves from. */
typedef struct st_scope {
    const void *conf;
    const st_table *table;
} st_scope;

typedef struct st_config {
    keel_module *module;
    st_table global;   /* the [static] section's mount lines */
    st_table **tables; /* the scopes' own lists */
    size_t ntables;
    st_scope *scopes; /* sorted by conf */
    size_t nscopes;
    st_type *types; /* from the config, looked up before the built-in table */
    size_t ntypes;
    st_ctype *builtin_types; /* mime.c's table in its order, then the default type */
    /* Fields every file response of a kind carries, prepared at load. */
    const keel_prepared_field *accept_ranges; /* "bytes", or "none" with max_ranges 0 */
    const keel_prepared_field *vary_encoding; /* Vary: Accept-Encoding (precompressed=on) */
    uint64_t max_ranges;
    uint64_t cache_valid_ms;                   /* open-file cache validity; 0: off */
    uint64_t cache_entries;                    /* per worker */
    uint64_t cache_content, cache_content_max; /* largest file in memory; per worker */
    int cache_on;
    keel_metric *m_status[6];        /* 2xx/3xx/4xx by class: static_responses_total */
    keel_metric *m_bytes;            /* static_bytes_sent_total (bodies promised) */
    keel_metric *m_no_descriptor[2]; /* static_open_errors_total: emfile, enfile */
} st_config;

/* The [static] section as the core fills it (keel/config.h), per scope:
 * `mount` may be written in a listener or site scope too (a scope that
 * writes it replaces the outer list), `try` in any scope. */
typedef struct st_settings {
    keel_config_list mount, type;
    int64_t max_ranges, cache_entries;
    uint64_t cache_valid_ms;
    uint64_t cache_content, cache_content_max;
    const char *try_files; /* `try`: NULL or "" for none */
} st_settings;

/* mount.c: checks a `try` value (keel_config_key.check). */
int st_try_check(const char *value, char *why, size_t whylen);

/* Parses the index-th `mount` value, line. */
int st_mount_parse(keel_module *module, const char *line, size_t index, st_mount *out);
/* index for a line of a [listener] or [site] scope: its DIRECTORY must be
 * absolute. */
#define ST_MOUNT_SCOPED ((size_t)-1)
/* Reports a bad mount line by its file and line; returns KEEL_ERR_CONFIG. */
int st_mount_error(keel_module *module, const st_mount *m, const char *fmt, ...);
void st_mount_free(st_mount *m);

/* ---- what a file is ------------------------------------------------------- */

enum { ST_KIND_OTHER = 0, ST_KIND_FILE = 1, ST_KIND_DIR = 2 };

typedef struct st_info {
    uint64_t size;
    uint64_t ino;
    uint64_t dev;
    int64_t mtime;   /* seconds */
    long mtime_nsec; /* 0 where the system keeps whole seconds */
    int kind;
    int gone; /* unlinked since it was opened (st_nlink 0): open the name again */
} st_info;

/* ---- pathcheck.c ---------------------------------------------------------- */

/* Checks the part of the path below the mount lexically, before any system
 * call: 0 if it may be opened, else the status to answer (403 for shapes no
 * file of this server can have, 404 for dotfiles when the mount hides them). */
int st_path_check(const st_mount *m, const char *rel, size_t len);

/* ---- resolve.c / resolve_win.c (one per platform) -------------------------- */

/* Opens the mount's root at load. KEEL_OK or a keel error (logged). */
int st_root_open(keel_module *module, st_mount *m);
void st_root_close(st_mount *m);

/* What st_open returns when no descriptor is left: the process's limit
 * (EMFILE) or the system's (ENFILE). Not statuses: the handler answers
 * 503 for both (st_unavailable) and counts them apart. */
enum { ST_NO_FD_PROCESS = -2, ST_NO_FD_SYSTEM = -3 };

/* ST_NO_FD_* for an errno value (EMFILE, ENFILE), else 0. */
int st_no_fd_of(int err);

/* Opens rel (a path below the root, '/'-separated, no empty, "." or ".."
 * segment; "" for the root) without ever leaving the root as the mount's
 * symlinks option says. On success 0, *fd open (read-only, close-on-exec,
 * non-blocking so that a FIFO cannot stall the loop) and *info filled;
 * otherwise the status to answer (403, 404, 500) or ST_NO_FD_*, and no
 * descriptor. */
int st_open(const st_mount *m, const char *rel, int *fd, st_info *info);

/* A second descriptor for the same open file (for a reader that closes
 * its own), or -1 with errno set. */
int st_dup(int fd);

/* Fills info for an open descriptor: 0, or -1. */
int st_fstat(int fd, st_info *info);
void st_close(int fd);

/* Directory entries for a listing: fn(name, info, arg) for each entry but
 * "." and ".."; the walk stops on a non-zero return. 0, or -1 if the
 * directory cannot be read, or ST_NO_FD_* if no descriptor was left to
 * read it with. */
typedef int (*st_dir_fn)(const char *name, const st_info *info, void *arg);
int st_dir_each(const st_mount *m, const char *rel, int dirfd, st_dir_fn fn, void *arg);

/* ---- mime.c ------------------------------------------------------------------ */

/* The type for a file name (by its last extension): the config's types
 * first, then the built-in table; "application/octet-stream" if unknown.
 * The text is complete (";charset=utf-8" included where it belongs).
 * Only after st_mime_prepare. */
const st_ctype *st_mime_type(const st_config *cfg, const char *name, size_t len);
/* A config type's value with the charset appended where it belongs. */
char *st_mime_with_charset(const char *mime);
/* At load, after the config's types are read: every type's Content-Type
 * field (keel_field_prepare), the built-in ones in cfg->builtin_types.
 * KEEL_OK or KEEL_ERR_NOMEM. */
int st_mime_prepare(keel_module *module, st_config *cfg);

/* ---- conditional.c -------------------------------------------------------- */

#define ST_ETAG_MAX 64
#define ST_DATE_MAX 64 /* an IMF-fixdate (29 bytes), room for any year keel_time_format writes */

/* Writes the strong ETag (quotes included) for info, with a suffix for a
 * content coding (NULL for none). */
size_t st_etag(const st_info *info, const char *coding, char *buf, size_t size);

/* Parses an HTTP-date (IMF-fixdate, RFC 850 or asctime, RFC 9110 5.6.7);
 * 0 and *out on success, -1 if invalid. */
int st_http_date_parse(const char *s, size_t len, int64_t *out);

/* The precondition result for a GET/HEAD (RFC 9110 13.2.2): 0 to go on,
 * 304 or 412. */
int st_preconditions(keel_request *req, const char *etag, int64_t mtime);

/* 1 if the If-Range condition holds (or there is none): the Range field
 * applies. */
int st_if_range(keel_request *req, const char *etag, int64_t mtime);

/* ---- range.c ---------------------------------------------------------------- */

typedef struct st_range {
    uint64_t first, last; /* inclusive */
} st_range;

enum {
    ST_RANGE_NONE = 0, /* no Range or one to ignore: the whole file, 200 */
    ST_RANGE_OK = 1,   /* ranges[0..n) to send, 206 */
    ST_RANGE_UNSAT = 2 /* 416 */
};

/* Parses a Range field value for a representation of `size` bytes
 * (RFC 9110 14.1.2), checks it against max_ranges and the nginx rule on
 * the total, coalesces overlapping and adjacent ranges and puts them in
 * the order they were asked for. *ranges is malloc'ed when the result is
 * ST_RANGE_OK (free it). */
int st_range_parse(const char *value, size_t len, uint64_t size, uint64_t max_ranges,
                   st_range **ranges, size_t *n);

/* ---- encoding.c --------------------------------------------------------------- */

enum { ST_ENC_IDENTITY = 0, ST_ENC_GZIP = 1, ST_ENC_BR = 2 };

/* The q-value (0..1000) the Accept-Encoding value gives a coding
 * ("gzip", "br"), honouring "*" and "identity;q=0" rules (RFC 9110 12.5.3). */
int st_accept_q(keel_str accept, const char *coding);

/* ---- multipart.c -------------------------------------------------------------- */

/* Sends ranges as multipart/byteranges (RFC 9110 14.6): the part heads from
 * memory and the parts as file ranges, in one keel_response_send_pieces.
 * Takes fd and ranges (closes and frees them once the core is done). */
int st_multipart_send(const st_config *cfg, keel_request *req, keel_response *res, int fd,
                      uint64_t size, const char *type, st_range *ranges, size_t n);

/* ---- listing.c ------------------------------------------------------------------ */

/* Answers a directory listing of rel (the URL path `url` ends in '/'). Takes
 * the descriptor. */
int st_listing_send(const st_config *cfg, const st_mount *m, keel_request *req, keel_response *res,
                    const char *url, size_t url_len, const char *rel, int dirfd);

/* ---- escape.c and helpers ------------------------------------------------------- */

/* Percent-encodes all but RFC 3986's unreserved bytes (and '/' if path);
 * the length written (out NUL-terminated), 0 if cap is too small. */
size_t st_url_encode(const char *s, size_t len, int path, char *out, size_t cap);
/* Escapes < > & " ' for HTML text and attributes; as st_url_encode. */
size_t st_html_escape(const char *s, size_t len, char *out, size_t cap);

int st_mime_table_sorted(void);

/* ---- cache.c ------------------------------------------------------------------------ */

/* A small file's bytes kept in memory (cache.c), shared by the cache and
 * the responses sending them: freed with the last reference. */
typedef struct st_content {
    unsigned refs;
    size_t size;
    char bytes[];
} st_content;

void st_content_release(void *data, void *content);

/* An open file shared by the cache and the requests sending it. */
typedef struct st_file {
    int fd;
    st_info info;
    unsigned refs;
    st_content *content; /* its bytes, read under `info`; NULL: not kept */
    /* What a response with the file's own bytes carries, made once rather
     * than on every response: the type of the name it was opened by (a
     * file is one cache entry's), and the validators of `info`
     * (st_file_validators): the text the preconditions compare with, and
     * the ETag and Last-Modified fields (keel_field_make) responses add
     * by pointer. `info` never changes (the cache opens a file whose
     * metadata changed into a new st_file), so neither do they; the
     * fields are freed with the last reference, and every response that
     * added them holds one until its log phase (file.c). */
    const st_ctype *type; /* NULL: not looked up yet */
    int validators_ok;
    char etag[ST_ETAG_MAX];
    char last_modified[ST_DATE_MAX];
    const keel_prepared_field *validator_fields[2]; /* ETag, Last-Modified; NULL: text */
} st_file;

/* f's ETag (without a content coding) and Last-Modified for its info, and
 * their fields, made now unless they were already. Worker thread. */
void st_file_validators(st_file *f);

typedef struct st_centry st_centry;

/* One worker's open-file cache (no lock: only its worker touches it). */
typedef struct st_cache {
    st_centry **buckets;
    size_t nbuckets;
    size_t count;
    st_centry *lru_head, *lru_tail; /* most recently used first */
    uint64_t valid_ms;
    size_t max;
    uint64_t hits, misses; /* for the log at stop, and the benchmark */
    /* The content cache: files up to content_max bytes are read once and
     * answered from memory, content_bytes of them at most content_budget
     * (the least recently used give theirs up first). */
    size_t content_max, content_budget, content_bytes;
    keel_worker *worker;
    uint64_t turn;        /* moves once the requests of one moment are served */
    unsigned turn_posted; /* a post will move it */
} st_cache;

int st_cache_init(st_cache *c, keel_worker *worker, uint64_t valid_ms, size_t max,
                  size_t content_max, size_t content_budget);
void st_cache_free(st_cache *c);

/* f's bytes from memory (a reference the caller releases with
 * st_content_release), read now if f is small enough and the budget
 * allows; NULL to send the file itself. f came from st_cache_open in this
 * turn, so its metadata is current: bytes read under other metadata were
 * dropped by that fstat. */
st_content *st_cache_content(st_cache *c, st_file *f);

/* How the name given to st_cache_open was made. A name from the request's
 * path is opened only once st_path_check let it by; the entry remembers
 * that it did (the check reads nothing but the name and the mount), so
 * that a hit skips it. A name the module made (a mount's index, a
 * precompressed sibling) is not checked, and its entry is not marked: a
 * request naming it directly is checked the first time. */
enum {
    ST_NAME_MADE = 0,      /* the module's own name: no check */
    ST_NAME_UNCHECKED = 1, /* the request's, not checked yet */
    ST_NAME_CHECKED = 2    /* the request's, st_path_check let it by */
};
/* st_cache_open's answer to ST_NAME_UNCHECKED when its entry is not
 * marked: check the name and ask again with ST_NAME_CHECKED. */
#define ST_CHECK_NAME (-4)

/* st_open through the cache for rel[0..len) (rel[len] is '\0'), a name
 * made as `name` says: 0 and *file (one reference, the caller's), a
 * status, or ST_CHECK_NAME (above). An entry younger than valid_ms is used
 * after an fstat of its descriptor, one per turn of requests (so a file
 * rewritten in place is seen by the next request, with its new size and
 * ETag); an older one, or one whose file was unlinked, is opened again by
 * name and kept only if it is still the same file. Misses (404) are
 * cached the same way. */
int st_cache_open(st_cache *c, uint64_t now_ms, const st_mount *m, const char *rel, size_t len,
                  int name, st_file **file);
void st_file_release(st_file *f);

/* Per-worker state. */
typedef struct st_worker {
    uint64_t boundary_seq; /* multipart boundaries */
    st_cache cache;
    uint64_t no_fd_logged_ms; /* st_unavailable's line: at most one a second */
    uint64_t no_fd_held;      /* ... and how many were held back since */
    int no_fd_any;
} st_worker;

/* ---- one request ----------------------------------------------------------- */

/* The longest URL path the module serves (longer ones are a 404). */
#define ST_PATH_MAX 4096

/* What one request works with. */
typedef struct st_ctx {
    const st_config *cfg;
    const st_table *table; /* the request scope's mounts */
    keel_request *req;
    keel_response *res;
    st_worker *ws; /* NULL without the cache */
    uint64_t now_ms;
} st_ctx;

/* An opened file: owned (shared NULL), or a reference to the cache's
 * entry, whose descriptor stays the cache's. */
typedef struct st_open_file {
    int fd;
    st_info info;
    st_file *shared; /* the cache's; NULL when fd is ours alone */
    /* The reference to `shared` is the request's now, released in the
     * log phase (static.c): closing this gives nothing back. */
    int held;
} st_open_file;

/* Answers status (an HTTP status, or ST_NO_FD_*: 503) with a short text
 * or the core's page (403, 404: the errors module applies), counted. */
int st_answer(const st_config *cfg, keel_request *req, keel_response *res, int status);

/* file.c: one file's response. */

/* Opens rel[0..len) (rel[len] is '\0') under m, through the cache when
 * there is one; `name` is ST_NAME_* (above). 0 and *of, or a status
 * (404, 403, ST_NO_FD_*) for st_answer. */
int st_open_rel(const st_ctx *x, const st_mount *m, const char *rel, size_t len, int name,
                st_open_file *of);
/* Gives back what st_open_rel opened. */
void st_of_close(st_open_file *of);
/* A descriptor the caller owns and closes (a shared one is duplicated),
 * in *fd with 0; or the status to answer instead (500, ST_NO_FD_*). *of
 * is closed either way. */
int st_of_take(st_open_file *of, int *fd);
/* Answers with the regular file *of names (rel[0..rlen) under m: its type,
 * and room for a sibling's suffix after it): the fields, the
 * preconditions (304, 412), a range (206, 416) or the whole (200). Takes
 * *of. */
int st_serve_file(const st_ctx *x, const st_mount *m, st_open_file *of, char *rel, size_t rlen);

/* Counts a response in static_responses_total and static_bytes_sent_total. */
void st_count(const st_config *cfg, keel_request *req, int status, uint64_t bytes);

/* Answers 503 with Retry-After for a file that could not be opened for
 * want of descriptors (why: ST_NO_FD_*), counts it in
 * static_open_errors_total and logs it, at most a line a second per
 * worker. Worker thread. */
int st_unavailable(const st_config *cfg, keel_request *req, keel_response *res, int why);

#endif
