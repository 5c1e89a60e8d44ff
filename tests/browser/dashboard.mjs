// The stats dashboard in headless Chromium, driven by playwright-core.
//   node dashboard.mjs BASE_URL OUT_DIR [NODE_MODULES_DIR]
// Loads BASE_URL/__stats/, makes a bounded load against keel (hello's
// routes, 404s), and checks that the page is fed by Server-Sent Events,
// that snapshots keep arriving, that the charts draw and change (their
// SVG differs between two moments) and that the numbers show the load;
// then the same page with EventSource removed must fall back to polling.
// Saves OUT_DIR/dashboard.png and dashboard-dark.png. Exits non-zero with a
// reason on any failure.
import path from "node:path";
import { deadline, fail, launch, pageErrors } from "./lib.mjs";

const [base, out, modules] = process.argv.slice(2);
const shot = path.join(out, "dashboard.png");

// A bounded load: n requests, four at a time, spread over a few seconds
// so that the charts show more than one beat of it.
async function load(n) {
  const paths = ["/", "/hello/browser", "/no/such/page", "/headers"];
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const p = paths[next++ % paths.length];
      const r = await fetch(base + p);
      await r.arrayBuffer();
      await new Promise((ok) => setTimeout(ok, 25));
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
}

async function waitSamples(page, n, ms) {
  await page.waitForFunction((k) => window.__keelStats && window.__keelStats.samples >= k, n, { timeout: ms });
}

// A chart's drawing (its SVG): it differs between two moments when the chart moved.
const chartDrawing = (page, id) => page.evaluate((i) => document.getElementById(i).innerHTML, id);

deadline(90000, "the whole browser test");
const browser = await launch(modules);
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 2 });
  const errors = pageErrors(page);
  await page.goto(base + "/__stats/");
  await waitSamples(page, 2, 15000);
  const transport = await page.evaluate(() => window.__keelStats.transport);
  if (transport !== "live") fail("expected the SSE stream, transport is " + transport);
  const before = await chartDrawing(page, "c-rps");
  const s0 = await page.evaluate(() => window.__keelStats.samples);

  await load(400);
  // Snapshots kept coming: two since the load began. The load lasts 2.5 s
  // or more (100 rounds of 25 ms per fetcher) and beats come once a
  // second, so two usually fall inside it, but a beat the busy page
  // handles half a second late falls after it: wait for it (bounded)
  // rather than count within the load.
  await waitSamples(page, s0 + 2, 5000);
  // Two more beats after the load: the last snapshot has counted it all.
  const s1 = await page.evaluate(() => window.__keelStats.samples);
  await waitSamples(page, s1 + 2, 15000);
  const after = await chartDrawing(page, "c-rps");
  if (after === before) fail("the requests chart did not change under load");
  const st = await page.evaluate(() => ({
    draws: window.__keelStats.draws,
    total: document.getElementById("t-total").textContent,
    conn: document.getElementById("t-conn").textContent,
    version: document.getElementById("version").textContent,
    workers: document.getElementById("l-util").children.length,
  }));
  if (st.draws < 10) fail("charts drew only " + st.draws + " times");
  const total = parseFloat(st.total) * (/k$/.test(st.total) ? 1000 : 1);
  if (!(total >= 400)) fail("the requests tile shows " + st.total + " after 400 requests");
  if (!/^v\d+\.\d+\.\d+ · ABI \d+\.\d+ · \d+ workers$/.test(st.version)) fail("header: " + st.version);
  if (st.workers < 1) fail("no worker in the utilisation legend");
  // "All metrics" lists every series once opened. The table is filled by
  // the details element's toggle event, which the browser fires in a task
  // of its own after the click: wait for it (reading at once raced it).
  await page.click("#all summary");
  await page.waitForFunction(() => document.querySelectorAll("#metrics tr").length >= 10, null, { timeout: 5000 })
    .catch(() => {});
  const rows = await page.evaluate(() => document.querySelectorAll("#metrics tr").length);
  if (rows < 10) fail("the metrics table has " + rows + " rows");
  await page.click("#all summary");
  const lat = await page.evaluate(() => document.getElementById("h-lat").textContent);
  await page.screenshot({ path: shot, fullPage: true });
  if (errors.length) fail("errors in the page: " + errors.join("; "));
  console.log(`ok: ${st.draws} draws, ${s1 + 2}+ snapshots over SSE, requests ${st.total}, ${rows} series, latency "${lat}"`);

  // The fallback: no EventSource, so the page polls the JSON page.
  // (In the dark scheme, and narrow, for a second screenshot.)
  const poll = await browser.newPage({ viewport: { width: 760, height: 1000 }, colorScheme: "dark" });
  await poll.addInitScript(() => { delete window.EventSource; });
  await poll.goto(base + "/__stats/");
  await waitSamples(poll, 3, 15000);
  const t2 = await poll.evaluate(() => window.__keelStats.transport);
  if (t2 !== "poll") fail("without EventSource the page should poll, transport is " + t2);
  // It asked for the server's history first (/__stats.json?history=1).
  const h2 = await poll.evaluate(() => window.__keelStats.history);
  if (!(h2 >= 3)) fail("the polling page got " + h2 + " samples of history");
  const dark = path.join(out, "dashboard-dark.png");
  await poll.screenshot({ path: dark });
  console.log("ok: polling fallback");
  console.log(`screenshots: ${shot} ${dark}`);
} finally {
  await browser.close();
}
