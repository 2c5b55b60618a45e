#!/usr/bin/env bash
# Release-profile choices compared: for each, a clean release build of `frogbot` (its wall time
# and binary size), then every binary serving the same load back to back (requests/s), so the
# fastest build whose server is within 10 % of the best can be chosen.
#
#   scripts/profile-compare.sh [FEATURES_FLAGS]    # default: --no-default-features (web only)
#
# Profiles (cargo `--config` overrides of `[profile.release]`; `strip = true` in all):
#   current    the workspace's [profile.release] as it is
#   lto-off    lto = "off" (not even the per-crate thin LTO cargo does by default)
#   thin       lto = "thin"
#   fat-cgu1   lto = "fat", codegen-units = 1
#   opt2       opt-level = 2
#
# The load: `POST /api/chats/NEW/messages` with the `demo` model (each request a new chat and a
# turn), wrk on loopback, 16 connections, SQLite on tmpfs (/dev/shm) so the server's own work is
# measured rather than the disk's fsyncs; each binary runs twice, interleaved, and its better run
# counts. Installs wrk (Debian) when missing. Slow: one clean build per profile. Environment:
# PROFILES="current thin" to compare only some, DURATION (seconds of load, default 10),
# TIMINGS_DIR=path to keep each build's `cargo build --timings` report there.
set -euo pipefail
cd "$(dirname "$0")/.."
read -ra features <<<"${1:---no-default-features}"
DURATION="${DURATION:-10}"
profiles=(current lto-off thin fat-cgu1 opt2)
[ -n "${PROFILES:-}" ] && read -ra profiles <<<"$PROFILES"

overrides() {
    case "$1" in
        current) ;;
        lto-off) echo "--config profile.release.lto=\"off\"" ;;
        thin) echo "--config profile.release.lto=\"thin\"" ;;
        fat-cgu1) echo "--config profile.release.lto=\"fat\" --config profile.release.codegen-units=1" ;;
        opt2) echo "--config profile.release.opt-level=2" ;;
        *) echo "profile-compare: unknown profile $1" >&2; return 1 ;;
    esac
}
for p in "${profiles[@]}"; do overrides "$p" >/dev/null; done
command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }

cargo fetch --locked >/dev/null
export CARGO_INCREMENTAL=0 CARGO_TERM_COLOR=never
WORK=$(mktemp -d)
SHM=$(mktemp -d /dev/shm/frogbot-profile.XXXXXX)
SERVER=
cleanup() {
    [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
    rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT

declare -A build_s size_mb best_rps
for p in "${profiles[@]}"; do
    read -ra flags <<<"$(overrides "$p")"
    dir="$WORK/target-$p"
    echo "==> $p: cargo build --release -p frogbot ${features[*]} ${flags[*]}" >&2
    started=$(date +%s)
    CARGO_TARGET_DIR="$dir" cargo build --release --locked --offline -p frogbot "${features[@]}" "${flags[@]}" \
        ${TIMINGS_DIR:+--timings} >&2
    build_s[$p]=$(( $(date +%s) - started ))
    if [ -n "${TIMINGS_DIR:-}" ]; then
        mkdir -p "$TIMINGS_DIR" && cp "$dir"/cargo-timings/cargo-timing-2*.html "$TIMINGS_DIR/$p.html"
    fi
    cp "$dir/release/frogbot" "$WORK/frogbot-$p"
    size_mb[$p]=$(awk -v n="$(stat -c %s "$WORK/frogbot-$p")" 'BEGIN { printf "%.1f", n / 1048576 }')
    rm -rf "$dir"
done

cat >"$WORK/post.lua" <<'LUA'
local counter = 0
local prefix = ""
function init(args)
  prefix = tostring(math.random(1, 1e9)) .. "-" .. tostring(os.time())
end
request = function()
  counter = counter + 1
  return wrk.format("POST", "/api/chats/p" .. prefix .. "-" .. counter .. "/messages",
    {["Content-Type"] = "application/json"}, '{"parts":[{"type":"text","text":"hello"}]}')
end
LUA

port=18900
for round in 1 2; do
    for p in "${profiles[@]}"; do
        port=$((port + 1))
        rm -f "$SHM"/bench.db*
        FROGBOT_DATABASE="sqlite://$SHM/bench.db" FROGBOT_LISTEN="127.0.0.1:$port" RUST_LOG=warn \
            "$WORK/frogbot-$p" serve >"$WORK/$p.log" 2>&1 &
        SERVER=$!
        for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
        rps=$(wrk -t1 -c16 -d"${DURATION}s" -s "$WORK/post.lua" "http://127.0.0.1:$port" |
            awk '/Requests\/sec/ { print int($2) }')
        kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=
        echo "round $round $p: $rps requests/s" >&2
        if [ -z "${best_rps[$p]:-}" ] || [ "$rps" -gt "${best_rps[$p]}" ]; then best_rps[$p]=$rps; fi
    done
done

best=0
for p in "${profiles[@]}"; do [ "${best_rps[$p]}" -gt "$best" ] && best=${best_rps[$p]}; done
echo
printf '%-9s %8s %8s %10s %8s   (%s; %s cores, %s)\n' profile build size "requests/s" "of best" \
    "${features[*]:-default features}" "$(nproc)" "$(rustc --version)"
for p in "${profiles[@]}"; do
    printf '%-9s %5dm%02ds %6s MB %10s %7s%%\n' "$p" $((build_s[$p] / 60)) $((build_s[$p] % 60)) \
        "${size_mb[$p]}" "${best_rps[$p]}" "$(( best_rps[$p] * 100 / best ))"
done
