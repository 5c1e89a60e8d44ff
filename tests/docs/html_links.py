#!/usr/bin/env python3
"""tests/docs/html_links.py DIR [SRCROOT]: checks the HTML docs that
tools/render-docs.c wrote to DIR (build/share/keel/www/docs).

Every internal link (href or src without a scheme, not site-absolute) of
every page must name a file that exists under DIR, and its #fragment an id
in that file; no link may still point at a .md file; index.html must exist
and link to every page. With SRCROOT, every Markdown source the build
renders (README.md, docs/*.md, docs/reference/*.md, modules/*/README.md,
examples/*/README.md) must have its page. ctest runs it (docs.html.links)
when the build renders the docs, that is when it found cmark-gfm.
"""
import glob
import html.parser
import os
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name in ("href", "src") and value is not None:
                self.links.append(value)


def parse(path):
    page = Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    return page


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = os.path.abspath(sys.argv[1])
    if not os.path.exists(os.path.join(out, "index.html")):
        print("html_links: %s/index.html is missing" % out, file=sys.stderr)
        return 1
    files = sorted(glob.glob(os.path.join(out, "**", "*.html"), recursive=True))
    parsed = {os.path.relpath(f, out): parse(f) for f in files}
    errors, checked = [], 0
    for rel, page in parsed.items():
        for link in page.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or link.startswith("/") or link.startswith("//"):
                continue
            checked += 1
            target = rel if url.path == "" else os.path.normpath(
                os.path.join(os.path.dirname(rel), urllib.parse.unquote(url.path)))
            if url.path.endswith(".md"):
                errors.append("%s: link to Markdown: %s" % (rel, link))
            elif target.startswith(".."):
                errors.append("%s: link leaves the docs: %s" % (rel, link))
            elif target not in parsed:
                errors.append("%s: no such page: %s" % (rel, link))
            elif url.fragment and urllib.parse.unquote(url.fragment) not in parsed[target].ids:
                errors.append("%s: %s has no id '%s'" % (rel, target, url.fragment))
    index_links = {os.path.normpath(urllib.parse.urlsplit(l).path)
                   for l in parsed["index.html"].links}
    for rel in parsed:
        if rel != "index.html" and rel not in index_links:
            errors.append("index.html does not link to %s" % rel)
    if len(sys.argv) > 2:
        root = sys.argv[2]
        want = ["overview.html"]
        want += [os.path.basename(p)[:-3] + ".html" for p in glob.glob(root + "/docs/*.md")]
        want += ["reference/" + os.path.basename(p)[:-3] + ".html"
                 for p in glob.glob(root + "/docs/reference/*.md")]
        for top in ("modules", "examples"):
            want += ["%s/%s.html" % (top, os.path.basename(os.path.dirname(p)))
                     for p in glob.glob("%s/%s/*/README.md" % (root, top))]
        for w in want:
            if w not in parsed:
                errors.append("no page for %s" % w)
    for e in errors:
        print("html_links: " + e, file=sys.stderr)
    print("html_links: %d pages, %d internal links checked, %d problems"
          % (len(parsed), checked, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
