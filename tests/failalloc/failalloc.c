/* failalloc.c — allocation-failure injection for keel's tests (SQLite's
 * approach: fail the Nth allocation, for every N, and expect a clean
 * error, never a crash or a leak). docs/security.md, "Fault injection".
 *
 * A shared object preloaded into a keel process (LD_PRELOAD): it defines
 * malloc, calloc, realloc, free, strdup, strndup, posix_memalign and
 * aligned_alloc, passes every call on to the next definition (the C
 * library's, or the sanitizer's under ASan) and counts the allocations
 * that keel's own code makes: those whose caller (the return address)
 * lies in the keel executable, libkeel or a module (an object whose file
 * name starts with "mod_"), as dl_iterate_phdr maps them. Allocations made
 * inside libuv, zlib or the C library on keel's behalf are not counted
 * (their failures reach keel as their callers' errors, which the counted
 * allocations around them exercise the same way).
 *
 * Why a preloaded interposer rather than a kl_alloc layer in the core:
 * keel's core and its modules call the C allocator directly in some 60
 * files (and modules are built by third parties against a stable ABI,
 * which has no allocator entry); routing them all through a hook would
 * touch every one of them, add an indirection to every allocation of a
 * production build, and still miss the allocations of a module that
 * calls malloc itself. The interposer needs no change to keel at all, sees
 * every allocation the shipped modules make, and exists only in tests.
 *
 * Environment:
 *   KEEL_FAILALLOC_N=N        fail the Nth counted allocation (1-based);
 *                             0 or unset: only count
 *   KEEL_FAILALLOC_REPEAT=1   fail every counted allocation from the Nth on
 *                             (a persistent shortage, not a transient one)
 *   KEEL_FAILALLOC_REPORT=F   at exit, write "count C failed F" to file F
 *   KEEL_FAILALLOC_TRACE=1    print a backtrace of each failed call to stderr
 *   KEEL_FAILALLOC_OBJECTS=a,b  more objects to count (substrings of their
 *                             path; "keel" and "mod_" always count)
 *
 * Linux (glibc) only: dl_iterate_phdr, RTLD_NEXT. Built without
 * sanitizers even in an ASan build: it forwards to ASan's allocator and
 * must not be instrumented itself (run with
 * ASAN_OPTIONS=verify_asan_link_order=0, as it comes before libasan). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);

/* dlsym itself may allocate (its error buffer) before the real functions
 * are known: those few bytes come from here and are never freed. */
static char boot[8192] __attribute__((aligned(16)));
static size_t boot_used;

static int in_boot(const void *p)
{
    return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

static void *boot_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (boot_used + n > sizeof boot)
        return NULL;
    void *p = boot + boot_used;
    boot_used += n;
    return p;
}

static long long fail_at;  /* N; 0: count only */
static int repeat;         /* fail from N on */
static int trace;          /* backtrace of each failure */
static const char *report; /* file written at exit */
static char extra[256];    /* KEEL_FAILALLOC_OBJECTS */
static long long counted;  /* counted allocations so far (atomic) */
static long long failed;   /* failures injected (atomic) */
static __thread int inside __attribute__((tls_model("initial-exec"))); /* in our own code */
static int ready;
/* Set by our constructor: before it, the sanitizer runtime may still be
 * setting up (its dl_iterate_phdr interceptor is not usable yet), and no
 * code of keel's has run. */
static int armed;

static void init(void)
{
    static int initing;
    if (ready || initing)
        return;
    initing = 1;
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    ready = 1;
    initing = 0;
}

/* The settings, read by our constructor: init() may run inside the
 * dynamic loader or the sanitizer's start-up, too early for getenv. */
static void settings(void)
{
    const char *s = getenv("KEEL_FAILALLOC_N");
    fail_at = s ? atoll(s) : 0;
    s = getenv("KEEL_FAILALLOC_REPEAT");
    repeat = s && *s == '1';
    s = getenv("KEEL_FAILALLOC_TRACE");
    trace = s && *s == '1';
    report = getenv("KEEL_FAILALLOC_REPORT");
    s = getenv("KEEL_FAILALLOC_OBJECTS");
    if (s)
        snprintf(extra, sizeof extra, "%s", s);
}

__attribute__((constructor)) static void failalloc_arm(void)
{
    init();
    inside = 1;
    settings();
    inside = 0;
    armed = ready;
}

/* ---- Whose code is calling ------------------------------------------------- */

typedef struct range {
    uintptr_t lo, hi;
    int keel;
} range;

#define MAX_RANGES 256
static range ranges[MAX_RANGES];
static int nranges; /* published with release, read with acquire */
static pthread_mutex_t ranges_lock = PTHREAD_MUTEX_INITIALIZER;

static int is_keel_object(const char *name)
{
    if (name == NULL || name[0] == '\0')
        return 1; /* the main program: keel, or the test's embedding program */
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "mod_", 4) == 0 || strncmp(base, "libkeel", 7) == 0)
        return 1;
    if (extra[0]) {
        char list[256];
        snprintf(list, sizeof list, "%s", extra);
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (*t && strstr(name, t))
                return 1;
    }
    return 0;
}

typedef struct find {
    uintptr_t addr;
    range found;
    int ok;
} find;

static int each_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    find *f = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo)
            lo = a;
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    if (f->addr >= lo && f->addr < hi) {
        f->found = (range){lo, hi, is_keel_object(info->dlpi_name)};
        f->ok = 1;
        return 1;
    }
    return 0;
}

static int from_keel(const void *caller)
{
    uintptr_t a = (uintptr_t)caller;
    int n = __atomic_load_n(&nranges, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (a >= ranges[i].lo && a < ranges[i].hi)
            return ranges[i].keel;
    /* First call from this object: find it and remember it. */
    find f = {.addr = a};
    dl_iterate_phdr(each_object, &f);
    if (!f.ok)
        return 0;
    pthread_mutex_lock(&ranges_lock);
    n = nranges;
    int known = 0;
    for (int i = 0; i < n; i++)
        known |= ranges[i].lo == f.found.lo;
    if (!known && n < MAX_RANGES) {
        ranges[n] = f.found;
        __atomic_store_n(&nranges, n + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ranges_lock);
    return f.found.keel;
}

/* Does this allocation fail? Counts it if it is keel's. */
static int should_fail(const void *caller)
{
    if (inside || !armed)
        return 0;
    inside = 1;
    int keel = from_keel(caller);
    int fail = 0;
    if (keel) {
        long long n = __atomic_add_fetch(&counted, 1, __ATOMIC_RELAXED);
        fail = fail_at > 0 && (n == fail_at || (repeat && n > fail_at));
        if (fail) {
            __atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);
            if (trace) {
                char msg[96];
                int len = snprintf(msg, sizeof msg, "failalloc: allocation %lld fails here:\n", n);
                if (write(2, msg, (size_t)len) < 0) {
                    /* nothing to do */
                }
                void *frames[32];
                int nf = backtrace(frames, 32);
                backtrace_symbols_fd(frames, nf, 2);
            }
        }
    }
    inside = 0;
    return fail;
}

/* ---- The allocator ------------------------------------------------------------ */

EXPORT void *malloc(size_t n)
{
    if (!real_malloc) {
        init();
        if (!real_malloc)
            return boot_alloc(n);
    }
    if (should_fail(__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    return real_malloc(n);
}

EXPORT void *calloc(size_t a, size_t b)
{
    if (!real_calloc) {
        init();
        if (!real_calloc) {
            if (b && a > SIZE_MAX / b)
                return NULL;
            return boot_alloc(a * b); /* static: already zero */
        }
    }
    if (should_fail(__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    return real_calloc(a, b);
}

EXPORT void *realloc(void *p, size_t n)
{
    if (!real_realloc)
        init();
    if (in_boot(p)) {
        void *q = malloc(n);
        if (q != NULL)
            memcpy(q, p,
                   n < (size_t)(boot + sizeof boot - (char *)p)
                       ? n
                       : (size_t)(boot + sizeof boot - (char *)p));
        return q;
    }
    /* realloc(p, 0) frees: not an allocation that can fail. */
    if (n > 0 && should_fail(__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    return real_realloc(p, n);
}

EXPORT void free(void *p)
{
    if (p == NULL || in_boot(p))
        return;
    if (!real_free)
        init();
    real_free(p);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (!real_posix_memalign)
        init();
    if (should_fail(__builtin_return_address(0)))
        return ENOMEM;
    return real_posix_memalign(out, align, n);
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    if (!real_aligned_alloc)
        init();
    if (should_fail(__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    return real_aligned_alloc(align, n);
}

/* strdup and strndup: under ASan they are interceptors that allocate
 * without calling malloc, so keel's calls must be counted here. */
EXPORT char *strdup(const char *s)
{
    if (!real_malloc)
        init();
    if (should_fail(__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    size_t n = strlen(s) + 1;
    char *d = real_malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

EXPORT char *strndup(const char *s, size_t max)
{
    if (!real_malloc)
        init();
    if (should_fail(__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    size_t n = strnlen(s, max);
    char *d = real_malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

__attribute__((destructor)) static void failalloc_report(void)
{
    if (report == NULL)
        return;
    inside = 1;
    FILE *f = fopen(report, "w");
    if (f != NULL) {
        fprintf(f, "count %lld failed %lld\n", __atomic_load_n(&counted, __ATOMIC_RELAXED),
                __atomic_load_n(&failed, __ATOMIC_RELAXED));
        fclose(f);
    }
    inside = 0;
}
