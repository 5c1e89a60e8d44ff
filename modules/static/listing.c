/* listing.c — a directory's index page (listing=on; off by default, as in
 * nginx's autoindex).
 *
 * The directory is read and the page built on the thread pool
 * (keel_offload): a directory of a hundred thousand entries must not stall
 * the loop. Every name is HTML-escaped in the text and percent-encoded in
 * the link (a file may be called `<script>.txt` or `a"b`), dotfiles are
 * left out unless the mount allows them, and so is every name that the
 * lexical checks would refuse anyway (a link that only answers 403 helps
 * nobody). Entries are sorted, directories first, then by name in byte
 * order; each line has the size in bytes and the modification time in UTC.
 * At most ST_LIST_MAX entries are shown.
 */
#include "static.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ST_LIST_MAX 10000

typedef struct entry {
    char *name;
    st_info info;
} entry;

typedef struct listing {
    const st_config *cfg;
    const st_mount *m;
    keel_response *res;
    int fd;
    char *rel;
    char *url; /* the decoded URL path, ending in '/' */
    size_t url_len;
    entry *e;
    size_t n, cap;
    int truncated;
    char *out; /* the page */
    size_t len, out_cap;
    int failed;
    int no_fd; /* ST_NO_FD_*: no descriptor was left to read the directory */
} listing;

static int collect(const char *name, const st_info *info, void *arg)
{
    listing *l = arg;
    size_t nl = strlen(name);
    if (info->kind == ST_KIND_OTHER || st_path_check(l->m, name, nl) != 0)
        return 0;
    if (l->n == ST_LIST_MAX) {
        l->truncated = 1;
        return 1;
    }
    char *copy = keel_strndup(name, nl);
    if (copy == NULL || keel_reserve(&l->e, &l->cap, l->n + 1, sizeof *l->e, 64) != 0) {
        free(copy);
        return l->failed = 1;
    }
    l->e[l->n++] = (entry){copy, *info};
    return 0;
}

static int by_kind_name(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int dx = x->info.kind == ST_KIND_DIR, dy = y->info.kind == ST_KIND_DIR;
    if (dx != dy)
        return dy - dx;
    return strcmp(x->name, y->name);
}

static void put(listing *l, const char *s, size_t n)
{
    if (!l->failed && keel_append(&l->out, &l->len, &l->out_cap, s, n, 4096) != 0)
        l->failed = 1;
}

static void puts_(listing *l, const char *s)
{
    put(l, s, strlen(s));
}

/* "YYYY-MM-DD HH:MM" in UTC, without gmtime (not every pool thread's libc
 * has gmtime_r under the same name). Hinnant's civil_from_days. */
static void format_time(int64_t t, char *buf, size_t size)
{
    int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400;
    int64_t secs = t - days * 86400;
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    y += m <= 2;
    snprintf(buf, size, "%04lld-%02lld-%02lld %02lld:%02lld", (long long)y, (long long)m,
             (long long)d, (long long)(secs / 3600), (long long)(secs % 3600 / 60));
}

static void build(void *arg)
{
    listing *l = arg;
    int rc = st_dir_each(l->m, l->rel, l->fd, collect, l);
    if (rc != 0) {
        l->failed = 1;
        l->no_fd = rc == ST_NO_FD_PROCESS || rc == ST_NO_FD_SYSTEM ? rc : 0;
    }
    if (l->failed)
        return;
    if (l->n > 1)
        qsort(l->e, l->n, sizeof *l->e, by_kind_name);
    size_t cap = l->url_len * 6 + 1;
    char *title = malloc(cap);
    if (title == NULL || st_html_escape(l->url, l->url_len, title, cap) == 0) {
        free(title);
        l->failed = 1;
        return;
    }
    puts_(l, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ");
    puts_(l, title);
    puts_(l, "</title></head>\n<body><h1>Index of ");
    puts_(l, title);
    puts_(l, "</h1>\n<table>\n<tr><th>Name</th><th>Size</th><th>Modified (UTC)</th></tr>\n");
    if (l->url_len > 1)
        puts_(l, "<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    free(title);
    for (size_t i = 0; i < l->n && !l->failed; i++) {
        const entry *e = &l->e[i];
        size_t nl = strlen(e->name);
        char *href = malloc(nl * 3 + 2), *text = malloc(nl * 6 + 2);
        char line[128], when[80];
        if (href == NULL || text == NULL || st_url_encode(e->name, nl, 0, href, nl * 3 + 2) == 0 ||
            st_html_escape(e->name, nl, text, nl * 6 + 2) == 0) {
            free(href);
            free(text);
            l->failed = 1;
            break;
        }
        int dir = e->info.kind == ST_KIND_DIR;
        format_time(e->info.mtime, when, sizeof when);
        puts_(l, "<tr><td><a href=\"./");
        puts_(l, href);
        puts_(l, dir ? "/\">" : "\">");
        puts_(l, text);
        puts_(l, dir ? "/</a></td><td>-</td><td>" : "</a></td><td>");
        if (!dir) {
            snprintf(line, sizeof line, "%llu</td><td>", (unsigned long long)e->info.size);
            puts_(l, line);
        }
        puts_(l, when);
        puts_(l, "</td></tr>\n");
        free(href);
        free(text);
    }
    puts_(l, "</table>\n");
    if (l->truncated)
        puts_(l, "<p>(only the first 10000 entries are listed)</p>\n");
    puts_(l, "</body></html>\n");
}

static void listing_free(listing *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->e[i].name);
    free(l->e);
    free(l->rel);
    free(l->url);
    st_close(l->fd);
    free(l);
}

static void free_page(void *data, void *userdata)
{
    (void)userdata;
    free(data);
}

static void built(keel_request *req, int status, void *arg)
{
    listing *l = arg;
    if (status != KEEL_OK) { /* the client left */
        free(l->out);
        listing_free(l);
        return;
    }
    keel_response *res = l->res;
    if (l->failed) {
        const st_config *cfg = l->cfg;
        int no_fd = l->no_fd;
        free(l->out);
        listing_free(l);
        if (no_fd)
            st_unavailable(cfg, req, res, no_fd);
        else
            keel_response_send_status(res, 500);
        return;
    }
    char *page = l->out;
    size_t len = l->len;
    listing_free(l);
    keel_response_header_set(res, "Content-Type", "text/html; charset=utf-8");
    keel_response_header_set(res, "Cache-Control", "no-cache");
    keel_response_send(res, page, len, free_page, NULL);
}

int st_listing_send(const st_config *cfg, const st_mount *m, keel_request *req, keel_response *res,
                    const char *url, size_t url_len, const char *rel, int dirfd)
{
    listing *l = calloc(1, sizeof *l);
    size_t rl = strlen(rel);
    if (l == NULL || (l->rel = malloc(rl + 1)) == NULL || (l->url = malloc(url_len + 1)) == NULL) {
        if (l != NULL)
            free(l->rel);
        free(l);
        st_close(dirfd);
        return KEEL_ERR_NOMEM;
    }
    l->cfg = cfg;
    l->m = m;
    l->res = res;
    l->fd = dirfd;
    memcpy(l->rel, rel, rl + 1);
    memcpy(l->url, url, url_len);
    l->url[url_len] = '\0';
    l->url_len = url_len;
    int rc = keel_offload(req, build, built, l);
    if (rc != KEEL_OK)
        listing_free(l);
    return rc;
}
