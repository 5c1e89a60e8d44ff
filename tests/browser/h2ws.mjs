// WebSocket over HTTP/2 (RFC 8441) in headless Chromium: a page loaded
// over HTTPS with ALPN h2 opens wss:// to its own origin (hello's /ws
// echo) and exchanges messages. Chromium sends the WebSocket as an
// extended CONNECT on the HTTP/2 connection it already has when the
// server's SETTINGS offered SETTINGS_ENABLE_CONNECT_PROTOCOL.
//   node h2ws.mjs BASE_URL OUT_DIR [NODE_MODULES_DIR]
// Checks the echo, then keel's side (its /metrics): the WebSocket was an
// HTTP/2 stream (h2_tunnels_total), on the page's one connection
// (h2_connections_total), while it was open (h2_tunnels). Exits non-zero
// with a reason.
import path from "node:path";
import { deadline, fail, launch, pageErrors } from "./lib.mjs";

const [base, out, modules] = process.argv.slice(2);

deadline(45000, "the whole browser test");
const browser = await launch(modules);
try {
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  const errors = pageErrors(page);
  const response = await page.goto(base + "/www/index.html", { waitUntil: "load", timeout: 20000 });
  if (!response || response.status() !== 200) fail("/www/index.html: " + (response && response.status()));
  const nav = await page.evaluate(() => performance.getEntriesByType("navigation")[0].nextHopProtocol);
  if (nav !== "h2") fail("the page came over " + nav + ", not h2");
  const metric = async (name) => {
    const text = await page.evaluate(async () => (await fetch("/metrics")).text());
    const line = text.split("\n").find((l) => l.startsWith(name + " ") || l.startsWith(name + "{"));
    return line ? Number(line.split(" ").pop()) : NaN;
  };
  const got = await page.evaluate(() => new Promise((resolve) => {
    const ws = new WebSocket(location.origin.replace("https:", "wss:") + "/ws", "echo");
    const echoed = [];
    ws.onopen = () => { ws.send("one"); ws.send("two"); ws.send("x".repeat(100000)); };
    ws.onmessage = (e) => {
      echoed.push(e.data);
      if (echoed.length === 3) {
        window.__ws = ws; // left open: keel counts it as an open tunnel
        resolve({ echoed: echoed.map((m) => m.length > 10 ? m.length : m), protocol: ws.protocol });
      }
    };
    ws.onerror = () => resolve({ error: "WebSocket error" });
    ws.onclose = (e) => resolve({ error: "closed " + e.code });
    setTimeout(() => resolve({ error: "no echo within 10 s", echoed }), 10000);
  }));
  if (got.error) fail(got.error + " " + JSON.stringify(got));
  if (JSON.stringify(got.echoed) !== JSON.stringify(["one", "two", 100000]))
    fail("echoed " + JSON.stringify(got.echoed));
  if (got.protocol !== "echo") fail("subprotocol " + JSON.stringify(got.protocol));
  // keel's side: the WebSocket was a stream of the page's connection.
  const tunnels = await metric("h2_tunnels_total"), open = await metric("h2_tunnels");
  const conns = await metric("h2_connections_total");
  if (tunnels !== 1) fail(`h2_tunnels_total ${tunnels}: the WebSocket did not go over HTTP/2`);
  if (open !== 1) fail(`h2_tunnels ${open} while the WebSocket is open`);
  if (conns !== 1) fail(`h2_connections_total ${conns}, expected the page's one connection`);
  await page.evaluate(() => new Promise((resolve) => {
    window.__ws.onclose = resolve;
    window.__ws.close(1000, "done");
  }));
  if (errors.length) fail("page errors: " + errors.join("; "));
  await page.screenshot({ path: path.join(out, "h2ws.png") });
  console.log(`ok: WebSocket echo over an HTTP/2 stream (h2_tunnels_total ${tunnels}, ${conns} connection)`);
} finally {
  await browser.close();
}
