// What the browser tests share: playwright-core from the npm cache that
// install.sh fills, failing with a reason, deadlines, headless Chromium,
// and the errors a page reports.
import { createRequire } from "node:module";
import path from "node:path";

export const fail = (msg) => { console.error("FAIL: " + msg); process.exit(1); };

// Fails the test after ms unless it has ended by then.
export const deadline = (ms, what) => setTimeout(() => fail("timed out: " + what), ms).unref();

// The system's Chromium ($CHROMIUM, else /usr/bin/chromium), headless,
// driven by the playwright-core installed under modulesDir.
// extraArgs: more command-line switches (a host resolver rule, a key to
// trust).
export async function launch(modulesDir, extraArgs = []) {
  const require = createRequire(path.join(modulesDir || process.cwd(), "node_modules", "x.js"));
  const { chromium } = require("playwright-core");
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    // Root (CI) cannot use Chromium's sandbox; /dev/shm is small in containers.
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", ...extraArgs],
  });
}

// Collects the page's uncaught exceptions and console errors into an
// array, each prefixed with label when given.
export function pageErrors(page, label) {
  const errors = [];
  const add = (text) => errors.push(label ? label + ": " + text : text);
  page.on("pageerror", (e) => add(String(e)));
  page.on("console", (m) => { if (m.type() === "error") add(m.text()); });
  return errors;
}
