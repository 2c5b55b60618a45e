#!/usr/bin/env bash
# Installs what the frogbot crate's browser and AI SDK tests need (idempotent):
#  - Debian `chromium` at /usr/bin/chromium (headless browser for tests/web_chat.rs),
#  - the Node packages of crates/frogbot/tests/js (`ai`, `playwright-core`; no browser download).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
js="$root/crates/frogbot/tests/js"

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
    if [ -f "$js/package-lock.json" ]; then
        (cd "$js" && npm ci --no-audit --no-fund)
    else
        (cd "$js" && npm install --no-audit --no-fund)
    fi
fi

echo "install-test-tools: ready (chromium: $(/usr/bin/chromium --version 2>/dev/null || echo '?'))" >&2
