#!/usr/bin/env python3
"""tests/h2/run.py — the h2 module against raw HTTP/2 frame sequences.

    run.py conformance|attacks KEEL MODULE_DIR TEST_MODULE_DIR [CASE...]

The cases live in one file per part of the RFCs (h2cases.py holds what
they share, h2lib.py is the client):

    cases_preface.py   RFC 9113 3 and 4: the preface, frame format and sizes,
                       header compression as the connection's state
    cases_hpack.py     RFC 7541: HPACK
    cases_streams.py   RFC 9113 5: stream states, identifiers, concurrency,
                       dependencies, extensions
    cases_frames.py    RFC 9113 6: each frame type but flow control
    cases_flow.py      RFC 9113 6.9: flow control
    cases_http.py      RFC 9113 8, RFC 9110: HTTP semantics (fields,
                       pseudo-fields, content-length, trailers), issue 23's
                       checks of each request
    cases_rfc8441.py   RFC 8441: extended CONNECT, WebSocket over a stream
    cases_keel.py      what keel promises above them (hello's routes,
                       limits, timeouts, the proxy module behind h2)
    cases_attacks.py   each published HTTP/2 attack

conformance: every case of the first eight files, in that order. attacks:
each published HTTP/2 attack performed against keel. Each must end with
GOAWAY ENHANCE_YOUR_CALM (or a reset stream), while another connection
opened before it keeps being answered, and keel's memory stays bounded.

Each case runs under an alarm (20 s); exit 0 if all pass, 1 otherwise, 77 if
hyperframe/hpack are missing.
"""

import os
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# In the order they run: a case file registers its cases when imported.
FILES = ["cases_preface", "cases_hpack", "cases_streams", "cases_frames", "cases_flow",
         "cases_http", "cases_rfc8441", "cases_keel", "cases_attacks"]

try:
    import hpack  # noqa: F401
    import hyperframe  # noqa: F401
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e} (Debian: python3-h2)")
    sys.exit(77)

# Past the check above an ImportError is a broken case file: it fails the run.
import importlib  # noqa: E402

from h2cases import CASES  # noqa: E402
from h2lib import Fail, Keel  # noqa: E402

for name in FILES:
    importlib.import_module(name)

# ---- running -----------------------------------------------------------------------------------


class Env:
    def __init__(self, suite, keel, mods, testmods):
        self.keel = keel
        self.dirs = [os.path.abspath(mods), os.path.abspath(testmods)]
        import tempfile
        self.www = tempfile.mkdtemp(prefix="keel-h2-www-")
        with open(os.path.join(self.www, "4k.bin"), "wb") as f:
            f.write(os.urandom(4096))
        with open(os.path.join(self.www, "big.bin"), "wb") as f:
            f.write(os.urandom(300000))
        self.access_log = os.path.join(self.www, "access.log")
        self.started = []
        limits = ("" if suite == "conformance" else
                  "max_resets = 50\nmax_pings = 50\nmax_settings = 20\nmax_empty_frames = 50\n"
                  "max_priority = 100\nmax_continuations = 8\n")
        self.base = f"[h2]\nmax_concurrent_streams = 8\nstream_timeout = 1s\n{limits}"
        # Every keel started here writes its access log into the temporary
        # folder, whatever [h2] section it was given.
        self.common = (f"[static]\nmount = /files {self.www}\n"
                       f"[accesslog]\npath = {self.access_log}\n")
        self.k = self.start(self.base)
        self.rss0 = self.k.rss_kib()

    def start(self, sections, extra="", first=""):
        # first: modules hello uses when loaded (websocket) go before it.
        mods = first + " http1 h2 hello h2test probe trailers static accesslog stats " + extra
        k = Keel(self.keel, self.dirs, mods, (sections if sections else self.base) + self.common)
        self.started.append(k)
        return k


def main():
    if len(sys.argv) < 5 or sys.argv[1] not in CASES:
        print(__doc__)
        return 2
    suite, keel, mods, testmods = sys.argv[1:5]
    only = set(sys.argv[5:])
    env = Env(suite, keel, mods, testmods)
    # The count is printed so that a case lost between files shows.
    print(f"{len(CASES[suite])} {suite} cases")
    failed = []
    try:
        for fn in CASES[suite]:
            if only and fn.__name__ not in only:
                continue
            t0 = time.time()

            def alarm(signum, frame):
                raise Fail("case timed out (20 s)")
            signal.signal(signal.SIGALRM, alarm)
            signal.alarm(20)
            try:
                fn(env)
                print(f"ok    {fn.__name__} ({time.time() - t0:.2f}s)")
            except Exception as e:  # a failing case must not stop the others
                failed.append(fn.__name__)
                print(f"FAIL  {fn.__name__}: {e}")
                if not isinstance(e, Fail):
                    traceback.print_exc()
            finally:
                signal.alarm(0)
            if not env.k.alive():
                print("keel died; its log:\n" + env.k.text())
                failed.append("(keel died)")
                break
    finally:
        env.k.stop()
    # Under ASan/UBSan (make test-asan) a report in keel's log is a failure
    # even when every case passed.
    for k in env.started:
        text = k.text()
        for mark in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            if mark in text:
                failed.append(f"(sanitizer report in {k.log})")
                print(text[text.index(mark) - 200:][:4000])
                break
    if failed:
        print(f"{len(failed)} failed: {' '.join(failed)}\nkeel log: {env.k.log}")
        return 1
    # Kept when something failed (the logs say why); removed otherwise.
    import shutil
    for k in env.started:
        shutil.rmtree(k.dir, ignore_errors=True)
    shutil.rmtree(env.www, ignore_errors=True)
    print(f"all {suite} cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
