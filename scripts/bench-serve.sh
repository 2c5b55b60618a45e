#!/usr/bin/env bash
# HTTP benchmark of `frogbot serve`: POST /messages on idle chats with the `demo` model, on SQLite
# and PostgreSQL, with wrk on loopback; reports requests/s, latency percentiles, and the server's
# resident memory idle and under load (peak).
#
#   bash scripts/bench-serve.sh [DURATION_SECONDS] [CONNECTIONS]
#
# Installs wrk (Debian) when missing. PostgreSQL: a private cluster (fsync on) in a temp dir, run
# as the `postgres` user when this runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-10}"
CONNS="${2:-32}"
command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
cargo build --release -p frogbot --locked
BIN="${CARGO_TARGET_DIR:-target}/release/frogbot"
WORK=$(mktemp -d)
chmod 755 "$WORK"
cleanup() {
    [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null || true
    if [ -n "${PGDATA_DIR:-}" ]; then
        runas pg_ctl -D "$PGDATA_DIR" -m immediate stop >/dev/null 2>&1 || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
runas() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$PGBIN/$1" "${@:2}"; else "$PGBIN/$1" "${@:2}"; fi; }

cat > "$WORK/post.lua" <<'LUA'
local counter = 0
local prefix = ""
function setup(thread)
  thread:set("prefix", tostring(math.random(1, 1e9)))
end
function init(args)
  prefix = tostring(math.random(1, 1e9)) .. "-" .. tostring(os.time())
end
request = function()
  counter = counter + 1
  local path = "/api/chats/b" .. prefix .. "-" .. counter .. "/messages"
  return wrk.format("POST", path, {["Content-Type"] = "application/json"},
    '{"parts":[{"type":"text","text":"hello"}]}')
end
done = function(summary, latency, requests)
  io.write(string.format("p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n",
    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000))
  io.write(string.format("non-2xx or errors: %d\n", summary.errors.status + summary.errors.connect
    + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
LUA

rss() { awk '/VmRSS/ {print $2/1024 " MB"}' "/proc/$1/status"; }
hwm() { awk '/VmHWM/ {print $2/1024 " MB"}' "/proc/$1/status"; }

run() {
    local name=$1 db=$2 port=$3
    FROGBOT_DATABASE="$db" FROGBOT_LISTEN="127.0.0.1:$port" RUST_LOG=warn "$BIN" serve >"$WORK/$name.log" 2>&1 &
    SERVER=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
    sleep 1
    echo "== $name: idle RSS $(rss $SERVER)"
    wrk -t2 -c"$CONNS" -d"${DURATION}s" -s "$WORK/post.lua" "http://127.0.0.1:$port" | grep -E "Requests/sec|p50|non-2xx|requests in"
    echo "== $name: RSS after load $(rss $SERVER), peak $(hwm $SERVER)"
    kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=
}

run sqlite "sqlite://$WORK/bench.db" 18801

if [ -n "$PGBIN" ]; then
    PGDATA_DIR="$WORK/pg"
    [ "$(id -u)" = 0 ] && chown postgres "$WORK"
    runas initdb -D "$PGDATA_DIR" -U frogbot -A trust >/dev/null
    runas pg_ctl -D "$PGDATA_DIR" -o "-p 18802 -k $WORK -c listen_addresses=127.0.0.1 -c max_connections=200" -w -l "$WORK/pg.log" start >/dev/null
    "$PGBIN/createdb" -h 127.0.0.1 -p 18802 -U frogbot bench
    run postgres "postgres://frogbot@127.0.0.1:18802/bench" 18803
else
    echo "== postgres: skipped (no server binaries)"
fi
