// tests/bench/node_h2.js — Node.js's http2 module (cleartext, prior
// knowledge) for tests/bench/h2.sh: "Hello, World!" at /, files from ROOT
// under /files/, read with fs.readFile per request. (respondWithFile, the
// faster path, crashed Node 20.20 with a segmentation fault when h2load
// ended its run with streams still in flight.)
//   node node_h2.js PORT ROOT
'use strict';
const http2 = require('http2');
const fs = require('fs');
const path = require('path');
const [port, root] = [Number(process.argv[2]), process.argv[3]];
const server = http2.createServer({ maxSessionMemory: 64 });
server.on('stream', (stream, headers) => {
  const p = headers[':path'];
  if (p.startsWith('/files/')) {
    fs.readFile(path.join(root, path.basename(p)), (err, data) => {
      if (stream.destroyed) return;
      if (err) { stream.respond({ ':status': 404 }); stream.end(); return; }
      stream.respond({ ':status': 200, 'content-type': 'application/octet-stream',
                       'content-length': data.length });
      stream.end(data);
    });
    return;
  }
  stream.respond({ ':status': 200, 'content-type': 'text/plain' });
  stream.end('Hello, World!');
});
server.on('sessionError', () => {});
server.listen(port, '127.0.0.1');
