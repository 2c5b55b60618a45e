#!/usr/bin/env bash
# Every published crate packages (metadata, versions of the workspace's own dependencies, the
# files each tarball holds), in dependency order: `cargo package` resolves the workspace's crates
# among themselves. Run by .ci/run. (Not verified by building each tarball: that is a second full
# build; a release does it with `cargo publish --workspace`.)
#
# Then a crate outside the workspace (tests/outside-crate) builds against the adapters' tarballs
# as a user's app would get them from crates.io: the four adapters and the frogbot-* crates they
# depend on are unpacked into tests/outside-crate/tarballs/ (not in git) and `cargo check`ed from
# there, in the same target folder: third-party crates checked already with the same features are
# reused, and the ones the adapters without `engine` need with other features are kept beside
# them (measured: ~4.5 min the first time on 2 cores, 1 s after; a `cargo build` would add the
# code generation and linking of matrix-sdk, serenity & co. for nothing packaging can break). A
# tarball that lacks a file it needs, names a dependency only a path gave, or warns fails the
# step. `--no-outside` skips it.
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

[ "${1:-}" = "--no-outside" ] && exit 0

start=$(date +%s)
# Where cargo wrote the tarballs, and each crate's version.
meta=$(cargo metadata --format-version 1 --no-deps --locked)
target_dir=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' <<<"$meta")
outside=tests/outside-crate
unpacked=(
    frogbot-model frogbot-channel frogbot-net
    frogbot-slack frogbot-discord frogbot-telegram frogbot-matrix
)
rm -rf "$outside/tarballs"
mkdir -p "$outside/tarballs"
for c in "${unpacked[@]}"; do
    version=$(python3 -c '
import json, sys
print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == sys.argv[1]))
' "$c" <<<"$meta")
    mkdir "$outside/tarballs/$c"
    # `-m`: the files get the time of extraction, not the fixed one cargo writes into every
    # tarball, so cargo sees a changed crate as changed in the shared target folder (with the
    # tarball's time, a check reused the previous run's build of the crate).
    tar -m -xzf "$target_dir/package/$c-$version.crate" -C "$outside/tarballs/$c" --strip-components=1
done
# Not a workspace member: `cargo fmt --all` does not see it.
rustfmt --check --edition 2024 "$outside/src/main.rs"
# The workspace's lock file: the versions CI tested, and nothing to resolve anew.
cp Cargo.lock "$outside/Cargo.lock"
out=$(CARGO_TARGET_DIR="$target_dir" cargo check --manifest-path "$outside/Cargo.toml" 2>&1) \
    || { echo "$out" >&2; exit 1; }
if grep -qi "^warning" <<<"$out"; then
    echo "$out" >&2
    echo "the crate outside the workspace warned (see above)" >&2
    exit 1
fi
echo "tests/outside-crate checks against the tarballs of ${unpacked[*]} ($(( $(date +%s) - start ))s)"
