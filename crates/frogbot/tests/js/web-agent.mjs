// Drives the web chat at `/` in headless Chromium (Debian's /usr/bin/chromium through
// playwright-core) on a chat an outside agent talks in (the rply messages model).
//
//   node web-agent.mjs http://127.0.0.1:PORT CHAT_ID [SCREENSHOT.png] [PERSON_TOKEN]
//
// The person is the configured user the agent opened the chat for (its token in the page).
//
// The agent is the caller (tests/web_chat.rs): it posted the messages before this starts, and
// each change it makes while the page is open is asked for with a line `agent: ACTION` on stdout,
// answered with `ok` (or `fail: why`) on stdin. Checks the blocks (and that agent data never runs
// as HTML), a pin above the thread that returns to its place when unpinned, an app in a sandboxed
// iframe and its events through the app bridge (only the block's own, only from the app), an
// event button's click (and a stale one), an edit and a deletion shown live, the person
// unpinning the app, and the
// acknowledgement badges. Prints `web-agent: ok` and exits 0, or `web-agent: FAIL …` and exits 1.
import { mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const base = (process.argv[2] || "").replace(/\/$/, "");
const chatId = process.argv[3] || "";
const shot = process.argv[4] || join(process.cwd(), "web-agent.png");
const personToken = process.argv[5] || "";
if (!base || !chatId) {
  console.error("usage: node web-agent.mjs BASE_URL CHAT_ID [SCREENSHOT.png]");
  process.exit(2);
}
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const profile = mkdtempSync(join(tmpdir(), "frogbot-web-agent-"));
const problems = [];
let context;

const replies = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

/** Asks the agent (the Rust test) to do `action` and waits for its answer. */
async function agent(action) {
  console.log(`agent: ${action}`);
  const { value, done: ended } = await replies.next();
  if (ended) throw new Error(`no answer to ${action}`);
  if (!value.startsWith("ok")) throw new Error(`${action}: ${value}`);
}

function done(code, line) {
  console.log(line);
  if (problems.length) console.log("  page problems:\n    " + problems.join("\n    "));
  const close = context ? context.close().catch(() => {}) : Promise.resolve();
  close.finally(() => {
    rmSync(profile, { recursive: true, force: true });
    process.exit(code);
  });
}

const timer = setTimeout(() => done(1, "web-agent: FAIL timed out after 120 s"), 120_000);

async function step(name, fn) {
  try {
    return await fn();
  } catch (err) {
    const page = context && context.pages()[0];
    if (page) {
      try {
        mkdirSync(dirname(shot), { recursive: true });
        await page.screenshot({ path: shot, fullPage: true });
        console.log(`  (screenshot of the failure: ${shot})`);
        const html = await page.locator("#main").innerHTML();
        console.log("  #main: " + html.slice(0, 4000));
      } catch (_) { /* best effort */ }
    }
    clearTimeout(timer);
    done(1, `web-agent: FAIL ${name}: ${err && err.message ? err.message.split("\n")[0] : err}`);
    await new Promise(() => {}); // exit happens in done()
  }
}

function check(cond, what, detail) {
  if (!cond) throw new Error(what + (detail === undefined ? "" : `: ${JSON.stringify(detail)}`));
}

context = await step("launch chromium", () =>
  chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1200, height: 900 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic",
    ],
  }),
);
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(20_000);
page.on("pageerror", (err) => problems.push(`pageerror: ${err.message}`));
page.on("console", (msg) => {
  if (msg.type() === "error") problems.push(`console.error: ${msg.text()}`);
});
page.on("dialog", (d) => {
  problems.push(`pageerror: a dialog opened: ${d.message()}`);
  d.dismiss().catch(() => {});
});

const thread = (id) => page.locator(`#message-list .message[data-message-id="${id}"]`);
const threadOrder = () =>
  page.$$eval("#message-list .message", (els) => els.map((e) => e.dataset.messageId));

await step("open the page", async () => {
  await page.goto(`${base}/#chat=${chatId}`);
  if (personToken) {
    await page.evaluate((t) => localStorage.setItem("frogbot.token", t), personToken);
    await page.reload();
  }
  await thread("m-blocks").waitFor();
  // Set once: still there at the end means nothing reloaded the page.
  await page.evaluate(() => { window.__loadedOnce = true; });
});

await step("the title and every block type are drawn", async () => {
  const m = thread("m-blocks");
  await m.locator(".msg-title", { hasText: "Build report" }).waitFor();
  await m.locator(".bubble", { hasText: "All the blocks:" }).waitFor();
  // table
  await m.locator("table thead th", { hasText: "Name" }).waitFor();
  const cells = await m.locator("table tbody td").allTextContents();
  check(cells.includes("<script>window.__xss = 1</script>"), "the script cell is text", cells);
  check(cells.includes('<img src=x onerror="window.__xss = 2">'), "the img cell is text", cells);
  check(cells.includes("42") && cells.includes("plain"), "plain cells", cells);
  // progress
  await m.locator('progress[value="3"][max="4"]').waitFor();
  await m.locator(".progress-label", { hasText: "Steps" }).waitFor();
  await m.locator(".progress-pct", { hasText: "75%" }).waitFor();
  // image
  const img = m.locator('img[alt="A frog"]');
  await img.waitFor({ state: "attached" });
  check((await img.getAttribute("loading")) === "lazy", "the image loads lazily");
  check((await img.getAttribute("referrerpolicy")) === "no-referrer", "the image sends no referrer");
  // code
  await m.locator("pre code.language-rust", { hasText: "fn main() {}" }).waitFor();
  // fields
  await m.locator("dl dt", { hasText: "Branch" }).waitFor();
  await m.locator("dl dd", { hasText: "main" }).waitFor();
  await m.locator("dl dd", { hasText: "<b>bold?</b>" }).waitFor();
  // a type this version does not know
  await m.locator(".block-unknown", { hasText: "Update FrogBot to see it." }).waitFor();
  // the event buttons
  await m.locator('button.event[data-value="approve"]', { hasText: "Approve" }).waitFor();
});

await step("the agent's files are shown: the image drawn, the text file to download", async () => {
  const m = thread("m-files");
  await m.locator('.file-part img[alt="chart.png"]').waitFor();
  await page.waitForFunction(() => {
    const i = document.querySelector('[data-message-id="m-files"] .file-part img[alt="chart.png"]');
    return i && i.complete && i.naturalWidth === 1 && i.src.startsWith("blob:");
  });
  await page.waitForFunction(() => {
    const a = document.querySelector('[data-message-id="m-files"] .file-part a[download="notes.txt"]');
    return a && a.href.startsWith("blob:");
  });
  const text = await m.innerText();
  if (!text.includes("Here are the files")) throw new Error(`the text is missing: ${text}`);
});

await step("agent data never runs as HTML", async () => {
  const xss = await page.evaluate(() => ({
    flag: window.__xss === undefined ? null : window.__xss,
    imgs: document.querySelectorAll("#message-list td img, #message-list dd b, #message-list .msg-title img").length,
    scripts: [...document.querySelectorAll("#main script")].length,
  }));
  check(xss.flag === null && xss.imgs === 0 && xss.scripts === 0, "agent text became HTML", xss);
});

await step("the pin is above the thread, not in it", async () => {
  const pin = page.locator('#pins .pin[data-pin="status"]');
  await pin.locator(".bubble", { hasText: "Deploying 1/3" }).waitFor();
  check((await thread("m-status").count()) === 0, "the pinned message is not in the thread");
  const pins = await page.locator("#pins").boundingBox();
  const msgs = await page.locator("#messages").boundingBox();
  check(pins && msgs && pins.y + pins.height <= msgs.y + 1, "the pins are above the thread", { pins, msgs });
});

await step("the app is a sandboxed iframe without same origin", async () => {
  const frame = page.locator('#pins .pin.app[data-pin="dashboard"] iframe.app-frame');
  await frame.waitFor();
  const sandbox = await frame.getAttribute("sandbox");
  check(sandbox === "allow-scripts", "sandbox is allow-scripts only", sandbox);
  check(!/same-origin/.test(sandbox || ""), "no allow-same-origin", sandbox);
  const box = await frame.boundingBox();
  check(box && box.width >= 600 && box.height >= 300, "the app is shown full-size", box);
  // Its script ran, in its own origin: the page and its token are out of its reach.
  const inner = page.frameLocator('#pins .pin.app iframe.app-frame');
  await inner.locator("#app", { hasText: "app ran" }).waitFor();
  await inner.locator("body[data-blocked='1']").waitFor({ state: "attached" });
  const pwned = await page.evaluate(() => document.body.dataset.pwned || null);
  check(pwned === null, "the app reached into the page");
  check((await thread("m-app").count()) === 0, "the app is not in the thread");
});

await step("an app sends its block's events through the bridge, and only those", async () => {
  const posted = [];
  page.on("request", (r) => {
    if (r.url().endsWith("/block-events")) posted.push(r.postDataJSON());
  });
  const inner = page.frameLocator('#pins .pin.app iframe.app-frame');
  // The page itself posting the bridge's message is no app: nothing is sent.
  await page.evaluate(() => window.postMessage({ type: "frogbot:event", value: "refresh" }, "*"));
  await inner.locator("#ev").click();
  await inner.locator("body[data-result-refresh='true']").waitFor({ state: "attached" });
  await agent("inbox-app-event");
  // A value the block does not offer is refused (as a stale button): the app hears `sent:
  // false`. Clicked until the bridge's one-a-second limit lets it through.
  for (let i = 0; i < 20; i++) {
    await inner.locator("#bad").click();
    const told = await inner.locator("body[data-result-drop-tables]").count();
    if (told) break;
    await page.waitForTimeout(150);
  }
  await inner.locator("body[data-result-drop-tables='false']").waitFor({ state: "attached" });
  check(posted.length === 2 && posted[0].value === "refresh" && posted[0].blockId === "dash"
    && posted[1].value === "drop-tables", "the bridge sent only the app's own events, one a second", posted);
});

await step("screenshot", async () => {
  mkdirSync(dirname(shot), { recursive: true });
  await page.screenshot({ path: shot });
  // The blocks whole: a tall window, so the pinned app leaves the thread room.
  await page.setViewportSize({ width: 1200, height: 2400 });
  await thread("m-blocks").screenshot({ path: shot.replace(/(\.png)?$/, "-blocks.png") });
  await page.setViewportSize({ width: 1200, height: 900 });
});

await step("an event button sends its event", async () => {
  const btn = thread("m-blocks").locator('button.event[data-value="approve"]');
  await btn.click();
  await thread("m-blocks").locator('button.event[data-state="sent"]').waitFor();
  await agent("inbox-event");
});

await step("a stale button says it is no longer available", async () => {
  // The server's answer when the button went away before the page learned of it.
  await page.route("**/block-events", (route) =>
    route.fulfill({
      status: 409,
      contentType: "application/json",
      body: JSON.stringify({ error: { code: "stale", message: "that message, block or button is gone" } }),
    }));
  await thread("m-blocks").locator('button.event[data-value="Reject"]').click();
  await thread("m-blocks").locator('button.event[data-state="stale"]', { hasText: "no longer available" }).waitFor();
  await page.unroute("**/block-events");
});

await step("an edit shows live", async () => {
  await thread("m-edit").locator(".bubble", { hasText: "version one" }).waitFor();
  await agent("edit");
  await thread("m-edit").locator(".bubble", { hasText: "version two" }).waitFor();
  await thread("m-edit").locator(".meta .edited").waitFor();
});

await step("a patched block shows live", async () => {
  await agent("patch-progress");
  await thread("m-blocks").locator('progress[value="4"][max="4"]').waitFor();
  await thread("m-blocks").locator(".progress-pct", { hasText: "100%" }).waitFor();
});

await step("a deletion removes the message live", async () => {
  await thread("m-delete").waitFor();
  await agent("delete");
  await thread("m-delete").waitFor({ state: "detached" });
});

await step("an unpinned message returns to its place in the thread", async () => {
  await agent("unpin");
  await thread("m-status").locator(".bubble", { hasText: "Deploying 1/3" }).waitFor();
  await page.locator('#pins .pin[data-pin="status"]').waitFor({ state: "detached" });
  const order = await threadOrder();
  const at = order.indexOf("m-status");
  check(at > 0 && order[at - 1] === "m-blocks" && order[at + 1] === "m-after", "m-status between m-blocks and m-after", order);
  // The app stays pinned.
  await page.locator('#pins .pin.app[data-pin="dashboard"]').waitFor();
});

await step("the person's message gets Seen, Working and Done badges", async () => {
  await page.locator("#composer textarea").fill("hello agent");
  await page.locator("#send").click();
  const mine = page.locator(".message.user", { hasText: "hello agent" });
  await mine.waitFor();
  await agent("take");
  await mine.locator('.ack[data-ack="seen"]').waitFor();
  await agent("working");
  await mine.locator('.ack[data-ack="working"]').waitFor();
  await agent("done");
  await mine.locator('.ack[data-ack="done"]', { hasText: "done" }).waitFor();
});

await step("the person unpins the app: it returns to its place in the thread", async () => {
  const pin = page.locator('#pins .pin.app[data-pin="dashboard"]');
  await pin.locator("button.unpin").click();
  await pin.waitFor({ state: "detached" });
  await thread("m-app").waitFor();
  const order = await threadOrder();
  const at = order.indexOf("m-app");
  check(at > 0 && order[at - 1] === "m-after", "m-app after m-after, where it was posted", order);
  await agent("app-unpinned");
});

await step("nothing reloaded the page", async () => {
  const same = await page.evaluate(() => window.__loadedOnce === true);
  check(same, "the page reloaded");
});

await step("final screenshot", async () => {
  await page.screenshot({ path: shot.replace(/(\.png)?$/, "-after.png") });
});

// A Content-Security-Policy violation (the page's or an app frame's) is a console error: fatal too.
const fatal = problems.filter((p) => p.startsWith("pageerror") || /Content Security Policy/i.test(p));
clearTimeout(timer);
if (fatal.length) done(1, "web-agent: FAIL the page threw errors or broke its Content-Security-Policy");
else done(0, `web-agent: ok (chat ${chatId}; screenshot ${shot})`);
