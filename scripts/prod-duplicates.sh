#!/usr/bin/env bash
# Issue 39's duplicate measure: `duplicates` over the production source only — the library and
# binary crates' `src/` with the testing modules (src/testing/, testing.rs) and the inline
# `#[cfg(test)] mod … { … }` unit tests left out (as scripts/adapter-lines.py strips them); the
# test-only crates (testkit, engine-tests, store-conformance, testdb), tests/, benches/ and
# examples/ are not production. Copies the stripped files to a scratch folder and runs
# `duplicates` there; extra arguments go to it (e.g. `--most 200`). Prints, then a line per pair
# of areas (`crate` or `crate ~ crate`) with its count.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
git ls-files -co --exclude-standard 'crates/*/src/*.rs' 'crates/*/src/**/*.rs' \
        'adapters/*/src/*.rs' 'adapters/*/src/**/*.rs' \
    | grep -v -e '/testing/' -e '/testing\.rs$' \
        -e '^crates/frogbot-testkit/' -e '^crates/frogbot-engine-tests/' \
        -e '^crates/frogbot-store-conformance/' -e '^crates/frogbot-testdb/' \
    | python3 -c '
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("al", "scripts/adapter-lines.py")
al = importlib.util.module_from_spec(spec)
spec.loader.exec_module(al)
out = sys.argv[1]
for path in sys.stdin.read().split():
    if not os.path.exists(path):
        continue
    lines = open(path, encoding="utf-8").read().split("\n")
    os.makedirs(os.path.join(out, os.path.dirname(path)), exist_ok=True)
    with open(os.path.join(out, path), "w", encoding="utf-8") as f:
        f.write("\n".join(al.without_unit_tests(lines)))
' "$out"
report=$(cd "$out" && duplicates --seconds 120 --most 200 "$@")
echo "$report"
echo
echo "pairs per area:"
echo "$report" | awk '/^D[0-9]/ {
    split($2, a, ":"); split($4, b, ":"); split(a[1], x, "/"); split(b[1], y, "/");
    ka = x[2]; kb = y[2];
    if (ka == kb) print ka; else if (ka < kb) print ka " ~ " kb; else print kb " ~ " ka }' \
    | sort | uniq -c | sort -rn
