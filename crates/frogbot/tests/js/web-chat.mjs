// Drives the web chat at `/` in headless Chromium (Debian's /usr/bin/chromium through
// playwright-core; no browser download).
//
//   node web-chat.mjs http://127.0.0.1:PORT [SCREENSHOT.png]
//
// Sends a slow message and a second one (queued, with its badge), then `ask`, answers the
// question with a click on "Red" and waits for the agent's continued reply. Writes the screenshot
// (and SCREENSHOT-question.png while the question waits). Prints `web-chat: ok` and exits 0, or
// `web-chat: FAIL …` and exits 1.
import { mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { chromium } from "playwright-core";

const base = (process.argv[2] || "").replace(/\/$/, "");
const shot = process.argv[3] || join(process.cwd(), "web-chat.png");
if (!base) {
  console.error("usage: node web-chat.mjs BASE_URL [SCREENSHOT.png]");
  process.exit(2);
}
const shotQuestion = shot.replace(/(\.png)?$/, "-question.png");
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const profile = mkdtempSync(join(tmpdir(), "frogbot-web-chat-"));
const problems = [];
let context;

function done(code, line) {
  console.log(line);
  if (problems.length) console.log("  page problems:\n    " + problems.join("\n    "));
  const close = context ? context.close().catch(() => {}) : Promise.resolve();
  close.finally(() => {
    rmSync(profile, { recursive: true, force: true });
    process.exit(code);
  });
}

const timer = setTimeout(() => done(1, "web-chat: FAIL timed out after 90 s"), 90_000);

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
        console.log("  #main: " + html.slice(0, 3000));
      } catch (_) { /* best effort */ }
    }
    clearTimeout(timer);
    done(1, `web-chat: FAIL ${name}: ${err && err.message ? err.message.split("\n")[0] : err}`);
    await new Promise(() => {}); // exit happens in done()
  }
}

context = await step("launch chromium", () =>
  chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1200, height: 760 },
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

const chatId = `web-test-${Date.now().toString(36)}`;
await step("open the page", async () => {
  await page.goto(`${base}/#chat=${chatId}`);
  await page.locator("#composer textarea").waitFor({ state: "visible" });
});

async function send(text) {
  await page.locator("#composer textarea").fill(text);
  await page.locator("#send").click();
}

// A slow turn (6 s: the page must see it run even on a loaded machine), and a message sent
// meanwhile: queued, then answered.
await step("slow turn runs", async () => {
  await send("slow 6");
  await page.locator("#state[data-state=running]").waitFor();
  await page.locator("#steer-option").waitFor({ state: "visible" });
});
await step("a second message is queued", async () => {
  await send("hi again");
  await page.locator(".message.user.queued .badge.queued").waitFor();
});
await step("the slow reply and the queued message's reply arrive", async () => {
  await page.locator(".message.assistant", { hasText: "You said: slow 6" }).waitFor();
  await page.locator(".message.assistant", { hasText: "You said: hi again" }).waitFor();
  await page.locator(".message.queued").waitFor({ state: "detached" });
  await page.locator("#steer-option").waitFor({ state: "hidden" });
});

// Acknowledgements on the user's messages, and Stop on a running turn.
await step("user messages show their acknowledgement", async () => {
  await page.locator('.message.user .ack[data-ack="done"]', { hasText: "done" }).first().waitFor();
});
await step("Stop stops a running turn and keeps it marked", async () => {
  await send("slow 3600");
  await page.locator("#state[data-state=running]").waitFor();
  await page.locator('.message.user .ack[data-ack="working"]').waitFor();
  await page.locator("#stop").click();
  await page.locator(".message.assistant", { hasText: "(stopped)" }).waitFor();
  await page.locator("#state[data-state=idle]").waitFor();
  await page.locator("#stop").waitFor({ state: "hidden" });
});
await step("the chat is listed", () => page.locator(`#chat-list .chat-item[data-chat-id="${chatId}"]`).waitFor());

// A question, answered with a click.
await step("ask shows the question", async () => {
  await send("Please ask me a question");
  await page.locator('.question button[data-label="Red"]').waitFor();
  await page.locator(".question .q-header", { hasText: "Colour" }).waitFor();
  await page.locator('.question button[data-label="Green"]').waitFor();
  await page.locator(".question input.custom-input").waitFor();
  await page.locator(".question button.dismiss").waitFor();
});
await step("screenshot of the question", async () => {
  mkdirSync(dirname(shotQuestion), { recursive: true });
  await page.screenshot({ path: shotQuestion });
});
await step("answer Red", () => page.locator('.question button[data-label="Red"]').click());
await step("the agent continues", async () => {
  await page.locator(".message.assistant", { hasText: "You chose Colour: Red." }).waitFor();
  await page.locator(".question").waitFor({ state: "detached" });
  await page.locator("#state[data-state=idle]").waitFor();
});
await step("screenshot", async () => {
  mkdirSync(dirname(shot), { recursive: true });
  await page.screenshot({ path: shot });
});

// A script's ask into this chat (POST /api/asks) with every input kind but choice (above),
// answered with the page's own form controls and "Send answers".
const shotAsk = shot.replace(/(\.png)?$/, "-ask.png");
const ask = await step("a script asks", async () => {
  const r = await fetch(`${base}/api/asks`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      to: { web: chatId },
      title: "Release",
      text: "Ship v1.4?",
      expiresInSeconds: 3600,
      inputs: [
        { header: "Go", kind: "confirm", label: "Approve", danger: true },
        { header: "Pods", kind: "number_input", min: 1, max: 10, unit: "pods" },
        { header: "Why", kind: "text_input", multiline: true, maxLength: 50, required: false },
        { header: "Notify", kind: "toggle", label: "Tell the team", default: true },
      ],
      blocks: [
        { type: "table", columns: ["service", "pods"], rows: [["api", 3]] },
        { type: "code", language: "diff", code: "- replicas: 3\n+ replicas: 4" },
      ],
    }),
  });
  if (r.status !== 201) throw new Error(`POST /api/asks: ${r.status} ${await r.text()}`);
  return r.json();
});
await step("the ask shows its form", async () => {
  await page.locator('.question .q[data-kind="number_input"] input[type=number][min="1"][max="10"]').waitFor();
  await page.locator('.question .q[data-kind="text_input"] textarea[maxlength="50"]').waitFor();
  await page.locator('.question .q[data-kind="toggle"] input.toggle:checked').waitFor();
  await page.locator('.question button.confirm.danger[data-label="Approve"]').waitFor();
  await page.locator(".question .expires", { hasText: "open until" }).waitFor();
  // What it is about, in the card before its inputs: the table and the diff.
  await page.locator(".question .q-block table td", { hasText: "api" }).waitFor();
  await page.locator(".question .q-block pre code.language-diff", { hasText: "+ replicas: 4" }).waitFor();
  const order = await page.locator(".question").evaluate((card) => {
    const block = card.querySelector(".q-block");
    const input = card.querySelector(".q");
    return !!(block && input && (block.compareDocumentPosition(input) & Node.DOCUMENT_POSITION_FOLLOWING));
  });
  if (!order) throw new Error("the question's blocks are not before its inputs");
  mkdirSync(dirname(shotAsk), { recursive: true });
  await page.screenshot({ path: shotAsk });
});
await step("send answers", async () => {
  await page.locator('.question button.confirm[data-label="Approve"]').click();
  await page.locator('.question .q[data-kind="number_input"] input').fill("4");
  await page.locator('.question .q[data-kind="text_input"] textarea').fill("tests pass");
  await page.locator('.question .q[data-kind="toggle"] input.toggle').uncheck();
  await page.locator(".question button.submit", { hasText: "Send answers" }).click();
  await page.locator(".question").waitFor({ state: "detached" });
});
await step("the ask is answered", async () => {
  const r = await fetch(`${base}/api/asks/${ask.id}`);
  const v = await r.json();
  const want = JSON.stringify({ Go: true, Notify: false, Pods: 4, Why: "tests pass" });
  const got = JSON.stringify(Object.fromEntries(Object.entries(v.values || {}).sort()));
  if (v.state !== "answered" || got !== want) throw new Error(`ask: ${JSON.stringify(v)}`);
});

// An app in a question's card answers the question through the bridge (as the card's own
// controls would); a message the page itself posts is not heard (it is sent first: had it been
// taken, its "left" would have won and the app's answer been refused).
const appAsk = await step("a script asks with an app beside the inputs", async () => {
  const html = "<button id=\"right\" onclick=\"parent.postMessage({type: 'frogbot:answer', " +
    "answers: [{header: 'Pick', selected: ['right']}]}, '*')\">right</button>";
  const r = await fetch(`${base}/api/asks`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      to: { web: chatId },
      text: "Pick in the app",
      inputs: [{ header: "Pick", options: [{ label: "left" }, { label: "right" }] }],
      blocks: [{ type: "html", title: "Picker", html }],
    }),
  });
  if (r.status !== 201) throw new Error(`POST /api/asks: ${r.status} ${await r.text()}`);
  return r.json();
});
await step("the app answers; the page's own message is not heard", async () => {
  await page.locator(".question .q-block iframe.app-frame").waitFor();
  await page.evaluate(() => window.postMessage({ type: "frogbot:answer", answers: [{ header: "Pick", selected: ["left"] }] }, "*"));
  await page.frameLocator(".question .q-block iframe.app-frame").locator("#right").click();
  await page.locator(".question").waitFor({ state: "detached" });
  const v = await (await fetch(`${base}/api/asks/${appAsk.id}`)).json();
  if (v.state !== "answered" || JSON.stringify(v.values) !== JSON.stringify({ Pick: "right" })) {
    throw new Error(`the app's answer: ${JSON.stringify(v)}`);
  }
});

// Files: an image and a text file attached with the 📎 input, sent with a text; the image is
// drawn (fetched through the API and shown), the text file is a download link.
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);
await step("attach two files", async () => {
  await page.locator("#attach-input").setInputFiles([
    { name: "dot.png", mimeType: "image/png", buffer: PNG },
    { name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("milk, eggs") },
  ]);
  await page.locator("#attachments .chip", { hasText: "notes.txt" }).waitFor();
});
await step("the files are sent and shown", async () => {
  await send("what are these?");
  await page.locator(".message.assistant", { hasText: "You said: what are these?" }).waitFor();
  const img = page.locator('.message.user .file-part img[alt="dot.png"]');
  await img.waitFor();
  await page.waitForFunction(() => {
    const i = document.querySelector('.message.user .file-part img[alt="dot.png"]');
    return i && i.complete && i.naturalWidth === 1 && i.src.startsWith("blob:");
  });
  await page.waitForFunction(() => {
    const a = document.querySelector('.message.user .file-part a[download="notes.txt"]');
    return a && a.href.startsWith("blob:");
  });
  await page.locator("#attachments").waitFor({ state: "hidden" });
  await page.screenshot({ path: shot.replace(/(\.png)?$/, "-files.png") });
});

// A Content-Security-Policy violation (the page's or an app frame's) is a console error: fatal too.
const fatal = problems.filter((p) => p.startsWith("pageerror") || /Content Security Policy/i.test(p));
clearTimeout(timer);
if (fatal.length) done(1, "web-chat: FAIL the page threw errors or broke its Content-Security-Policy");
else done(0, `web-chat: ok (chat ${chatId}; screenshots ${shot}, ${shotQuestion})`);
