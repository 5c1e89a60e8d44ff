// examples/configs/spa.conf in headless Chromium, driven by playwright-core:
// the app loads at /, a click navigates client-side to /users/42 (no
// document request: history.pushState), a reload of that deep link gets
// the app again from the server (static's `try` fallback, 200) which draws
// the same view, a deep link opened directly does too, and a missing asset
// is a 404 with the site's page, not the app.
//   node spa.mjs BASE_URL OUT_DIR [NODE_MODULES_DIR]
// Saves OUT_DIR/spa.png. Exits non-zero with a reason on any failure.
import path from "node:path";
import { deadline, fail, launch, pageErrors } from "./lib.mjs";

const [base, out, modules] = process.argv.slice(2);

deadline(60000, "the whole browser test");
const browser = await launch(modules);
try {
  const page = await browser.newPage({ viewport: { width: 800, height: 600 } });
  const errors = pageErrors(page);
  const documents = [];
  page.on("request", (r) => { if (r.resourceType() === "document") documents.push(new URL(r.url()).pathname); });

  let res = await page.goto(base + "/");
  if (res.status() !== 200) fail("/ answered " + res.status());
  await page.waitForFunction(() => document.title === "spa:home", null, { timeout: 5000 });

  // Client-side navigation: the view changes, no document is fetched.
  await page.evaluate(() => { window.__sameDocument = true; });
  await page.click("text=user 42");
  await page.waitForFunction(() => document.title === "spa:user 42", null, { timeout: 5000 });
  if (new URL(page.url()).pathname !== "/users/42") fail("the URL is " + page.url());
  if (!(await page.evaluate(() => window.__sameDocument === true))) fail("the click loaded a new document");
  if (documents.length !== 1) fail("documents fetched: " + documents.join(" "));

  // A reload of the deep link: the server answers it with the app.
  res = await page.reload();
  if (res.status() !== 200) fail("reload of /users/42 answered " + res.status());
  await page.waitForFunction(() => document.title === "spa:user 42", null, { timeout: 5000 });
  if (await page.evaluate(() => window.__sameDocument === true)) fail("the reload kept the old document");
  if (documents[documents.length - 1] !== "/users/42") fail("the reload fetched " + documents.join(" "));

  // A deep link opened directly, then history back across the pushState.
  res = await page.goto(base + "/users/7");
  if (res.status() !== 200) fail("/users/7 answered " + res.status());
  await page.waitForFunction(() => document.title === "spa:user 7", null, { timeout: 5000 });
  await page.click("text=home");
  await page.waitForFunction(() => document.title === "spa:home", null, { timeout: 5000 });
  await page.goBack();
  await page.waitForFunction(() => document.title === "spa:user 7", null, { timeout: 5000 });
  await page.screenshot({ path: path.join(out, "spa.png") });

  // A missing asset is a 404 with the site's page, never the app.
  res = await page.goto(base + "/assets/missing.js");
  if (res.status() !== 404) fail("/assets/missing.js answered " + res.status());
  const body = await res.text();
  if (!body.includes("There is no such file here.") || body.includes("/assets/app.js"))
    fail("/assets/missing.js got: " + body.slice(0, 200));

  // The 404 above is the one error expected in the console.
  const unexpected = errors.filter((e) => !/404/.test(e));
  if (unexpected.length > 0) fail("page errors: " + unexpected.join("; "));
  console.log("spa: client-side routes, reloads and deep links get the app; missing assets a 404");
} finally {
  await browser.close();
}
