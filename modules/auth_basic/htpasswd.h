/* auth_basic/htpasswd.h — a user file in Apache's htpasswd format, read
 * once (at load: a reload starts a new process that reads it again).
 * No keel calls. */
#ifndef AUTH_BASIC_HTPASSWD_H
#define AUTH_BASIC_HTPASSWD_H

#include <stddef.h>

/* How a user's password is checked. */
enum {
    AB_HASH_CRYPT = 1, /* bcrypt $2a$ $2b$ $2y$, SHA-crypt $5$ $6$, yescrypt $y$, scrypt $7$ */
    AB_HASH_WEAK,      /* MD5-crypt $1$ or DES crypt: crypt_r, only with allow_weak_hashes */
    AB_HASH_PLAIN      /* the password itself: only with allow_weak_hashes */
};

typedef struct ab_user {
    const char *name; /* NUL-terminated, in ab_users.text */
    size_t name_len;
    const char *hash; /* NUL-terminated */
    size_t hash_len;
    int kind; /* AB_HASH_* */
} ab_user;

typedef struct ab_users {
    char *text;     /* the file, its separators replaced by NULs */
    ab_user *users; /* sorted by name */
    size_t count;
} ab_users;

/* Reads and checks path. 0 on success; otherwise -1 with a message
 * ("PATH:LINE: why") in err, nothing to free. */
int ab_users_load(ab_users *out, const char *path, int allow_weak, char *err, size_t errlen);
void ab_users_free(ab_users *u);

/* The user named name[0..len), or NULL. */
const ab_user *ab_users_find(const ab_users *u, const char *name, size_t len);

/* 1 if a and b (alen, blen bytes) are equal, compared in a time that
 * depends on the lengths only. */
int ab_equal_ct(const void *a, size_t alen, const void *b, size_t blen);

#endif
