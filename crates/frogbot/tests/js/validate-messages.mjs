// Reads a chat with `GET /api/chats/{id}` and checks its messages with the AI SDK's own
// `validateUIMessages` (what a `useChat` server route does with stored messages), so the block
// parts an agent posted are typed `data-*` parts a `useChat` front end draws.
//
//   node validate-messages.mjs http://127.0.0.1:PORT CHAT_ID
//
// Prints `validate-messages: ok …` and exits 0, or `validate-messages: FAIL …` and exits 1.
import { validateUIMessages } from "ai";

const base = (process.argv[2] || "").replace(/\/$/, "");
const chatId = process.argv[3] || "";
// The bearer token of a caller who may read the chat (optional).
const token = process.argv[4] || "";
if (!base || !chatId) {
  console.error("usage: node validate-messages.mjs BASE_URL CHAT_ID");
  process.exit(2);
}

try {
  const res = await fetch(`${base}/api/chats/${encodeURIComponent(chatId)}`, {
    headers: token ? { Authorization: `Bearer ${token}` } : {},
  });
  if (!res.ok) throw new Error(`GET: HTTP ${res.status} ${await res.text()}`);
  const chat = await res.json();
  const messages = await validateUIMessages({ messages: chat.messages });
  const blocks = messages.flatMap((m) => m.parts).filter((p) => p.type.startsWith("data-block-"));
  if (!blocks.length) throw new Error("no data-block-* parts: " + JSON.stringify(chat.messages));
  for (const b of blocks) {
    if (typeof b.data !== "object" || b.data === null) throw new Error("a block part without data: " + JSON.stringify(b));
  }
  console.log(`validate-messages: ok (${messages.length} messages, ${blocks.length} block parts: ${blocks.map((b) => b.type).join(", ")})`);
} catch (err) {
  console.log(`validate-messages: FAIL ${err && err.message ? err.message : err}`);
  process.exit(1);
}
