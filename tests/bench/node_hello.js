// node_hello.js — the Node.js peer of tests/bench/run.sh: one process,
// the core http module (libuv + llhttp, like keel), the same three routes
// as keel's hello plugin: GET / "Hello, World!", POST /echo.
//   node node_hello.js PORT
'use strict';
const http = require('http');

const port = Number(process.argv[2] || 18083);
const hello = Buffer.from('Hello, World!');

const server = http.createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/echo') {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      res.writeHead(200, {
        'Content-Type': req.headers['content-type'] || 'application/octet-stream',
        'Content-Length': body.length,
      });
      res.end(body);
    });
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': hello.length });
  res.end(hello);
});
// Idle keep-alive connections must survive the memory measurement.
server.keepAliveTimeout = 300000;
server.headersTimeout = 301000;
server.listen(port, '127.0.0.1');
