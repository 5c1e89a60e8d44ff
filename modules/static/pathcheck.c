/* pathcheck.c — the lexical checks every path passes before a system call.
 *
 * The core has already percent-decoded the path, resolved "." and ".."
 * segments and refused NUL bytes and climbs above "/" (400). What is left
 * here is what a file system may read differently from the URL:
 *
 *   - '\\' is a separator on Windows ("a\\..\\..\\x"): refused everywhere,
 *     so that a docroot copied between systems means the same;
 *   - ':' names a drive ("C:") or an alternate data stream ("f::$DATA",
 *     which serves a script's source on IIS): refused everywhere;
 *   - reserved device names (CON, NUL, COM1, LPT1..., with any extension
 *     and any case) open a device on Windows, whatever the directory;
 *   - trailing dots and spaces are dropped by Windows ("x.php." opens
 *     "x.php");
 *   - control characters have no business in a file name served to the web;
 *   - on Windows also the characters Win32 refuses and 8.3 short names
 *     ("GIT~1" is ".git"), which would bypass the dotfile rule;
 *   - a segment starting with '.' (".git", ".env", ".htpasswd") is hidden
 *     unless the mount says dotfiles=allow.
 *
 * Every refusal is 403 except hidden dotfiles, which are 404 so that their
 * existence is not revealed. The body never names a path.
 */
#include "static.h"

#include <string.h>

/* CON, PRN, AUX, NUL, COM0-9, LPT0-9, CONIN$, CONOUT$: the base name (up to
 * the first dot, trailing spaces dropped as Windows does) in any case. */
static int device_name(const char *s, size_t len)
{
    size_t base = 0;
    while (base < len && s[base] != '.')
        base++;
    while (base > 0 && s[base - 1] == ' ')
        base--;
    static const char *const three[] = {"con", "prn", "aux", "nul"};
    if (base == 3)
        for (size_t i = 0; i < 4; i++)
            if (keel_ascii_ncasecmp(s, three[i], 3) == 0)
                return 1;
    if (base == 4 &&
        (keel_ascii_ncasecmp(s, "com", 3) == 0 || keel_ascii_ncasecmp(s, "lpt", 3) == 0) &&
        s[3] >= '0' && s[3] <= '9')
        return 1;
    if ((base == 6 && keel_ascii_ncasecmp(s, "conin$", 6) == 0) ||
        (base == 7 && keel_ascii_ncasecmp(s, "conout$", 7) == 0))
        return 1;
    return 0;
}

static int check_segment(const st_mount *m, const char *s, size_t len)
{
    if (len == 0)
        return 0;
    if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
        return 403; /* the core resolves these; never trust it twice */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '\\' || c == ':')
            return 403;
#ifdef _WIN32
        if (c == '*' || c == '?' || c == '"' || c == '<' || c == '>' || c == '|')
            return 403;
        if (c == '~' && i + 1 < len && s[i + 1] >= '0' && s[i + 1] <= '9')
            return 403;
#endif
    }
    if (s[len - 1] == '.' || s[len - 1] == ' ')
        return 403;
    if (device_name(s, len))
        return 403;
    if (s[0] == '.' && !m->dotfiles)
        return 404;
    return 0;
}

int st_path_check(const st_mount *m, const char *rel, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && rel[j] != '/')
            j++;
        int rc = check_segment(m, rel + i, j - i);
        if (rc != 0)
            return rc;
        i = j + 1;
    }
    return 0;
}
