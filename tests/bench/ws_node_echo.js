// ws_node_echo.js — a Node.js `ws` echo server for tests/bench/ws.sh.
//   node ws_node_echo.js PORT DEFLATE     (NODE_PATH points at the ws package)
const { WebSocketServer } = require('ws');
const port = +process.argv[2];
const deflate = process.argv[3] === '1';
const wss = new WebSocketServer({
    host: '127.0.0.1',
    port,
    maxPayload: 1 << 20,
    perMessageDeflate: deflate ? { threshold: 64 } : false,
});
wss.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
});
wss.on('listening', () => console.log(`listening on 127.0.0.1:${port}`));
