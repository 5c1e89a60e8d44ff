/* Unix domain sockets (platform/platform.h): addresses, listening with a
 * stale file replaced safely, connecting, and the peer's credentials. */
#if defined(__linux__)
#define _GNU_SOURCE /* struct ucred */
#endif
#include "platform/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define SUN_ROOM sizeof(((struct sockaddr_un *)0)->sun_path)

int kl_unix_addr(const char *name, struct sockaddr_storage *out)
{
    size_t len = strlen(name);
    if (len == 0 || (name[0] == '@' && len == 1))
        return UV_EINVAL;
#if !defined(__linux__)
    if (name[0] == '@')
        return UV_ENOTSUP; /* the abstract namespace is Linux's */
#endif
    /* A path keeps room for its NUL (nginx does the same), so that the
     * name getsockname reports is the one given. */
    if (name[0] == '@' ? len > SUN_ROOM : len >= SUN_ROOM)
        return UV_ENAMETOOLONG;
    memset(out, 0, sizeof *out);
    struct sockaddr_un *un = (struct sockaddr_un *)out;
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, name, len);
    if (name[0] == '@')
        un->sun_path[0] = '\0';
    return 0;
}

static int is_abstract(const struct sockaddr_un *un)
{
    return un->sun_path[0] == '\0';
}

/* An abstract name's bytes after the leading NUL, up to the last non-NUL:
 * the name as written after '@' (systemd's and ss(8)'s convention; a name
 * with trailing NULs cannot be written in a config). */
static size_t abstract_len(const struct sockaddr_un *un)
{
    size_t len = SUN_ROOM;
    while (len > 1 && un->sun_path[len - 1] == '\0')
        len--;
    return len;
}

socklen_t kl_sockaddr_len(const struct sockaddr_storage *addr)
{
    if (addr->ss_family == AF_INET6)
        return sizeof(struct sockaddr_in6);
    if (addr->ss_family == AF_INET)
        return sizeof(struct sockaddr_in);
    const struct sockaddr_un *un = (const struct sockaddr_un *)addr;
    size_t len = is_abstract(un) ? abstract_len(un) : strnlen(un->sun_path, SUN_ROOM) + 1;
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
}

void kl_unix_name(const struct sockaddr_storage *addr, char *buf, size_t size)
{
    const struct sockaddr_un *un = (const struct sockaddr_un *)addr;
    if (is_abstract(un))
        snprintf(buf, size, "unix:@%.*s", (int)abstract_len(un) - 1, un->sun_path + 1);
    else
        snprintf(buf, size, "unix:%.*s", (int)SUN_ROOM, un->sun_path);
}

int kl_unix_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != AF_UNIX || b->ss_family != AF_UNIX)
        return 0;
    const struct sockaddr_un *x = (const struct sockaddr_un *)a;
    const struct sockaddr_un *y = (const struct sockaddr_un *)b;
    if (is_abstract(x) != is_abstract(y))
        return 0;
    if (is_abstract(x))
        return abstract_len(x) == abstract_len(y) &&
               memcmp(x->sun_path, y->sun_path, abstract_len(x)) == 0;
    return strncmp(x->sun_path, y->sun_path, SUN_ROOM) == 0;
}

static int new_socket(int *out)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        return -errno;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

/* Whether something listens on the socket file at addr: 1 (it accepted,
 * or its queue is full), 0 (refused: nobody listens, the file is stale),
 * or a negative error (the probe could not tell: EACCES, say). */
static int someone_listens(const struct sockaddr_storage *addr)
{
    kl_socket fd;
    int rc = kl_unix_connect(addr, &fd);
    if (rc == 0)
        close(fd);
    if (rc == 0 || rc == UV_EAGAIN)
        return 1;
    if (rc == -ECONNREFUSED)
        return 0;
    return rc;
}

/* The path of a socket about to be bound is free, or freed: a socket file
 * nobody listens on is what an instance that did not end cleanly (killed,
 * crashed) leaves, and is removed, as h2o and systemd do; anything else at
 * the path (a file, a directory, a socket in use) is refused, never
 * removed (nginx's own rule is cruder: it unlinks whatever is there). */
static int free_path(const struct sockaddr_storage *addr, char *err, size_t errlen)
{
    const char *path = ((const struct sockaddr_un *)addr)->sun_path;
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -errno;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "%s exists and is not a socket: refusing to replace it", path);
        return UV_EEXIST;
    }
    int listening = someone_listens(addr);
    if (listening == 1) {
        snprintf(err, errlen, "%s is in use: another process listens on it", path);
        return UV_EADDRINUSE;
    }
    if (listening < 0) {
        snprintf(err, errlen, "%s exists and cannot be probed (%s): refusing to replace it", path,
                 uv_strerror(listening));
        return listening;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "removing the stale socket %s: %s", path, strerror(errno));
        return -errno;
    }
    return 0;
}

/* A user or group by name or number: 0, or UV_EINVAL with the reason. */
static int find_id(const char *key, const char *name, int is_group, unsigned long *out, char *err,
                   size_t errlen)
{
    char *end;
    unsigned long n = strtoul(name, &end, 10);
    struct passwd *pw = is_group ? NULL : getpwnam(name);
    struct group *gr = is_group ? getgrnam(name) : NULL;
    if (pw != NULL || gr != NULL)
        *out = pw != NULL ? (unsigned long)pw->pw_uid : (unsigned long)gr->gr_gid;
    else if (name[0] != '\0' && *end == '\0')
        *out = n;
    else {
        snprintf(err, errlen, "%s=%s: no such %s", key, name, is_group ? "group" : "user");
        return UV_EINVAL;
    }
    return 0;
}

static int find_ids(const kl_unix_perms *p, uid_t *uid, gid_t *gid, char *err, size_t errlen)
{
    unsigned long u = (unsigned long)(uid_t)-1, g = (unsigned long)(gid_t)-1;
    int rc = 0;
    if (p->owner != NULL)
        rc = find_id("owner", p->owner, 0, &u, err, errlen);
    if (rc == 0 && p->group != NULL)
        rc = find_id("group", p->group, 1, &g, err, errlen);
    *uid = (uid_t)u;
    *gid = (gid_t)g;
    return rc;
}

int kl_unix_listen(const struct sockaddr_storage *addr, int backlog, const kl_unix_perms *perms,
                   kl_socket *out, kl_unix_file *file, char *err, size_t errlen)
{
    const struct sockaddr_un *un = (const struct sockaddr_un *)addr;
    int abstract = is_abstract(un);
    uid_t uid;
    gid_t gid;
    memset(file, 0, sizeof *file);
    int rc = find_ids(perms, &uid, &gid, err, errlen);
    if (rc == 0 && !abstract)
        rc = free_path(addr, err, errlen);
    if (rc != 0)
        return rc;
    int fd;
    if ((rc = new_socket(&fd)) != 0) {
        snprintf(err, errlen, "socket: %s", uv_strerror(rc));
        return rc;
    }
    if (bind(fd, (const struct sockaddr *)addr, kl_sockaddr_len(addr)) != 0) {
        rc = -errno;
        snprintf(err, errlen, "bind: %s", uv_strerror(rc));
        close(fd);
        return rc;
    }
    /* Mode and owner before listen(2): until then a client that races in
     * is refused, so none connects under the umask's permissions. */
    const char *path = un->sun_path;
    if (!abstract && perms->mode >= 0 && chmod(path, (mode_t)perms->mode) != 0) {
        rc = -errno;
        snprintf(err, errlen, "chmod %04o %s: %s", (unsigned)perms->mode, path, strerror(errno));
    } else if (!abstract && (uid != (uid_t)-1 || gid != (gid_t)-1) && chown(path, uid, gid) != 0) {
        rc = -errno;
        snprintf(err, errlen, "chown %s: %s", path, strerror(errno));
    } else if (listen(fd, backlog) != 0) {
        rc = -errno;
        snprintf(err, errlen, "listen: %s", uv_strerror(rc));
    }
    struct stat st;
    if (rc == 0 && !abstract && lstat(path, &st) == 0) {
        file->dev = (uint64_t)st.st_dev;
        file->ino = (uint64_t)st.st_ino;
        file->known = 1;
    }
    if (rc != 0) {
        close(fd);
        if (!abstract)
            unlink(path); /* ours: bound a moment ago */
        return rc;
    }
    *out = fd;
    return 0;
}

int kl_unix_file_of(kl_socket sock, const struct sockaddr_storage *addr, kl_unix_file *file)
{
    (void)sock;
    memset(file, 0, sizeof *file);
    const struct sockaddr_un *un = (const struct sockaddr_un *)addr;
    struct stat st;
    if (is_abstract(un))
        return 0;
    if (lstat(un->sun_path, &st) != 0)
        return -errno;
    if (!S_ISSOCK(st.st_mode))
        return UV_EINVAL;
    file->dev = (uint64_t)st.st_dev;
    file->ino = (uint64_t)st.st_ino;
    file->known = 1;
    return 0;
}

int kl_unix_remove(const struct sockaddr_storage *addr, const kl_unix_file *file)
{
    const struct sockaddr_un *un = (const struct sockaddr_un *)addr;
    if (is_abstract(un) || !file->known)
        return 0;
    /* Only the file this listener bound: another instance may have
     * replaced it since (a second keel started on the path after this
     * one's was removed by hand). */
    struct stat st;
    if (lstat(un->sun_path, &st) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode) || (uint64_t)st.st_dev != file->dev ||
        (uint64_t)st.st_ino != file->ino)
        return 0;
    return unlink(un->sun_path) == 0 ? 0 : -errno;
}

int kl_unix_connect(const struct sockaddr_storage *addr, kl_socket *out)
{
    int fd;
    int rc = new_socket(&fd);
    if (rc != 0)
        return rc;
    do
        rc = connect(fd, (const struct sockaddr *)addr, kl_sockaddr_len(addr)) == 0 ? 0 : -errno;
    while (rc == -EINTR);
    /* A Unix socket connects at once or not at all: EAGAIN is the
     * listener's full queue (Linux), not a connect in progress; nginx
     * fails the same way. */
    if (rc == -EINPROGRESS)
        rc = 0;
    if (rc != 0) {
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

int kl_socket_peer_cred(kl_socket sock, uint32_t *uid, uint32_t *gid, int32_t *pid)
{
#if defined(SO_PEERCRED) && defined(__linux__)
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return -errno;
    *uid = (uint32_t)cred.uid;
    *gid = (uint32_t)cred.gid;
    *pid = (int32_t)cred.pid;
    return 0;
#else
    /* The BSDs and macOS: getpeereid(3) gives no pid. */
    uid_t u;
    gid_t g;
    if (getpeereid(sock, &u, &g) != 0)
        return -errno;
    *uid = (uint32_t)u;
    *gid = (uint32_t)g;
    *pid = -1;
    return 0;
#endif
}
