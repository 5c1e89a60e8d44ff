#include "base/util.h"

#include <stdlib.h>
#include <string.h>

#include <keel/types.h>

char *kl_strndup(const char *s, size_t n)
{
    char *copy = malloc(n + 1);
    if (copy != NULL) {
        memcpy(copy, s, n);
        copy[n] = '\0';
    }
    return copy;
}

char *kl_strdup(const char *s)
{
    return kl_strndup(s, strlen(s));
}

char *kl_path_join(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    char *path = malloc(dl + nl + 2);
    if (path == NULL)
        return NULL;
    memcpy(path, dir, dl);
    size_t at = dl;
    /* "/" works on Windows too; only add one if the dir lacks a separator. */
    if (dl > 0 && dir[dl - 1] != '/' && dir[dl - 1] != '\\')
        path[at++] = '/';
    memcpy(path + at, name, nl + 1);
    return path;
}

static int is_separator(char c)
{
#ifdef _WIN32
    return c == '/' || c == '\\';
#else
    return c == '/';
#endif
}

int kl_path_is_absolute(const char *path)
{
    if (is_separator(path[0]))
        return 1;
#ifdef _WIN32
    if (((path[0] >= 'A' && path[0] <= 'Z') || (path[0] >= 'a' && path[0] <= 'z')) &&
        path[1] == ':' && is_separator(path[2]))
        return 1;
#endif
    return 0;
}

size_t kl_path_dir_len(const char *path)
{
    size_t n = strlen(path);
    while (n > 0 && !is_separator(path[n - 1]))
        n--;
    if (n == 0)
        return 0;
    /* Keep the root's separator ("/keel.conf" -> "/", "C:\\keel.conf" ->
     * "C:\\"), drop any other. */
    if (n == 1)
        return 1;
#ifdef _WIN32
    if (path[n - 2] == ':')
        return n;
#endif
    return n - 1;
}

int kl_grow(void **items, size_t *cap, size_t need, size_t elem_size)
{
    if (need <= *cap)
        return KEEL_OK;
    size_t n = *cap ? *cap : 4;
    while (n < need)
        n *= 2;
    void *grown = realloc(*items, n * elem_size);
    if (grown == NULL)
        return KEEL_ERR_NOMEM;
    *items = grown;
    *cap = n;
    return KEEL_OK;
}
