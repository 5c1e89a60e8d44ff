#!/usr/bin/env python3
"""Checks that the core's folders form a stack (docs/architecture.md, "The
layers"): no #include cycle between folders of core/, and no folder
including one above it in LAYERS. Prints each offending include chain as
file:line steps and exits 1; exits 0 with one line when the stack holds.

Then the same for the h2 module's files (docs/http2.md, "The layers"):
each file is in one of H2_LAYERS and includes only headers of its layer
and of those below it.

    tools/check-layers.py [CORE_DIR]      (default: core/ beside tools/;
                                           modules/h2 is CORE_DIR/../modules/h2)

Only quoted includes are followed ("net/conn.h"): <...> headers are the
public ABI or the system's. A quoted path is resolved against core/ first
(the core's include root), then against the including file's folder.
"""
import os
import re
import sys

# Bottom up. A folder may include its own headers and those of the folders
# below it. core/main.c, outside every folder, is above them all.
LAYERS = ["platform", "base", "runtime", "net", "http", "server"]
TOP = "(main)"

# modules/h2, bottom up. The codec is also built without keel's headers
# (modules/h2/CMakeLists.txt); above it the state reports to the layers
# above through a table of functions (writer.h: h2_events), never by name.
H2_LAYERS = [
    ("codec", ["frame.h", "frame.c", "hpack.h", "hpack.c", "hpack_huffman.c"]),
    ("writer", ["writer.h", "writer.c", "output.c", "limits.c"]),
    ("state", ["state.h", "input.c", "stream.c", "window.c"]),
    ("scheduler", ["scheduler.h", "send.c", "queue.c", "fileload.c", "headcache.c"]),
    ("module", ["h2.h", "h2.c", "request.c", "request_body.c", "sink.c", "tunnel.c"]),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def scan(core):
    """Every quoted include in core/: a list of (file, line, target), paths
    relative to core/ with '/' separators."""

    def rel(p):
        return os.path.relpath(p, core).replace(os.sep, "/")

    edges = []
    for root, _, files in os.walk(core):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, text in enumerate(f, 1):
                    m = INCLUDE.match(text)
                    if m is None:
                        continue
                    target = m.group(1)
                    for base in (core, root):
                        full = os.path.normpath(os.path.join(base, target))
                        if os.path.isfile(full):
                            break
                    else:
                        continue  # not the core's (a generated or system header)
                    edges.append((rel(path), lineno, rel(full)))
    return sorted(edges)


def folder(rel):
    return rel.split("/", 1)[0] if "/" in rel else TOP


def rank(name):
    return len(LAYERS) if name == TOP else LAYERS.index(name)


def folder_graph(edges):
    """folder -> {folder it includes: the first such include, as witness}"""
    graph = {}
    for e in edges:
        a, b = folder(e[0]), folder(e[2])
        if a != b:
            graph.setdefault(a, {}).setdefault(b, e)
    return graph


def path_back(graph, start, goal):
    """The includes of a shortest way from folder start to folder goal, or
    None if there is none."""
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        if v == goal:
            steps = []
            while prev[v] is not None:
                steps.append(graph[prev[v]][v])
                v = prev[v]
            return steps[::-1]
        for w in sorted(graph.get(v, {}), key=rank):
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return None


def chain(edges_in_order):
    return "\n".join("    %s:%d includes %s" % e for e in edges_in_order)


def check_h2(h2dir):
    """1 (with each offending include printed) if a file of modules/h2
    includes a header of a layer above its own, or is in no layer."""
    layer_of = {}
    for rank_, (name, files) in enumerate(H2_LAYERS):
        for f in files:
            layer_of[f] = (rank_, name)
    order = " < ".join(name for name, _ in H2_LAYERS)
    failed = False
    checked = 0
    for name in sorted(os.listdir(h2dir)):
        if not name.endswith((".c", ".h")):
            continue
        if name not in layer_of:
            print("check-layers: modules/h2/%s is in no layer: add it to H2_LAYERS in %s"
                  % (name, os.path.relpath(__file__)))
            failed = True
            continue
        with open(os.path.join(h2dir, name), encoding="utf-8", errors="replace") as f:
            for lineno, text in enumerate(f, 1):
                m = INCLUDE.match(text)
                if m is None or m.group(1) not in layer_of:
                    continue
                checked += 1
                (ra, la), (rb, lb) = layer_of[name], layer_of[m.group(1)]
                if rb > ra:
                    print("check-layers: modules/h2/%s:%d includes %s: the %s layer includes "
                          "the %s layer, above it (%s)" % (name, lineno, m.group(1), la, lb, order))
                    failed = True
    if failed:
        return 1
    print("check-layers: modules/h2 is a stack: %s (%d includes checked)" % (order, checked))
    return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    core = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "core"))
    edges = scan(core)
    failed = False
    unknown = sorted({folder(e[0]) for e in edges} - set(LAYERS) - {TOP})
    if unknown:
        print("check-layers: core/%s is in no layer: add it to LAYERS in %s"
              % (", core/".join(unknown), os.path.relpath(__file__)))
        return 1
    # With the folders in one order, every cycle goes up somewhere: each
    # include that goes up is reported with the way back down that makes it
    # a cycle, if there is one.
    graph = folder_graph(edges)
    order = " < ".join(LAYERS)
    for e in edges:
        a, b = folder(e[0]), folder(e[2])
        if a == b or rank(b) < rank(a):
            continue
        failed = True
        back = path_back(graph, b, a)
        if back is not None:
            names = [a] + [folder(x[2]) for x in [e] + back]
            print("check-layers: include cycle between core folders: %s" % " -> ".join(names))
            print(chain([e] + back))
        else:
            print("check-layers: %s includes %s, a layer above it (%s)" % (a, b, order))
            print(chain([e]))
    if failed:
        return 1
    print("check-layers: core/ is a stack: %s (%d includes checked)" % (order, len(edges)))
    h2dir = os.path.join(core, "..", "modules", "h2")
    if os.path.isdir(h2dir):
        return check_h2(h2dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
