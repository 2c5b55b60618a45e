// Drives a tool approval in the web chat at `/` in headless Chromium (Debian's /usr/bin/chromium
// through playwright-core), against a `frogbot serve` whose model calls an MCP tool that needs
// approval (tests/mcp_tools.rs).
//
//   node web-approval.mjs http://127.0.0.1:PORT TOKEN [SCREENSHOT.png]
//
// Sends a message, waits for the approval card (Approve / Deny / a reason) and the tool call
// shown waiting, clicks Approve, and waits for the call shown done with its arguments, its result
// and who approved it, then the agent's reply. Prints `web-approval: ok` and exits 0, or
// `web-approval: FAIL …` and exits 1.
import { mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { chromium } from "playwright-core";

const base = (process.argv[2] || "").replace(/\/$/, "");
const token = process.argv[3] || "";
const shot = process.argv[4] || join(process.cwd(), "web-approval.png");
if (!base || !token) {
  console.error("usage: node web-approval.mjs BASE_URL TOKEN [SCREENSHOT.png]");
  process.exit(2);
}
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const profile = mkdtempSync(join(tmpdir(), "frogbot-web-approval-"));
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

const timer = setTimeout(() => done(1, "web-approval: FAIL timed out after 90 s"), 90_000);

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
        console.log("  #main: " + (await page.locator("#main").innerHTML()).slice(0, 3000));
      } catch (_) { /* best effort */ }
    }
    clearTimeout(timer);
    done(1, `web-approval: FAIL ${name}: ${err && err.message ? err.message.split("\n")[0] : err}`);
    await new Promise(() => {});
  }
}

context = await step("launch chromium", () =>
  chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1200, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"],
  }),
);
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(20_000);
page.on("pageerror", (err) => problems.push(`pageerror: ${err.message}`));
page.on("console", (msg) => {
  if (msg.type() === "error") problems.push(`console.error: ${msg.text()}`);
});

const chatId = `web-appr-${Date.now().toString(36)}`;
await step("open the page with the token", async () => {
  await page.goto(`${base}/#chat=${chatId}`);
  await page.evaluate((t) => localStorage.setItem("frogbot.token", t), token);
  await page.reload();
  await page.locator("#composer textarea").waitFor({ state: "visible" });
});
await step("send", async () => {
  await page.locator("#composer textarea").fill("echo something");
  await page.locator("#send").click();
});
await step("the approval card asks, naming the tool and its arguments", async () => {
  const card = page.locator(".question.approval");
  await card.waitFor();
  await card.locator(".q-text", { hasText: "everything__echo" }).waitFor();
  await card.locator(".q-text", { hasText: '"message": "hi frog"' }).waitFor();
  await card.locator('button[data-label="Approve"]').waitFor();
  await card.locator('button[data-label="Deny"]').waitFor();
  await card.locator('input.custom-input[placeholder="Or deny with a reason…"]').waitFor();
});
await step("the call is shown waiting for approval", () =>
  page.locator('.message.assistant details.tool[data-state="approval-requested"]', { hasText: "everything__echo" }).waitFor(),
);
await step("screenshot of the approval", async () => {
  mkdirSync(dirname(shot), { recursive: true });
  await page.screenshot({ path: shot.replace(/(\.png)?$/, "-waiting.png") });
});
await step("approve", () => page.locator('.question.approval button[data-label="Approve"]').click());
await step("the call is shown done, with its arguments, result and approval", async () => {
  const tool = page.locator('.message.assistant details.tool[data-state="output-available"]', { hasText: "everything__echo" });
  await tool.waitFor();
  // Inside the folded <details> (the list is redrawn as events arrive): attached, with the text.
  const attached = { state: "attached" };
  await tool.locator(".tool-args pre", { hasText: '"message": "hi frog"' }).waitFor(attached);
  await tool.locator(".tool-result pre", { hasText: "Echo: hi frog" }).waitFor(attached);
  await tool.locator('.tool-approval[data-approved="true"]', { hasText: "Approved by alice" }).waitFor(attached);
});
await step("the agent continues with the result", () =>
  page.locator(".message.assistant", { hasText: 'The tool said: "Echo: hi frog"' }).waitFor(),
);
await step("the card is gone", () => page.locator(".question.approval").waitFor({ state: "detached" }));
await step("screenshot (the call unfolded)", async () => {
  await page.locator('.message.assistant details.tool[data-state="output-available"] summary').click();
  await page.screenshot({ path: shot, fullPage: true });
});
clearTimeout(timer);
done(0, "web-approval: ok");
