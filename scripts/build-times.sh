#!/usr/bin/env bash
# Clean release builds of `frogbot` and what each costs: wall time and binary size.
#
#   scripts/build-times.sh                # all three builds below
#   scripts/build-times.sh web slack      # only some of them
#
# Builds:  default  every channel (the default features)
#          web      --no-default-features: the HTTP API and the web chat only
#          slack    --no-default-features --features slack
#          discord / telegram / matrix: the same with that one channel
#
# Each build starts from nothing in its own fresh temporary CARGO_TARGET_DIR (deleted afterwards),
# so the time is what a first build on this machine costs (crates already downloaded; run
# `cargo fetch --locked` first to keep downloads out of the time). Slow: the default build takes
# tens of minutes on 2 cores; anything else building beside it makes every number larger.
set -euo pipefail
cd "$(dirname "$0")/.."

builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=(default web slack)

flags_of() {
    case "$1" in
        default) echo "" ;;
        web) echo "--no-default-features" ;;
        slack | discord | telegram | matrix) echo "--no-default-features --features $1" ;;
        *)
            echo "build-times: unknown build \"$1\" (default, web, slack, discord, telegram, matrix)" >&2
            return 1
            ;;
    esac
}
for b in "${builds[@]}"; do flags_of "$b" >/dev/null; done

cargo fetch --locked >/dev/null
export CARGO_INCREMENTAL=0 CARGO_TERM_COLOR=never
results=()
for b in "${builds[@]}"; do
    dir=$(mktemp -d "${TMPDIR:-/tmp}/frogbot-build-times.XXXXXX")
    trap 'rm -rf "$dir"' EXIT
    read -ra flags <<<"$(flags_of "$b")"
    echo "==> $b: cargo build --release --locked -p frogbot ${flags[*]}" >&2
    started=$(date +%s)
    CARGO_TARGET_DIR="$dir" cargo build --release --locked --offline -p frogbot "${flags[@]}" >&2
    seconds=$(( $(date +%s) - started ))
    bytes=$(stat -c %s "$dir/release/frogbot")
    results+=("$(awk -v b="$b" -v s="$seconds" -v n="$bytes" \
        'BEGIN { printf "%-8s %4dm%02ds  %6.1f MB", b, s / 60, s % 60, n / 1048576 }')")
    rm -rf "$dir"
    trap - EXIT
done
echo
printf '%-8s %8s  %9s   (%s cores, %s)\n' build "wall" size "$(nproc)" "$(rustc --version)"
printf '%s\n' "${results[@]}"
