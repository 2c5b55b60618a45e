// A small stdio MCP server for the approval tests of `frogbot serve` (crates/frogbot/tests):
// its one tool, `record`, appends its `note` to the file named by COUNTER_FILE, so a test can
// count how many times a call really ran — across FrogBot processes killed and restarted.
// Built on the official TypeScript SDK that server-everything brings along (package-lock.json).
import { appendFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const file = process.env.COUNTER_FILE;
if (!file) {
  console.error("COUNTER_FILE is not set");
  process.exit(2);
}
const server = new McpServer({ name: "counter", version: "1.0.0" });
server.registerTool(
  "record",
  { description: "Records a note (each call appends one line)", inputSchema: { note: z.string() } },
  async ({ note }) => {
    appendFileSync(file, note + "\n");
    return { content: [{ type: "text", text: `recorded ${note}` }] };
  },
);
await server.connect(new StdioServerTransport());
