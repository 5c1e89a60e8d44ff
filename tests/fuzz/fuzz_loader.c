/* fuzz_loader — the loader's checks of module descriptors
 * (core/server/loader.c): ABI versions, the descriptor's size, its name,
 * dependencies (required and "?optional"), their order in the `modules`
 * list, duplicates, and modules missing from the program.
 *
 * Descriptors are made from the input and registered as compiled-in
 * modules (keel_server_add_module), then keel_server_check loads and
 * unloads them, as `keel -t` does. The input is text, one line each:
 *
 *     line 1            the [keel] modules list
 *     lines 2 to 4      a descriptor each: three characters, then words
 *                       char 1: ABI major ('1' is keel's), char 2: minor,
 *                       char 3: the size the descriptor claims ('0' its real
 *                       size, '1' one byte short of `unload`, '2' a
 *                       smaller size, '3' larger than keel's struct, '4' 0),
 *                       then its name and the names it depends on
 *
 * Checked: no crash, no sanitizer report, no leak; a descriptor of
 * another major, of a newer minor, too small, or without a name is never
 * loaded (its load function aborts). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/embed.h>

#define MAXD    3
#define MAXDEPS 4

typedef struct fdesc {
    keel_module_desc d;
    char pad[64]; /* room for a descriptor that claims to be larger */
    char name[64];
    char deps[MAXDEPS][64];
    const char *dep_ptrs[MAXDEPS + 1];
    const struct keel_api *slot;
    int must_refuse;
} fdesc;

static fdesc descs[MAXD];

static int load_ok(keel_module *m)
{
    (void)m;
    return KEEL_OK;
}

static int load_refused(keel_module *m)
{
    (void)m;
    fprintf(stderr, "fuzz_loader: a descriptor keel must refuse was loaded\n");
    abort();
}

/* Copies the next word of [*p, end) into out; returns its length. */
static size_t word(const char **p, const char *end, char *out, size_t cap)
{
    while (*p < end && **p == ' ')
        (*p)++;
    size_t n = 0;
    while (*p < end && **p != ' ') {
        if (n + 1 < cap)
            out[n++] = **p;
        (*p)++;
    }
    out[n] = '\0';
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data, *end = s + size;
    if (memchr(s, '\0', size) != NULL || size > 4096)
        return 0; /* text only: names are C strings */

    const char *nl = memchr(s, '\n', size);
    const char *line_end = nl ? nl : end;
    char conf[1024];
    snprintf(conf, sizeof conf,
             "[keel]\nlog_level = error\nlog = /dev/null\ncrash_report = off\nmodules = %.*s\n",
             (int)(line_end - s < 512 ? line_end - s : 512), s);
    s = nl ? nl + 1 : end;

    keel_server *server = keel_server_new();
    if (server == NULL)
        return 0;
    int nd = 0;
    for (; nd < MAXD && s < end; nd++) {
        nl = memchr(s, '\n', (size_t)(end - s));
        line_end = nl ? nl : end;
        fdesc *f = &descs[nd];
        memset(f, 0, sizeof *f);
        if (line_end - s < 3)
            break;
        f->d.abi_major = (uint32_t)(s[0] - '0');
        f->d.abi_minor = (uint32_t)(unsigned char)(s[1] - '0');
        switch (s[2]) {
        case '1':
            f->d.size = offsetof(keel_module_desc, unload) + sizeof f->d.unload - 1;
            break;
        case '2':
            f->d.size = offsetof(keel_module_desc, dependencies);
            break;
        case '3':
            f->d.size = sizeof f->d + sizeof f->pad;
            break;
        case '4':
            f->d.size = 0;
            break;
        default:
            f->d.size = sizeof f->d;
            break;
        }
        const char *p = s + 3;
        int named = word(&p, line_end, f->name, sizeof f->name) > 0;
        f->d.name = named ? f->name : NULL;
        int ndeps = 0;
        while (ndeps < MAXDEPS && word(&p, line_end, f->deps[ndeps], sizeof f->deps[0]) > 0) {
            f->dep_ptrs[ndeps] = f->deps[ndeps];
            ndeps++;
        }
        f->d.dependencies = ndeps > 0 ? f->dep_ptrs : NULL;
        f->d.api = &f->slot;
        f->d.worker_state_size = 16;
        f->must_refuse = f->d.abi_major != KEEL_ABI_MAJOR || f->d.abi_minor > KEEL_ABI_MINOR ||
                         f->d.size < offsetof(keel_module_desc, unload) + sizeof f->d.unload ||
                         !named;
        /* A descriptor claiming to be smaller than `load` has no load. */
        if (f->d.size >= offsetof(keel_module_desc, load) + sizeof f->d.load)
            f->d.load = f->must_refuse ? load_refused : load_ok;
        if (named)
            keel_server_add_module(server, &f->d);
        s = nl ? nl + 1 : end;
    }
    if (keel_server_load_config_string(server, conf, "fuzz.conf") == KEEL_OK)
        keel_server_check(server);
    keel_server_free(server);
    return 0;
}
