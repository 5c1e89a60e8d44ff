// HTTP/2 in headless Chromium: a page with 80 assets (40 scripts, 40
// style sheets) over HTTPS, where the tls module negotiates ALPN "h2" and
// hands the connection to the h2 module.
//   node h2.mjs BASE_URL OUT_DIR [NODE_MODULES_DIR]
// Checks that every asset loaded, that the page and each asset came over
// HTTP/2 (the Resource Timing API's nextHopProtocol), and that keel saw
// them as streams of one connection (its /metrics: h2_connections_total,
// h2_streams_total). Saves OUT_DIR/h2.png. Exits non-zero with a reason.
import path from "node:path";
import { deadline, fail, launch, pageErrors } from "./lib.mjs";

const [base, out, modules] = process.argv.slice(2);

deadline(45000, "the whole browser test");
const browser = await launch(modules);
try {
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  const errors = pageErrors(page);
  const response = await page.goto(base + "/index.html", { waitUntil: "load", timeout: 20000 });
  if (!response || response.status() !== 200) fail("index.html: " + (response && response.status()));
  const seen = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    // The page's own assets (Chromium may add others: a favicon).
    const res = performance.getEntriesByType("resource").filter((r) => /\/[sc]\d+\.(js|css)$/.test(r.name));
    return {
      scripts: window.__scripts || 0,
      sheets: document.styleSheets.length,
      nav: nav && nav.nextHopProtocol,
      resources: res.length,
      protocols: [...new Set(res.map((r) => r.nextHopProtocol))],
    };
  });
  if (seen.nav !== "h2") fail("the page came over " + seen.nav + ", not h2");
  if (seen.scripts !== 40) fail(`${seen.scripts} of 40 scripts ran`);
  if (seen.sheets !== 40) fail(`${seen.sheets} of 40 style sheets loaded`);
  if (seen.resources !== 80) fail(`${seen.resources} resources, expected 80`);
  if (seen.protocols.length !== 1 || seen.protocols[0] !== "h2")
    fail("assets came over " + seen.protocols.join(", "));
  // keel's side: one HTTP/2 connection carried the page and its assets.
  const metrics = await page.evaluate(async () => (await fetch("/metrics")).text());
  const value = (name) => {
    const line = metrics.split("\n").find((l) => l.startsWith(name + " ") || l.startsWith(name + "{"));
    return line ? Number(line.split(" ").pop()) : NaN;
  };
  const conns = value("h2_connections_total"), streams = value("h2_streams_total");
  if (conns !== 1) fail(`h2_connections_total ${conns}, expected 1`);
  if (!(streams >= 82)) fail(`h2_streams_total ${streams}, expected at least 82`);
  if (errors.length) fail("page errors: " + errors.join("; "));
  await page.screenshot({ path: path.join(out, "h2.png") });
  console.log(`ok: 80 assets over h2, ${streams} streams on ${conns} connection`);
} finally {
  await browser.close();
}
