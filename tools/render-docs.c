/* render-docs — keel's Markdown documentation as HTML pages, at build time.
 *
 *     render-docs SRCROOT OUTDIR FILE.md...
 *
 * FILEs are paths relative to SRCROOT (the repository). Each is parsed
 * with cmark-gfm (CommonMark plus GitHub's tables, strikethrough and
 * autolinks: the docs and the generated reference pages are read on
 * GitHub too, and their tables are GFM) and written under OUTDIR:
 *
 *     README.md                 overview.html
 *     docs/NAME.md              NAME.html
 *     docs/reference/NAME.md    reference/NAME.html
 *     modules/NAME/README.md    modules/NAME.html
 *     examples/NAME/README.md   examples/NAME.html
 *
 * with OUTDIR/index.html listing them all. Links between the files are
 * rewritten to the pages they became (fragment kept); a link to a folder
 * goes to its README's page; a relative link to anything not rendered
 * (a source file, an example config) cannot work in an installed copy and
 * becomes its text. Headings get the ids GitHub gives them, so that
 * `page.md#section` links keep working. tests/docs/html_links.py checks
 * that every internal link of the result resolves.
 *
 * The pages are styled as the welcome page (modules/static/welcome), light
 * and dark. A build-time tool of the build machine: not installed, not
 * built when cmark-gfm is absent or when cross-compiling. */
#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_PAGES 512
#define MAX_IDS   1024

typedef struct page {
    char *src;   /* relative to SRCROOT: docs/static.md */
    char *out;   /* relative to OUTDIR: static.html */
    char *title; /* the first heading's text, or the file name */
} page;

static page pages[MAX_PAGES];
static size_t npages;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("render-docs: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy == NULL)
        die("out of memory");
    return memcpy(copy, s, n);
}

static char *xprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = malloc((size_t)n + 1);
    if (s == NULL)
        die("out of memory");
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

/* The output page of a source file, or NULL when it is not one we render. */
static char *output_name(const char *src)
{
    const char *slash;
    if (strcmp(src, "README.md") == 0)
        return xstrdup("overview.html");
    if (strncmp(src, "docs/reference/", 15) == 0 && strchr(src + 15, '/') == NULL &&
        ends_with(src, ".md"))
        return xprintf("reference/%.*s.html", (int)(strlen(src) - 18), src + 15);
    if (strncmp(src, "docs/", 5) == 0 && strchr(src + 5, '/') == NULL && ends_with(src, ".md"))
        return xprintf("%.*s.html", (int)(strlen(src) - 8), src + 5);
    for (int i = 0; i < 2; i++) {
        const char *top = i == 0 ? "modules/" : "examples/";
        size_t n = strlen(top);
        if (strncmp(src, top, n) == 0 && (slash = strchr(src + n, '/')) != NULL &&
            strcmp(slash, "/README.md") == 0)
            return xprintf("%s%.*s.html", top, (int)(slash - src - n), src + n);
    }
    return NULL;
}

static const page *find_page(const char *src)
{
    for (size_t i = 0; i < npages; i++)
        if (strcmp(pages[i].src, src) == 0)
            return &pages[i];
    return NULL;
}

/* Resolves REL against the folder of FROM (both relative to SRCROOT), with
 * "." and ".." segments and a trailing slash removed. NULL when it leaves
 * the root. */
static char *resolve(const char *from, const char *rel)
{
    char *segs[128];
    size_t nsegs = 0;
    char *buf = xprintf("%s/../%s", from, rel); /* from names a file: drop it */
    char *save = NULL;
    for (char *seg = strtok_r(buf, "/", &save); seg != NULL; seg = strtok_r(NULL, "/", &save)) {
        if (strcmp(seg, ".") == 0)
            continue;
        if (strcmp(seg, "..") == 0) {
            if (nsegs == 0) {
                free(buf);
                return NULL;
            }
            nsegs--;
            continue;
        }
        if (nsegs == sizeof segs / sizeof *segs)
            break;
        segs[nsegs++] = seg;
    }
    size_t len = 1;
    for (size_t i = 0; i < nsegs; i++)
        len += strlen(segs[i]) + 1;
    char *out = malloc(len);
    if (out == NULL)
        die("out of memory");
    out[0] = '\0';
    for (size_t i = 0; i < nsegs; i++) {
        if (i)
            strcat(out, "/");
        strcat(out, segs[i]);
    }
    free(buf);
    return out;
}

/* The path from page FROM's folder to page TO (both relative to OUTDIR). */
static char *relative_to(const char *from, const char *to)
{
    size_t depth = 0;
    for (const char *p = from; *p; p++)
        depth += *p == '/';
    size_t len = strlen(to) + 3 * depth + 1;
    char *out = malloc(len);
    if (out == NULL)
        die("out of memory");
    out[0] = '\0';
    for (size_t i = 0; i < depth; i++)
        strcat(out, "../");
    strcat(out, to);
    return out;
}

/* Where a link target (relative to SRCROOT, no fragment) goes: a rendered
 * page, or a folder whose README is one. docs/reference is the index's
 * reference section. */
static const char *target_page(const char *path, const char **fragment)
{
    const page *p = find_page(path);
    if (p != NULL)
        return p->out;
    if (strcmp(path, "docs/reference") == 0) {
        *fragment = "#reference";
        return "index.html";
    }
    if (strcmp(path, "docs") == 0 || strcmp(path, "") == 0)
        return "index.html";
    char *readme = xprintf("%s/README.md", path);
    p = find_page(readme);
    free(readme);
    return p != NULL ? p->out : NULL;
}

static int is_external(const char *url)
{
    /* A scheme (RFC 3986 3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"),
     * a site-absolute path or a fragment of this page stay as they are. */
    if (url[0] == '#' || url[0] == '/' || url[0] == '\0')
        return 1;
    for (const char *p = url; *p && *p != '/'; p++)
        if (*p == ':')
            return 1;
    return 0;
}

/* Replaces a link node by its children (a link that cannot work). */
static void unlink_keeping_text(cmark_node *link)
{
    cmark_node *child;
    while ((child = cmark_node_first_child(link)) != NULL) {
        cmark_node_unlink(child);
        cmark_node_insert_before(link, child);
    }
    cmark_node_unlink(link);
    cmark_node_free(link);
}

static size_t unlinked;

static void rewrite_link(const page *pg, cmark_node *link, int verbose)
{
    const char *url = cmark_node_get_url(link);
    if (url == NULL || is_external(url))
        return;
    const char *hash = strchr(url, '#');
    char *path = hash ? xprintf("%.*s", (int)(hash - url), url) : xstrdup(url);
    const char *fragment = hash ? hash : "";
    char *resolved = resolve(pg->src, path);
    const char *to = resolved ? target_page(resolved, &fragment) : NULL;
    if (to == NULL) {
        if (verbose)
            fprintf(stderr, "render-docs: %s: '%s' is not a rendered page: kept as text\n", pg->src,
                    url);
        unlinked++;
        unlink_keeping_text(link);
    } else {
        char *rel = relative_to(pg->out, to);
        char *full = xprintf("%s%s", rel, fragment);
        cmark_node_set_url(link, full);
        free(full);
        free(rel);
    }
    free(resolved);
    free(path);
}

/* The text of a node's inlines (a heading's, for its id and a title). */
static void text_of(cmark_node *node, char *buf, size_t cap)
{
    size_t n = strlen(buf);
    for (cmark_node *c = cmark_node_first_child(node); c != NULL; c = cmark_node_next(c)) {
        cmark_node_type t = cmark_node_get_type(c);
        if (t == CMARK_NODE_TEXT || t == CMARK_NODE_CODE) {
            const char *lit = cmark_node_get_literal(c);
            if (lit != NULL && n + strlen(lit) < cap) {
                memcpy(buf + n, lit, strlen(lit) + 1);
                n += strlen(lit);
            }
        } else if (t == CMARK_NODE_SOFTBREAK && n + 1 < cap) {
            buf[n++] = ' ';
            buf[n] = '\0';
        } else {
            text_of(c, buf, cap);
            n = strlen(buf);
        }
    }
}

/* GitHub's heading ids: lower case, letters (any script), digits, '-' and
 * '_' kept, spaces to '-', other punctuation dropped; a repeated id gets
 * -1, -2. */
static char *slug(const char *text, char **ids, size_t *nids)
{
    size_t len = strlen(text);
    char *s = malloc(len + 16);
    if (s == NULL)
        die("out of memory");
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        /* Punctuation beyond ASCII goes too, as on GitHub: the General
         * Punctuation block (dashes, quotes, ellipsis: E2 80 xx, E2 81 xx)
         * and the middle dot and the multiplication sign (C2 B7, C3 97). */
        if (p[0] == 0xE2 && (p[1] == 0x80 || p[1] == 0x81) && p[2] != 0) {
            p += 2;
            continue;
        }
        if ((p[0] == 0xC2 && p[1] == 0xB7) || (p[0] == 0xC3 && p[1] == 0x97)) {
            p += 1;
            continue;
        }
        if (*p >= 'A' && *p <= 'Z')
            s[n++] = (char)(*p - 'A' + 'a');
        else if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
                 *p >= 0x80)
            s[n++] = (char)*p;
        else if (*p == ' ')
            s[n++] = '-';
    }
    s[n] = '\0';
    char *unique = xstrdup(s);
    for (int k = 1;; k++) {
        size_t i;
        for (i = 0; i < *nids && strcmp(ids[i], unique) != 0; i++)
            ;
        if (i == *nids)
            break;
        free(unique);
        unique = xprintf("%s-%d", s, k);
    }
    free(s);
    if (*nids < MAX_IDS)
        ids[(*nids)++] = unique;
    return unique;
}

static void html_escape(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", out);
        else if (*s == '>')
            fputs("&gt;", out);
        else if (*s == '&')
            fputs("&amp;", out);
        else if (*s == '"')
            fputs("&quot;", out);
        else
            fputc(*s, out);
    }
}

/* The welcome page's look (modules/static/welcome/index.html): its colours,
 * light and dark, its type and width, plus what long documents need
 * (tables that scroll on a phone, headings, block quotes). */
static const char style[] =
    ":root{--bg:#f6f7f9;--fg:#1d2330;--muted:#5b6475;--card:#fff;--line:#dde1e8;"
    "--accent:#2563eb;--code:#eef1f6}\n"
    "@media (prefers-color-scheme: dark){:root{--bg:#12151b;--fg:#e6e9ef;--muted:#9aa3b2;"
    "--card:#1a1f28;--line:#2a313d;--accent:#6ea8fe;--code:#222936}}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;background:var(--bg);color:var(--fg);"
    "font:16px/1.55 system-ui,-apple-system,\"Segoe UI\",Roboto,sans-serif}\n"
    "main{max-width:52rem;margin:0 auto;padding:1.5rem 1.25rem 4rem}\n"
    "nav{font-size:.95rem;margin-bottom:1.5rem;color:var(--muted)}\n"
    "a{color:var(--accent)}\n"
    "h1{font-size:2rem;margin:.5rem 0 1rem;letter-spacing:-.02em}\n"
    "h2{font-size:1.35rem;margin:2.2rem 0 .6rem}\n"
    "h3{font-size:1.1rem;margin:1.8rem 0 .5rem}\n"
    "code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em}\n"
    "code{background:var(--code);padding:.1em .35em;border-radius:.3em;overflow-wrap:anywhere}\n"
    "pre{background:var(--code);padding:.9rem 1rem;border-radius:.6rem;overflow-x:auto}\n"
    "pre code{background:none;padding:0;overflow-wrap:normal}\n"
    "table{border-collapse:collapse;display:block;overflow-x:auto;margin:1rem 0;"
    "background:var(--card);border-radius:.5rem}\n"
    "th,td{border:1px solid var(--line);padding:.35rem .6rem;text-align:left;vertical-align:top}\n"
    "td code{overflow-wrap:normal}td:first-child code{white-space:nowrap}\n"
    "blockquote{margin:1rem 0;padding:.2rem 1rem;border-left:3px solid var(--line);"
    "color:var(--muted)}\n"
    "ul,ol{padding-left:1.4rem}\n"
    ".cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(15rem,1fr));gap:.6rem}\n"
    ".card{display:block;padding:.7rem 1rem;border:1px solid var(--line);border-radius:.7rem;"
    "background:var(--card);color:inherit;text-decoration:none}\n"
    ".card:hover{border-color:var(--accent)}\n"
    ".card strong{color:var(--accent)}\n"
    "footer{margin-top:3rem;color:var(--muted);font-size:.9rem}\n";

static FILE *open_out(const char *outdir, const char *rel)
{
    char *path = xprintf("%s/%s", outdir, rel);
    char *slash = strrchr(path, '/');
    /* The one level of folders the names above use. */
    if (slash != NULL && slash > path + strlen(outdir)) {
        *slash = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            die("cannot create %s: %s", path, strerror(errno));
        *slash = '/';
    }
    FILE *f = fopen(path, "w");
    if (f == NULL)
        die("cannot write %s: %s", path, strerror(errno));
    free(path);
    return f;
}

static void head(FILE *out, const char *title, const char *root)
{
    fputs("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          out);
    html_escape(out, title);
    fprintf(out,
            " — keel</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n"
            "<nav><a href=\"%sindex.html\">keel documentation</a></nav>\n",
            style, root);
}

static void foot(FILE *out)
{
    fputs("<footer>keel — generated from the Markdown sources at build time.</footer>\n"
          "</main>\n</body>\n</html>\n",
          out);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        die("cannot read %s: %s", path, strerror(errno));
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *bigger = realloc(buf, cap *= 2);
            if (bigger == NULL)
                free(buf);
            buf = bigger;
        }
    }
    if (buf == NULL)
        die("out of memory");
    buf[len] = '\0';
    fclose(f);
    return buf;
}

static void render(const char *root, const char *outdir, page *pg, int verbose)
{
    char *path = xprintf("%s/%s", root, pg->src);
    char *md = read_file(path);
    free(path);
    cmark_parser *parser = cmark_parser_new(CMARK_OPT_DEFAULT);
    static const char *const extensions[] = {"table", "strikethrough", "autolink"};
    for (size_t i = 0; i < sizeof extensions / sizeof *extensions; i++) {
        cmark_syntax_extension *ext = cmark_find_syntax_extension(extensions[i]);
        if (ext == NULL)
            die("cmark-gfm has no '%s' extension", extensions[i]);
        cmark_parser_attach_syntax_extension(parser, ext);
    }
    cmark_parser_feed(parser, md, strlen(md));
    cmark_node *doc = cmark_parser_finish(parser);
    free(md);

    /* Collect first: rewriting links unlinks nodes under the iterator. */
    cmark_node **links = NULL, **headings = NULL;
    size_t nlinks = 0, nheadings = 0;
    cmark_iter *it = cmark_iter_new(doc);
    cmark_event_type ev;
    while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
        if (ev != CMARK_EVENT_ENTER)
            continue;
        cmark_node *node = cmark_iter_get_node(it);
        cmark_node_type type = cmark_node_get_type(node);
        cmark_node ***list = type == CMARK_NODE_LINK      ? &links
                             : type == CMARK_NODE_HEADING ? &headings
                                                          : NULL;
        if (list == NULL)
            continue;
        size_t *count = list == &links ? &nlinks : &nheadings;
        cmark_node **grown = realloc(*list, (*count + 1) * sizeof **list);
        if (grown == NULL)
            die("out of memory");
        *list = grown;
        grown[(*count)++] = node;
    }
    cmark_iter_free(it);

    char *ids[MAX_IDS];
    size_t nids = 0;
    for (size_t i = 0; i < nheadings; i++) {
        char text[1024] = "";
        text_of(headings[i], text, sizeof text);
        if (pg->title == NULL)
            pg->title = xstrdup(text);
        char *anchor = xprintf("<a id=\"%s\"></a>", slug(text, ids, &nids));
        cmark_node *html = cmark_node_new(CMARK_NODE_HTML_INLINE);
        cmark_node_set_literal(html, anchor);
        cmark_node_prepend_child(headings[i], html);
        free(anchor);
    }
    for (size_t i = 0; i < nlinks; i++)
        rewrite_link(pg, links[i], verbose);
    if (pg->title == NULL)
        pg->title = xstrdup(pg->src);

    /* UNSAFE: the sources are keel's own docs, whose raw HTML (comments,
     * the anchors above) is meant to reach the page. */
    char *body =
        cmark_render_html(doc, CMARK_OPT_UNSAFE, cmark_parser_get_syntax_extensions(parser));
    FILE *out = open_out(outdir, pg->out);
    head(out, pg->title, strchr(pg->out, '/') ? "../" : "");
    fputs(body, out);
    foot(out);
    if (fclose(out) != 0)
        die("cannot write %s/%s", outdir, pg->out);
    free(body);
    for (size_t i = 0; i < nids; i++)
        free(ids[i]);
    free(links);
    free(headings);
    cmark_node_free(doc);
    cmark_parser_free(parser);
}

static void index_section(FILE *out, const char *id, const char *heading, const char *prefix,
                          int in_folder)
{
    int any = 0;
    for (size_t i = 0; i < npages; i++) {
        const page *pg = &pages[i];
        if (strncmp(pg->out, prefix, strlen(prefix)) != 0 ||
            (strchr(pg->out, '/') != NULL) != in_folder || strcmp(pg->out, "overview.html") == 0)
            continue;
        if (!any)
            fprintf(out, "<h2 id=\"%s\">%s</h2>\n<div class=\"cards\">\n", id, heading);
        any = 1;
        fprintf(out, "<a class=\"card\" href=\"%s\"><strong>", pg->out);
        html_escape(out, pg->title);
        fputs("</strong></a>\n", out);
    }
    if (any)
        fputs("</div>\n", out);
}

static void write_index(const char *outdir)
{
    FILE *out = open_out(outdir, "index.html");
    head(out, "Documentation", "");
    fputs("<h1>keel documentation</h1>\n<p>A networking toolkit in C: one libuv loop per worker, "
          "and modules loaded from a config through a stable C ABI.",
          out);
    if (find_page("README.md") != NULL)
        fputs(" Start with the <a href=\"overview.html\">overview</a>.", out);
    fputs(" The manuals: <code>man keel</code>, <code>man keel.conf</code>.</p>\n", out);
    index_section(out, "guides", "Guides", "", 0);
    index_section(out, "modules", "Modules", "modules/", 1);
    index_section(out, "reference", "Reference: every module's keys", "reference/", 1);
    index_section(out, "examples", "Examples", "examples/", 1);
    foot(out);
    if (fclose(out) != 0)
        die("cannot write %s/index.html", outdir);
}

int main(int argc, char **argv)
{
    int verbose = 0, first = 3;
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        verbose = 1;
        argv++;
        argc--;
    }
    if (argc < first) {
        fputs("usage: render-docs [-v] SRCROOT OUTDIR FILE.md...\n", stderr);
        return 2;
    }
    const char *root = argv[1], *outdir = argv[2];
    for (int i = first; i < argc; i++) {
        char *out = output_name(argv[i]);
        if (out == NULL)
            die("%s: not a documentation file this tool places (see its header)", argv[i]);
        if (npages == MAX_PAGES)
            die("more than %d pages", MAX_PAGES);
        pages[npages].src = xstrdup(argv[i]);
        pages[npages].out = out;
        npages++;
    }
    if (mkdir(outdir, 0777) != 0 && errno != EEXIST)
        die("cannot create %s: %s", outdir, strerror(errno));
    cmark_gfm_core_extensions_ensure_registered();
    for (size_t i = 0; i < npages; i++)
        render(root, outdir, &pages[i], verbose);
    write_index(outdir);
    printf("render-docs: %zu pages and index.html in %s (%zu links to unrendered files kept as "
           "text)\n",
           npages, outdir, unlinked);
    return 0;
}
