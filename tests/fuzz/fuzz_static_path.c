/* fuzz_static_path — the static module's path confinement, end to end: a
 * request-target through the core's decoding and normalisation
 * (kl_request_parse_target), the module's lexical checks
 * (modules/static/pathcheck.c, st_path_check) and its confined open
 * (modules/static/resolve.c, st_open) on a real tree.
 *
 * LLVMFuzzerInitialize builds a small tree in a temporary directory:
 *
 *     TMP/outside/secret                   a file that must never be served
 *     TMP/root/a.txt, dir/b.txt, .env, dir/sub/c.txt
 *     TMP/root/in      -> dir/b.txt        a link that stays inside
 *     TMP/root/dirl    -> dir              a link to a directory inside
 *     TMP/root/out     -> ../outside/secret     relative, leaving the root
 *     TMP/root/outd    -> ../outside            ... to a directory
 *     TMP/root/abs     -> TMP/outside/secret    absolute
 *     TMP/root/dir/up  -> ../..                 climbing through a directory
 *     TMP/root/dir/upin -> ../a.txt             climbing but staying inside
 *     TMP/root/loop    -> loop                  itself
 *     TMP/root/fifo                        a FIFO (never content)
 *
 * The input's first byte picks the mount's options (symlinks off or
 * inside; resolver auto (openat2 where the kernel has it) or the walk;
 * dotfiles hidden or allowed); the rest is the request-target.
 *
 * Checked besides ASan/UBSan: a path the core accepts holds no NUL and no
 * "." or ".." segment; whatever st_open opens lies in the root (its
 * /proc/self/fd link is the root or below it), is a regular file or a
 * directory, and is never TMP/outside/secret; with symlinks off, nothing
 * reached through a link is opened; a status is 403, 404 or 500. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/http.h"
#include "static.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_static_path: " __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static char tmp[PATH_MAX];       /* the tree's top */
static char root_real[PATH_MAX]; /* realpath of TMP/root */
static struct stat secret_st;
static int root_fd = -1;

static void put(const char *rel, const char *text)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL, "creating %s: %s", p, strerror(errno));
    fputs(text, f);
    fclose(f);
}

static void dir(const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    CHECK(mkdir(p, 0755) == 0, "mkdir %s: %s", p, strerror(errno));
}

static void link_(const char *target, const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    CHECK(symlink(target, p) == 0, "symlink %s: %s", p, strerror(errno));
}

static void remove_tree(void)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_static_path: could not remove %s\n", tmp);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *base = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/keel-fuzz-static-XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp: %s", strerror(errno));
    atexit(remove_tree);
    dir("outside");
    put("outside/secret", "secret\n");
    dir("root");
    dir("root/dir");
    dir("root/dir/sub");
    put("root/a.txt", "a\n");
    put("root/dir/b.txt", "b\n");
    put("root/dir/sub/c.txt", "c\n");
    put("root/.env", "env\n");
    link_("dir/b.txt", "root/in");
    link_("dir", "root/dirl");
    link_("../outside/secret", "root/out");
    link_("../outside", "root/outd");
    char abs[PATH_MAX + 32];
    snprintf(abs, sizeof abs, "%s/outside/secret", tmp);
    link_(abs, "root/abs");
    link_("../..", "root/dir/up");
    link_("../a.txt", "root/dir/upin");
    link_("loop", "root/loop");
    char fifo[PATH_MAX + 16];
    snprintf(fifo, sizeof fifo, "%s/root/fifo", tmp);
    CHECK(mkfifo(fifo, 0644) == 0, "mkfifo: %s", strerror(errno));

    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/root", tmp);
    CHECK(realpath(p, root_real) != NULL, "realpath: %s", strerror(errno));
    root_fd = open(root_real, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    CHECK(root_fd >= 0, "open root: %s", strerror(errno));
    snprintf(p, sizeof p, "%s/outside/secret", tmp);
    CHECK(stat(p, &secret_st) == 0, "stat: %s", strerror(errno));
    return 0;
}

static void free_blocks(kl_arena *a)
{
    void *b = a->blocks;
    while (b != NULL) {
        void *next = *(void **)b;
        free(b);
        b = next;
    }
    a->blocks = NULL;
}

/* Did the path pass through a symbolic link of the tree? Walks it with
 * lstat, component by component, from the root. */
static int through_link(const char *rel)
{
    char p[PATH_MAX];
    size_t at = (size_t)snprintf(p, sizeof p, "%s", root_real);
    const char *s = rel;
    while (*s) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n > 0) {
            if (at + 1 + n >= sizeof p)
                return 0;
            p[at++] = '/';
            memcpy(p + at, s, n);
            at += n;
            p[at] = '\0';
            struct stat st;
            if (lstat(p, &st) != 0)
                return 0;
            if (S_ISLNK(st.st_mode))
                return 1;
        }
        s += n + (e ? 1 : 0);
        if (!e)
            break;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int opts = data[0];
    data++;
    size--;
    char *target = malloc(size);
    CHECK(target != NULL, "malloc");
    memcpy(target, data, size);
    static keel_request req;
    memset(&req, 0, sizeof req);
    req.arena.at = req.inline_arena;
    req.arena.end = req.inline_arena + sizeof req.inline_arena;
    req.head.target = (keel_str){target, size};
    int rc = kl_request_parse_target(&req);
    if (rc != 0 || req.path.len == 0 || req.path.ptr[0] != '/') {
        free_blocks(&req.arena);
        free(target);
        return 0;
    }
    /* What static.c does: the part below the mount "/", NUL-terminated. */
    keel_str path = req.path;
    CHECK(memchr(path.ptr, '\0', path.len) == NULL, "a NUL in the path");
    char *rel = malloc(path.len);
    CHECK(rel != NULL, "malloc");
    memcpy(rel, path.ptr + 1, path.len - 1);
    rel[path.len - 1] = '\0';
    for (const char *s = rel; *s;) {
        size_t n = strcspn(s, "/");
        CHECK(!(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.'),
              "a dot segment in '%s'", rel);
        s += n + (s[n] == '/');
    }

    st_mount m = {
        .root = root_real,
        .root_fd = root_fd,
        .symlinks = (opts & 1) ? ST_LINKS_INSIDE : ST_LINKS_OFF,
        .resolver = (opts & 2) ? ST_RESOLVE_WALK : ST_RESOLVE_AUTO,
        .dotfiles = (opts & 4) != 0,
    };
    int status = st_path_check(&m, rel, strlen(rel));
    CHECK(status == 0 || status == 403 || status == 404, "st_path_check: %d", status);
    if (status == 0) {
        int fd = -1;
        st_info info;
        status = st_open(&m, rel, &fd, &info);
        CHECK(status == 0 || status == 403 || status == 404 || status == 500, "st_open: %d",
              status);
        if (status == 0) {
            CHECK(fd >= 0, "no descriptor");
            CHECK(info.kind == ST_KIND_FILE || info.kind == ST_KIND_DIR, "opened a kind %d",
                  info.kind);
            char proc[64], real[PATH_MAX];
            snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
            ssize_t n = readlink(proc, real, sizeof real - 1);
            CHECK(n > 0, "readlink %s: %s", proc, strerror(errno));
            real[n] = '\0';
            size_t rl = strlen(root_real);
            CHECK(strncmp(real, root_real, rl) == 0 && (real[rl] == '\0' || real[rl] == '/'),
                  "'%s' opened %s, outside the root %s", rel, real, root_real);
            struct stat st;
            CHECK(fstat(fd, &st) == 0, "fstat");
            CHECK(!(st.st_ino == secret_st.st_ino && st.st_dev == secret_st.st_dev),
                  "'%s' opened the secret", rel);
            if (m.symlinks == ST_LINKS_OFF)
                CHECK(!through_link(rel), "'%s' went through a link with symlinks off", rel);
            close(fd);
        } else {
            CHECK(fd == -1, "a descriptor with status %d", status);
        }
    }
    free(rel);
    free_blocks(&req.arena);
    free(target);
    return 0;
}
