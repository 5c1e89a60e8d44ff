#!/usr/bin/env python3
"""The proxy's FastCGI upstreams against the distribution's PHP-FPM, and
against a FastCGI application that misbehaves on purpose.

    run.py KEEL_BIN MODULE_DIR

Starts php-fpm itself (its own config in a temp dir: one pool on
127.0.0.1 at a free port, one on a Unix socket in the temp dir, no
daemon, its error log in the temp dir), and keel in front of both; stops
php-fpm by its process group at the end. Exits 0 when every check passed,
1 on a failure, 77 (ctest's skip code) when php-fpm is absent (Debian:
php-fpm). The scripts it serves are in tests/fastcgi/www/.
"""
import glob
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KEEL, MODULES = sys.argv[1], sys.argv[2]


def find_fpm():
    for name in ("php-fpm",):
        path = shutil.which(name)
        if path:
            return path
    found = sorted(glob.glob("/usr/sbin/php-fpm*"))
    return found[-1] if found else None


FPM = find_fpm()
if FPM is None:
    print("SKIP: php-fpm is not installed (Debian: php-fpm)")
    sys.exit(77)

failures = []


def check(cond, what, detail=""):
    if cond:
        print(f"ok   {what}")
    else:
        print(f"FAIL {what} {detail}")
        failures.append(what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(cond, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


class Fpm:
    def __init__(self, tmp, www):
        self.tmp = tmp
        self.port = free_port()
        self.sock = os.path.join(tmp, "fpm.sock")
        self.conf = os.path.join(tmp, "php-fpm.conf")
        user = ""
        if os.geteuid() == 0:
            user = "user = root\ngroup = root\n"
        pool = ("pm = static\npm.max_children = 4\nping.path = /ping\n"
                "php_admin_value[output_buffering] = 0\n"
                "php_admin_value[upload_max_filesize] = 16M\n"
                "php_admin_value[post_max_size] = 16M\n"
                "php_admin_flag[log_errors] = on\n"
                "catch_workers_output = no\n"
                "security.limit_extensions = .php\n" + user)
        with open(self.conf, "w") as f:
            f.write(f"[global]\npid = {tmp}/fpm.pid\nerror_log = {tmp}/fpm.log\n"
                    "daemonize = no\n"
                    f"[tcp]\nlisten = 127.0.0.1:{self.port}\n{pool}"
                    f"[unix]\nlisten = {self.sock}\n{pool}")
        self.proc = None

    def start(self):
        args = [FPM, "-y", self.conf, "-F", "-n", "-d", "output_buffering=0"]
        if os.geteuid() == 0:
            args.append("-R")
        self.log = open(os.path.join(self.tmp, "fpm.stdout"), "a")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

        def up():
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return os.path.exists(self.sock)
            except OSError:
                return False
        if not wait_for(up):
            raise RuntimeError("php-fpm did not start: " + open(f"{self.tmp}/fpm.log").read())

    def stop(self):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None


class Keel:
    def __init__(self, tmp, conf_text):
        self.tmp = tmp
        conf = os.path.join(tmp, "keel.conf")
        with open(conf, "w") as f:
            f.write(conf_text)
        self.err = open(os.path.join(tmp, "keel.stderr"), "w+")
        self.proc = subprocess.Popen([KEEL, "-c", conf], stderr=self.err,
                                     stdout=subprocess.DEVNULL)
        self.port = None
        want = conf_text.count("\nlisten = ")
        # every listener's port, in the order of the listen lines
        self.ports = []

        def listening():
            self.ports = [int(p) for p in
                          re.findall(r"listening on 127\.0\.0\.1:(\d+)", self.log())]
            if len(self.ports) >= want:
                self.port = self.ports[0]
            return self.port is not None or self.proc.poll() is not None
        wait_for(listening)
        if self.port is None:
            self.stop()
            raise RuntimeError("keel did not start:\n" + self.log())

    def log(self):
        self.err.seek(0)
        return self.err.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        log = self.log()
        if "Sanitizer" in log or "runtime error" in log:
            failures.append("sanitizer report")
            print(log)
        return self.proc.returncode


def request(port, method, path, body=None, headers=None, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r, data


def raw_request(port, data, timeout=10):
    """Sends bytes as they are (a PROXY preamble, a chunked body); returns
    the response and its body."""
    s = socket.create_connection(("127.0.0.1", port), timeout)
    s.sendall(data)
    r = http.client.HTTPResponse(s)
    r.begin()
    body = r.read()
    s.close()
    return r, body


def chunks(data, size=65536):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def body_seen(data):
    """What body.php prints for a body PHP read whole."""
    return (f"content_length={len(data)}\nread={len(data)}\n"
            f"sha256={hashlib.sha256(data).hexdigest()}\nte=-\n").encode()


def held_files(pid):
    """The temporary files keel holds open for request bodies (Linux)."""
    out = []
    for fd in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if "keel-body-" in target:
            out.append(target)
    return out


def make_cert(tmp):
    """A self-signed certificate for 127.0.0.1, or None without openssl."""
    key, pem = os.path.join(tmp, "tls.key"), os.path.join(tmp, "tls.pem")
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", pem,
                        "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return pem, key


# ---- a FastCGI application that misbehaves on purpose ------------------------------

def record(rtype, content, rid=1, version=1, padding=0):
    return struct.pack(">BBHHBB", version, rtype, rid, len(content), padding, 0) + content + \
        b"\0" * padding


def end_request(rid=1):
    return record(3, struct.pack(">IB3x", 0, 0), rid)


HOSTILE = {
    "garbage": b"HTTP/1.1 200 OK\r\n\r\n",
    "version2": record(6, b"Status: 200\r\n\r\nhi", version=2) + end_request(),
    "status999": record(6, b"Status: 999 Odd\r\n\r\nhi") + end_request(),
    "status1xx": record(6, b"Status: 100 Continue\r\n\r\n") + end_request(),
    "end_without_head": record(6, b"Content-Type: text/plain\r\n") + end_request(),
    "no_stdout": end_request(),
    "other_id": record(6, b"Status: 200\r\n\r\nhi", rid=7) + end_request(7),
    "management": record(10, b"\x00\x00") + end_request(),
    "huge_head": b"".join(record(6, b"X-Pad: " + b"a" * 60000 + b"\r\n") for _ in range(2)) +
    record(6, b"\r\n") + end_request(),
    "folded": record(6, b"X-A: 1\r\n  folded\r\n\r\nhi") + end_request(),
    "bad_name": record(6, b"X A: 1\r\n\r\nhi") + end_request(),
    "end_body_short": record(6, b"Status: 200\r\n\r\nhi") + record(3, b"\0\0"),
    "nul_value": record(6, b"X-A: a\0b\r\n\r\nhi") + end_request(),
    # valid, padded, in pieces: 200 with the body whole
    "padded_ok": record(6, b"Content-Type: text/plain\r\n", padding=3) +
    record(7, b"a warning", padding=7) + record(6, b"\r\nbo", padding=1) +
    record(6, b"dy") + record(6, b"") + end_request(),
}


def read_request(conn):
    """Reads records until the empty FCGI_STDIN; returns the PARAMS bytes."""
    buf, params = b"", b""
    while True:
        while len(buf) < 8:
            d = conn.recv(65536)
            if not d:
                return None
            buf += d
        v, t, rid, clen, plen, _ = struct.unpack(">BBHHBB", buf[:8])
        while len(buf) < 8 + clen + plen:
            d = conn.recv(65536)
            if not d:
                return None
            buf += d
        content = buf[8:8 + clen]
        buf = buf[8 + clen + plen:]
        if t == 4:
            params += content
        if t == 5 and clen == 0:
            return params


def parse_params(data):
    out, i = {}, 0

    def length():
        nonlocal i
        if data[i] < 128:
            i += 1
            return data[i - 1]
        n = struct.unpack(">I", data[i:i + 4])[0] & 0x7fffffff
        i += 4
        return n
    while i < len(data):
        n, v = length(), length()
        out[data[i:i + n].decode()] = data[i + n:i + n + v].decode("latin-1")
        i += n + v
    return out


class Hostile(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        self.last_params = None

    def run(self):
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            try:
                params = read_request(conn)
                if params is None:
                    continue
                p = parse_params(params)
                self.last_params = p
                mode = p.get("SCRIPT_NAME", "").rsplit("/", 1)[-1]
                conn.sendall(HOSTILE.get(mode, HOSTILE["garbage"]))
                time.sleep(0.05)
            except OSError:
                pass
            finally:
                conn.close()


class Relay(threading.Thread):
    """Bytes both ways between keel and php-fpm, one connection to php-fpm
    per connection accepted: what php-fpm sees, counted."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.to = port
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        self.accepted = 0

    def pipe(self, a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def run(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            self.accepted += 1
            u = socket.create_connection(("127.0.0.1", self.to))
            threading.Thread(target=self.pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=self.pipe, args=(u, c), daemon=True).start()


# ---- the cases -------------------------------------------------------------------------

def main():
    tmp = tempfile.mkdtemp(prefix="keel-fcgi-")
    www = os.path.join(tmp, "www")
    shutil.copytree(os.path.join(HERE, "www"), www)
    # the same scripts under the prefixes of the routes to other pools
    for sub, script in (("unix", "info.php"), ("relayed", "small.php")):
        os.makedirs(os.path.join(www, sub))
        shutil.copy(os.path.join(www, script), os.path.join(www, sub, script))
    fpm = Fpm(tmp, www)
    hostile = Hostile()
    hostile.start()
    relay = Relay(fpm.port)
    relay.start()
    relay_checked = Relay(fpm.port)  # its own address, for the health checks' log lines
    relay_checked.start()
    spool = os.path.join(tmp, "spool")
    os.makedirs(spool)
    # listeners: 0 plain HTTP/1.1, 1 HTTP/2 (prior knowledge), 2 the PROXY
    # protocol, 3 TLS when the tls module is built
    cert = make_cert(tmp) if os.path.exists(os.path.join(MODULES, "mod_tls.so")) else None
    tls_listen = "listen = 127.0.0.1:0 http1 tls\n" if cert else ""
    tls_conf = f"[tls]\ncert = {cert[0]} {cert[1]}\n" if cert else ""
    keel = None
    try:
        fpm.start()
        keel = Keel(tmp, f"""[keel]
listen = 127.0.0.1:0 http1
listen = 127.0.0.1:0 h2
listen = 127.0.0.1:0 http1 proxy_protocol=on proxy_from=127.0.0.1
{tls_listen}workers = 1
modules = http1 h2 proxy{" tls" if cert else ""}
module_path = {MODULES}
[http1]
max_body = 8m
[h2]
max_body = 8m
{tls_conf}[proxy]
fastcgi_body_buffer = 64k
fastcgi_temp_path = {spool}
upstream = php fastcgi 127.0.0.1:{fpm.port} max_fails=0
upstream = phpunix fastcgi unix:{fpm.sock}
upstream = relayed fastcgi 127.0.0.1:{relay.port}
upstream = pinged fastcgi 127.0.0.1:{fpm.port} 127.0.0.1:{hostile.port} check=/ping check_interval=200ms
upstream = missing fastcgi 127.0.0.1:{relay_checked.port} 127.0.0.1:{hostile.port} check=/missing.php check_interval=200ms
upstream = hostile fastcgi 127.0.0.1:{hostile.port} max_fails=0
fastcgi_param = KEEL_TEST from-config
pass = /unix phpunix root={www}
pass = /slow php root={www} read_timeout=1s
pass = /app php root={www} script=/index.php
pass = /relayed relayed root={www}
pass = /hostile hostile root={www}
pass = / php root={www}
""")
        port = keel.port

        # -- a phpinfo-style page: the parameters the application sees
        r, body = request(port, "GET", "/info.php/extra/path?a=1&b=two",
                          headers={"X-Foo": "bar", "Proxy": "http://evil.example:1",
                                   "Cookie": "c=1", "Host": "example.test:8080"})
        check(r.status == 200, "info: 200", r.status)
        info = json.loads(body) if r.status == 200 else {}
        check(info.get("SCRIPT_FILENAME") == www + "/info.php", "info: SCRIPT_FILENAME",
              info.get("SCRIPT_FILENAME"))
        check(info.get("SCRIPT_NAME") == "/info.php", "info: SCRIPT_NAME", info.get("SCRIPT_NAME"))
        check(info.get("PATH_INFO") == "/extra/path", "info: PATH_INFO", info.get("PATH_INFO"))
        check(info.get("QUERY_STRING") == "a=1&b=two", "info: QUERY_STRING")
        check(info.get("REQUEST_URI") == "/info.php/extra/path?a=1&b=two", "info: REQUEST_URI")
        check(info.get("DOCUMENT_ROOT") == www, "info: DOCUMENT_ROOT")
        check(info.get("REQUEST_METHOD") == "GET", "info: REQUEST_METHOD")
        check(info.get("REMOTE_ADDR") in ("127.0.0.1", "::ffff:127.0.0.1"), "info: REMOTE_ADDR",
              info.get("REMOTE_ADDR"))
        check((info.get("REMOTE_PORT") or "").isdigit(), "info: REMOTE_PORT")
        check(info.get("SERVER_PORT") == str(port), "info: SERVER_PORT", info.get("SERVER_PORT"))
        check(info.get("SERVER_NAME") == "example.test", "info: SERVER_NAME")
        check(info.get("SERVER_PROTOCOL") == "HTTP/1.1", "info: SERVER_PROTOCOL")
        check(info.get("GATEWAY_INTERFACE") == "CGI/1.1", "info: GATEWAY_INTERFACE")
        check(info.get("REQUEST_SCHEME") == "http" and info.get("HTTPS") is None,
              "info: REQUEST_SCHEME http, no HTTPS")
        check(info.get("HTTP_X_FOO") == "bar", "info: HTTP_X_FOO")
        check(info.get("HTTP_PROXY") is None, "info: no HTTP_PROXY (httpoxy)")
        check(info.get("KEEL_TEST") == "from-config", "info: fastcgi_param")
        check(r.getheader("Via") is None, "info: no Via on a FastCGI response")

        # -- a POST form with a file upload
        payload = os.urandom(3 * 1024 * 1024 + 17)
        boundary = "keelboundary1234"
        form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\n"
                "keel\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                "filename=\"blob.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                ).encode() + payload + f"\r\n--{boundary}--\r\n".encode()
        r, body = request(port, "POST", "/upload.php", body=form, headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}"})
        want = f"name=keel\nsize={len(payload)}\nsha256={hashlib.sha256(payload).hexdigest()}\n"
        check(r.status == 200 and body.decode() == want, "upload: size and hash echoed",
              (r.status, body[:200]))

        # -- bodies of unknown length: held whole, then sent with
        # CONTENT_LENGTH (nginx's fastcgi_pass buffers them too)
        head = b"POST /body.php HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" \
            b"Content-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
        r, body = raw_request(port, head + b"3\r\nabc\r\n0\r\n\r\n")
        check(r.status == 200 and body == body_seen(b"abc"),
              "chunked body: held in memory, PHP reads it with CONTENT_LENGTH", (r.status, body))
        r, body = raw_request(port, head + b"0\r\n\r\n")
        check(r.status == 200 and body == body_seen(b""), "chunked empty body: CONTENT_LENGTH 0",
              (r.status, body))
        upload = os.urandom(3 * 1024 * 1024 + 5)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("POST", "/body.php", body=chunks(upload), encode_chunked=True,
                  headers={"Content-Type": "application/octet-stream"})
        r = c.getresponse()
        body = r.read()
        c.close()
        check(r.status == 200 and body == body_seen(upload),
              "chunked 3 MiB upload: PHP sees its length and bytes", (r.status, body[:300]))
        # held in a file of the temp directory, unlinked at once: while the
        # upload waits half-way, keel holds a deleted keel-body-* file open
        # and the directory is empty
        if os.path.isdir(f"/proc/{keel.proc.pid}/fd"):
            s = socket.create_connection(("127.0.0.1", port), 30)
            s.sendall(head)
            for piece in chunks(upload[:1024 * 1024]):
                s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            held = []
            check(wait_for(lambda: held.extend(held_files(keel.proc.pid)) or held, 10) and
                  all(h.endswith("(deleted)") and h.startswith(spool) for h in held) and
                  os.listdir(spool) == [],
                  "chunked upload: held in fastcgi_temp_path, unlinked", (held, os.listdir(spool)))
            for piece in chunks(upload[1024 * 1024:]):
                s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            s.sendall(b"0\r\n\r\n")
            r = http.client.HTTPResponse(s)
            r.begin()
            body = r.read()
            s.close()
            check(r.status == 200 and body == body_seen(upload),
                  "chunked upload in two halves: whole", (r.status, body[:300]))
            check(wait_for(lambda: held_files(keel.proc.pid) == [], 5),
                  "chunked upload: the file closed once sent")
        # over max_body (8m): 413, and the file is let go
        s = socket.create_connection(("127.0.0.1", port), 30)
        s.sendall(head)
        piece = os.urandom(65536)
        for _ in range(8 * 16):
            s.sendall(b"10000\r\n" + piece + b"\r\n")
        s.sendall(b"10000\r\n")  # the chunk that would go over: refused before its data
        r = http.client.HTTPResponse(s)
        r.begin()
        r.read()
        s.close()
        check(r.status == 413, "chunked upload over max_body: 413", r.status)
        check(wait_for(lambda: held_files(keel.proc.pid) == [], 5)
              if os.path.isdir("/proc") else True, "413: the temporary file closed")
        # HTTP/2 without content-length: curl streams stdin in DATA frames
        if shutil.which("curl"):
            h2_upload = os.urandom(2 * 1024 * 1024 + 3)
            out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-X", "POST", "-T",
                                  "-", "-H", "Content-Type: application/octet-stream",
                                  "-w", "\nstatus=%{http_code} version=%{http_version}",
                                  f"http://127.0.0.1:{keel.ports[1]}/body.php"],
                                 input=h2_upload, capture_output=True, timeout=60)
            check(out.stdout == body_seen(h2_upload) + b"\nstatus=200 version=2",
                  "HTTP/2 upload without content-length: PHP sees its length and bytes",
                  (out.stdout[:300], out.stderr[:300]))

        # -- the client as the PROXY protocol names it: REMOTE_ADDR, REMOTE_PORT
        r, body = raw_request(keel.ports[2], b"PROXY TCP4 198.51.100.7 127.0.0.1 40123 "
                              b"%d\r\nGET /info.php HTTP/1.1\r\nHost: x\r\n"
                              b"Connection: close\r\n\r\n" % keel.ports[2])
        info = json.loads(body) if r.status == 200 else {}
        check(info.get("REMOTE_ADDR") == "198.51.100.7" and info.get("REMOTE_PORT") == "40123",
              "PROXY protocol: REMOTE_ADDR and REMOTE_PORT are the client's it names",
              (r.status, info.get("REMOTE_ADDR"), info.get("REMOTE_PORT")))
        check(info.get("HTTPS") is None and info.get("REQUEST_SCHEME") == "http",
              "PROXY protocol over plain TCP: no HTTPS")

        # -- over TLS: HTTPS=on
        if cert:
            import ssl
            ctx = ssl.create_default_context(cafile=cert[0])
            c = http.client.HTTPSConnection("127.0.0.1", keel.ports[3], timeout=10, context=ctx)
            c.request("GET", "/info.php")
            r = c.getresponse()
            body = r.read()
            c.close()
            info = json.loads(body) if r.status == 200 else {}
            check(info.get("HTTPS") == "on" and info.get("REQUEST_SCHEME") == "https",
                  "TLS listener: HTTPS=on, REQUEST_SCHEME https",
                  (r.status, info.get("HTTPS"), info.get("REQUEST_SCHEME")))
            check(info.get("SERVER_PORT") == str(keel.ports[3]), "TLS listener: SERVER_PORT")
        else:
            print("skip tls: the tls module is not built or openssl is missing")

        # -- a streamed response: the first piece long before the end
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        start = time.time()
        c.request("GET", "/stream.php")
        r = c.getresponse()
        first = r.readline()
        t_first = time.time() - start
        rest = r.read()
        t_all = time.time() - start
        c.close()
        check(first.startswith(b"piece 0"), "stream: first piece", first[:20])
        check(t_first < 1.0 and t_all > 1.2, "stream: bytes arrive before the script ends",
              (t_first, t_all))
        check(r.getheader("Transfer-Encoding") == "chunked", "stream: chunked to HTTP/1.1")
        check(rest.endswith(b"end\n") and rest.count(b"piece") == 4, "stream: whole")

        # -- a response read whole at once leaves with its head in one
        # piece: framed by Content-Length, not chunks (a last chunk written
        # apart cost a system call a request)
        r, body = request(port, "GET", "/small.php")
        check(r.status == 200 and r.getheader("Content-Length") == str(len(body)) and
              r.getheader("Transfer-Encoding") is None,
              "small response: Content-Length, not chunked",
              (r.status, r.getheader("Content-Length"), r.getheader("Transfer-Encoding"), body))

        # -- status and fields from PHP
        r, body = request(port, "GET", "/headers.php?mode=404")
        check(r.status == 404 and body == b"not here\n" and r.getheader("X-App") == "set-by-php",
              "headers: http_response_code(404) with its fields", r.status)
        cookies = [v for k, v in r.getheaders() if k.lower() == "set-cookie"]
        check(cookies == ["a=1", "b=2"], "headers: two Set-Cookie kept apart", cookies)
        r, body = request(port, "GET", "/headers.php?mode=redirect")
        check(r.status == 302 and r.getheader("Location") == "/elsewhere",
              "headers: Location alone is a 302", (r.status, r.getheader("Location")))
        r, body = request(port, "GET", "/headers.php?mode=status")
        check(r.status == 503 and body == b"busy\n", "headers: Status: 503", r.status)

        # -- stderr to keel's log
        r, body = request(port, "GET", "/stderr.php?n=42")
        check(r.status == 200 and body == b"logged\n", "stderr: the response is whole")
        check(wait_for(lambda: "keel-fcgi-stderr-marker 42" in keel.log(), 5),
              "stderr: error_log() in keel's log")

        # -- the front controller: every path of /app to index.php
        r, body = request(port, "GET", "/app/users/7?tab=x")
        text = body.decode()
        check(r.status == 200 and "front controller" in text and
              "REQUEST_URI=/app/users/7?tab=x" in text and "SCRIPT_NAME=/index.php" in text,
              "front controller: /app/users/7 runs index.php", text)

        # -- keep-alive: php-fpm accepts fewer connections than requests
        statuses = [request(port, "GET", "/relayed/small.php")[0].status for _ in range(20)]
        check(statuses == [200] * 20 and 1 <= relay.accepted <= 2,
              "keep-alive: 20 requests on at most 2 connections to php-fpm",
              (statuses, relay.accepted))

        # -- a slow script: the route's read_timeout, 504
        r, body = request(port, "GET", "/slow/slow.php")
        check(r.status == 504, "slow script: 504 after read_timeout", r.status)

        # -- hostile application: 502, never a crash
        for mode in sorted(HOSTILE):
            r, body = request(port, "GET", "/hostile/" + mode)
            if mode == "padded_ok":
                check(r.status == 200 and body == b"body", "hostile: padded records in pieces",
                      (r.status, body))
            else:
                check(r.status == 502, f"hostile: {mode} is a 502", r.status)
        check(keel.proc.poll() is None, "hostile: keel still running")
        check(wait_for(lambda: "a warning" in keel.log(), 5), "hostile: stderr record logged")

        # -- active health checks: PHP-FPM's ping.path answers (in), the
        # hostile server does not (out), a script that is not there (404) is out
        log_of = lambda: keel.log()
        check(wait_for(lambda: f"health check of 127.0.0.1:{hostile.port}: down" in log_of(), 5),
              "checks: a server answering garbage is out")
        check(wait_for(lambda: f"health check of 127.0.0.1:{relay_checked.port}: down" in log_of(),
                       5), "checks: a 404 from PHP-FPM is out")
        time.sleep(0.5)  # two more rounds: php-fpm's pong must keep it in
        check(f"health check of 127.0.0.1:{fpm.port}: down" not in log_of(),
              "checks: PHP-FPM's ping.path keeps it in")

        # -- php-fpm restarted mid-test: the next requests succeed
        fpm.stop()
        r, body = request(port, "GET", "/small.php")
        check(r.status in (502, 503), "restart: php-fpm down is a 502", r.status)
        fpm.start()
        ok = 0
        for _ in range(5):
            r, body = request(port, "GET", "/small.php")
            ok += r.status == 200 and body == b"hello from php\n"
        check(ok == 5, "restart: the next requests succeed", ok)

        # -- over the Unix socket (keel_conn_connect's unix:PATH)
        r, body = request(port, "GET", "/unix/info.php/x")
        if r.status == 200:
            info = json.loads(body)
            check(info.get("SCRIPT_FILENAME") == www + "/unix/info.php", "unix: SCRIPT_FILENAME")
            check(info.get("PATH_INFO") == "/x", "unix: PATH_INFO")
        elif re.search(r"connect to unix:\S+: .*(unsupported|not supported|invalid argument)",
                       keel.log(), re.I):
            print("skip unix: keel_conn_connect reports unix:PATH unsupported in this build")
        else:
            check(False, "unix: 200 over the Unix socket", r.status)
    finally:
        if keel is not None:
            rc = keel.stop()
            check(rc == 0, "keel stopped cleanly", rc)
        fpm.stop()
        hostile.srv.close()
        relay.srv.close()
        relay_checked.srv.close()
        if failures:
            print("keel log:\n" + (keel.log() if keel else ""))
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s): {failures}")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
