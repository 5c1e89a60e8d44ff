/* The portable half of the crash report (runtime/crash.h): the thread's
 * scope, the table of loaded modules' address ranges, and the line. What
 * the signal handler calls here takes no lock and allocates nothing. */
#include "runtime/crash.h"

#include <stdio.h>
#include <string.h>

#include <keel/types.h>
#include <uv.h>

#include "base/atomic.h"
#include "base/log.h"
#include "platform/platform.h"

KL_THREAD_LOCAL volatile kl_crash_thread kl_crash_self;

/* Modules whose code a crash can be traced to: those loaded from files
 * (a module compiled into the program shares the executable's range with
 * keel itself, so only the thread's scope can name it). Entries are only
 * added, on the main thread, and published by raising `nmodules` after
 * they are written: the handler reads without a lock. Shared objects are
 * never unloaded, so an entry stays true for the life of the process. */
#define MAX_MODULES 128
typedef struct crash_module {
    char name[64];
    char file[64];          /* the shared object's file name, for the offset */
    uintptr_t base, lo, hi; /* hi == 0: extent unknown, match by base */
} crash_module;

static crash_module modules[MAX_MODULES];
static volatile uint64_t nmodules;

static uv_once_t once = UV_ONCE_INIT;
static uv_mutex_t lock; /* enable/disable and the table's writers */
static unsigned enabled;
static volatile uint64_t active;     /* handlers installed: read by workers */
static const char *volatile opening; /* kl_crash_opening */

static void init_once(void)
{
    uv_mutex_init(&lock);
}

int kl_crash_enable(void)
{
    uv_once(&once, init_once);
    uv_mutex_lock(&lock);
    int rc = KEEL_OK;
    if (enabled == 0)
        rc = kl_crash_platform_install(kl_log_file(), kl_crash_describe);
    if (rc == KEEL_OK) {
        enabled++;
        kl_atomic_store(&active, 1);
    }
    uv_mutex_unlock(&lock);
    if (rc == KEEL_OK) {
        kl_crash_self.role = KL_THREAD_MAIN;
        kl_crash_platform_thread_begin();
    }
    return rc;
}

void kl_crash_disable(void)
{
    uv_once(&once, init_once);
    kl_crash_platform_thread_end();
    kl_crash_self.role = KL_THREAD_OTHER;
    uv_mutex_lock(&lock);
    if (enabled > 0 && --enabled == 0) {
        kl_atomic_store(&active, 0);
        kl_crash_platform_uninstall();
    }
    uv_mutex_unlock(&lock);
}

void kl_crash_worker_thread(unsigned id)
{
    kl_crash_self.worker = id;
    kl_crash_self.role = KL_THREAD_WORKER;
    if (kl_atomic_load(&active))
        kl_crash_platform_thread_begin();
}

static void copy_name(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void kl_crash_add_module(const char *name, const char *path, const void *addr)
{
    uintptr_t base, lo, hi;
    if (kl_lib_extent(addr, &base, &lo, &hi) != 0)
        return;
    uv_once(&once, init_once);
    uv_mutex_lock(&lock);
    size_t n = (size_t)kl_atomic_load(&nmodules);
    int known = 0;
    for (size_t i = 0; i < n && !known; i++)
        known = modules[i].base == base; /* a second server loaded it again */
    if (!known && n < MAX_MODULES) {
        crash_module *m = &modules[n];
        copy_name(m->name, sizeof m->name, name);
        const char *file = path;
        for (const char *p = path; *p; p++)
            if (*p == '/' || *p == '\\')
                file = p + 1;
        copy_name(m->file, sizeof m->file, file);
        m->base = base;
        m->lo = lo;
        m->hi = hi;
        kl_atomic_store(&nmodules, n + 1); /* publishes the entry */
    }
    uv_mutex_unlock(&lock);
}

/* The module whose shared object holds pc, or NULL. Signal handler. */
static const crash_module *module_at(uintptr_t pc)
{
    size_t n = (size_t)kl_atomic_load(&nmodules);
    int need_base = 0;
    for (size_t i = 0; i < n; i++) {
        if (modules[i].hi == 0)
            need_base = 1;
        else if (pc >= modules[i].lo && pc < modules[i].hi)
            return &modules[i];
    }
    if (!need_base)
        return NULL;
    uintptr_t base = kl_crash_platform_base_of(pc);
    for (size_t i = 0; base != 0 && i < n; i++)
        if (modules[i].hi == 0 && modules[i].base == base)
            return &modules[i];
    return NULL;
}

/* ---- the line, without stdio ------------------------------------------- */

typedef struct out {
    char *p;
    size_t left; /* room, keeping one byte for the final "\n" */
} out;

static void put(out *o, const char *s)
{
    while (*s && o->left > 1) {
        *o->p++ = *s++;
        o->left--;
    }
}

static void put_n(out *o, uint64_t v, int width)
{
    char digits[24];
    kl_crash_format_dec(digits, v);
    for (int pad = width - (int)strlen(digits); pad > 0; pad--)
        put(o, "0");
    put(o, digits);
}

void kl_crash_format_dec(char *buf, uint64_t value)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = '\0';
}

void kl_crash_format_hex(char *buf, uint64_t value)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = hex[value & 15];
        value >>= 4;
    } while (value != 0);
    buf[0] = '0';
    buf[1] = 'x';
    for (size_t i = 0; i < n; i++)
        buf[2 + i] = tmp[n - 1 - i];
    buf[2 + n] = '\0';
}

void kl_crash_format_time(char *buf, int64_t seconds, unsigned ms)
{
    /* Days since 1970-01-01 to year, month, day in the proleptic Gregorian
     * calendar (gmtime is not async-signal-safe). */
    int64_t days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400;
    int64_t rem = seconds - days * 86400;
    int64_t z = days + 719468; /* days since 0000-03-01 */
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;                                      /* [0, 146096] */
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* [0, 365] */
    int64_t mp = (5 * doy + 2) / 153;                                    /* March = 0 */
    int64_t day = doy - (153 * mp + 2) / 5 + 1;
    int64_t month = mp < 10 ? mp + 3 : mp - 9;
    int64_t year = yoe + era * 400 + (month <= 2);
    out o = {buf, 32};
    put_n(&o, (uint64_t)year, 4);
    put(&o, "-");
    put_n(&o, (uint64_t)month, 2);
    put(&o, "-");
    put_n(&o, (uint64_t)day, 2);
    put(&o, "T");
    put_n(&o, (uint64_t)(rem / 3600), 2);
    put(&o, ":");
    put_n(&o, (uint64_t)(rem / 60 % 60), 2);
    put(&o, ":");
    put_n(&o, (uint64_t)(rem % 60), 2);
    put(&o, ".");
    put_n(&o, ms % 1000, 3);
    put(&o, "Z");
    *o.p = '\0';
}

/* The log's timestamp, "2026-11-29T22:36:42.045Z". */
static void put_time(out *o)
{
    int64_t seconds;
    unsigned ms;
    char text[32];
    kl_crash_platform_now(&seconds, &ms);
    kl_crash_format_time(text, seconds, ms);
    put(o, text);
}

static void put_thread(out *o)
{
    switch (kl_crash_self.role) {
    case KL_THREAD_WORKER:
        put(o, "on worker ");
        put_n(o, kl_crash_self.worker, 1);
        break;
    case KL_THREAD_MAIN:
        put(o, "on the main thread");
        break;
    default:
        put(o, "on another thread (thread pool or a module's own)");
        break;
    }
}

static void put_module(out *o, const char *name)
{
    put(o, "module '");
    put(o, name);
    put(o, "'");
}

void kl_crash_opening(const char *path)
{
    opening = path;
}

size_t kl_crash_describe(char *buf, size_t cap, const char *what, const uintptr_t *addrs,
                         size_t naddrs, size_t npc)
{
    if (cap < 2)
        return 0;
    out o = {buf, cap};
    put_time(&o);
    put(&o, " [error] crash: ");
    put(&o, what);
    put(&o, " ");
    put_thread(&o);

    /* The innermost frame in a module's code is the module at fault (a
     * module calling abort() or memcpy has libc's frames above its own).
     * A return address is looked up one byte back: the call it returns
     * from may be the last instruction of its function. */
    const crash_module *found = NULL;
    uintptr_t at = 0;
    for (size_t i = 0; i < naddrs && found == NULL; i++) {
        uintptr_t pc = i < npc || addrs[i] == 0 ? addrs[i] : addrs[i] - 1;
        if ((found = module_at(pc)) != NULL)
            at = pc;
    }
    /* What the core says the thread entered last. */
    const char *running = kl_crash_self.scope.module;
    if (running == NULL && kl_crash_self.scope.code != 0) {
        const crash_module *m = module_at(kl_crash_self.scope.code);
        running = m ? m->name : NULL;
    }

    if (found != NULL) {
        char off[24];
        kl_crash_format_hex(off, at - found->base);
        put(&o, " in ");
        put_module(&o, found->name);
        put(&o, " (");
        put(&o, found->file);
        put(&o, "+");
        put(&o, off);
        put(&o, ")");
        if (running != NULL && strcmp(running, found->name) != 0) {
            put(&o, ", called while ");
            put_module(&o, running);
            put(&o, " was running");
        }
    } else if (opening != NULL && kl_crash_self.role == KL_THREAD_MAIN) {
        /* In the dynamic loader, before the module is recorded: the file
         * is what to look at (a truncated copy faults with SIGBUS). */
        put(&o, " while opening the module file ");
        put(&o, opening);
    } else if (running != NULL) {
        /* Not in a module's shared object: keel's code or a library's,
         * called by the module (or the module's own, compiled into the
         * program). */
        put(&o, " while ");
        put_module(&o, running);
        put(&o, " was running");
    } else {
        put(&o, " outside any module's code");
    }
    *o.p++ = '\n';
    return (size_t)(o.p - buf);
}
