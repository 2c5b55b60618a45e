#!/usr/bin/env bash
# Runs every FrogBot test on a fresh machine: `bash scripts/test.sh`.
#
# What the tests need and this script provides:
# - Debian's chromium and the npm packages under crates/frogbot/tests/js (scripts/install-test-tools.sh).
# - Synapse (PyPI `matrix-synapse`) in a cached venv for the Matrix adapter's tests
#   (scripts/synapse.sh); the tests start and stop it themselves.
# - PostgreSQL server binaries (Debian's `postgresql` package): the tests start a private cluster
#   themselves, as the unprivileged `postgres` user when run as root. Installed here when missing.
# The test binaries run one after another (`FROGBOT_TEST_JOBS=3`: three at a time), by
# scripts/run-tests.py; extra arguments go to `cargo test` (e.g. `bash scripts/test.sh -p
# frogbot-core`), those after `--` to every test binary (a filter).
set -euo pipefail
cd "$(dirname "$0")/.."

have_pg() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; }
if ! have_pg; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing PostgreSQL server (Debian package postgresql)…"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else
        echo "PostgreSQL server binaries not found; PostgreSQL tests will be skipped" \
             "(or fail with FROGBOT_REQUIRE_POSTGRES=1)" >&2
    fi
fi

# Headless Chromium and the npm packages of the browser / AI SDK tests.
if [ -f scripts/install-test-tools.sh ]; then
    bash scripts/install-test-tools.sh
fi

# Synapse for the Matrix tests (skipped by them when missing, unless FROGBOT_REQUIRE_SYNAPSE=1).
if ! bash scripts/synapse.sh; then
    if [ "${FROGBOT_REQUIRE_SYNAPSE:-}" = 1 ]; then
        echo "Synapse could not be installed (FROGBOT_REQUIRE_SYNAPSE=1)" >&2
        exit 1
    fi
    echo "Synapse could not be installed; the Matrix tests will be skipped" >&2
fi

exec python3 scripts/run-tests.py --locked "$@"
