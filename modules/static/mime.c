/* mime.c — Content-Type from the file name's last extension.
 *
 * A built-in table sorted by extension, searched with bsearch (about 7
 * comparisons for 80 entries, no allocation), and the
 * config's `type = .ext mime/type` lines, searched first so that they
 * override it. Text types, JavaScript and JSON get "; charset=utf-8":
 * a browser otherwise guesses (RFC 9110 8.3.1 lets the recipient sniff
 * when no charset is given, which is how UTF-7 XSS happened); nginx's
 * `charset utf-8` does the same for text types. Unknown extensions are
 * application/octet-stream (RFC 9110 8.3: the recipient may then treat it
 * as data), never sniffed. Each type's Content-Type field is prepared
 * at load (st_mime_prepare), and the open-file cache keeps the lookup's
 * result with the file, so that a cached file's response neither searches
 * nor checks and copies the type again.
 */
#include "static.h"

#include <stdlib.h>
#include <string.h>

typedef struct mime_entry {
    const char *ext;
    const char *type;
} mime_entry;

#define U8 "; charset=utf-8"

/* Sorted by ext (byte order, lower case): the test for this module checks
 * a few lookups, and st_mime_check_sorted() guards the order in debug
 * builds. */
static const mime_entry builtin[] = {
    {"7z", "application/x-7z-compressed"},
    {"aac", "audio/aac"},
    {"apng", "image/apng"},
    {"atom", "application/atom+xml" U8},
    {"avi", "video/x-msvideo"},
    {"avif", "image/avif"},
    {"bin", "application/octet-stream"},
    {"bmp", "image/bmp"},
    {"bz2", "application/x-bzip2"},
    {"cjs", "text/javascript" U8},
    {"css", "text/css" U8},
    {"csv", "text/csv" U8},
    {"doc", "application/msword"},
    {"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
    {"eot", "application/vnd.ms-fontobject"},
    {"epub", "application/epub+zip"},
    {"flac", "audio/flac"},
    {"gif", "image/gif"},
    {"gz", "application/gzip"},
    {"heic", "image/heic"},
    {"htm", "text/html" U8},
    {"html", "text/html" U8},
    {"ico", "image/vnd.microsoft.icon"},
    {"ics", "text/calendar" U8},
    {"jar", "application/java-archive"},
    {"jpeg", "image/jpeg"},
    {"jpg", "image/jpeg"},
    {"js", "text/javascript" U8},
    {"json", "application/json" U8},
    {"jsonld", "application/ld+json" U8},
    {"jxl", "image/jxl"},
    {"m3u8", "application/vnd.apple.mpegurl"},
    {"m4a", "audio/mp4"},
    {"m4v", "video/mp4"},
    {"manifest", "application/manifest+json" U8},
    {"map", "application/json" U8},
    {"md", "text/markdown" U8},
    {"mid", "audio/midi"},
    {"mjs", "text/javascript" U8},
    {"mkv", "video/x-matroska"},
    {"mov", "video/quicktime"},
    {"mp3", "audio/mpeg"},
    {"mp4", "video/mp4"},
    {"mpd", "application/dash+xml"},
    {"mpeg", "video/mpeg"},
    {"oga", "audio/ogg"},
    {"ogg", "audio/ogg"},
    {"ogv", "video/ogg"},
    {"opus", "audio/ogg"},
    {"otf", "font/otf"},
    {"pdf", "application/pdf"},
    {"png", "image/png"},
    {"ppt", "application/vnd.ms-powerpoint"},
    {"pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
    {"rar", "application/vnd.rar"},
    {"rss", "application/rss+xml" U8},
    {"rtf", "application/rtf"},
    {"svg", "image/svg+xml" U8},
    {"svgz", "image/svg+xml"},
    {"tar", "application/x-tar"},
    {"tif", "image/tiff"},
    {"tiff", "image/tiff"},
    {"ts", "video/mp2t"},
    {"ttf", "font/ttf"},
    {"txt", "text/plain" U8},
    {"vtt", "text/vtt" U8},
    {"wasm", "application/wasm"},
    {"wav", "audio/wav"},
    {"weba", "audio/webm"},
    {"webm", "video/webm"},
    {"webmanifest", "application/manifest+json" U8},
    {"webp", "image/webp"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"xhtml", "application/xhtml+xml" U8},
    {"xls", "application/vnd.ms-excel"},
    {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
    {"xml", "application/xml" U8},
    {"yaml", "application/yaml" U8},
    {"yml", "application/yaml" U8},
    {"zip", "application/zip"},
    {"zst", "application/zstd"},
};

static const char default_type[] = "application/octet-stream";

static int cmp_entry(const void *key, const void *elem)
{
    return strcmp(key, ((const mime_entry *)elem)->ext);
}

#define NBUILTIN (sizeof builtin / sizeof builtin[0])

const st_ctype *st_mime_type(const st_config *cfg, const char *name, size_t len)
{
    const st_ctype *unknown = &cfg->builtin_types[NBUILTIN];
    size_t dot = len;
    while (dot > 0 && name[dot - 1] != '.' && name[dot - 1] != '/')
        dot--;
    if (dot == 0 || name[dot - 1] != '.' || len - dot == 0 || len - dot > 15)
        return unknown;
    char ext[16];
    size_t n = len - dot;
    for (size_t i = 0; i < n; i++)
        ext[i] = (char)keel_ascii_lower((unsigned char)name[dot + i]);
    ext[n] = '\0';
    for (size_t i = 0; i < cfg->ntypes; i++)
        if (strcmp(cfg->types[i].ext, ext) == 0)
            return &cfg->types[i].type;
    const mime_entry *e = bsearch(ext, builtin, NBUILTIN, sizeof builtin[0], cmp_entry);
    return e ? &cfg->builtin_types[e - builtin] : unknown;
}

/* A type's Content-Type field; a value the core refuses (a configured
 * type with a control byte) leaves it NULL, and the handler sets the text,
 * which is refused the same way, as it was before fields were prepared. */
static int prepare_type(keel_module *module, st_ctype *t)
{
    int rc = keel_field_prepare(module, "Content-Type", 12, t->text, strlen(t->text), &t->field);
    return rc == KEEL_ERR_NOMEM ? rc : KEEL_OK;
}

int st_mime_prepare(keel_module *module, st_config *cfg)
{
    cfg->builtin_types = calloc(NBUILTIN + 1, sizeof *cfg->builtin_types);
    if (cfg->builtin_types == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i <= NBUILTIN; i++)
        cfg->builtin_types[i].text = i < NBUILTIN ? builtin[i].type : default_type;
    int rc = KEEL_OK;
    for (size_t i = 0; rc == KEEL_OK && i <= NBUILTIN; i++)
        rc = prepare_type(module, &cfg->builtin_types[i]);
    for (size_t i = 0; rc == KEEL_OK && i < cfg->ntypes; i++)
        rc = prepare_type(module, &cfg->types[i].type);
    return rc;
}

/* text/... and the script and JSON types are text whatever their name says
 * (RFC 9239 for text/javascript; RFC 8259 says JSON is UTF-8). */
char *st_mime_with_charset(const char *mime)
{
    size_t len = strlen(mime);
    int textual = strncmp(mime, "text/", 5) == 0 || strstr(mime, "json") != NULL ||
                  strstr(mime, "+xml") != NULL || strcmp(mime, "application/xml") == 0 ||
                  strcmp(mime, "application/javascript") == 0;
    int has = strchr(mime, ';') != NULL;
    char *out = malloc(len + sizeof U8);
    if (out == NULL)
        return NULL;
    memcpy(out, mime, len + 1);
    if (textual && !has)
        memcpy(out + len, U8, sizeof U8);
    return out;
}

int st_mime_table_sorted(void)
{
    for (size_t i = 1; i < NBUILTIN; i++)
        if (strcmp(builtin[i - 1].ext, builtin[i].ext) >= 0)
            return 0;
    return 1;
}
