#!/usr/bin/env bash
# Installs what the frogbot crate's browser and AI SDK tests need (idempotent):
#  - Debian `chromium` at /usr/bin/chromium (headless browser for tests/web_chat.rs),
#  - the Node packages of crates/frogbot/tests/js (`ai`, `playwright-core`; no browser download),
#  - the Node packages of crates/frogbot-mcp/tests/js (`@modelcontextprotocol/server-everything`,
#    the third-party MCP server of frogbot-mcp's tests).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
js="$root/crates/frogbot/tests/js"
mcp_js="$root/crates/frogbot-mcp/tests/js"

# npm ci (from the lock file) or npm install in folder $1.
npm_install() {
    if [ -f "$1/package-lock.json" ]; then
        (cd "$1" && npm ci --no-audit --no-fund)
    else
        (cd "$1" && npm install --no-audit --no-fund)
    fi
}

if [ ! -x /usr/bin/chromium ]; then
    echo "install-test-tools: installing Debian chromium" >&2
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y chromium
fi

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "install-test-tools: node and npm are needed (Node 20 or later)" >&2
    exit 1
fi

if [ ! -d "$js/node_modules" ]; then
    echo "install-test-tools: installing Node packages in $js" >&2
    export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
    npm_install "$js"
fi

if [ ! -f "$mcp_js/node_modules/@modelcontextprotocol/server-everything/package.json" ]; then
    echo "install-test-tools: installing Node packages in $mcp_js" >&2
    npm_install "$mcp_js"
fi

echo "install-test-tools: ready (chromium: $(/usr/bin/chromium --version 2>/dev/null || echo '?'))" >&2
