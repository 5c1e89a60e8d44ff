#!/usr/bin/env python3
"""Black-box tests of the Windows build of keel: keel.exe driven over real
sockets on 127.0.0.1, under Wine from Linux or natively on Windows.

    tests/windows/blackbox.py --build build-win [--filter GLOB] [-v]    (Linux, Wine)
    py tests\windows\blackbox.py --build build                         (Windows)

Each test starts keel.exe with a config that listens on 127.0.0.1:0, reads
the `listening on 127.0.0.1:PORT (PROTO)` line from its stderr and talks to
it. keel runs on a console of its own (tests/windows/kl_ctrl.exe starts it
there), so that a graceful stop is what it is on Windows: a real console
control event, CTRL_C_EVENT raised with GenerateConsoleCtrlEvent. One test
also stops a keel.exe started directly with SIGINT to its Wine process,
which Wine turns into CTRL_C_EVENT as a terminal's Ctrl-C would (skipped
on Windows, where there is no Wine process to signal).
Every wait is bounded; a test that leaves keel running has it killed.

Prints one line per test and `N passed, N failed[, N skipped]` at the end;
exits 1 if anything failed. Standard library only. Under Wine the caller
(cmake/windows/build-and-test.sh) sets WINEPREFIX and WINEDEBUG and ends
the wineserver afterwards.
"""

import argparse
import fnmatch
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

ARGS = None
TMP = None
NATIVE = os.name == "nt"  # on Windows itself: the programs run as they are
START_TIMEOUT = 60.0  # seconds for keel.exe to start listening (Wine is slow the first time)
EXIT_TIMEOUT = 30.0
IO_TIMEOUT = 15.0


class Failure(Exception):
    pass


def check(cond, msg, proc=None):
    if not cond:
        if proc is not None:
            msg += "\n---- keel stderr ----\n" + proc.stderr_text() + "---- end ----"
        raise Failure(msg)


def win_path(path):
    """A path the Windows way: drive letter and backslashes (under Wine, a
    Linux path as its Z: drive shows it)."""
    if NATIVE:
        return os.path.abspath(path)
    return "Z:" + os.path.abspath(path).replace("/", "\\")


def wine_cmd(exe, *args):
    """The command line running a Windows program: through Wine, or as is."""
    return [ARGS.wine, exe, *args] if ARGS.wine else [exe, *args]


CTRL_PREFIX = "kl_ctrl: "
CTRL_ACK = re.compile(r"kl_ctrl: (raised |cannot raise |unknown command )")
CTRL_STATUS = re.compile(r"kl_ctrl: exit status (\d+)$")


class Keel:
    """keel.exe started through kl_ctrl.exe, its stderr collected line by line.

    console=True (the default): `kl_ctrl run`, on a console of its own, where
    stop("ctrl-c") raises CTRL_C_EVENT. console=False: `kl_ctrl exec`, no
    console, to be stopped with SIGINT to its Wine process (Wine only).

    Either way kl_ctrl reports keel's exit status as Windows has it (its
    "kl_ctrl: exit status N" line): under Wine the Unix exit status of a Wine
    process is not that, the wineserver SIGKILLs one whose Unix side is slow
    to go after its Windows side ended (see tests/windows/kl_ctrl.c)."""

    def __init__(self, config=None, args=(), name="keel.conf", console=True):
        cmd = [os.path.join(ARGS.build, "keel.exe")]
        if config is not None:
            path = os.path.join(TMP, name)
            with open(path, "w", newline="\n") as f:
                f.write(config)
            cmd += ["-c", path]
        cmd += list(args)
        cmd = [ctrl_exe(), "run" if console else "exec"] + cmd
        self.console = console
        self.win_pid = None
        self.status = None  # keel's exit status, from kl_ctrl's report
        self.lines = []  # keel's stderr
        self.ctrl_lines = []  # kl_ctrl's own
        self.output = []  # both, in order (for failure reports)
        self.stdout = b""
        self.cond = threading.Condition()
        self.done = False
        # A session of its own under Wine, so that kill() and sigint() can
        # reach the Wine processes behind it as a group; Windows has
        # taskkill /T for that.
        self.proc = subprocess.Popen(
            wine_cmd(*cmd),
            stdin=subprocess.PIPE if console else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=not NATIVE,
        )
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()
        self.out_reader = threading.Thread(target=self._read_stdout, daemon=True)
        self.out_reader.start()
        RUNNING.append(self)

    def _read_stderr(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            with self.cond:
                self.output.append(line)
                if line.startswith(CTRL_PREFIX):
                    self.ctrl_lines.append(line)
                    m = re.match(r"kl_ctrl: pid (\d+)$", line)
                    if m:
                        self.win_pid = int(m.group(1))
                    m = CTRL_STATUS.match(line)
                    if m:
                        self.status = int(m.group(1))
                else:
                    self.lines.append(line)
                self.cond.notify_all()
            if ARGS.verbose:
                print("    keel: " + line, flush=True)
        with self.cond:
            self.done = True
            self.cond.notify_all()

    def _read_stdout(self):
        data = self.proc.stdout.read()
        self.stdout = data or b""

    def finished(self):
        """keel has ended (kl_ctrl said so) or the pipe closed: no more lines
        will come from it. Call with self.cond held."""
        return self.done or self.status is not None

    def command(self, what):
        """A command for kl_ctrl ("c" or "break"); returns its answer line."""
        check(self.console, "not started on a console of its own", self)
        with self.cond:
            before = len(self.ctrl_lines)
        try:
            self.proc.stdin.write((what + "\n").encode())
            self.proc.stdin.flush()
        except OSError as e:
            raise Failure("cannot talk to kl_ctrl: %s" % e)
        deadline = time.monotonic() + IO_TIMEOUT
        with self.cond:
            while time.monotonic() < deadline:
                for line in self.ctrl_lines[before:]:
                    if CTRL_ACK.match(line):
                        return line
                # kl_ctrl answers a command before it reports the exit
                # status; after that, or the end of its output, no answer.
                if self.finished():
                    break
                self.cond.wait(0.2)
        raise Failure("kl_ctrl did not acknowledge %r" % what)

    def ended_silently(self):
        """keel has exited without writing a single line."""
        with self.cond:
            return self.finished() and not self.lines and self.proc.poll() is not None

    def stderr_text(self):
        """keel's stderr, kl_ctrl's lines included (for failure reports)."""
        with self.cond:
            return "".join(line + "\n" for line in self.output)

    def wait_line(self, pattern, timeout=START_TIMEOUT):
        """The first stderr line matching the regex, waiting for it."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    m = rx.search(line)
                    if m:
                        return m
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if self.finished() or left <= 0:
                    return None
                self.cond.wait(min(left, 0.5))

    def ports(self, count=1, timeout=START_TIMEOUT):
        """The ports of the first `count` listeners, from their log lines."""
        rx = re.compile(r"listening on 127\.0\.0\.1:(\d+) \(([^)]*)\)")
        deadline = time.monotonic() + timeout
        while True:
            with self.cond:
                ports = [int(m.group(1)) for m in map(rx.search, self.lines) if m]
                done = self.finished()
            if len(ports) >= count:
                return ports[:count]
            if done or time.monotonic() > deadline:
                check(False, "keel did not report %d listener(s)" % count, self)
            time.sleep(0.05)

    def wait_exit(self, timeout=EXIT_TIMEOUT):
        """keel's exit status as kl_ctrl reports it, or None while keel is
        still running after `timeout` seconds. kl_ctrl's own Unix exit
        status is not it (see the class comment); a difference is noted."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.status is None and not self.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 0.5))
            status = self.status
        try:
            unix_status = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            unix_status = None
        if status is None:
            raise Failure(
                "kl_ctrl ended (exit status %s) without reporting keel's\n---- output ----\n%s---- end ----"
                % (unix_status, self.stderr_text())
            )
        # What kl_ctrl's own exit status should be: the same code, cut to 8
        # bits by Wine (which turns a non-zero code ending in 0x00 into 1).
        expected = status if NATIVE else (status & 0xFF or (1 if status else 0))
        if unix_status is not None and unix_status != expected:
            print("    [NOTE] keel's exit status %d, but kl_ctrl's process ended with %d" % (status, unix_status), flush=True)
        return status

    def kill(self):
        if self.proc.poll() is None and NATIVE:
            # kl_ctrl and the keel it started, or keel alone.
            subprocess.run(
                ["taskkill", "/F", "/T", "/PID", str(self.proc.pid)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=30,
            )
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        elif self.proc.poll() is None:
            if self.console and self.win_pid:
                # keel.exe is a Wine process of its own: end it by its id.
                subprocess.run(
                    wine_cmd("taskkill", "/F", "/PID", str(self.win_pid)),
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=30,
                )
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:
                pass


RUNNING = []


def run_exe(*args, timeout=EXIT_TIMEOUT):
    """Runs a Windows program to completion through `kl_ctrl exec`: (exit
    code as Windows reports it, stdout, stderr without kl_ctrl's lines)."""
    try:
        p = subprocess.run(
            wine_cmd(ctrl_exe(), "exec", *args), stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise Failure("%s timed out after %ss" % (" ".join(args), timeout))
    err = p.stderr.decode("utf-8", "replace")
    own = [l for l in err.splitlines() if l.startswith(CTRL_PREFIX)]
    status = next((int(m.group(1)) for m in map(CTRL_STATUS.match, own) if m), None)
    if status is None:
        raise Failure("kl_ctrl exec %s ended (exit status %s) without a report:\n%s" % (" ".join(args), p.returncode, err))
    err = "".join(l + "\n" for l in err.splitlines() if not l.startswith(CTRL_PREFIX))
    return status, p.stdout.decode("utf-8", "replace"), err


# ---- stopping keel: console control events ---------------------------------


class Skip(Exception):
    pass


def ctrl_exe():
    return os.path.join(ARGS.build, "tests", "windows", "kl_ctrl.exe")


def ctrl_c(k):
    """CTRL_C_EVENT on keel's console (GenerateConsoleCtrlEvent)."""
    answer = k.command("c")
    check(answer == "kl_ctrl: raised c", answer, k)


def unix_pids(group, name):
    """Linux processes of a process group whose name (comm) is `name`: Wine
    names a process after its .exe, and one started by another Wine process
    stays in that one's group."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()  # state ppid pgrp ...
        if comm == name and int(fields[2]) == group:
            pids.append(int(entry))
    return pids


def sigint(k):
    """SIGINT to the Wine process of a keel started with `kl_ctrl exec`, as a
    terminal's Ctrl-C sends it: Wine raises CTRL_C_EVENT in it."""
    check(not k.console, "sigint needs console=False", k)
    pids = unix_pids(k.proc.pid, "keel.exe")
    check(len(pids) == 1, "keel.exe processes in kl_ctrl's group: %r" % pids, k)
    os.kill(pids[0], signal.SIGINT)


STOPPERS = {"ctrl-c": ctrl_c, "sigint": sigint}


def stop(k, how="ctrl-c"):
    """Stops keel gracefully and returns its exit status."""
    STOPPERS[how](k)
    code = k.wait_exit()
    check(code is not None, "keel did not exit within %ss of the stop request" % EXIT_TIMEOUT, k)
    return code


# ---- sockets -------------------------------------------------------------------


def connect(port, timeout=IO_TIMEOUT):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


def recv_until(s, want, timeout=IO_TIMEOUT):
    """Reads until `want` bytes arrived (or EOF / timeout); returns them."""
    data = b""
    deadline = time.monotonic() + timeout
    while len(data) < want:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
    return data


def recv_line(s, timeout=IO_TIMEOUT):
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = s.recv(1)
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
    return data


def is_closed(s, timeout=IO_TIMEOUT):
    """True when the peer closed (EOF or reset) within the timeout."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, ConnectionAbortedError):
        return True
    except socket.timeout:
        return False


# ---- configs ---------------------------------------------------------------------


def modules_dir():
    return os.path.join(ARGS.build, "modules")


def test_modules_dir():
    return os.path.join(ARGS.build, "tests", "modules")


def echo_config(workers=2, extra="", modules="echo", echo="greeting = hello from windows\n", module_path=None):
    if module_path is None:
        module_path = "%s %s" % (modules_dir(), test_modules_dir())
    return (
        "[keel]\n"
        "listen = 127.0.0.1:0 echo\n"
        "workers = %d\n"
        "modules = %s\n"
        "module_path = %s\n"
        "%s"
        "[echo]\n"
        "%s" % (workers, modules, module_path, extra, echo)
    )


# ---- tests -----------------------------------------------------------------------

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


@test
def version():
    code, out, err = run_exe(os.path.join(ARGS.build, "keel.exe"), "--version")
    check(code == 0, "exit %s" % code)
    check(re.match(r"keel \d+\.\d+\.\d+\S* \(ABI \d+\.\d+\)\r?\n$", out), "stdout %r" % out)


@test
def help_and_bad_option():
    code, out, err = run_exe(os.path.join(ARGS.build, "keel.exe"), "--help")
    check(code == 0 and "usage: keel" in out, "--help: exit %s, stdout %r" % (code, out))
    code, out, err = run_exe(os.path.join(ARGS.build, "keel.exe"), "--no-such-option")
    check(code == 1 and "unknown or incomplete option '--no-such-option'" in err, "exit %s, stderr %r" % (code, err))


@test
def check_config_ok():
    path = os.path.join(TMP, "ok.conf")
    with open(path, "w") as f:
        f.write(echo_config())
    code, out, err = run_exe(os.path.join(ARGS.build, "keel.exe"), "-t", "-c", path)
    check(code == 0, "exit %s: %s" % (code, err))
    check("configuration ok: " + path in err, "stderr %r" % err)


@test
def check_config_not_ok():
    path = os.path.join(TMP, "bad.conf")
    with open(path, "w") as f:
        f.write(echo_config(extra="no_such_key = 1\n"))
    code, out, err = run_exe(os.path.join(ARGS.build, "keel.exe"), "-t", "-c", path)
    check(code == 1, "exit %s: %s" % (code, err))
    check(re.search(r"\[error\] .*bad\.conf:6: .*no_such_key", err), "the error names file, line and key: %r" % err)
    code, out, err = run_exe(os.path.join(ARGS.build, "keel.exe"), "-t", "-c", os.path.join(TMP, "missing.conf"))
    check(code == 1 and "missing.conf: cannot open" in err, "missing file: exit %s, %r" % (code, err))


def refuses(modules, message):
    """keel with `modules = echo <modules>` exits 1 with one [error] line holding message."""
    k = Keel(echo_config(modules="echo " + modules))
    code = k.wait_exit()
    check(code is not None, "keel did not exit", k)
    err = k.stderr_text()
    check(code == 1, "exit status %s, expected 1" % code, k)
    lines = [l for l in err.splitlines() if message in l]
    check(lines and "[error] " in lines[0], "no [error] line with %r" % message, k)
    check(err.count("[error]") == 1, "expected exactly one [error] line", k)
    check("listening on" not in err, "keel listened although a module failed", k)


@test
def module_not_found():
    refuses("nosuch", "module 'nosuch': not found (looked for mod_nosuch.dll in %s" % modules_dir())


@test
def not_a_keel_module():
    refuses(
        "notmodule",
        "module 'notmodule': %s/mod_notmodule.dll is not a keel module (no symbol keel_module_notmodule)" % test_modules_dir(),
    )


@test
def not_a_dll_at_all():
    # A text file named like a module: LoadLibrary fails and says why.
    d = os.path.join(TMP, "junk")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "mod_junk.dll"), "w") as f:
        f.write("not a PE file\n")
    k = Keel(echo_config(modules="echo junk", module_path="%s %s" % (modules_dir(), d)))
    code = k.wait_exit()
    check(code == 1, "exit status %s" % code, k)
    check(re.search(r"\[error\] .*module 'junk': cannot load .*mod_junk\.dll: \S", k.stderr_text()), "no load error", k)


@test
def wrong_abi_major():
    abi = abi_version()
    refuses("badabi", "module 'badabi': built for ABI %d.0, this keel has ABI %d.%d" % (abi[0] + 1, abi[0], abi[1]))


@test
def newer_abi_minor():
    abi = abi_version()
    refuses("newminor", "module 'newminor': built for ABI %d.%d, this keel has ABI %d.%d" % (abi[0], abi[1] + 1, abi[0], abi[1]))


@test
def missing_requirement():
    refuses("needsmissing", "module 'needsmissing': requires module 'nosuchmodule', which is not loaded before it")


@test
def load_fails():
    refuses("loadfail", "module 'loadfail': load failed: ")


@test
def start_fails():
    refuses("startfail", "module 'startfail': start failed on worker ")


_ABI = []


def abi_version():
    if not _ABI:
        code, out, err = run_exe(os.path.join(ARGS.build, "keel.exe"), "--version")
        m = re.search(r"\(ABI (\d+)\.(\d+)\)", out)
        check(m, "no ABI in --version: %r" % out)
        _ABI.extend([int(m.group(1)), int(m.group(2))])
    return _ABI


def echo_exchange(port, idx, rounds, greeting=b"hello from windows\n"):
    s = connect(port)
    try:
        got = recv_line(s)
        check(got == greeting, "connection %d: greeting %r" % (idx, got))
        for r in range(rounds):
            msg = ("conn %d line %d %s\n" % (idx, r, "x" * (idx * 37 % 200))).encode()
            # Two writes for one line: the echo waits for the newline.
            s.sendall(msg[:5])
            s.sendall(msg[5:])
            back = recv_until(s, len(msg))
            check(back == msg, "connection %d round %d: sent %r, got %r" % (idx, r, msg, back))
        return s
    except BaseException:
        s.close()
        raise


def run_parallel(fns):
    """Runs the callables on threads; re-raises the first failure."""
    results, errors = [None] * len(fns), []

    def run(i, fn):
        try:
            results[i] = fn()
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(IO_TIMEOUT * 4)
    for s in results:
        if isinstance(s, socket.socket):
            s.close()
    if errors:
        raise errors[0]
    check(not any(t.is_alive() for t in threads), "client threads did not finish")
    return results


def worker_counts(k):
    counts = {}
    for line in k.stderr_text().splitlines():
        m = re.search(r"worker (\d+) stopped: (\d+) connections, (\d+) rejected", line)
        if m:
            counts[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    return counts


@test
def echo_two_workers_single_acceptor():
    k = Keel(echo_config(workers=2))
    try:
        (port,) = k.ports()
        check(k.wait_line(r"started: 2 workers, one acceptor", 1), "not the single-acceptor mode", k)
        conns = 8
        sockets = []

        def client(i):
            return lambda: echo_exchange(port, i, rounds=5)

        # All open at once, so both workers hold connections concurrently.
        sockets = run_parallel([client(i) for i in range(conns)])
        code = stop(k)
        check(code == 0, "exit status %s" % code, k)
        counts = worker_counts(k)
        check(sorted(counts) == [0, 1], "worker lines: %r" % counts, k)
        total = sum(a for a, _ in counts.values())
        check(total == conns, "workers served %d connections, expected %d: %r" % (total, conns, counts), k)
        check(all(a > 0 for a, _ in counts.values()), "a worker got no connection: %r" % counts, k)
        del sockets
    finally:
        k.kill()


@test
def many_sequential_connections():
    k = Keel(echo_config(workers=2))
    try:
        (port,) = k.ports()
        for i in range(40):
            s = echo_exchange(port, i, rounds=1)
            s.close()
        code = stop(k)
        check(code == 0, "exit status %s" % code, k)
        total = sum(a for a, _ in worker_counts(k).values())
        check(total == 40, "served %d connections, expected 40" % total, k)
    finally:
        k.kill()


@test
def large_echo_backpressure():
    # 4 MB in lines, sent while reading: exercises partial writes and the
    # pause/resume of reading on Windows' IOCP-based TCP.
    k = Keel(echo_config(workers=1, echo="max_line = 64k\n"))
    try:
        (port,) = k.ports()
        s = connect(port)
        line = b"y" * 1023 + b"\n"
        total = 4 * 1024 * 1024
        received = bytearray()

        def reader():
            while len(received) < total:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                received.extend(chunk)

        t = threading.Thread(target=reader)
        t.start()
        sent = 0
        while sent < total:
            s.sendall(line * 64)
            sent += len(line) * 64
        t.join(60)
        check(not t.is_alive(), "echo of 4 MB did not complete (%d bytes back)" % len(received), k)
        check(len(received) == total and received == line * (total // len(line)), "echo corrupted (%d bytes)" % len(received), k)
        s.close()
        check(stop(k) == 0, "exit status", k)
    finally:
        k.kill()


@test
def max_connections_in_acceptor():
    k = Keel(echo_config(workers=2, extra="max_connections = 2\n"))
    try:
        (port,) = k.ports()
        a = echo_exchange(port, 0, 1)
        b = echo_exchange(port, 1, 1)
        c = connect(port)
        check(is_closed(c, 10), "a third connection over max_connections = 2 was not closed", k)
        c.close()
        a.close()
        b.close()
        time.sleep(0.3)
        d = echo_exchange(port, 3, 1)  # room again once the others closed
        d.close()
        check(stop(k) == 0, "exit status", k)
        check(k.wait_line(r"acceptor rejected 1 connections over max_connections", 1), "no rejection line", k)
    finally:
        k.kill()


@test
def backslash_paths():
    # module_path and -c in Windows spelling (drive letter, backslashes).
    cfg = echo_config(workers=1, module_path=win_path(modules_dir()) + "\\")
    path = os.path.join(TMP, "winpath.conf")
    with open(path, "w") as f:
        f.write(cfg)
    code, out, err = run_exe(os.path.join(ARGS.build, "keel.exe"), "-t", "-c", win_path(path))
    check(code == 0, "exit %s: %s" % (code, err))
    k = Keel(None, args=["-c", win_path(path)])
    try:
        (port,) = k.ports()
        echo_exchange(port, 0, 2).close()
        check(stop(k) == 0, "exit status", k)
    finally:
        k.kill()


@test
def set_override_and_frozen_v1_module():
    # --set on the command line, and a module built against the frozen v1
    # headers serving beside echo.
    cfg = echo_config(workers=2, modules="frozen echo")
    cfg = cfg.replace("listen = 127.0.0.1:0 echo\n", "listen = 127.0.0.1:0 frozen\nlisten = 127.0.0.1:0 echo\n")
    k = Keel(cfg, args=["--set", "echo.greeting=overridden"])
    try:
        frozen_port, echo_port = k.ports(2)
        s = connect(frozen_port)
        s.sendall(b"Built against v1.0 headers\n")
        want = b"BUILT AGAINST V1.0 HEADERS\n"
        check(recv_until(s, len(want)) == want, "frozen module answer", k)
        s.close()
        echo_exchange(echo_port, 0, 1, greeting=b"overridden\n").close()
        check(stop(k) == 0, "exit status", k)
    finally:
        k.kill()


@test
def restart_right_after_stop_binds_the_port():
    # A stop closes the connections keel accepted, keel first, so they
    # linger (TIME_WAIT) on its port; the next keel must still bind it
    # (core/platform/win: SO_EXCLUSIVEADDRUSE, and why it may fall back),
    # and while that one runs, no other keel gets the port.
    k = Keel(echo_config(workers=1))
    try:
        (port,) = k.ports()
        open_conns = [echo_exchange(port, i, 1) for i in range(3)]
        check(stop(k) == 0, "exit status of the first keel", k)
        for s in open_conns:
            check(is_closed(s, 5), "a connection outlived the first keel", k)
            s.close()
    finally:
        k.kill()
    cfg = echo_config(workers=1).replace("127.0.0.1:0", "127.0.0.1:%d" % port)
    again = Keel(cfg, name="again.conf")
    try:
        check(again.ports() == [port], "the restarted keel did not get port %d" % port, again)
        echo_exchange(port, 0, 1).close()
        rival = Keel(cfg, name="rival.conf")
        try:
            code = rival.wait_exit()
            check(code == 1, "a second keel on port %d: exit status %s, expected 1" % (port, code), rival)
            check(rival.wait_line(r"\[error\] .*cannot listen on 127\.0\.0\.1:%d" % port, 1), "no listen error", rival)
        finally:
            rival.kill()
        echo_exchange(port, 1, 1).close()  # the rival took nothing away
        check(stop(again) == 0, "exit status of the restarted keel", again)
    finally:
        again.kill()


@test
def default_config_finds_modules_beside_the_exe():
    # No -c: the embedded default (http1 + static + stats), whose
    # module_path defaults to modules\ beside keel.exe (found through
    # uv_exepath, a backslash path) and whose docroot is share\keel\www
    # beside it (keel_server_data_dir).
    k = Keel(None, args=["--set", "keel.listen=127.0.0.1:0 http1", "--set", "keel.workers=1"])
    try:
        (port,) = k.ports()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=IO_TIMEOUT)
        c.request("GET", "/")
        r = c.getresponse()
        body = r.read()
        check(r.status == 200 and b"keel is running" in body, "GET /: %s %r" % (r.status, body[:80]), k)
        c.request("GET", "/docs/architecture.md")
        r = c.getresponse()
        body = r.read()
        check(r.status == 200 and body.startswith(b"# keel"), "GET /docs/...: %s %r" % (r.status, body[:40]), k)
        c.request("GET", "/__stats")
        r = c.getresponse()
        body = r.read()
        check(r.status == 200 and body.startswith(b"keel "), "GET /__stats: %s %r" % (r.status, body[:40]), k)
        c.close()
        check(stop(k) == 0, "exit status", k)
    finally:
        k.kill()


@test
def idle_timeout_closes():
    k = Keel(echo_config(workers=1, extra="idle_timeout = 500ms\n"))
    try:
        (port,) = k.ports()
        s = echo_exchange(port, 0, 1)
        t0 = time.monotonic()
        check(is_closed(s, 10), "an idle connection outlived idle_timeout = 500ms", k)
        took = time.monotonic() - t0
        check(0.3 <= took <= 8, "closed after %.2fs, expected about 0.5s" % took, k)
        s.close()
        check(stop(k) == 0, "exit status", k)
    finally:
        k.kill()


@test
def ipv6_loopback():
    cfg = echo_config(workers=2).replace("listen = 127.0.0.1:0 echo", "listen = [::1]:0 echo")
    k = Keel(cfg)
    try:
        m = k.wait_line(r"listening on \[::1\]:(\d+) \(echo\)")
        check(m, "no IPv6 listener", k)
        s = socket.create_connection(("::1", int(m.group(1))), timeout=IO_TIMEOUT)
        check(recv_line(s) == b"hello from windows\n", "greeting over IPv6", k)
        s.sendall(b"six\n")
        check(recv_until(s, 4) == b"six\n", "echo over IPv6", k)
        s.close()
        check(stop(k) == 0, "exit status", k)
    finally:
        k.kill()


@test
def udp_echo_round_trips():
    # A UDP listener (docs/udp.md) on Windows: one socket bound with
    # SO_EXCLUSIVEADDRUSE that worker 0 serves (no SO_REUSEPORT balancing),
    # libuv's IOCP receiving a datagram per call; the echo plugin's
    # udp_echo answers each from the socket it came to.
    cfg = echo_config(workers=2).replace("listen = 127.0.0.1:0 echo", "listen = 127.0.0.1:0 udp_echo udp")
    k = Keel(cfg)
    try:
        m = k.wait_line(r"listening on 127\.0\.0\.1:(\d+) \(udp_echo, udp\)")
        check(m, "no UDP listener", k)
        port = int(m.group(1))
        for i in range(20):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(IO_TIMEOUT)
            msg = b"datagram %d" % i
            s.sendto(msg, ("127.0.0.1", port))
            try:
                data, addr = s.recvfrom(2048)
            except socket.timeout:
                data, addr = None, None
            s.close()
            check(data == msg and addr == ("127.0.0.1", port), "echo %d: %r from %r" % (i, data, addr), k)
        check(stop(k) == 0, "exit status", k)
    finally:
        k.kill()


@test
def statsd_counters_on_metrics():
    # The statsd module over UDP feeding the stats module's /metrics, as
    # tests/integration/test_statsd.c checks on POSIX.
    if not os.path.exists(os.path.join(modules_dir(), "mod_statsd.dll")):
        raise Skip("mod_statsd.dll is not built")
    cfg = (
        "[keel]\n"
        "listen = 127.0.0.1:0 http1\n"
        "listen = 127.0.0.1:0 statsd udp\n"
        "workers = 2\n"
        "modules = http1 stats statsd\n"
        "module_path = %s\n" % modules_dir()
    )
    k = Keel(cfg)
    try:
        http_port, udp_port = k.ports(2)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for line in (b"win.hits:1|c|#os:windows", b"win.hits:2|c|#os:windows", b"win.temp:21.5|g"):
            s.sendto(line, ("127.0.0.1", udp_port))
        s.close()

        def metrics():
            c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=IO_TIMEOUT)
            c.request("GET", "/metrics")
            r = c.getresponse()
            body = r.read().decode("utf-8", "replace")
            c.close()
            return body

        deadline = time.monotonic() + IO_TIMEOUT
        page = metrics()
        while 'win_hits_total{os="windows"} 3' not in page and time.monotonic() < deadline:
            time.sleep(0.1)
            page = metrics()
        check('win_hits_total{os="windows"} 3' in page, "no counter on /metrics:\n%s" % page[-2000:], k)
        check("\nwin_temp 21.5" in page, "no gauge on /metrics", k)
        check(stop(k) == 0, "exit status", k)
    finally:
        k.kill()


@test
def http1_hello_routes():
    # The http1 module (llhttp compiled for Windows) and the hello plugin:
    # keep-alive, a route parameter, a body, a timer, libuv's thread pool,
    # chunked streaming with a trailer, HEAD, 404.
    cfg = (
        "[keel]\n"
        "listen = 127.0.0.1:0 http1\n"
        "workers = 2\n"
        "modules = http1 hello\n"
        "module_path = %s\n" % modules_dir()
    )
    k = Keel(cfg)
    try:
        (port,) = k.ports()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=IO_TIMEOUT)

        def req(method, path, body=None, headers=None):
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r, r.read()

        r, body = req("GET", "/")
        check(r.status == 200 and body == b"Hello, World!", "GET /: %s %r" % (r.status, body), k)
        check(r.getheader("Date"), "no Date header", k)
        r, body = req("GET", "/hello/windows%20host")
        check(r.status == 200 and body == b"Hello, windows host!", "route parameter: %s %r" % (r.status, body), k)
        payload = bytes(range(256)) * 64
        r, body = req("POST", "/echo", payload, {"Content-Type": "application/octet-stream"})
        check(r.status == 200 and body == payload, "POST /echo: %s, %d bytes" % (r.status, len(body)), k)
        r, body = req("GET", "/slow?ms=100")
        check(r.status == 200, "GET /slow: %s" % r.status, k)
        r, body = req("GET", "/offload?n=3")
        check(r.status == 200 and body, "GET /offload: %s %r" % (r.status, body), k)
        r, body = req("GET", "/stream?n=3")
        check(r.status == 200 and r.getheader("Transfer-Encoding") == "chunked" and body, "GET /stream: %s %r" % (r.status, body), k)
        r, body = req("HEAD", "/")
        check(r.status == 200 and body == b"", "HEAD /: %s %r" % (r.status, body), k)
        r, body = req("GET", "/no/such/route")
        check(r.status == 404, "GET /no/such/route: %s" % r.status, k)
        c.close()
        check(stop(k) == 0, "exit status", k)
        check(k.wait_line(r"\[info\] stopped$", 1), "no 'stopped' line", k)
    finally:
        k.kill()


@test
def http1_send_file_reads_on_windows():
    # keel_response_send_file: no sendfile(2) on Windows, so the core reads
    # the file through libuv's thread pool (a CRT descriptor) and writes it.
    data = bytes((i * 7 + (i >> 8)) & 0xFF for i in range(3 * 1024 * 1024 + 123))
    path = os.path.join(TMP, "served.bin")
    with open(path, "wb") as f:
        f.write(data)
    cfg = (
        "[keel]\n"
        "listen = 127.0.0.1:0 http1\n"
        "workers = 1\n"
        "modules = http1 files\n"
        "module_path = %s %s\n"
        "[files]\n"
        "path = %s\n" % (modules_dir(), test_modules_dir(), path)
    )
    k = Keel(cfg)
    try:
        (port,) = k.ports()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=IO_TIMEOUT)
        c.request("GET", "/file")
        r = c.getresponse()
        body = r.read()
        check(r.status == 200 and body == data, "GET /file: %s, %d of %d bytes" % (r.status, len(body), len(data)), k)
        check(r.getheader("Content-Length") == str(len(data)), "Content-Length %s" % r.getheader("Content-Length"), k)
        c.request("GET", "/range?offset=1000000&length=70000")
        r = c.getresponse()
        body = r.read()
        check(r.status == 206 and body == data[1000000:1070000], "GET /range: %s, %d bytes" % (r.status, len(body)), k)
        c.request("HEAD", "/file")
        r = c.getresponse()
        check(r.status == 200 and r.read() == b"", "HEAD /file: %s" % r.status, k)
        c.request("GET", "/small")
        r = c.getresponse()
        check(r.status == 200 and r.read() == b"small\n", "GET /small after the file: %s" % r.status, k)
        c.close()
        check(stop(k) == 0, "exit status", k)
    finally:
        k.kill()


def graceful(how):
    k = Keel(echo_config(workers=2), console=(how != "sigint"))
    try:
        (port,) = k.ports()
        idle = echo_exchange(port, 0, 1)
        code = stop(k, how)
        err = k.stderr_text()
        check(code == 0, "exit status %s after %s" % (code, how), k)
        check(re.search(r"\[info\] shutting down", err), "no 'shutting down' line", k)
        check(re.search(r"\[info\] stopped$", err, re.M), "no 'stopped' line", k)
        check(is_closed(idle, 5), "an idle connection was left open", k)
        idle.close()
        return err
    finally:
        k.kill()


@test
def shutdown_on_ctrl_c_event():
    err = graceful("ctrl-c")
    check("shutting down (SIGINT)" in err, "Ctrl-C is not reported as SIGINT: %r" % err)


@test
def shutdown_on_sigint_to_wine():
    if not ARGS.wine:
        raise Skip("no Wine process to send SIGINT to (native Windows; the console tests cover Ctrl-C)")
    err = graceful("sigint")
    check("shutting down (SIGINT)" in err, "not reported as SIGINT: %r" % err)


@test
def shutdown_on_ctrl_break_event():
    # libuv reports CTRL_BREAK_EVENT as SIGBREAK; Wine 8 cannot raise it
    # (its server implements CTRL_C_EVENT only): skipped there.
    k = Keel(echo_config(workers=1))
    try:
        k.ports()
        answer = k.command("break")
        if answer.startswith("kl_ctrl: cannot raise break"):
            raise Skip("this Wine cannot raise CTRL_BREAK_EVENT (%s)" % answer)
        code = k.wait_exit()
        check(code == 0, "exit status %s" % code, k)
        check("shutting down (Ctrl-Break)" in k.stderr_text(), "Ctrl-Break is not reported", k)
    finally:
        k.kill()


@test
def shutdown_lets_in_flight_echo_finish():
    # echo's `delay` holds each answer back: the stop request comes while one
    # is pending, and the answer must still arrive before keel exits 0.
    k = Keel(echo_config(workers=1, echo="delay = 1500ms\n"))
    try:
        (port,) = k.ports()
        s = connect(port)
        s.sendall(b"in flight\n")
        time.sleep(0.3)
        ctrl_c(k)
        back = recv_until(s, len(b"in flight\n"), timeout=10)
        check(back == b"in flight\n", "the in-flight answer was lost: %r" % back, k)
        code = k.wait_exit()
        check(code == 0, "exit status %s" % code, k)
        check(k.wait_line(r"\[info\] stopped$", 1), "no 'stopped' line", k)
        s.close()
    finally:
        k.kill()


@test
def mini_criterion_reports_failures():
    # The unit-test runner must report what goes wrong, not only successes:
    # its self-test has one test for each way a test can end.
    exe = os.path.join(ARGS.build, "tests", "windows", "kl_criterion_selftest.exe")
    code, out, err = run_exe(exe, timeout=120)
    want = {
        "[PASS] selftest::passes": None,
        "[PASS] selftest::expected_exit_code": None,
        "[PASS] selftest::init_and_fini_run": None,
        "[FAIL] selftest::assert_fails": "a check failed",
        "[FAIL] selftest::expect_fails_and_goes_on": "a check failed",
        "[FAIL] selftest::str_eq_fails": "a check failed",
        "[FAIL] selftest::crashes": "crashed (exception 0xc0000005)",
        "[FAIL] selftest::aborts": "",
        "[FAIL] selftest::times_out": "timed out after 1s",
        "[FAIL] selftest::assert_in_thread": "a check failed",
        "[SKIP] selftest::skipped": None,
        "[SKIP] selftest::disabled": None,
    }
    for head, reason in want.items():
        line = next((l for l in out.splitlines() if l.startswith(head + " ") or l.startswith(head + ":") or l == head), None)
        check(line is not None, "no line %r in:\n%s" % (head, out))
        if reason:
            check(reason in line, "%r does not say %r" % (line, reason))
    check("went on after a failed expectation" in out, "cr_expect did not go on:\n" + out)
    check('= "left"' in out and '= "right"' in out, "cr_assert_str_eq does not show both strings:\n" + out)
    check(re.search(r"^3 passed, 7 failed, 2 skipped\r?$", out, re.M), "summary line:\n" + out)
    check(code == 1, "exit status %s, expected 1" % code)


def main():
    global ARGS, TMP
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build-win", help="the Windows build directory")
    ap.add_argument(
        "--wine",
        default="" if NATIVE else (shutil.which("wine") or "wine"),
        help="what runs a Windows program (default: wine; none on Windows)",
    )
    ap.add_argument("--filter", default="*", help="glob on test names")
    ap.add_argument("-v", "--verbose", action="store_true", help="echo keel's stderr")
    ARGS = ap.parse_args()
    ARGS.build = os.path.abspath(ARGS.build)
    for f in ("keel.exe", "modules/mod_echo.dll", "tests/windows/kl_ctrl.exe"):
        if not os.path.exists(os.path.join(ARGS.build, f)):
            print("blackbox: %s missing in %s (build first)" % (f, ARGS.build), file=sys.stderr)
            return 2
    TMP = tempfile.mkdtemp(prefix="keel-win-blackbox-")
    passed = failed = skipped = 0
    t0 = time.monotonic()
    try:
        for fn in TESTS:
            if not fnmatch.fnmatch(fn.__name__, ARGS.filter):
                continue
            start = time.monotonic()
            try:
                try:
                    fn()
                except Failure:
                    # keel never exits without a line on stderr; a process
                    # that ended silently is Wine failing to start it (seen
                    # now and then on a loaded machine): the test runs again.
                    silent = [k for k in RUNNING if k.ended_silently()]
                    if not silent:
                        raise
                    print(
                        "[NOTE] windows::%s: Wine ended a process silently (exit status %s); once more"
                        % (fn.__name__, silent[0].status if silent[0].status is not None else silent[0].proc.returncode),
                        flush=True,
                    )
                    for k in RUNNING:
                        k.kill()
                    RUNNING.clear()
                    fn()
            except Skip as e:
                skipped += 1
                print("[SKIP] windows::%s: %s" % (fn.__name__, e), flush=True)
            except Failure as e:
                failed += 1
                print("[FAIL] windows::%s (%.1fs)\n    %s" % (fn.__name__, time.monotonic() - start, str(e).replace("\n", "\n    ")), flush=True)
            except Exception:  # a bug in the test or an unexpected error
                failed += 1
                print("[FAIL] windows::%s (%.1fs)\n%s" % (fn.__name__, time.monotonic() - start, traceback.format_exc()), flush=True)
            else:
                passed += 1
                print("[PASS] windows::%s (%.1fs)" % (fn.__name__, time.monotonic() - start), flush=True)
            finally:
                for k in RUNNING:
                    k.kill()
                RUNNING.clear()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print("black-box tests took %.0fs" % (time.monotonic() - t0))
    if skipped:
        print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    else:
        print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
