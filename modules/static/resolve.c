/* resolve.c — opening a path without ever leaving the mount's root (POSIX).
 *
 * A check-then-open ("realpath, compare the prefix, open") can be beaten by
 * swapping a symbolic link between the check and the open. So the path is
 * never checked and then opened: it is opened relative to a descriptor of
 * the root held since load, in one of two ways.
 *
 *   openat2 (Linux 5.6+): RESOLVE_BENEATH makes the kernel refuse, during
 *     the lookup itself, any step that leaves the root ("..", an absolute
 *     or escaping symbolic link), atomically with respect to renames;
 *     RESOLVE_NO_MAGICLINKS refuses /proc-style links;
 *     RESOLVE_NO_SYMLINKS when the mount allows no link at all. One system
 *     call per path.
 *
 *   the walk (everywhere else, and `resolve=walk`): openat one component at
 *     a time from the root with O_NOFOLLOW, holding a descriptor for every
 *     directory on the way. A symbolic link is never followed by the
 *     kernel: it is read (readlinkat) and its target's components are
 *     spliced into what is left of the path, ".." popping the held stack,
 *     so a link leaving the root is seen as an attempt to pop past it. If
 *     the link is swapped after it was read, the next openat still refuses
 *     to follow anything, so a swap can only make the lookup fail. (What
 *     neither way can stop is someone with write access to the docroot
 *     moving a directory we hold outside the root mid-walk; openat2 does.)
 *
 * symlinks=follow opens with a plain openat from the root: the operator
 * trusts the tree (nginx's default, disable_symlinks off).
 *
 * Descriptors are opened O_NONBLOCK (a FIFO in the docroot would otherwise
 * block the loop in open) and anything but a regular file or a directory is
 * refused. open and fstat run on the loop thread, as nginx does for local
 * disks: for a file in the page cache they cost microseconds; a docroot on
 * a network file system belongs behind a cache, not here.
 */
#ifndef _WIN32

#include "static.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif
#ifndef O_NOCTTY
#define O_NOCTTY 0
#endif

#define ST_FILE_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
#define ST_MAX_DEPTH  64
#define ST_MAX_LINKS  40 /* as the kernel's own MAXSYMLINKS */

static void fill_info(const struct stat *st, st_info *info)
{
    info->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
    info->ino = (uint64_t)st->st_ino;
    info->dev = (uint64_t)st->st_dev;
    info->mtime = (int64_t)st->st_mtime;
#if defined(__APPLE__)
    info->mtime_nsec = st->st_mtimespec.tv_nsec;
#else
    info->mtime_nsec = st->st_mtim.tv_nsec;
#endif
    info->gone = st->st_nlink == 0;
    info->kind = S_ISREG(st->st_mode)   ? ST_KIND_FILE
                 : S_ISDIR(st->st_mode) ? ST_KIND_DIR
                                        : ST_KIND_OTHER;
}

int st_fstat(int fd, st_info *info)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    fill_info(&st, info);
    return 0;
}

int st_dup(int fd)
{
    return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

void st_close(int fd)
{
    if (fd >= 0)
        close(fd);
}

int st_no_fd_of(int err)
{
    return err == EMFILE ? ST_NO_FD_PROCESS : err == ENFILE ? ST_NO_FD_SYSTEM : 0;
}

static int status_of(int err)
{
    if (st_no_fd_of(err))
        return st_no_fd_of(err);
    switch (err) {
    case ENOENT:
    case ENOTDIR:
    case ENAMETOOLONG:
        return 404;
    case EACCES:
    case EPERM:
    case ELOOP:
    case EMLINK: /* FreeBSD's O_NOFOLLOW on a link */
    case EXDEV:  /* openat2: the path left the root */
        return 403;
    default:
        return 500;
    }
}

#if defined(__linux__) && defined(SYS_openat2)
static int open_beneath(int root, const char *rel, int symlinks, int *out)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = ST_FILE_FLAGS;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    if (symlinks == ST_LINKS_OFF)
        how.resolve |= RESOLVE_NO_SYMLINKS;
    for (int tries = 0; tries < 4; tries++) {
        long fd = syscall(SYS_openat2, root, rel, &how, sizeof how);
        if (fd >= 0) {
            *out = (int)fd;
            return 0;
        }
        /* EAGAIN: a rename raced the lookup; the kernel asks for a retry. */
        if (errno != EAGAIN && errno != EINTR)
            return -1;
    }
    errno = EAGAIN;
    return -1;
}
#endif

/* The walk. path is a writable copy; the stack holds the directories
 * below the root (the root itself is not ours to close). */
typedef struct walk {
    int fds[ST_MAX_DEPTH + 1];
    int depth;
} walk;

static int top(const walk *w)
{
    return w->fds[w->depth];
}

static void walk_release(walk *w)
{
    while (w->depth > 0)
        close(w->fds[w->depth--]);
}

static int open_walk(const st_mount *m, const char *rel, int *out)
{
    size_t cap = strlen(rel) + 1;
    char *pend = malloc(cap < 256 ? 256 : cap);
    if (pend == NULL) {
        errno = ENOMEM;
        return -1;
    }
    cap = cap < 256 ? 256 : cap;
    memcpy(pend, rel, strlen(rel) + 1);
    size_t pos = 0; /* the next component starts at pend + pos */
    walk w = {.depth = 0};
    w.fds[0] = m->root_fd;
    int links = 0, rc = -1, err = 0;
    for (;;) {
        while (pend[pos] == '/')
            pos++;
        char *c = pend + pos;
        size_t clen = strcspn(c, "/");
        if (clen == 0) { /* the path ended on a directory: the top itself */
            int fd = openat(top(&w), ".", ST_FILE_FLAGS);
            if (fd < 0) {
                err = errno;
                break;
            }
            *out = fd;
            rc = 0;
            break;
        }
        size_t after = pos + clen;
        while (pend[after] == '/')
            after++;
        int last = pend[after] == '\0';
        char saved = c[clen];
        c[clen] = '\0';
        if (clen == 1 && c[0] == '.') {
            pos = after;
            continue;
        }
        if (clen == 2 && c[0] == '.' && c[1] == '.') {
            /* Only a link's target has these: popping past the root is
             * the escape this walk exists to catch. */
            if (w.depth == 0) {
                err = EXDEV;
                break;
            }
            close(w.fds[w.depth--]);
            pos = after;
            continue;
        }
        int flags =
            last ? ST_FILE_FLAGS | O_NOFOLLOW : O_RDONLY | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW;
        int fd = openat(top(&w), c, flags);
        if (fd >= 0) {
            if (last) {
                *out = fd;
                rc = 0;
                break;
            }
            if (w.depth == ST_MAX_DEPTH) {
                close(fd);
                err = ENAMETOOLONG;
                break;
            }
            w.fds[++w.depth] = fd;
            c[clen] = saved;
            pos = after;
            continue;
        }
        err = errno;
        if (err != ELOOP && err != EMLINK && err != ENOTDIR)
            break;
        struct stat st;
        if (fstatat(top(&w), c, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st.st_mode)) {
            err = err == ENOTDIR ? ENOTDIR : EACCES;
            break;
        }
        if (m->symlinks == ST_LINKS_OFF || ++links > ST_MAX_LINKS) {
            err = ELOOP;
            break;
        }
        char target[4096];
        ssize_t tl = readlinkat(top(&w), c, target, sizeof target - 1);
        if (tl <= 0 || (size_t)tl >= sizeof target - 1) {
            err = tl < 0 ? errno : ENAMETOOLONG;
            break;
        }
        target[tl] = '\0';
        if (target[0] == '/') {
            /* An absolute target names the host's tree, not the root's. */
            err = EXDEV;
            break;
        }
        /* pend becomes target + "/" + what followed the link. */
        const char *rest = pend + after;
        size_t rlen = strlen(rest);
        size_t need = (size_t)tl + 1 + rlen + 1;
        char *next = malloc(need);
        if (next == NULL) {
            err = ENOMEM;
            break;
        }
        memcpy(next, target, (size_t)tl);
        size_t at = (size_t)tl;
        if (rlen > 0)
            next[at++] = '/';
        memcpy(next + at, rest, rlen + 1);
        free(pend);
        pend = next;
        cap = need;
        pos = 0;
    }
    (void)cap;
    walk_release(&w);
    free(pend);
    if (rc != 0)
        errno = err;
    return rc;
}

int st_open(const st_mount *m, const char *rel, int *fd, st_info *info)
{
    int got = -1, rc;
    const char *path = rel[0] ? rel : ".";
    if (m->symlinks == ST_LINKS_FOLLOW) {
        got = openat(m->root_fd, path, ST_FILE_FLAGS);
        rc = got >= 0 ? 0 : -1;
    }
#if defined(__linux__) && defined(SYS_openat2)
    else if (m->resolver == ST_RESOLVE_AUTO)
        rc = open_beneath(m->root_fd, path, m->symlinks, &got);
#endif
    else
        rc = open_walk(m, rel, &got);
    if (rc != 0)
        return status_of(errno);
    struct stat st;
    if (fstat(got, &st) != 0) {
        close(got);
        return 500;
    }
    fill_info(&st, info);
    if (info->kind == ST_KIND_OTHER) {
        close(got); /* a FIFO, a device, a socket: never content */
        return 403;
    }
    *fd = got;
    return 0;
}

int st_root_open(keel_module *module, st_mount *m)
{
    m->root_fd = open(m->root, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    if (m->root_fd < 0)
        return st_mount_error(module, m, "%s: %s", m->root, strerror(errno));
#if defined(__linux__) && defined(SYS_openat2)
    if (m->resolver == ST_RESOLVE_AUTO) {
        /* Probe once, here on the main thread: a kernel before 5.6 says
         * ENOSYS, a seccomp filter EPERM or ENOSYS. */
        int fd = -1;
        if (open_beneath(m->root_fd, ".", ST_LINKS_INSIDE, &fd) == 0)
            close(fd);
        else
            m->resolver = ST_RESOLVE_WALK;
    }
#else
    m->resolver = ST_RESOLVE_WALK;
#endif
    return KEEL_OK;
}

void st_root_close(st_mount *m)
{
    if (m->root_fd >= 0)
        close(m->root_fd);
    m->root_fd = -1;
}

int st_dir_each(const st_mount *m, const char *rel, int dirfd, st_dir_fn fn, void *arg)
{
    (void)rel;
    /* A new open file description, not a dup: a dup shares the directory
     * offset with the cached descriptor (and with a listing running at the
     * same time on another pool thread). */
    int fd = openat(dirfd, ".", O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    if (fd < 0)
        return st_no_fd_of(errno) ? st_no_fd_of(errno) : -1;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -1;
    }
    struct dirent *e;
    int flags = m->symlinks == ST_LINKS_FOLLOW ? 0 : AT_SYMLINK_NOFOLLOW;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, flags) != 0)
            continue;
        st_info info;
        fill_info(&st, &info);
        if (fn(e->d_name, &info, arg) != 0)
            break;
    }
    closedir(d);
    return 0;
}

#endif /* !_WIN32 */
