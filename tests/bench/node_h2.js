// tests/bench/node_h2.js — Node.js's http2 module (cleartext, prior
// knowledge) for tests/bench/h2.sh: "Hello, World!" at /, files from ROOT
// under /files/ (respondWithFile: Node's fastest file path).
//   node node_h2.js PORT ROOT
'use strict';
const http2 = require('http2');
const path = require('path');
const [port, root] = [Number(process.argv[2]), process.argv[3]];
const server = http2.createServer({ maxSessionMemory: 64 });
server.on('stream', (stream, headers) => {
  const p = headers[':path'];
  if (p.startsWith('/files/')) {
    stream.respondWithFile(path.join(root, path.basename(p)),
      { 'content-type': 'application/octet-stream' },
      { onError: () => { stream.respond({ ':status': 404 }); stream.end(); } });
    return;
  }
  stream.respond({ ':status': 200, 'content-type': 'text/plain' });
  stream.end('Hello, World!');
});
server.listen(port, '127.0.0.1');
