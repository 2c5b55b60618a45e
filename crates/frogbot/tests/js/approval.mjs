// Reads a tool approval the way an AI SDK client does (tests/mcp_tools.rs).
//
//   node approval.mjs stream BASE_URL CHAT_ID TOKEN MODEL TEXT
//     POSTs the message with `Accept: text/event-stream`, parses every chunk with the AI SDK's
//     `uiMessageChunkSchema` and assembles the message with `readUIMessageStream`.
//   node approval.mjs validate BASE_URL CHAT_ID TOKEN
//     Reads the chat (`GET /api/chats/{id}`) and checks its messages with `validateUIMessages`.
//
// Either prints `approval: ok ` and a JSON list of the tool parts (`{type, state, approval}`) and
// exits 0, or prints `approval: FAIL …` and exits 1.
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema, validateUIMessages } from "ai";

const [mode, baseArg, chatId, token, model, text] = process.argv.slice(2);
const base = (baseArg || "").replace(/\/$/, "");
const timer = setTimeout(() => fail("timed out after 60 s"), 60_000);

function fail(msg) {
  console.log(`approval: FAIL ${msg}`);
  process.exit(1);
}

function tools(message) {
  return (message.parts || [])
    .filter((p) => p.type.startsWith("tool-"))
    .map((p) => ({ type: p.type, state: p.state, approval: p.approval ?? null }));
}

const auth = { Authorization: `Bearer ${token}` };

try {
  if (mode === "stream") {
    const res = await fetch(`${base}/api/chats/${chatId}/messages`, {
      method: "POST",
      headers: { ...auth, "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify({ parts: [{ type: "text", text }], model }),
    });
    if (!res.ok) fail(`POST: HTTP ${res.status} ${await res.text()}`);
    const chunks = parseJsonEventStream({ stream: res.body, schema: uiMessageChunkSchema }).pipeThrough(
      new TransformStream({
        transform(result, controller) {
          if (!result.success) fail(`a chunk does not fit uiMessageChunkSchema: ${JSON.stringify(result.rawValue)}`);
          controller.enqueue(result.value);
        },
      }),
    );
    let message;
    const errors = [];
    for await (const snapshot of readUIMessageStream({ stream: chunks, onError: (e) => errors.push(String(e)) })) {
      message = snapshot;
    }
    if (errors.length) fail(`stream errors: ${errors.join("; ")}`);
    if (!message) fail("no message");
    console.log(`approval: ok ${JSON.stringify(tools(message))}`);
  } else if (mode === "validate") {
    const res = await fetch(`${base}/api/chats/${encodeURIComponent(chatId)}`, { headers: auth });
    if (!res.ok) fail(`GET: HTTP ${res.status} ${await res.text()}`);
    const chat = await res.json();
    const messages = await validateUIMessages({ messages: chat.messages });
    console.log(`approval: ok ${JSON.stringify(messages.flatMap(tools))}`);
  } else {
    fail(`unknown mode ${mode}`);
  }
} catch (err) {
  fail(err && err.message ? err.message : String(err));
}
clearTimeout(timer);
