#!/usr/bin/env bash
# Invariants of the code's shape (ARCHITECTURE.md, "Invariants") that the compiler does not check.
# Run by .ci/run, after scripts/check-adapter-shape.sh. `--list` prints every module circle and
# exits 0 (for people untangling one); the other checks do not run then.
#
# 1. No module circles in any crate (crates/*, adapters/*): scripts/module_graph.py (examples/*
#    and the e2e crate in tests/ are left out).
# 2. The store crates stay behind serve's one door: no adapter depends on frogbot-sqlite,
#    frogbot-postgres or frogbot-testkit (dev-dependencies may: the engine tests run on SQLite
#    through frogbot-testkit), and no file of serve (`crates/frogbot/src`) or of an adapter names
#    `frogbot_sqlite` / `frogbot_postgres` but `crates/frogbot/src/lib.rs`, where serve opens the
#    configured store. Adapters and serve's other modules reach data only through the `Engine`
#    ("Dependencies run one way"); a second place opening a store would be a second engine's
#    worth of state. An adapter's `testing` module (feature `testing`) is left out of the file
#    rule: it is test support. Both held as written when the check came in (issue 39): the
#    adapters' tests get their store from frogbot-testkit, and serve's only store names are
#    `open_store`'s two `open` calls in lib.rs. The file rule reads the text as is (a comment
#    naming a store crate counts too).
# 3. An adapter's production code never uses its `testing` module (the fake platform and its
#    helpers, feature `testing`); only its tests do. Held when the check came in (issue 39):
#    Discord's `channel` used it from a test module only.
# 4. ARCHITECTURE.md stays a map (issue 39, "Docs that stay true"): at most 250 lines, and every
#    `crates/…`, `adapters/…` or `scripts/…` path it names exists (a `*` in a path must match
#    something). Figures belong in the docs of the bench that measures them, not there.
# 5. Who holds the store (below).
# 6. An adapter's normal dependencies name, of the workspace's crates, only frogbot-model and
#    frogbot-channel (the engine is `frogbot_channel::ChannelEngine`, which frogbot-core
#    implements), and frogbot-net (the guarded outbound HTTP client: no engine, no store).
#    dev-dependencies may name any (the tests build FrogBot's engine).
# 7. One retry policy: only frogbot-channel depends on backon (`RetryPolicy`: the adapters'
#    clients, the model client, MCP restarts and delivery retries take their waits from it).
# 8. No arrow runs back up: no crate's dev-dependencies name a workspace crate that depends on it
#    (directly or through others: scripts/crate_arrows.py, over `cargo metadata --no-deps`). Tests
#    needing the crates above live in a crate on top (frogbot-engine-tests: the engine's tests and
#    benches on real SQLite and PostgreSQL). A crate naming itself to turn on a feature for its
#    own tests is no arrow. Five arrows when the check came in (issue 39): frogbot-core's
#    dev-dependencies on frogbot-sqlite, frogbot-postgres and frogbot-testkit, and the store
#    crates' on frogbot-testkit.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--list" ]; then
    exec python3 scripts/module_graph.py --list
fi

status=0

# The checker first proves on a planted crate that it finds circles (and only circles).
python3 scripts/module_graph.py --self-test || status=1
python3 scripts/module_graph.py || status=1
# 8. (Arrows running back up.) The checker first proves on a planted workspace that it finds one.
python3 scripts/crate_arrows.py --self-test || status=1
python3 scripts/crate_arrows.py || status=1
# 3. (The adapters' `testing` modules.)
# shellcheck disable=SC2046
python3 scripts/module_graph.py --forbid testing $(ls -d adapters/*/) || status=1

for toml in adapters/*/Cargo.toml; do
    # Normal dependencies: `[dependencies]`, `[target.'…'.dependencies]` and their
    # `[dependencies.<name>]` forms, by key or by `package = "…"`.
    bad=$(awk '
        /^\[/ {
            deps = ($0 ~ /^\[(target\.[^]]*\.)?dependencies(\.[^]]*)?\]/)
            if ($0 ~ /^\[(target\.[^]]*\.)?dependencies\.frogbot-(sqlite|postgres|testkit)\]/) print FILENAME ":" NR ": " $0
            next
        }
        deps && ($0 ~ /^frogbot-(sqlite|postgres|testkit)[ .=]/ || $0 ~ /package *= *"frogbot-(sqlite|postgres|testkit)"/) {
            print FILENAME ":" NR ": " $0
        }
    ' "$toml")
    if [ -n "$bad" ]; then
        echo "$bad" >&2
        echo "$toml: an adapter depends on no store crate and not on frogbot-testkit (dev-dependencies may)" >&2
        status=1
    fi
done

# 6. (Which of the workspace's crates an adapter depends on.)
for toml in adapters/*/Cargo.toml; do
    bad=$(awk '
        /^\[/ { deps = ($0 ~ /^\[(target\.[^]]*\.)?dependencies\]/); next }
        deps && $0 ~ /^frogbot-/ && $0 !~ /^frogbot-(model|channel|net)[ .=]/ { print FILENAME ":" NR ": " $0 }
    ' "$toml")
    if [ -n "$bad" ]; then
        echo "$bad" >&2
        echo "$toml: an adapter depends on frogbot-model, frogbot-channel and frogbot-net only (it reaches the engine through frogbot_channel::EngineHandle)" >&2
        status=1
    fi
done

# 7. (backon only in frogbot-channel.)
if grep -lE '^backon' crates/*/Cargo.toml adapters/*/Cargo.toml | grep -v '^crates/frogbot-channel/Cargo.toml$' >&2; then
    echo "one retry policy: only frogbot-channel depends on backon (use frogbot_channel::RetryPolicy)" >&2
    status=1
fi

files=$(find crates/frogbot/src adapters/*/src -name '*.rs' \
    -not -path 'crates/frogbot/src/lib.rs' \
    -not -path 'adapters/*/src/testing.rs' -not -path 'adapters/*/src/testing/*' | LC_ALL=C sort)
# shellcheck disable=SC2086
if grep -nwE 'frogbot_(sqlite|postgres)' $files >&2; then
    echo "only crates/frogbot/src/lib.rs opens a store: the rest of serve and the adapters go through the Engine" >&2
    status=1
fi

# 5. Who holds the store: in serve only `lib.rs` (which builds the engine), `ops.rs` (the operator
#    commands' engine) and `main.rs` (`migrate`) open or name a store handle; every other module
#    asks the `Engine` through its handles (metrics read the backlog with
#    `engine.ops().refresh_backlog()`). No serve file but `lib.rs` and `main.rs` names
#    `frogbot_core::store` at all: the rows the handles return are read as the engine's views
#    (`frogbot_core::agent::views`; `ops.rs` opens its store with `lib.rs`'s `open_store`). No
#    adapter source outside its `testing` module names `frogbot_core::store`.
# shellcheck disable=SC2046
if grep -nwE 'DynStore|open_store|StoreLayer|store::Store' $(find crates/frogbot/src -name '*.rs' \
    -not -path 'crates/frogbot/src/lib.rs' -not -path 'crates/frogbot/src/ops.rs' \
    -not -path 'crates/frogbot/src/main.rs') >&2; then
    echo "serve's modules reach data through the Engine; only lib.rs, ops.rs and main.rs open the store" >&2
    status=1
fi
# shellcheck disable=SC2046
if grep -nE 'frogbot_core::(store|\{[^}]*\bstore\b)' $(find crates/frogbot/src -name '*.rs' \
    -not -path 'crates/frogbot/src/lib.rs' -not -path 'crates/frogbot/src/main.rs') >&2; then
    echo "serve's modules name no store type: they read the engine's views (frogbot_core::agent::views); only lib.rs and main.rs open the store" >&2
    status=1
fi
# shellcheck disable=SC2046
if grep -nE 'frogbot_core::store' $(find adapters/*/src -name '*.rs' -not -name testing.rs \
    -not -path '*/src/testing/*') >&2; then
    echo "adapters talk to the engine, never to the store" >&2
    status=1
fi

# 4. ARCHITECTURE.md: its length, and the paths it names.
max_lines=250
lines=$(wc -l < ARCHITECTURE.md)
if [ "$lines" -gt "$max_lines" ]; then
    echo "ARCHITECTURE.md: $lines lines, at most $max_lines: move details into the code's //! docs, figures into their bench's" >&2
    status=1
fi
# A path starts after anything but a path character, and loses trailing dots (sentence ends).
paths=$(grep -oE '(^|[^A-Za-z0-9_./-])(crates|adapters|scripts)/[A-Za-z0-9_./*-]*' ARCHITECTURE.md \
    | sed -E 's/^[^a-z]//; s/[.]+$//' | LC_ALL=C sort -u)
for path in $paths; do
    if ! compgen -G "$path" >/dev/null && [ ! -e "$path" ]; then
        echo "ARCHITECTURE.md names $path, which does not exist" >&2
        status=1
    fi
done

[ "$status" = 0 ] && echo "invariants: no module circles, no arrow running back up, adapters on frogbot-model/-channel/-net only, one retry policy, the store crates only in serve's lib.rs (store types only there and in main.rs), no production use of testing, ARCHITECTURE.md within $max_lines lines naming only real paths"
exit "$status"
