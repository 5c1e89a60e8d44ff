/* auth_basic/htpasswd.c — Apache's htpasswd format: one `user:hash` a
 * line; `#` comments and blank lines are skipped. */
#include "htpasswd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* What crypt_r verifies well (libxcrypt's strong methods), what it
 * verifies but an attacker with the file cracks fast (MD5-crypt: about a
 * thousand MD5s; DES: 8 characters), and what is no hash at all. Apache's
 * $apr1$ and {SHA} are neither crypt_r's nor safe: refused. */
static int classify(const char *hash, const char **why)
{
    static const char *const strong[] = {"$2a$", "$2b$", "$2y$", "$5$",
                                         "$6$",  "$y$",  "$gy$", "$7$"};
    for (size_t i = 0; i < sizeof strong / sizeof *strong; i++)
        if (starts(hash, strong[i]))
            return AB_HASH_CRYPT;
    if (starts(hash, "$apr1$") || starts(hash, "{SHA}")) {
        *why = "Apache's $apr1$ and {SHA} are not supported: rehash with `htpasswd -B` (bcrypt)";
        return -1;
    }
    if (starts(hash, "$1$")) {
        *why = "an MD5-crypt hash ($1$) is weak: rehash with `htpasswd -B` (bcrypt), or write "
               "allow_weak_hashes = on";
        return AB_HASH_WEAK;
    }
    if (hash[0] == '$') {
        *why = "unknown hash method";
        return -1;
    }
    /* 13 characters of [./0-9A-Za-z] is traditional DES crypt; else plain. */
    size_t n = strlen(hash);
    int des = n == 13;
    for (size_t i = 0; des && i < n; i++)
        des = strchr("./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", hash[i]) !=
              NULL;
    *why = des ? "a DES crypt hash is weak (8 characters at most): rehash with `htpasswd -B` "
                 "(bcrypt), or write allow_weak_hashes = on"
               : "a plain-text password: hash it with `htpasswd -B` (bcrypt), or write "
                 "allow_weak_hashes = on";
    return des ? AB_HASH_WEAK : AB_HASH_PLAIN;
}

static int by_name(const void *a, const void *b)
{
    const ab_user *x = a, *y = b;
    return strcmp(x->name, y->name);
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (n < cap - 1)
            break;
        char *bigger = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;
        if (bigger == NULL) {
            free(buf);
            buf = NULL;
            errno = EFBIG;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int failed = ferror(f);
    fclose(f);
    if (buf != NULL && failed) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    if (buf != NULL)
        buf[n] = '\0';
    *len = n;
    return buf;
}

int ab_users_load(ab_users *out, const char *path, int allow_weak, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t len = 0;
    char *text = read_all(path, &len);
    if (text == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    ab_user *users = calloc(lines, sizeof *users);
    if (users == NULL) {
        free(text);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    size_t count = 0;
    unsigned lineno = 0;
    for (char *line = text, *next; line != NULL; line = next) {
        lineno++;
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\r')
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        char *colon = strchr(line, ':');
        const char *why = NULL;
        int kind = 0;
        if (colon == NULL || colon == line) {
            why = "expected user:hash";
        } else {
            *colon = '\0';
            char *hash = colon + 1, *extra = strchr(hash, ':');
            if (extra != NULL) /* Apache's digest files add fields: not this format */
                *extra = '\0';
            kind = hash[0] != '\0' ? classify(hash, &why) : -1;
            if (kind == AB_HASH_CRYPT || (kind > 0 && allow_weak)) {
                why = NULL;
                users[count++] = (ab_user){line, (size_t)(colon - line), hash, strlen(hash), kind};
            } else if (hash[0] == '\0') {
                why = "an empty password hash"; /* plain text would let anyone in */
            }
        }
        if (why != NULL) {
            snprintf(err, errlen, "%s:%u: %s", path, lineno, why);
            free(users);
            free(text);
            return -1;
        }
    }
    if (count == 0) {
        snprintf(err, errlen, "%s: no user", path);
        free(users);
        free(text);
        return -1;
    }
    qsort(users, count, sizeof *users, by_name);
    for (size_t i = 1; i < count; i++) {
        if (strcmp(users[i - 1].name, users[i].name) == 0) {
            snprintf(err, errlen, "%s: user '%s' is written twice", path, users[i].name);
            free(users);
            free(text);
            return -1;
        }
    }
    *out = (ab_users){text, users, count};
    return 0;
}

void ab_users_free(ab_users *u)
{
    free(u->users);
    free(u->text);
    memset(u, 0, sizeof *u);
}

const ab_user *ab_users_find(const ab_users *u, const char *name, size_t len)
{
    size_t lo = 0, hi = u->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const ab_user *x = &u->users[mid];
        size_t common = x->name_len < len ? x->name_len : len;
        int c = memcmp(x->name, name, common);
        if (c == 0)
            c = x->name_len < len ? -1 : x->name_len > len;
        if (c == 0)
            return x;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int ab_equal_ct(const void *a, size_t alen, const void *b, size_t blen)
{
    const volatile unsigned char *x = a, *y = b;
    size_t n = alen < blen ? alen : blen;
    unsigned diff = alen != blen;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned)(x[i] ^ y[i]);
    return diff == 0;
}
