// Reads FrogBot's UI message stream with the AI SDK (`ai`): its JSON event stream parser with
// `uiMessageChunkSchema`, then `readUIMessageStream`, the way an AI SDK client does.
//
//   node read-stream.mjs http://127.0.0.1:PORT
//
// Prints `read-stream: ok …` and exits 0, or prints `read-stream: FAIL …` and exits 1.
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";

const base = (process.argv[2] || "").replace(/\/$/, "");
if (!base) {
  console.error("usage: node read-stream.mjs BASE_URL");
  process.exit(2);
}

const timer = setTimeout(() => fail("timed out after 60 s"), 60_000);

function fail(msg) {
  console.log(`read-stream: FAIL ${msg}`);
  process.exit(1);
}

function check(cond, msg, detail) {
  if (!cond) fail(msg + (detail === undefined ? "" : `: ${JSON.stringify(detail)}`));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const uniq = (p) => `${p}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

/** POSTs a message with `Accept: text/event-stream` and reads the answer through the AI SDK. */
async function streamMessage(chatId, text) {
  const res = await fetch(`${base}/api/chats/${chatId}/messages`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify({ parts: [{ type: "text", text }] }),
  });
  if (!res.ok) fail(`POST ${text}: HTTP ${res.status} ${await res.text()}`);
  check(
    res.headers.get("x-vercel-ai-ui-message-stream") === "v1",
    "header x-vercel-ai-ui-message-stream",
    res.headers.get("x-vercel-ai-ui-message-stream"),
  );
  check((res.headers.get("content-type") || "").startsWith("text/event-stream"), "content-type", res.headers.get("content-type"));
  check(res.headers.get("x-frogbot-chat-id") === chatId, "header x-frogbot-chat-id", res.headers.get("x-frogbot-chat-id"));

  const [forParser, forRaw] = res.body.tee();
  const rawText = new Response(forRaw).text();
  const chunks = [];
  const chunkStream = parseJsonEventStream({ stream: forParser, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(result, controller) {
        if (!result.success) {
          fail(`a chunk does not fit the AI SDK's uiMessageChunkSchema: ${JSON.stringify(result.rawValue)} (${result.error && result.error.message})`);
        }
        chunks.push(result.value);
        controller.enqueue(result.value);
      },
    }),
  );
  const errors = [];
  let message;
  for await (const snapshot of readUIMessageStream({
    stream: chunkStream,
    onError: (e) => errors.push(String(e && e.message ? e.message : e)),
  })) {
    message = snapshot;
  }
  const raw = await rawText;
  return { res, chunks, message, errors, raw };
}

async function getJson(path) {
  const res = await fetch(base + path);
  if (!res.ok) fail(`GET ${path}: HTTP ${res.status} ${await res.text()}`);
  return res.json();
}

async function waitIdle(chatId, what, ms = 20_000) {
  const until = Date.now() + ms;
  for (;;) {
    const chat = await getJson(`/api/chats/${chatId}`);
    if (chat.state === "idle" && !chat.messages.some((m) => m.metadata && m.metadata.status === "queued")) return chat;
    if (Date.now() > until) fail(`${what}: chat not idle`, chat);
    await sleep(100);
  }
}

const textOf = (m) => (m.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("");
const types = (chunks) => chunks.map((c) => c.type);
const summary = [];

// 1. An echo: text parts through the whole protocol.
{
  const chatId = uniq("sdk-echo");
  const { chunks, message, errors, raw } = await streamMessage(chatId, "hello there");
  check(errors.length === 0, "stream errors", errors);
  check(raw.trimEnd().endsWith("data: [DONE]"), "the stream ends with data: [DONE]", raw.slice(-200));
  const t = types(chunks);
  for (const want of ["start", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"]) {
    check(t.includes(want), `echo: a ${want} chunk`, t);
  }
  check(t[0] === "start" && t[t.length - 1] === "finish", "echo: start first, finish last", t);
  check(message, "echo: readUIMessageStream yielded a message");
  check(message.role === "assistant", "echo: role", message.role);
  check(message.id === chunks[0].messageId && message.id, "echo: message id from start", [message.id, chunks[0]]);
  const textParts = message.parts.filter((p) => p.type === "text");
  check(textParts.length >= 1, "echo: a text part", message.parts);
  check(textOf(message) === "You said: hello there", "echo: text", textOf(message));
  check(textParts.every((p) => p.state === "done"), "echo: text parts done", textParts);
  summary.push(`echo ${JSON.stringify(textOf(message))} (${chunks.length} chunks)`);
  await waitIdle(chatId, "echo");
}

// 2. `ask`: a question tool call waiting for its answer.
{
  const chatId = uniq("sdk-ask");
  const { chunks, message, errors, raw } = await streamMessage(chatId, "please ask me something");
  check(errors.length === 0, "ask: stream errors", errors);
  check(raw.trimEnd().endsWith("data: [DONE]"), "ask: the stream ends with data: [DONE]", raw.slice(-200));
  check(types(chunks).includes("tool-input-available"), "ask: a tool-input-available chunk", types(chunks));
  const tools = message.parts.filter((p) => p.type === "tool-question");
  check(tools.length === 1, "ask: one tool-question part", message.parts);
  const part = tools[0];
  check(part.state === "input-available", "ask: tool part state", part);
  check(typeof part.toolCallId === "string" && part.toolCallId.length > 0, "ask: toolCallId", part);
  const q = part.input && part.input.questions && part.input.questions[0];
  check(q && q.header === "Colour", "ask: question header", part.input);
  check(JSON.stringify(q.options.map((o) => o.label)) === JSON.stringify(["Red", "Green", "Blue"]), "ask: options", q.options);
  check(q.custom === true, "ask: custom", q);
  const pending = await getJson(`/api/chats/${chatId}/pending`);
  check(pending.state === "awaiting", "ask: pending state", pending);
  check(pending.calls.length === 1 && pending.calls[0].toolCallId === part.toolCallId, "ask: pending call is the streamed one", pending);
  // Answer it and see the turn continue.
  const settled = await fetch(`${base}/api/chats/${chatId}/settle`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ toolCallId: part.toolCallId, output: { answers: [{ header: "Colour", selected: ["Green"] }] } }),
  });
  check(settled.ok, "ask: settle status", settled.status);
  const chat = await waitIdle(chatId, "ask");
  const last = chat.messages[chat.messages.length - 1];
  check(textOf(last).includes("You chose Colour: Green."), "ask: continued reply", last);
  summary.push(`ask -> tool-question ${part.state} ${JSON.stringify(q.options.map((o) => o.label))}, then ${JSON.stringify(textOf(last).trim())}`);
}

// 3. A message sent while a turn runs: one transient data-queued part.
{
  const chatId = uniq("sdk-queue");
  const first = streamMessage(chatId, "slow 2");
  // Wait until the turn runs.
  const until = Date.now() + 5000;
  for (;;) {
    const res = await fetch(`${base}/api/chats/${chatId}`);
    if (res.ok && (await res.json()).state === "running") break;
    if (Date.now() > until) fail("queue: the slow turn never ran");
    await sleep(50);
  }
  const second = await streamMessage(chatId, "and then this");
  check(second.errors.length === 0, "queue: stream errors", second.errors);
  check(second.raw.trimEnd().endsWith("data: [DONE]"), "queue: the stream ends with data: [DONE]", second.raw);
  const queued = second.chunks.filter((c) => c.type === "data-queued");
  check(second.chunks.length === 1 && queued.length === 1, "queue: exactly one data-queued chunk", second.chunks);
  const dq = queued[0];
  check(dq.transient === true, "queue: data-queued is transient", dq);
  check(dq.data && typeof dq.data.messageId === "string" && dq.data.messageId.length > 0, "queue: data.messageId", dq);
  check(dq.data.delivery === "queue", "queue: data.delivery", dq);
  check(!second.message || !second.message.parts.some((p) => p.type === "data-queued"), "queue: transient part kept out of the message", second.message);
  const firstDone = await first;
  check(firstDone.errors.length === 0, "queue: first stream errors", firstDone.errors);
  check(textOf(firstDone.message) === "You said: slow 2", "queue: first reply", textOf(firstDone.message));
  // The queued message is promoted after the turn and answered.
  const chat = await waitIdle(chatId, "queue");
  const idx = chat.messages.findIndex((m) => m.id === dq.data.messageId);
  check(idx >= 0, "queue: the queued message is in the chat", chat.messages);
  const reply = chat.messages[idx + 1];
  check(reply && reply.role === "assistant" && textOf(reply) === "You said: and then this", "queue: the promoted message's reply", chat.messages);
  summary.push(`queued ${JSON.stringify(dq)}`);
}

clearTimeout(timer);
console.log(`read-stream: ok\n  ${summary.join("\n  ")}`);
process.exit(0);
