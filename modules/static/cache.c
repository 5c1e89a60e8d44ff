/* cache.c — the per-worker open-file cache (nginx's open_file_cache).
 *
 * Without it a request costs openat2 + fstat + close besides the response's
 * own system calls; with it, one fstat on the cached descriptor per turn:
 * requests served in the same moment (an HTTP/2 read's hundred streams,
 * many connections' requests that arrived together) share it. A turn ends
 * when a function posted to the worker (keel_worker_post) runs, which is
 * before the loop reads anything that arrived after the first of them was
 * answered, so a client that rewrites a file and asks again always gets
 * the fresh metadata (as h2o's file cache, cleared each loop iteration).
 * The fstat stays on purpose: it keeps the size and the ETag exact for a file
 * rewritten in place (the descriptor reads the new bytes at once, so its
 * metadata must be the new one too, or a shorter file would break the
 * promised length), and it notices a file unlinked or renamed over
 * (st_nlink 0); either way the name is opened again, into a new st_file,
 * so that an st_file's metadata, and what is made of it once (its
 * validators and their fields, its bytes), never change under a response
 * that holds it. Past `cache_valid` the name is
 * opened again anyway (a rename of another file over the name, a symlink
 * changed) and the entry kept only if it is still the same file (device,
 * inode, size, mtime). Lookups that found nothing (404) are cached the
 * same way, which makes precompressed=on cost nothing for files that have
 * no siblings. An entry also remembers that its name passed the lexical
 * checks (pathcheck.c), which depend on nothing but the name and the
 * mount, and the file keeps its formatted validators and its type
 * (static.h, st_file): a hit formats, searches and checks nothing.
 *
 * Descriptors are shared: the cache holds one reference, each response
 * sending the file another, released in the log phase (static.c), once
 * the last byte has left. An evicted or replaced file is closed when its
 * last reference goes. Per worker, so no lock; bounded by cache_entries
 * (least recently used out first). The measured effect is in
 * docs/static.md.
 */
#include "static.h"

#include <stdlib.h>
#include <string.h>

struct st_centry {
    const st_mount *m;
    char *key;
    size_t klen;
    uint32_t hash;
    int status;       /* 0: file holds the open file; else the cached answer (404) */
    int name_checked; /* the key passed st_path_check (ST_NAME_CHECKED) */
    st_file *file;
    uint64_t checked_ms;
    uint64_t fstat_turn; /* the cache's turn when its metadata was read */
    st_centry *next;     /* hash chain */
    st_centry *prev_lru, *next_lru;
};

static uint32_t hash_of(const st_mount *m, const char *s, size_t n)
{
    uint32_t h = 2166136261u ^ (uint32_t)(uintptr_t)m;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

int st_cache_init(st_cache *c, keel_worker *worker, uint64_t valid_ms, size_t max,
                  size_t content_max, size_t content_budget)
{
    memset(c, 0, sizeof *c);
    c->worker = worker;
    c->turn = 1; /* entries start at 0: not read in this turn */
    c->valid_ms = valid_ms;
    c->max = max;
    c->content_max = content_max;
    c->content_budget = content_budget;
    size_t n = 64;
    while (n < max * 2 && n < (1u << 20))
        n *= 2;
    c->buckets = calloc(n, sizeof *c->buckets);
    if (c->buckets == NULL)
        return KEEL_ERR_NOMEM;
    c->nbuckets = n;
    return KEEL_OK;
}

void st_content_release(void *data, void *content)
{
    (void)data;
    st_content *k = content;
    if (--k->refs == 0)
        free(k);
}

void st_file_release(st_file *f)
{
    if (f != NULL && --f->refs == 0) {
        if (f->content != NULL)
            st_content_release(NULL, f->content);
        keel_field_free(f->validator_fields[0]);
        keel_field_free(f->validator_fields[1]);
        st_close(f->fd);
        free(f);
    }
}

/* The cache gives up f's bytes (responses sending them keep theirs). */
static void content_drop(st_cache *c, st_file *f)
{
    if (f == NULL || f->content == NULL)
        return;
    c->content_bytes -= f->content->size;
    st_content_release(NULL, f->content);
    f->content = NULL;
}

static void lru_unlink(st_cache *c, st_centry *e)
{
    if (e->prev_lru)
        e->prev_lru->next_lru = e->next_lru;
    else
        c->lru_head = e->next_lru;
    if (e->next_lru)
        e->next_lru->prev_lru = e->prev_lru;
    else
        c->lru_tail = e->prev_lru;
    e->prev_lru = e->next_lru = NULL;
}

static void lru_front(st_cache *c, st_centry *e)
{
    e->next_lru = c->lru_head;
    e->prev_lru = NULL;
    if (c->lru_head)
        c->lru_head->prev_lru = e;
    c->lru_head = e;
    if (c->lru_tail == NULL)
        c->lru_tail = e;
}

static void entry_free(st_cache *c, st_centry *e)
{
    st_centry **pp = &c->buckets[e->hash & (c->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->next;
    *pp = e->next;
    lru_unlink(c, e);
    content_drop(c, e->file);
    st_file_release(e->file);
    free(e->key);
    free(e);
    c->count--;
}

void st_cache_free(st_cache *c)
{
    while (c->lru_head)
        entry_free(c, c->lru_head);
    free(c->buckets);
    memset(c, 0, sizeof *c);
}

static int same_file(const st_info *a, const st_info *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime == b->mtime &&
           a->mtime_nsec == b->mtime_nsec && a->kind == b->kind;
}

/* Opens rel by name into a new st_file (one reference) or a status. */
static int open_new(const st_mount *m, const char *rel, st_file **out)
{
    int fd;
    st_info info;
    int rc = st_open(m, rel, &fd, &info);
    if (rc != 0)
        return rc;
    st_file *f = malloc(sizeof *f);
    if (f == NULL) {
        st_close(fd);
        return 500;
    }
    *f = (st_file){.fd = fd, .info = info, .refs = 1};
    *out = f;
    return 0;
}

static void turn_end(keel_worker *worker, void *userdata)
{
    (void)worker;
    st_cache *c = userdata;
    c->turn++;
    c->turn_posted = 0;
}

/* e's metadata was just read: good for the rest of this turn, if the turn
 * can be ended (otherwise the next request reads it again). */
static void fresh_this_turn(st_cache *c, st_centry *e)
{
    if (!c->turn_posted && c->worker != NULL && keel_worker_post(c->worker, turn_end, c) == KEEL_OK)
        c->turn_posted = 1;
    e->fstat_turn = c->turn;
}

/* Re-opens the entry's name and keeps what was cached if it is the same
 * file; 0 if the entry now holds a usable answer. */
static void refresh(st_cache *c, st_centry *e, uint64_t now)
{
    st_file *f = NULL;
    int rc = open_new(e->m, e->key, &f);
    e->checked_ms = now;
    if (rc == 0 && e->status == 0 && same_file(&f->info, &e->file->info) && !f->info.gone) {
        st_file_release(f); /* unchanged: keep the descriptor we have */
        return;
    }
    content_drop(c, e->file);
    st_file_release(e->file);
    e->file = rc == 0 ? f : NULL;
    e->status = rc;
}

int st_cache_open(st_cache *c, uint64_t now, const st_mount *m, const char *rel, size_t klen,
                  int name, st_file **file)
{
    uint32_t h = hash_of(m, rel, klen);
    st_centry *e = c->buckets[h & (c->nbuckets - 1)];
    while (e && !(e->hash == h && e->m == m && e->klen == klen && memcmp(e->key, rel, klen) == 0))
        e = e->next;
    if (name == ST_NAME_UNCHECKED && (e == NULL || !e->name_checked))
        return ST_CHECK_NAME;
    if (e != NULL) {
        c->hits++;
        if (name == ST_NAME_CHECKED)
            e->name_checked = 1;
        if (now - e->checked_ms >= c->valid_ms) {
            refresh(c, e, now);
        } else if (e->status == 0 && !(c->turn_posted && e->fstat_turn == c->turn)) {
            st_info now_info;
            if (st_fstat(e->file->fd, &now_info) != 0 || now_info.gone) {
                refresh(c, e, now);
            } else if (!same_file(&now_info, &e->file->info)) {
                /* Rewritten in place: a new st_file under the new
                 * metadata, as for a file renamed over. The old one's
                 * info, bytes and validator fields stay as they are for
                 * the responses still holding it. */
                refresh(c, e, now);
            }
            fresh_this_turn(c, e);
        }
        if (c->lru_head != e) {
            lru_unlink(c, e);
            lru_front(c, e);
        }
        /* 500s (out of descriptors, say) are not worth keeping. */
        if (e->status != 0 && e->status != 404 && e->status != 403) {
            int rc = e->status;
            entry_free(c, e);
            return rc;
        }
        if (e->status != 0)
            return e->status;
        e->file->refs++;
        *file = e->file;
        return 0;
    }
    c->misses++;
    st_file *f = NULL;
    int rc = open_new(m, rel, &f);
    if (rc != 0 && rc != 404 && rc != 403)
        return rc;
    e = calloc(1, sizeof *e);
    char *key = malloc(klen + 1);
    if (e == NULL || key == NULL) { /* no room to remember: answer anyway */
        free(e);
        free(key);
        if (rc == 0)
            *file = f;
        return rc;
    }
    memcpy(key, rel, klen);
    key[klen] = '\0';
    e->m = m;
    e->key = key;
    e->klen = klen;
    e->hash = h;
    e->status = rc;
    e->name_checked = name == ST_NAME_CHECKED;
    e->file = f;
    e->checked_ms = now;
    e->next = c->buckets[h & (c->nbuckets - 1)];
    c->buckets[h & (c->nbuckets - 1)] = e;
    lru_front(c, e);
    c->count++;
    while (c->count > c->max && c->lru_tail != e)
        entry_free(c, c->lru_tail);
    if (rc != 0)
        return rc;
    f->refs++;
    *file = f;
    return 0;
}

/* ---- the content cache ---------------------------------------------------- */

/* Room for `need` more bytes: the least recently used entries give theirs
 * up first (their descriptors stay). */
static int content_room(st_cache *c, const st_file *keep, size_t need)
{
    if (need > c->content_budget)
        return 0;
    for (st_centry *e = c->lru_tail; e != NULL && c->content_bytes + need > c->content_budget;
         e = e->prev_lru)
        if (e->file != keep)
            content_drop(c, e->file);
    return c->content_bytes + need <= c->content_budget;
}

st_content *st_cache_content(st_cache *c, st_file *f)
{
    if (f->content == NULL) {
        /* Read on the loop, as sendfile would have read it there: a
         * small file, mostly in the page cache already. An empty file
         * has nothing worth keeping. */
        uint64_t size = f->info.size;
        if (f->info.kind != ST_KIND_FILE || size == 0 || size > c->content_max ||
            !content_room(c, f, (size_t)size))
            return NULL;
        st_content *k = malloc(sizeof *k + (size_t)size);
        if (k == NULL)
            return NULL;
        if (keel_pread_all(f->fd, k->bytes, (size_t)size, 0) != 0) {
            free(k); /* shorter than its fstat said: let sendfile's checks answer */
            return NULL;
        }
        k->refs = 1;
        k->size = (size_t)size;
        f->content = k;
        c->content_bytes += k->size;
    }
    f->content->refs++;
    return f->content;
}
