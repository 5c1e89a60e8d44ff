/* Dropping root for an unprivileged user (core/platform.h), as nginx's
 * workers do (ngx_worker_process_init): supplementary groups, then the
 * group, then the user, in that order because each step needs the
 * privilege the next one gives up; then a check that root cannot be had
 * back, and on Linux no_new_privs, so that nothing exec'd later (a
 * reload's new keel) gains privileges through setuid files or file
 * capabilities. */
#if defined(__linux__)
#define _GNU_SOURCE /* initgroups, setgroups */
#else
#define _DEFAULT_SOURCE
#endif
#include "platform/platform.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <keel/types.h>

/* [keel] user or group (`key`) names no entry: getpwnam and getgrnam
 * leave errno 0 for "not found", set it when the lookup itself failed. */
static int not_found(const char *key, const char *name, char *err, size_t errlen)
{
    snprintf(err, errlen, "[keel] %s: no %s '%s'%s%s", key, key, name, errno ? ": " : "",
             errno ? strerror(errno) : "");
    return KEEL_ERR_CONFIG;
}

/* The ids `user` and `group` (NULL: the user's own group) name. */
static int lookup(const char *user, const char *group, uid_t *uid, gid_t *gid, char *err,
                  size_t errlen)
{
    errno = 0;
    struct passwd *pw = getpwnam(user);
    if (pw == NULL)
        return not_found("user", user, err, errlen);
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    if (group != NULL) {
        errno = 0;
        struct group *gr = getgrnam(group);
        if (gr == NULL)
            return not_found("group", group, err, errlen);
        *gid = gr->gr_gid;
    }
    return KEEL_OK;
}

int kl_privileged(void)
{
    return geteuid() == 0;
}

int kl_privileges_check(const char *user, const char *group, char *err, size_t errlen)
{
    uid_t uid;
    gid_t gid;
    int rc = lookup(user, group, &uid, &gid, err, errlen);
    if (rc != KEEL_OK)
        return rc;
    if (geteuid() == 0 ||
        (getuid() == uid && geteuid() == uid && getgid() == gid && getegid() == gid))
        return KEEL_OK;
    snprintf(err, errlen,
             "[keel] user = %s%s%s: keel runs as uid %ld gid %ld, not as root, and cannot "
             "become uid %ld gid %ld (a reload keeps the user the first keel dropped to: "
             "changing it needs a restart)",
             user, group ? ", group = " : "", group ? group : "", (long)getuid(), (long)getgid(),
             (long)uid, (long)gid);
    return KEEL_ERR_CONFIG;
}

int kl_privileges_drop(const char *user, const char *group, char *err, size_t errlen)
{
    uid_t uid;
    gid_t gid;
    int rc = kl_privileges_check(user, group, err, errlen);
    if (rc != KEEL_OK || (rc = lookup(user, group, &uid, &gid, err, errlen)) != KEEL_OK)
        return rc;
    if (geteuid() != 0)
        return KEEL_OK; /* already that user: a reload's new process */
    /* The user's supplementary groups (as login does); with a group named
     * in the config, that one is the primary. */
    if (initgroups(user, gid) != 0) {
        snprintf(err, errlen, "initgroups(%s): %s", user, strerror(errno));
        return KEEL_ERR_IO;
    }
    if (setgid(gid) != 0) {
        snprintf(err, errlen, "setgid(%ld): %s", (long)gid, strerror(errno));
        return KEEL_ERR_IO;
    }
    if (setuid(uid) != 0) {
        snprintf(err, errlen, "setuid(%ld): %s", (long)uid, strerror(errno));
        return KEEL_ERR_IO;
    }
    /* setuid by root sets the real, effective and saved ids: none of them
     * may be 0 now, and root must be out of reach (unless the user is
     * root itself, which the config asked for). */
    if (uid != 0 && (getuid() != uid || geteuid() != uid || setuid(0) == 0 || seteuid(0) == 0)) {
        snprintf(err, errlen, "privileges could be regained after setuid(%ld)", (long)uid);
        return KEEL_ERR_IO;
    }
    if (gid != 0 && (getgid() != gid || getegid() != gid || setgid(0) == 0 || setegid(0) == 0)) {
        snprintf(err, errlen, "group privileges could be regained after setgid(%ld)", (long)gid);
        return KEEL_ERR_IO;
    }
#if defined(__linux__)
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        snprintf(err, errlen, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
        return KEEL_ERR_IO;
    }
#endif
    return KEEL_OK;
}
