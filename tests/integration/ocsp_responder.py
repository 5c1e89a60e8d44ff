#!/usr/bin/env python3
"""An OCSP responder on 127.0.0.1 for tests/integration/test_tls_ocsp.c.

Usage: ocsp_responder.py DIR [NMIN]

Listens on 127.0.0.1 (an ephemeral port) and logs "listening on
127.0.0.1:PORT (ocsp)" to stderr, the line keel logs, so the harness finds
the port the same way. Each POST (RFC 6960 A.1) is answered by OpenSSL's
own responder, `openssl ocsp -index DIR/index.txt -CA DIR/ca.pem -rsigner
DIR/ca.pem -rkey DIR/ca.key -reqin REQ -respout RESP -nmin NMIN`, run per
request (so a revocation written to the index shows at once): `openssl
ocsp -port` itself would listen on every interface, and tests stay on
loopback. Each request is logged to stderr as "ocsp request N". Exits
after 120 s whatever happens.
"""
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

DIR = sys.argv[1]
NMIN = sys.argv[2] if len(sys.argv) > 2 else "5"
count = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass

    def do_POST(self):
        global count
        length = int(self.headers.get("Content-Length", "0"))
        if length <= 0 or length > 65536:
            self.send_error(400)
            return
        body = self.rfile.read(length)
        with tempfile.TemporaryDirectory(dir=DIR) as tmp:
            req = os.path.join(tmp, "req.der")
            resp = os.path.join(tmp, "resp.der")
            with open(req, "wb") as f:
                f.write(body)
            rc = subprocess.run(
                ["openssl", "ocsp", "-index", os.path.join(DIR, "index.txt"),
                 "-CA", os.path.join(DIR, "ca.pem"), "-rsigner", os.path.join(DIR, "ca.pem"),
                 "-rkey", os.path.join(DIR, "ca.key"), "-reqin", req, "-respout", resp,
                 "-nmin", NMIN],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20).returncode
            if rc != 0 or not os.path.exists(resp):
                self.send_error(500)
                return
            with open(resp, "rb") as f:
                answer = f.read()
        count += 1
        sys.stderr.write("ocsp request %d\n" % count)
        sys.stderr.flush()
        self.send_response(200)
        self.send_header("Content-Type", "application/ocsp-response")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


server = HTTPServer(("127.0.0.1", 0), Handler)
sys.stderr.write("listening on 127.0.0.1:%d (ocsp)\n" % server.server_address[1])
sys.stderr.flush()
threading.Timer(120, os._exit, args=(0,)).start()
server.serve_forever()
