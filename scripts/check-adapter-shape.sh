#!/usr/bin/env bash
# Every adapter crate has the same modules with the same roles (adapters/README.md; ARCHITECTURE.md,
# "Invariants"): the same source files, the same features, no `#[path]` includes. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

expected="src/channel/mod.rs
src/channel/outbox.rs
src/channel/receive.rs
src/client.rs
src/convert.rs
src/format.rs
src/ids.rs
src/lib.rs
src/questions.rs
src/render.rs
src/testing.rs"

status=0
for dir in adapters/*/; do
    [ -f "$dir/Cargo.toml" ] || continue
    # The `testing` module (feature `testing`) may keep its parts in `src/testing/`.
    got=$(cd "$dir" && find src -name '*.rs' -not -path 'src/testing/*' | LC_ALL=C sort)
    if [ "$got" != "$expected" ]; then
        echo "$dir: the source files differ from the adapter shape:" >&2
        diff <(echo "$expected") <(echo "$got") >&2 || true
        status=1
    fi
    for feature in engine testing; do
        if ! grep -Eq "^$feature = " "$dir/Cargo.toml"; then
            echo "$dir: no \`$feature\` feature" >&2
            status=1
        fi
    done
done
if grep -rnE --include='*.rs' '^\s*#\[path' crates adapters examples tests; then
    echo "no #[path] includes: share code through a crate (e.g. an adapter's \`testing\` module)" >&2
    status=1
fi
[ "$status" = 0 ] && echo "adapters: $(ls -d adapters/*/ | wc -l) crates, one module list, no #[path] includes"
exit "$status"
