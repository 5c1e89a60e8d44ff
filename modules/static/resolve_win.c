/* resolve_win.c — opening a path without leaving the mount's root (Windows).
 *
 * Windows has no openat, so the portable fallback is: the lexical checks
 * first (pathcheck.c refuses '\\', ':', device names, trailing dots and
 * spaces, 8.3 short names), then open the joined path, then check what was
 * actually opened. The check is made on the open handle, not on the name,
 * so a link swapped between check and open cannot slip through:
 * GetFinalPathNameByHandleW says where the handle really is, and a file
 * outside the root (reached through a junction or symbolic link) is
 * refused. With symlinks=off the final path must also equal the requested
 * one, which it does not when any reparse point was crossed, and the last
 * component is opened with FILE_FLAG_OPEN_REPARSE_POINT so that a link
 * there is seen, not followed.
 *
 * Paths are given to CreateFileW in the "\\?\" form: it turns off Win32's
 * name normalisation (trailing dots and spaces, "CON" anywhere), so what is
 * opened is exactly what was checked, and lifts MAX_PATH.
 *
 * The handle becomes a C runtime descriptor (_open_osfhandle), which is
 * what keel_response_send_file takes.
 */
#ifdef _WIN32

#include "static.h"

#include <windows.h>

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

typedef struct win_root {
    wchar_t *full;  /* "\\?\C:\srv\www" */
    wchar_t *final; /* the same as GetFinalPathNameByHandleW gives it */
    size_t final_len;
} win_root;

static wchar_t *widen(const char *s, size_t len)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, (int)len, NULL, 0);
    if (n <= 0 && len > 0)
        return NULL;
    wchar_t *w = malloc(((size_t)n + 1) * sizeof *w);
    if (w == NULL)
        return NULL;
    if (len > 0)
        MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, (int)len, w, n);
    w[n] = 0;
    return w;
}

static char *narrow(const wchar_t *w)
{
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    if (n <= 0)
        return NULL;
    char *s = malloc((size_t)n);
    if (s != NULL)
        WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL);
    return s;
}

static wchar_t *final_path(HANDLE h)
{
    DWORD n = GetFinalPathNameByHandleW(h, NULL, 0, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
    if (n == 0)
        return NULL;
    wchar_t *w = malloc(((size_t)n + 1) * sizeof *w);
    if (w == NULL)
        return NULL;
    DWORD got = GetFinalPathNameByHandleW(h, w, n + 1, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
    if (got == 0 || got > n) {
        free(w);
        return NULL;
    }
    return w;
}

static void from_filetime(FILETIME ft, st_info *info)
{
    uint64_t t = ((uint64_t)ft.dwHighDateTime << 32) | ft.dwLowDateTime;
    /* 100 ns ticks since 1601 */
    uint64_t secs = t / 10000000u;
    info->mtime = (int64_t)secs - 11644473600LL;
    info->mtime_nsec = (long)(t % 10000000u) * 100;
}

static int info_of(HANDLE h, st_info *info)
{
    BY_HANDLE_FILE_INFORMATION fi;
    if (!GetFileInformationByHandle(h, &fi))
        return -1;
    info->size = ((uint64_t)fi.nFileSizeHigh << 32) | fi.nFileSizeLow;
    info->ino = ((uint64_t)fi.nFileIndexHigh << 32) | fi.nFileIndexLow;
    info->dev = fi.dwVolumeSerialNumber;
    from_filetime(fi.ftLastWriteTime, info);
    info->gone = fi.nNumberOfLinks == 0;
    info->kind = (fi.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) ? ST_KIND_OTHER
                 : (fi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)   ? ST_KIND_DIR
                                                                      : ST_KIND_FILE;
    return 0;
}

int st_fstat(int fd, st_info *info)
{
    HANDLE h = (HANDLE)_get_osfhandle(fd);
    return h == INVALID_HANDLE_VALUE ? -1 : info_of(h, info);
}

int st_dup(int fd)
{
    return _dup(fd);
}

void st_close(int fd)
{
    if (fd >= 0)
        _close(fd);
}

/* root->full + "\" + rel with '/' as '\'. */
static wchar_t *join(const win_root *root, const char *rel)
{
    wchar_t *w = widen(rel, strlen(rel));
    if (w == NULL)
        return NULL;
    size_t a = wcslen(root->full), b = wcslen(w);
    wchar_t *p = malloc((a + b + 2) * sizeof *p);
    if (p != NULL) {
        memcpy(p, root->full, a * sizeof *p);
        size_t at = a;
        if (b > 0)
            p[at++] = L'\\';
        for (size_t i = 0; i < b; i++)
            p[at++] = w[i] == L'/' ? L'\\' : w[i];
        p[at] = 0;
    }
    free(w);
    return p;
}

int st_no_fd_of(int err)
{
    return err == EMFILE ? ST_NO_FD_PROCESS : err == ENFILE ? ST_NO_FD_SYSTEM : 0;
}

static int status_of(DWORD err)
{
    switch (err) {
    case ERROR_TOO_MANY_OPEN_FILES:
        return ST_NO_FD_PROCESS;
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME:
    case ERROR_BAD_PATHNAME:
    case ERROR_DIRECTORY:
        return 404;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
    case ERROR_CANT_ACCESS_FILE:
        return 403;
    default:
        return 500;
    }
}

int st_open(const st_mount *m, const char *rel, int *fd, st_info *info)
{
    const win_root *root = m->platform;
    wchar_t *path = join(root, rel);
    if (path == NULL)
        return 404;
    DWORD flags = FILE_FLAG_BACKUP_SEMANTICS; /* lets a directory be opened */
    if (m->symlinks == ST_LINKS_OFF)
        flags |= FILE_FLAG_OPEN_REPARSE_POINT;
    HANDLE h =
        CreateFileW(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                    NULL, OPEN_EXISTING, flags, NULL);
    if (h == INVALID_HANDLE_VALUE) {
        free(path);
        return status_of(GetLastError());
    }
    int status = 0;
    if (info_of(h, info) != 0)
        status = 500;
    else if (info->kind == ST_KIND_OTHER)
        status = 403; /* a link not followed (symlinks=off), or not a file */
    if (status == 0 && m->symlinks != ST_LINKS_FOLLOW) {
        wchar_t *fin = final_path(h);
        size_t fl = fin ? wcslen(fin) : 0;
        if (fin == NULL)
            status = 500;
        else if (fl < root->final_len || _wcsnicmp(fin, root->final, root->final_len) != 0 ||
                 (fl > root->final_len && fin[root->final_len] != L'\\'))
            status = 403; /* the handle is outside the root */
        else if (m->symlinks == ST_LINKS_OFF) {
            /* No reparse point crossed: the final path is the asked one. */
            const wchar_t *asked = path + wcslen(root->full);
            if (_wcsicmp(fin + root->final_len, asked) != 0)
                status = 403;
        }
        free(fin);
    }
    free(path);
    if (status != 0) {
        CloseHandle(h);
        return status;
    }
    int f = _open_osfhandle((intptr_t)h, _O_RDONLY | _O_BINARY);
    if (f < 0) {
        int err = errno; /* EMFILE: the C runtime's descriptor table is full */
        CloseHandle(h);
        return st_no_fd_of(err) ? st_no_fd_of(err) : 500;
    }
    *fd = f;
    return 0;
}

int st_root_open(keel_module *module, st_mount *m)
{
    m->root_fd = -1;
    win_root *root = calloc(1, sizeof *root);
    wchar_t *w = widen(m->root, strlen(m->root));
    if (root == NULL || w == NULL) {
        free(root);
        free(w);
        return KEEL_ERR_NOMEM;
    }
    DWORD n = GetFullPathNameW(w, 0, NULL, NULL);
    wchar_t *full = n ? malloc(((size_t)n + 8) * sizeof *full) : NULL;
    if (full == NULL) {
        free(root);
        free(w);
        return st_mount_error(module, m, "%s: not a usable path", m->root);
    }
    wcscpy(full, L"\\\\?\\");
    GetFullPathNameW(w, n, full + 4, NULL);
    free(w);
    size_t fl = wcslen(full);
    while (fl > 7 && full[fl - 1] == L'\\')
        full[--fl] = 0;
    HANDLE h =
        CreateFileW(full, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                    NULL, OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, NULL);
    if (h == INVALID_HANDLE_VALUE) {
        free(full);
        free(root);
        return st_mount_error(module, m, "%s: cannot open (error %lu)", m->root,
                              (unsigned long)GetLastError());
    }
    root->full = full;
    root->final = final_path(h);
    CloseHandle(h);
    if (root->final == NULL) {
        free(full);
        free(root);
        return st_mount_error(module, m, "%s: no final path", m->root);
    }
    root->final_len = wcslen(root->final);
    while (root->final_len > 7 && root->final[root->final_len - 1] == L'\\')
        root->final[--root->final_len] = 0;
    m->platform = root;
    return KEEL_OK;
}

void st_root_close(st_mount *m)
{
    win_root *root = m->platform;
    if (root != NULL) {
        free(root->full);
        free(root->final);
        free(root);
    }
    m->platform = NULL;
    m->root_fd = -1;
}

int st_dir_each(const st_mount *m, const char *rel, int dirfd, st_dir_fn fn, void *arg)
{
    (void)dirfd;
    wchar_t *dir = join(m->platform, rel);
    if (dir == NULL)
        return -1;
    size_t dl = wcslen(dir);
    wchar_t *pattern = malloc((dl + 3) * sizeof *pattern);
    if (pattern == NULL) {
        free(dir);
        return -1;
    }
    memcpy(pattern, dir, dl * sizeof *pattern);
    pattern[dl] = L'\\';
    pattern[dl + 1] = L'*';
    pattern[dl + 2] = 0;
    free(dir);
    WIN32_FIND_DATAW fd;
    HANDLE h = FindFirstFileExW(pattern, FindExInfoBasic, &fd, FindExSearchNameMatch, NULL, 0);
    free(pattern);
    if (h == INVALID_HANDLE_VALUE)
        return -1;
    do {
        if (wcscmp(fd.cFileName, L".") == 0 || wcscmp(fd.cFileName, L"..") == 0)
            continue;
        char *name = narrow(fd.cFileName);
        if (name == NULL)
            continue;
        st_info info;
        memset(&info, 0, sizeof info);
        info.size = ((uint64_t)fd.nFileSizeHigh << 32) | fd.nFileSizeLow;
        from_filetime(fd.ftLastWriteTime, &info);
        info.kind = (fd.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) ? ST_KIND_OTHER
                    : (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)   ? ST_KIND_DIR
                                                                         : ST_KIND_FILE;
        int stop = fn(name, &info, arg);
        free(name);
        if (stop)
            break;
    } while (FindNextFileW(h, &fd));
    FindClose(h);
    return 0;
}

#endif /* _WIN32 */
