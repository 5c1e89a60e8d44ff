// The chat example (examples/chat) in two headless Chromium pages, driven
// by playwright-core.
//   node chat.mjs BASE_URL OUT_DIR [NODE_MODULES_DIR]
// keel runs examples/chat/chat.conf with two workers (run.sh). Two browser
// contexts (two separate connections, which the kernel spreads over the
// workers' listening sockets) open the page and join the room under
// different names; four more members join from the first page's script, so
// that the room almost surely spans both workers (all five on the second
// page's worker: 1 in 32). Checks: permessage-deflate negotiated on both
// pages; each page sees the other arrive (the first by its join, the
// second by the room's roll call, which names everyone already there, on
// every worker); messages both ways, sent through the page's form, arrive
// on the other page in order and with the right name, including quotes,
// backslashes, control characters, é, 漢字 and emoji (JSON escaping) and a
// long text (over the threshold of [websocket] compression, so sent
// compressed); a name that is not UTF-8 is refused by the room, a text
// over its 2000 bytes by the page without losing the connection; closing
// one page is announced to the other as a leave. Saves
// OUT_DIR/chat-1.png and chat-2.png. Exits non-zero with a reason on any
// failure; every wait is bounded.
import path from "node:path";
import { deadline, fail, launch, pageErrors } from "./lib.mjs";

const [base, out, modules] = process.argv.slice(2);
const WAIT = 10000; // any single step
const PROBES = ["probe 1", "probe 2", "probe 3", "probe 4"];

deadline(50000, "the whole chat test");
const browser = await launch(modules);

// A page in its own context, joined as name (through the form).
async function member(name) {
  const ctx = await browser.newContext({ viewport: { width: 900, height: 900 } });
  ctx.setDefaultTimeout(WAIT);
  const page = await ctx.newPage();
  const errors = pageErrors(page, name);
  await page.goto(base + "/");
  await page.fill("#name", name);
  await page.click("#join");
  await page.waitForFunction(() => window.chat.ws && window.chat.ws.readyState === WebSocket.OPEN,
    null, { timeout: WAIT }).catch(() => fail(name + ": the WebSocket did not open"));
  // Its own join comes back once it is subscribed to the room.
  await seen(page, (m, n) => m.type === "join" && m.name === n, name, name + " sees its own join");
  return { name, ctx, page, errors };
}

// Waits until the page's messages hold one for which pred(message, arg)
// is true (pred runs in the page).
async function seen(page, pred, arg, what) {
  await page.waitForFunction(([src, a]) => {
    const p = new Function("return " + src)();
    return window.chat.messages.some((m) => p(m, a));
  }, [pred.toString(), arg], { timeout: WAIT }).catch(() => fail("not seen: " + what));
}

const messages = (page) => page.evaluate(() => window.chat.messages);

// Sends text through the page's form (or, for what an input field cannot
// hold, such as control characters, straight on its WebSocket).
async function say(m, text) {
  if (/[\u0000-\u001f]/.test(text)) {
    await m.page.evaluate((t) => window.chat.ws.send(t), text);
    return;
  }
  await m.page.fill("#text", text);
  await m.page.click("#send");
}

try {
  const a = await member("Ada");
  // Other members, on either worker.
  await a.page.evaluate((names) => {
    window.probes = names.map((n) => new WebSocket(`ws://${location.host}/chat/ws?name=${encodeURIComponent(n)}`));
  }, PROBES);
  for (const n of PROBES) await seen(a.page, (m, x) => m.type === "join" && m.name === x, n, "Ada sees " + n + " join");

  const bName = 'Zoë "漢字" \\ 🙂';
  const b = await member(bName);
  await seen(a.page, (m, x) => m.type === "join" && m.name === x, bName, "Ada sees " + bName + " join");
  // The newcomer learns who is there from the roll call: one line per
  // worker with members, possibly naming someone twice.
  for (const n of ["Ada", ...PROBES])
    await seen(b.page, (m, x) => m.type === "members" && m.names.includes(x), n, bName + " is told " + n + " is here");

  // A name that is not UTF-8 is refused at the handshake: published, it
  // would make every browser in the room fail its connection.
  const bad = await a.page.evaluate(() => new Promise((ok) => {
    const w = new WebSocket(`ws://${location.host}/chat/ws?name=%FF`);
    w.onopen = () => ok("accepted");
    w.onclose = () => ok("refused");
  }));
  if (bad !== "refused") fail("a name of the byte 0xFF was accepted");
  const refusal = a.errors.findIndex((e) => /name=%FF.*400/.test(e)); // Chromium logs it
  if (refusal >= 0) a.errors.splice(refusal, 1);

  for (const m of [a, b]) {
    const st = await m.page.evaluate(() => ({ ext: window.chat.extensions, status: document.getElementById("status").textContent }));
    if (!/permessage-deflate/.test(st.ext)) fail(m.name + ": no permessage-deflate, extensions: " + JSON.stringify(st.ext));
    if (!st.status.includes("compression: permessage-deflate")) fail(m.name + ": status says " + JSON.stringify(st.status));
  }

  const long = "compressible 漢字 é 😀 ".repeat(12).trim(); // 300 bytes of UTF-8
  const sent = {
    Ada: ['say "hi"', "back\\slash \\n \\u0041 \\\"", "é 漢字 😀 👩‍👩‍👧", "ctl:\u0001\t\n\u001f end", long],
    [bName]: ["hello Ada", '{"type":"join","name":"x"}', "</li><b>not bold</b>", "日本語 ünïcödé 🎉", long + " (b)"],
  };
  // Both ways at once, alternating.
  for (let i = 0; i < sent.Ada.length; i++) {
    await say(a, sent.Ada[i]);
    await say(b, sent[bName][i]);
  }
  for (const [me, other] of [[a, b], [b, a]]) {
    const want = sent[other.name];
    await seen(me.page, (m, x) => m.type === "msg" && m.text === x, want[want.length - 1], me.name + " gets " + other.name + "'s last message");
    const got = (await messages(me.page)).filter((m) => m.type === "msg" && m.name === other.name).map((m) => m.text);
    if (JSON.stringify(got) !== JSON.stringify(want))
      fail(`${me.name} got from ${other.name} ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
    // Its own come back from the room too, in order.
    const own = (await messages(me.page)).filter((m) => m.type === "msg" && m.name === me.name).map((m) => m.text);
    if (JSON.stringify(own) !== JSON.stringify(sent[me.name])) fail(`${me.name}'s own messages came back as ${JSON.stringify(own)}`);
    // Shown as text, not markup: one <b> (the name) per message line.
    const log = await me.page.evaluate(() => ({
      text: document.getElementById("log").textContent,
      lines: document.querySelectorAll("#log li:not(.note)").length,
      bold: document.querySelectorAll("#log li b").length,
    }));
    if (!log.text.includes(other.name + ": " + want[0])) fail(me.name + "'s log does not show " + other.name + "'s first message");
    if (log.bold !== log.lines) fail(`${me.name}'s log: ${log.bold} <b> in ${log.lines} messages (markup from a message?)`);
  }

  // Over 2000 bytes (maxlength counts 1001 characters): the page refuses it
  // and stays connected.
  await a.page.fill("#text", "é".repeat(1001));
  await a.page.click("#send");
  await a.page.waitForFunction(() => /not sent: 2002 bytes/.test(document.getElementById("log").textContent),
    null, { timeout: WAIT }).catch(() => fail("the page did not refuse a text of 2002 bytes"));
  if ((await a.page.evaluate(() => window.chat.ws.readyState)) !== 1) fail("Ada lost the connection over a long text");

  const shots = [path.join(out, "chat-1.png"), path.join(out, "chat-2.png")];
  await a.page.screenshot({ path: shots[0] });
  await b.page.screenshot({ path: shots[1] });

  // Closing a page closes its WebSocket: the room says so.
  await b.ctx.close();
  await seen(a.page, (m, x) => m.type === "leave" && m.name === x, bName, "Ada sees " + bName + " leave");
  await a.page.evaluate(() => window.probes.forEach((w) => w.close()));
  for (const n of PROBES) await seen(a.page, (m, x) => m.type === "leave" && m.name === x, n, "Ada sees " + n + " leave");
  const errors = [...a.errors, ...b.errors];
  if (errors.length) fail("errors in the pages: " + errors.join("; "));

  const n = (await messages(a.page)).length;
  console.log(`ok: ${n} messages on Ada's page, extensions ${JSON.stringify(await a.page.evaluate(() => window.chat.extensions))}`);
  console.log(`screenshots: ${shots.join(" ")}`);
} finally {
  await browser.close();
}
