/* core/base/util.h — small helpers shared by the core. */
#ifndef KEEL_CORE_UTIL_H
#define KEEL_CORE_UTIL_H

#include <stddef.h>

#define KL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define KL_STRINGIFY_(x) #x
#define KL_STRINGIFY(x)  KL_STRINGIFY_(x)

/* Recovers the struct from a pointer to one of its members. */
#define KL_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

char *kl_strdup(const char *s);
char *kl_strndup(const char *s, size_t n);

/* dir + separator + name, newly allocated; NULL if out of memory. */
char *kl_path_join(const char *dir, const char *name);

/* Non-zero for an absolute path: "/x", and on Windows also "\\x", "C:\\x"
 * or "C:/x" ("C:x" is relative to a drive's current folder: not absolute). */
int kl_path_is_absolute(const char *path);

/* The length of path's folder part, without the final separator: 0 when
 * path names no folder ("keel.conf"), 1 for a file in "/". */
size_t kl_path_dir_len(const char *path);

/* Grows *items (of elem_size bytes each) so that it can hold `need`
 * elements; *cap is updated. KEEL_OK or KEEL_ERR_NOMEM. */
int kl_grow(void **items, size_t *cap, size_t need, size_t elem_size);

#endif
