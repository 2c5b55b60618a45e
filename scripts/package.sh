#!/usr/bin/env bash
# Every published crate packages (metadata, versions of the workspace's own dependencies, the
# files each tarball holds), in dependency order: `cargo package` resolves the workspace's crates
# among themselves. Run by .ci/run. (Not verified by building each tarball: that is a second full
# build; a release does it with `cargo publish --workspace`.)
set -euo pipefail
cd "$(dirname "$0")/.."
crates=(
    frogbot-model frogbot-channel frogbot-net frogbot-core frogbot-sqlite frogbot-postgres
    frogbot-openai frogbot-mcp frogbot-slack frogbot-discord frogbot-telegram frogbot-matrix
    frogbot
)
args=()
for c in "${crates[@]}"; do args+=(-p "$c"); done
out=$(cargo package --no-verify --locked "${args[@]}" 2>&1) || { echo "$out" >&2; exit 1; }
if grep -qi "^warning" <<<"$out"; then
    echo "$out" >&2
    echo "cargo package warned (see above)" >&2
    exit 1
fi
echo "packaged: ${crates[*]}"
