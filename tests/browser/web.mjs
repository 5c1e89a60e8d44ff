// What a browser decides about a site, in headless Chromium against keel
// (run.sh web): the browser, not a test client, follows the redirects,
// answers the Basic authentication challenge, upgrades to HTTPS by HSTS
// and sends the CORS preflight, so each check here shows keel's answers
// are what a browser acts on.
//   WEB_SPKI=... WEB_PLAIN=P WEB_SECURE=S WEB_LOG=access.log \
//     node web.mjs https://127.0.0.1:S OUT_DIR [NODE_MODULES_DIR]
// Host names (site.test, redir.test, api.test) reach 127.0.0.1 through
// Chromium's resolver rules; nothing leaves the machine.
import fs from "node:fs";
import path from "node:path";
import { deadline, fail, launch } from "./lib.mjs";

const [, out, modules] = process.argv.slice(2);
const spki = process.env.WEB_SPKI, plain = process.env.WEB_PLAIN, secure = process.env.WEB_SECURE;
const logPath = process.env.WEB_LOG;
if (!spki || !plain || !secure || !logPath) fail("WEB_SPKI, WEB_PLAIN, WEB_SECURE and WEB_LOG");

deadline(110000, "the whole browser test");
const browser = await launch(modules, [
  "--host-resolver-rules=MAP *.test 127.0.0.1",
  "--ignore-certificate-errors-spki-list=" + spki,
]);
const https = (host, p) => `https://${host}:${secure}${p}`;
const http = (host, port, p) => `http://${host}:${port}${p}`;

// The access log's lines for a path, waited for (keel writes it in the
// background): "METHOD STATUS" each.
async function logged(what, want) {
  for (let i = 0; i < 100; i++) {
    const lines = fs.existsSync(logPath) ? fs.readFileSync(logPath, "utf8").split("\n") : [];
    const got = lines.filter((l) => l.includes(what)).map((l) => {
      const m = l.match(/"(\S+) \S+ HTTP\/[\d.]+" (\d+)/);
      return m ? `${m[1]} ${m[2]}` : l;
    });
    if (got.length >= want) return got;
    await new Promise((r) => setTimeout(r, 50));
  }
  fail(`the access log has no ${want} line(s) for ${what}: ${fs.readFileSync(logPath, "utf8")}`);
}

try {
  const context = await browser.newContext();
  const page = await context.newPage();

  // ---- redirects --------------------------------------------------------
  // HTTP to HTTPS: the plain listener's `return = 301 https://$https_host
  // $request_uri`; the browser lands on the TLS listener with the path and
  // query kept.
  const res = await page.goto(http("redir.test", plain, "/www/index.html?x=1"), { timeout: 20000 });
  if (!res || res.status() !== 200) fail("HTTP to HTTPS: " + (res && res.status()));
  if (res.url() !== https("redir.test", "/www/index.html?x=1")) fail("landed on " + res.url());
  const hop = res.request().redirectedFrom();
  const hopRes = hop && (await hop.response());
  if (!hop || hop.url() !== http("redir.test", plain, "/www/index.html?x=1") || hopRes.status() !== 301)
    fail("the chain: " + (hop ? `${hop.url()} ${hopRes && hopRes.status()}` : "no redirect"));
  // 308 keeps the method and the body (RFC 9110 15.4.9); 301 lets the
  // browser turn a POST into a GET (15.4.2), which /echo (POST only)
  // answers 405.
  const posted = await page.evaluate(async () => {
    const go = async (p) => {
      const r = await fetch(p, { method: "POST", body: "kept" });
      return { status: r.status, redirected: r.redirected, url: r.url, body: await r.text() };
    };
    return { r308: await go("/old308/"), r301: await go("/old301/") };
  });
  if (posted.r308.status !== 200 || !posted.r308.redirected || posted.r308.body !== "kept")
    fail("308 did not keep the POST: " + JSON.stringify(posted.r308));
  if (posted.r301.status !== 405 || !posted.r301.redirected)
    fail("301 after a POST should reach /echo as GET (405): " + JSON.stringify(posted.r301));
  const echo = await logged(" /echo HTTP", 2);
  if (!echo.includes("POST 200") || !echo.includes("GET 405"))
    fail("/echo was asked " + echo.join(", ") + ", not POST (after 308) and GET (after 301)");

  // ---- CORS: a page of https://redir.test fetches api.test ---------------
  // A JSON POST with X-Token is not simple: the browser asks first
  // (OPTIONS), keel's cors answers for the listed origin, then the POST
  // goes and its answer is readable.
  const cors = await page.evaluate(async (api) => {
    try {
      const r = await fetch(api + "/echo", {
        method: "POST", headers: { "Content-Type": "application/json", "X-Token": "t" },
        body: '{"a":1}',
      });
      return { ok: true, status: r.status, body: await r.text() };
    } catch (e) {
      return { ok: false, error: String(e) };
    }
  }, https("api.test", ""));
  if (!cors.ok || cors.status !== 200 || cors.body !== '{"a":1}')
    fail("the cross-origin POST: " + JSON.stringify(cors));
  const corsLines = await logged(" /echo HTTP", 4);
  if (!corsLines.includes("OPTIONS 204")) fail("no preflight answered 204: " + corsLines.join(", "));

  // ---- Basic authentication ---------------------------------------------
  // Without credentials the browser is challenged (a 401 naming the
  // realm: the prompt a user would see) and, with nobody to answer it in
  // a headless run, does not get in (Playwright cancels the prompt:
  // net::ERR_INVALID_AUTH_CREDENTIALS, or the 401 shown).
  const seen = [];
  const onResponse = (r) => { if (r.url().endsWith("/private/")) seen.push(r); };
  page.on("response", onResponse);
  const anon = await page.goto(https("redir.test", "/private/")).catch((e) => String(e));
  page.off("response", onResponse);
  if (typeof anon === "string" ? !anon.includes("ERR_INVALID_AUTH_CREDENTIALS") : anon.status() !== 401)
    fail("got in without credentials: " + (typeof anon === "string" ? anon : anon.status()));
  const challenge = seen.length ? await seen[0].headerValue("www-authenticate") : null;
  if (!seen.length || seen[0].status() !== 401 || !/^Basic realm="keel-members"/.test(challenge || ""))
    fail(`no challenge: ${seen.length && seen[0].status()} ${challenge}`);
  // With credentials for the prompt (page.authenticate's successor,
  // httpCredentials): asked without, challenged, asked again with them.
  const asked = (await logged(" /private/ HTTP", 1)).length;
  const member = await browser.newContext({
    httpCredentials: { username: "demo", password: "demo-password" },
  });
  const mp = await member.newPage();
  const inside = await mp.goto(https("redir.test", "/private/"));
  if (!inside || inside.status() !== 200 || !(await inside.text()).includes("for members"))
    fail("the member's page: " + (inside && inside.status()));
  const privateLines = await logged(" /private/ HTTP", asked + 2);
  if (privateLines.slice(asked, asked + 2).join(",") !== "GET 401,GET 200")
    fail("challenge then credentials expected: " + privateLines.join(", "));
  // Credentials in the URL answer the challenge too; a wrong password
  // does not get in.
  const inUrl = await mp.goto(`https://demo:demo-password@redir.test:${secure}/private/`);
  if (!inUrl || inUrl.status() !== 200) fail("credentials in the URL: " + (inUrl && inUrl.status()));
  const wrong = await browser.newContext({ httpCredentials: { username: "demo", password: "nope" } });
  const wp = await wrong.newPage();
  // Chromium gives up on credentials the server keeps refusing
  // (net::ERR_INVALID_AUTH_CREDENTIALS) or shows the last 401.
  const refused = await wp.goto(https("redir.test", "/private/")).catch((e) => String(e));
  if (typeof refused === "string" ? !refused.includes("ERR_INVALID_AUTH_CREDENTIALS")
                                  : refused.status() !== 401)
    fail("a wrong password: " + (typeof refused === "string" ? refused : refused.status()));

  // ---- HSTS -------------------------------------------------------------
  // http:// to the TLS port: plain HTTP there is answered 400 by the tls
  // module; once the browser knows the host wants HTTPS it never sends it.
  const before = await page.goto(http("site.test", secure, "/www/index.html"));
  if (!before || before.status() !== 400) fail("before HSTS: " + (before && before.status()));
  const first = await page.goto(https("site.test", "/www/index.html"));
  if (!first || first.status() !== 200 || (await first.headerValue("strict-transport-security")) !== "max-age=600")
    fail("the HTTPS visit's HSTS field: " + (first && (await first.headerValue("strict-transport-security"))));
  const after = await page.goto(http("site.test", secure, "/www/index.html"));
  if (!after || after.status() !== 200 || after.url() !== https("site.test", "/www/index.html"))
    fail(`after HSTS: ${after && after.status()} ${after && after.url()}`);
  const internal = after.request().redirectedFrom();
  const internalRes = internal && (await internal.response());
  if (!internal || internal.url() !== http("site.test", secure, "/www/index.html") ||
      internalRes.status() !== 307)
    fail("no internal redirect: " + (internal ? `${internal.url()} ${internalRes && internalRes.status()}` : "none"));
  // An IP address is never an HSTS host (RFC 6797 8.1): the same visits
  // by 127.0.0.1 leave http:// alone.
  await page.goto(`https://127.0.0.1:${secure}/www/index.html`);
  const ip = await page.goto(`http://127.0.0.1:${secure}/www/index.html`);
  if (!ip || ip.status() !== 400) fail("HSTS applied to an IP address: " + (ip && ip.status()));

  await page.goto(https("site.test", "/www/index.html"));
  await page.screenshot({ path: path.join(out, "web.png") });
  console.log("ok: HTTP to HTTPS (301), 308 kept a POST and 301 made it GET; the CORS preflight; " +
    "the Basic challenge answered by credentials and by the URL, refused for a wrong password; " +
    "HSTS upgraded http:// by name (307 internal), not by IP address");
} finally {
  await browser.close();
}
