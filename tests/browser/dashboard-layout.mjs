// The stats dashboard's layout and history in headless Chromium.
//   node dashboard-layout.mjs BASE_URL OUT_DIR [NODE_MODULES_DIR]
//
// 1. History: a page makes a bounded load and is reloaded; the reloaded
//    page must draw the minutes before it at once (the server's "history"
//    event), before its second snapshot: the requests chart holds the
//    load, and its time span covers the time before the reload.
// 2. Layout, at 1280x800 and 390x844, light and dark: the page gets a
//    history of large values (95.4 MiB/s in, 40 MiB/s out, 12 345
//    requests/s, 12 345 connections: the sizes that clipped the y labels
//    and cut the in/out tile) through its own event stream, answered here
//    (page.route) instead of by keel. Then, read from the DOM: every tick
//    label's box lies inside its chart's box; no element overflows its
//    tile or card, nor the page its width; every y tick is a multiple of
//    1, 2 or 5 times a power of ten in its unit, the axis covers the data
//    and the labels say the values they stand for.
// Saves OUT_DIR/dashboard-{desktop,mobile}-{light,dark}.png and
// dashboard-reload.png. Exits non-zero with a reason on any failure.
import path from "node:path";
import { deadline, fail, launch, pageErrors } from "./lib.mjs";

const [base, out, modules] = process.argv.slice(2);
const url = base + "/__stats/";

async function load(n) {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      next++;
      const r = await fetch(base + "/hello/layout");
      await r.arrayBuffer();
      await new Promise((ok) => setTimeout(ok, 20));
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
}

// What the page says about its charts and tiles (run in the page).
function inspect() {
  const problems = [];
  const inside = (a, b, slack) => a.left >= b.left - slack && a.right <= b.right + slack &&
    a.top >= b.top - slack && a.bottom <= b.bottom + slack;
  const box = (e) => e.getBoundingClientRect();
  const charts = {};
  for (const svg of document.querySelectorAll("svg.chart")) {
    const sb = box(svg);
    const ticks = [];
    for (const t of svg.querySelectorAll("text")) {
      if (!inside(box(t), sb, 0.5)) problems.push(`${svg.id}: label "${t.textContent}" outside the chart`);
    }
    for (const t of svg.querySelectorAll(".y-ticks text"))
      ticks.push({ text: t.textContent, v: +t.dataset.v, step: +t.dataset.step, unit: +t.dataset.unit });
    charts[svg.id] = ticks;
  }
  for (const tile of document.querySelectorAll(".tile, .card")) {
    const tb = box(tile);
    for (const e of tile.querySelectorAll("*")) {
      if (e.closest("svg") && e.tagName !== "svg") continue; // the chart's own test above
      const b = box(e);
      if (b.width === 0 && b.height === 0) continue;
      if (!inside(b, tb, 0.5)) problems.push(`${e.id || e.className || e.tagName} ("${e.textContent.slice(0, 30)}") overflows its ${tile.className}`);
      if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== "visible")
        problems.push(`${e.id || e.tagName} ("${e.textContent.slice(0, 30)}") is cut: ${e.scrollWidth} > ${e.clientWidth}`);
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth)
    problems.push(`the page is wider than the window: ${document.documentElement.scrollWidth} > ${window.innerWidth}`);
  const s = window.__keelStats;
  const top = {};
  for (const [name, c] of Object.entries(s.charts)) {
    let m = 0;
    for (const p of c.points) {
      const vals = p.v.filter((v) => v != null && isFinite(v));
      m = Math.max(m, c.opts.stacked ? vals.reduce((a, v) => a + v, 0) : Math.max(0, ...vals));
    }
    top[name] = { data: m, axis: c.axis ? c.axis.top : null, points: c.points.length };
  }
  return { problems, charts, top, io: document.getElementById("t-io").textContent };
}

// 1, 2 or 5 times a power of ten (floating point allowed for).
function nice(x) {
  const e = Math.pow(10, Math.floor(Math.log10(x) + 1e-9)), f = x / e;
  return [1, 2, 5, 10].some((m) => Math.abs(f - m) < 1e-6);
}

function checkTicks(r, where) {
  const bad = [...r.problems];
  for (const [id, ticks] of Object.entries(r.charts)) {
    if (ticks.length < 2) { bad.push(`${id}: ${ticks.length} y ticks`); continue; }
    for (const t of ticks) {
      if (!nice(t.step / t.unit)) bad.push(`${id}: step ${t.step / t.unit} (label ${t.text}) is not 1, 2 or 5 x 10^k`);
      const k = t.v / t.step;
      if (Math.abs(k - Math.round(k)) > 1e-6) bad.push(`${id}: tick ${t.v} is not a multiple of ${t.step}`);
      const shown = parseFloat(t.text);
      if (Math.abs(shown - t.v / t.unit) > 1e-6 * Math.max(1, t.v / t.unit)) bad.push(`${id}: label "${t.text}" for ${t.v / t.unit}`);
    }
    const texts = ticks.map((t) => t.text);
    if (new Set(texts).size !== texts.length) bad.push(`${id}: repeated labels ${texts.join(", ")}`);
  }
  for (const [name, t] of Object.entries(r.top))
    if (t.axis != null && t.data > t.axis * (1 + 1e-9)) bad.push(`${name}: data up to ${t.data} above the axis top ${t.axis}`);
  if (bad.length) fail(where + ":\n  " + bad.join("\n  "));
}

// A history of n samples a second apart, counters growing by the rates
// given, in the shape the stats module sends (history.c).
function history(n, monoEnd, workers) {
  const MiB = 1024 * 1024;
  const idx = [...Array(n).keys()];
  const mono = idx.map((i) => monoEnd - (n - 1 - i) * 1000);
  const le = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
  return {
    interval_ms: 1000,
    mono_ms: mono,
    keel_connections_open: idx.map((i) => 12000 + (i % 7) * 50),
    keel_bytes_received_total: idx.map((i) => i * 95.4 * MiB),
    keel_bytes_sent_total: idx.map((i) => i * 40 * MiB),
    keel_http_requests_total: {
      "1xx": idx.map(() => 0), "2xx": idx.map((i) => i * 12000), "3xx": idx.map((i) => i * 300),
      "4xx": idx.map((i) => i * 40), "5xx": idx.map((i) => i * 5),
    },
    keel_http_request_duration_seconds: {
      le,
      count: idx.map((i) => i * 12345),
      cumulative: idx.map((i) => le.map((_, b) => Math.round(i * 12345 * Math.min(1, (b + 1) / 9)))),
    },
    keel_worker_loop_idle_seconds_total: idx.map((i) => Array.from({ length: workers }, (_, w) => i * (0.3 + 0.1 * w))),
  };
}

deadline(100000, "the whole layout test");
const browser = await launch(modules);
try {
  // ---- 1. the history survives a reload ----
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors = pageErrors(page, "history");
  await page.goto(url);
  await page.waitForFunction(() => window.__keelStats.samples >= 1, null, { timeout: 15000 });
  await load(200);
  await page.waitForFunction(() => window.__keelStats.samples >= 4, null, { timeout: 15000 });
  const loaded = Date.now();
  await page.reload();
  // Right after the first snapshot or so: the server's history is drawn.
  await page.waitForFunction(() => window.__keelStats.samples >= 1, null, { timeout: 15000 });
  const h = await page.evaluate(() => {
    const s = window.__keelStats, pts = s.charts.rps.points;
    return {
      samples: s.samples, history: s.history, points: pts.length,
      peak: Math.max(0, ...pts.map((p) => p.v.reduce((a, v) => a + (v || 0), 0))),
      oldest: pts.length ? pts[0].t : null,
    };
  });
  // Live snapshots alone give the requests chart one point fewer than
  // snapshots (a rate needs two); the history gives it more.
  if (!(h.history >= 4)) fail(`the reloaded page got ${h.history} samples of history (want 4 or more)`);
  if (!(h.points >= h.samples + 3))
    fail(`after a reload the requests chart has ${h.points} points after ${h.samples} snapshots`);
  if (!(h.peak > 0)) fail("the reloaded page's history does not show the load made before the reload");
  if (!(h.oldest < loaded - 2000)) fail("the history does not reach back before the reload");
  checkTicks(await page.evaluate(inspect), "real data");
  await page.screenshot({ path: path.join(out, "dashboard-reload.png"), fullPage: true });
  if (errors.length) fail("errors in the page: " + errors.join("; "));
  console.log(`ok: reload drew ${h.history} samples of history at once (peak ${h.peak.toFixed(1)} requests/s)`);
  await page.close();

  // ---- 2. layout with large values, desktop and mobile, light and dark ----
  const real = await (await fetch(base + "/__stats.json")).json();
  for (const [name, viewport] of [["desktop", { width: 1280, height: 800 }], ["mobile", { width: 390, height: 844 }]]) {
    for (const scheme of ["light", "dark"]) {
      const where = `${name} ${scheme}`;
      const p = await browser.newPage({ viewport, colorScheme: scheme, deviceScaleFactor: name === "mobile" ? 2 : 1 });
      const errs = pageErrors(p, where);
      const n = 120, monoEnd = 1e7;
      const hist = history(n, monoEnd, real.workers);
      // The live snapshot continues the history by one beat.
      const snap = JSON.parse(JSON.stringify(real));
      snap.mono_ms = monoEnd + 1000;
      const set = (fam, v) => { snap.metrics[fam].series = [{ labels: {}, value: v }]; };
      set("keel_connections_open", 12345);
      set("keel_bytes_received_total", n * 95.4 * 1024 * 1024);
      set("keel_bytes_sent_total", n * 40 * 1024 * 1024);
      snap.metrics.keel_http_requests_total.series = [
        { labels: { class: "2xx" }, value: n * 12000 }, { labels: { class: "3xx" }, value: n * 300 },
        { labels: { class: "4xx" }, value: n * 40 }, { labels: { class: "5xx" }, value: n * 5 }];
      const last = n - 1;
      snap.metrics.keel_http_request_duration_seconds.series = [{
        labels: {}, count: n * 12345, sum: 0,
        buckets: hist.keel_http_request_duration_seconds.le.map((le, b) =>
          [le, hist.keel_http_request_duration_seconds.cumulative[last][b] * n / last]) }];
      snap.metrics.keel_worker_loop_idle_seconds_total.series = [{
        labels: {}, value: 0, workers: hist.keel_worker_loop_idle_seconds_total[last].map((v, w) => v + 0.3 + 0.1 * w) }];
      const body = "retry: 600000\n\nevent: history\ndata: " + JSON.stringify(hist) +
        "\n\nevent: snapshot\ndata: " + JSON.stringify(snap) + "\n\n";
      await p.route(/\/__stats\/events$/, (route) => route.fulfill({ status: 200, contentType: "text/event-stream", body }));
      await p.goto(url);
      await p.waitForFunction(() => window.__keelStats.samples >= 1 && window.__keelStats.history > 0, null, { timeout: 15000 });
      // Let a resize-driven redraw settle (the ResizeObserver's first call).
      await p.evaluate(() => new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok))));
      const r = await p.evaluate(inspect);
      await p.screenshot({ path: path.join(out, `dashboard-${name}-${scheme}.png`), fullPage: true });
      checkTicks(r, where);
      const io = r.charts["c-io"].map((t) => t.text);
      if (!io.some((t) => /MiB$/.test(t))) fail(`${where}: the throughput axis is not in MiB: ${io.join(", ")}`);
      if (!/95\.4M/.test(r.io) || !/40\.0M/.test(r.io)) fail(`${where}: the in/out tile says "${r.io}"`);
      if (errs.length) fail("errors in the page: " + errs.join("; "));
      console.log(`ok: ${where}: ${Object.values(r.charts).reduce((a, t) => a + t.length, 0)} y labels inside their charts, nothing overflows; throughput ticks ${io.join(" ")}`);
      await p.close();
    }
  }
  console.log("screenshots: " + path.join(out, "dashboard-*.png"));
} finally {
  await browser.close();
}
