/* kl_posix_compat.h — the few POSIX calls keel's unit tests make that
 * mingw-w64's C runtime lacks, supplied for the Windows test build only
 * (criterion.h includes this; on other systems it adds nothing). mingw-w64
 * itself has unistd.h, mkstemp, write/close/unlink/rmdir. */
#ifndef KL_POSIX_COMPAT_H
#define KL_POSIX_COMPAT_H

#if defined(_WIN32)
#include <direct.h>
#include <io.h>
#include <stdlib.h>
#include <string.h>

/* mkdtemp(3): replaces the trailing XXXXXX and creates the directory. */
static inline char *kl_cr_mkdtemp(char *tmpl)
{
    if (_mktemp_s(tmpl, strlen(tmpl) + 1) != 0 || _mkdir(tmpl) != 0)
        return NULL;
    return tmpl;
}
#define mkdtemp kl_cr_mkdtemp
#endif

#endif
