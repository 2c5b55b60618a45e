// An MCP client made with the official TypeScript SDK, for tests/mcp_server.rs and the channel
// tests: connects to FrogBot over streamable HTTP or to `frogbot mcp` over stdio, then runs the
// commands it reads on stdin (one JSON object per line) and prints one JSON object per line:
//
//   {"op": "list"}                              -> {"op": "list", "tools": [...]}
//   {"op": "call", "id": "a", "name": N, "arguments": {...}}
//                                               -> {"op": "progress", "id": "a", ...} (0..n)
//                                                  {"op": "result", "id": "a", "result": {...}}
//                                               or {"op": "error", "id": "a", "message": "..."}
//   {"op": "cancel", "id": "a"}                 -> aborts call a (the SDK sends notifications/cancelled)
//   {"op": "close"}                             -> closes the transport and exits
//
// Usage: node mcp-client.mjs http URL TOKEN | node mcp-client.mjs stdio FROGBOT_BIN SERVER TOKEN
// A connection failure prints {"op": "connect-error", "message": "..."} and exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import readline from "node:readline";

const [mode, ...rest] = process.argv.slice(2);
const out = (v) => process.stdout.write(JSON.stringify(v) + "\n");

let transport;
if (mode === "http") {
  const [url, token] = rest;
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
} else if (mode === "stdio") {
  const [bin, server, token] = rest;
  transport = new StdioClientTransport({
    command: bin,
    args: ["mcp"],
    env: { ...process.env, FROGBOT_URL: server, FROGBOT_TOKEN: token },
    stderr: "inherit",
  });
} else {
  console.error("usage: mcp-client.mjs http URL TOKEN | stdio BIN SERVER TOKEN");
  process.exit(2);
}

const client = new Client({ name: "frogbot-tests", version: "1.0.0" });
try {
  await client.connect(transport);
} catch (e) {
  out({ op: "connect-error", message: String(e?.message ?? e), code: e?.code ?? null });
  process.exit(1);
}
out({ op: "connected", server: client.getServerVersion() });

const calls = new Map();
const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  if (cmd.op === "list") {
    const { tools } = await client.listTools();
    out({ op: "list", tools });
  } else if (cmd.op === "call") {
    const controller = new AbortController();
    calls.set(cmd.id, controller);
    client
      .callTool({ name: cmd.name, arguments: cmd.arguments ?? {} }, undefined, {
        signal: controller.signal,
        timeout: 60000,
        resetTimeoutOnProgress: true,
        onprogress: (p) => out({ op: "progress", id: cmd.id, ...p }),
      })
      .then((result) => out({ op: "result", id: cmd.id, result }))
      .catch((e) => out({ op: "error", id: cmd.id, message: String(e?.message ?? e), code: e?.code ?? null }));
  } else if (cmd.op === "cancel") {
    calls.get(cmd.id)?.abort("cancelled by the test");
  } else if (cmd.op === "close") {
    await client.close();
    process.exit(0);
  }
}
await client.close();
