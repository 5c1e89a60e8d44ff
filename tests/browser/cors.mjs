// CORS in headless Chromium: the browser, not a test client, decides
// whether a cross-origin fetch() may read its answer, so this is the
// proof that the cors module's preflight and actual responses follow the
// Fetch standard's CORS protocol.
//   CORS_API=B CORS_OTHER=C node cors.mjs A OUT_DIR [NODE_MODULES_DIR]
// A page of origin A (allowed, with credentials) fetches B's POST /echo
// with a JSON body and an X-Token field: a non-simple request, so the
// browser sends a preflight first; it must succeed and read the echo. The
// same fetch asking for a field B does not allow must fail, and so must
// the same fetch from a page of origin C (not in the list). Saves
// OUT_DIR/cors.png.
import path from "node:path";
import { deadline, fail, launch } from "./lib.mjs";

const [base, out, modules] = process.argv.slice(2);
const api = process.env.CORS_API, other = process.env.CORS_OTHER;
if (!api || !other) fail("CORS_API and CORS_OTHER must name origins B and C");

deadline(100000, "the whole browser test"); // two pages; slow on a loaded machine
const browser = await launch(modules);

// Runs fetch(api + "/echo") in a page of `origin` with credentials.
async function call(page, extraHeader) {
  return page.evaluate(async ({ api, extraHeader }) => {
    const headers = { "Content-Type": "application/json", "X-Token": "t1" };
    if (extraHeader) headers[extraHeader] = "1";
    try {
      const r = await fetch(api + "/echo", {
        method: "POST", credentials: "include", headers, body: '{"hello":"cors"}',
      });
      return { ok: true, status: r.status, body: await r.text() };
    } catch (e) {
      return { ok: false, error: String(e) };
    }
  }, { api, extraHeader });
}

try {
  const context = await browser.newContext();
  const page = await context.newPage();
  const preflights = [];
  page.on("request", (r) => { if (r.method() === "OPTIONS") preflights.push(r.url()); });
  const res = await page.goto(base + "/app/index.html", { waitUntil: "load", timeout: 20000 });
  if (!res || res.status() !== 200) fail("A's page: " + (res && res.status()));
  const allowed = await call(page, null);
  if (!allowed.ok) fail("A's credentialed fetch failed: " + allowed.error);
  if (allowed.status !== 200 || allowed.body !== '{"hello":"cors"}')
    fail(`A's fetch: ${allowed.status} '${allowed.body}'`);
  const refusedHeader = await call(page, "X-Other");
  if (refusedHeader.ok) fail("a field B does not allow went through: " + refusedHeader.status);

  const page2 = await context.newPage();
  const res2 = await page2.goto(other + "/app/index.html", { waitUntil: "load", timeout: 20000 });
  if (!res2 || res2.status() !== 200) fail("C's page: " + (res2 && res2.status()));
  const refused = await call(page2, null);
  if (refused.ok) fail("C's fetch was allowed: " + refused.status + " " + refused.body);
  await page.screenshot({ path: path.join(out, "cors.png") });
  console.log(`ok: A's credentialed fetch read the echo; X-Other and origin C refused (${refused.error})`);
} finally {
  await browser.close();
}
