#!/usr/bin/env python3
"""Runs the workspace's test binaries side by side, what `cargo test` runs one after another.

    python3 scripts/run-tests.py [CARGO TEST ARGS…] [-- TEST BINARY ARGS…]

1. `cargo test --no-run --message-format=json` builds every test binary the arguments select
   (`--workspace` when there are none) and names them.
2. The binaries run `FROGBOT_TEST_JOBS` at a time (those in `ALONE` first, by themselves), each
   as `cargo test` runs it:
   in its package's folder, with `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME` set, and its own test
   threads. The longest start first: the times of the last run are kept in the target folder
   (`frogbot-test-times.json`); without them, a few known long binaries go first.
3. The doctests (`cargo test --doc`) run as one more job.

Each binary's output is printed whole when it ends (a line when it starts), so the log reads as
`cargo test`'s does; the last lines list every binary's time. Every binary runs even when one
fails (`cargo test --no-fail-fast`); the exit code is 1 when any failed.

One at a time by default, as `cargo test` runs them: side by side, some tests still miss budgets
made for a machine to themselves (see `ALONE`; CI saw one more, a race in a delivery test, now
fixed). `FROGBOT_TEST_JOBS=3` runs three at a time: on 2 cores the binaries took 416 s instead of
about 850 s.

Why: most of the suite's time is binaries waiting on processes, sockets and servers (a killed
`frogbot serve`, Synapse, PostgreSQL), one after another. Each binary still starts its own
fixtures (a PostgreSQL cluster, a Synapse, a browser) on temporary folders and free ports, so
binaries side by side share nothing. cargo-nextest was not used: it runs every test in a process
of its own, which would start those per-process fixtures once per test.
"""
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

# Known long binaries (package, target), started first when no earlier times are kept.
LONG_FIRST = [
    ("frogbot", "crash"),
    ("frogbot-matrix", "synapse"),
    ("frogbot-slack", "engine_faults"),
    ("frogbot-postgres", "conformance"),
    ("frogbot", "serve_matrix"),
    ("frogbot", "discord_shards"),
    ("frogbot", "mcp_server"),
]

# Binaries that run alone, before the others start. serve's crash suite (a `frogbot serve` child
# SIGKILLed 20 times under 200 conversations) has budgets made for a machine it has to itself:
# beside two other binaries on 2 cores its audit ended with 131 reply pieces still owed by
# delivery jobs that were due and not yet tried (CI run of 16bc384).
# serve's two_processes asserts a p99 latency of pushed events (100 ms): beside two other binaries
# it measured 114 ms.
ALONE = [("frogbot", "crash"), ("frogbot", "two_processes")]


def split_args(argv):
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def target_dir():
    if os.environ.get("CARGO_TARGET_DIR"):
        return os.environ["CARGO_TARGET_DIR"]
    meta = subprocess.run(
        ["cargo", "metadata", "--format-version=1", "--no-deps"],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(meta.stdout)["target_directory"]


def build(cargo_args):
    """Builds the test binaries; returns (package, kind, name, executable, package dir)."""
    proc = subprocess.Popen(
        ["cargo", "test", "--no-run", "--message-format=json-render-diagnostics", *cargo_args],
        stdout=subprocess.PIPE,
        text=True,
    )
    found = []
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact":
            continue
        if not msg.get("profile", {}).get("test") or not msg.get("executable"):
            continue
        target = msg["target"]
        package = msg["package_id"]
        manifest = msg["manifest_path"]
        name = os.path.basename(os.path.dirname(manifest))
        # The package's name: the manifest's folder is not always it; the target's crate name of
        # a lib is, with `-` for `_`. Read it from the id (`path+file:///…#name@version` or
        # `…#version` when the folder is the name).
        frag = package.rsplit("#", 1)[-1]
        if "@" in frag:
            name = frag.split("@", 1)[0]
        found.append((name, target["kind"][0], target["name"], msg["executable"], os.path.dirname(manifest)))
    if proc.wait() != 0:
        sys.exit(proc.returncode)
    return found


def main():
    cargo_args, test_args = split_args(sys.argv[1:])
    picks = ("-p", "--package", "--workspace", "--all", "--manifest-path")
    if not any(a.split("=", 1)[0] in picks or a.startswith("-p") for a in cargo_args):
        cargo_args = ["--workspace", *cargo_args]
    jobs = max(1, int(os.environ.get("FROGBOT_TEST_JOBS", "1")))
    times_path = os.path.join(target_dir(), "frogbot-test-times.json")
    try:
        with open(times_path, encoding="utf-8") as f:
            past = json.load(f)
    except (OSError, ValueError):
        past = {}

    binaries = build(cargo_args)
    key = lambda b: f"{b[0]} {b[1]} {b[2]}"

    def expected(b):
        if key(b) in past:
            return past[key(b)]
        if (b[0], b[2]) in LONG_FIRST:
            return 1000 - LONG_FIRST.index((b[0], b[2]))
        return 0

    runs = sorted(binaries, key=expected, reverse=True)
    # The doctests compile every example: a long job, started early beside the long binaries.
    # Not when the arguments pick targets (`--test x`, `--lib`…): `cargo test` would not run them.
    selectors = ("--lib", "--bin", "--bins", "--test", "--tests", "--example", "--examples",
                 "--bench", "--benches", "--all-targets")
    if not any(a.split("=", 1)[0] in selectors for a in cargo_args):
        runs.insert(min(len(runs), 2), ("doctests", "doc", "all", None, os.getcwd()))
    lock = threading.Lock()
    results = []
    start_all = time.monotonic()

    def run(b):
        package, kind, name, exe, folder = b
        label = f"{package} ({kind} {name})" if exe else "doctests (cargo test --doc)"
        with lock:
            print(f"     Started {label}", flush=True)
        if exe:
            env = dict(os.environ, CARGO_MANIFEST_DIR=folder, CARGO_PKG_NAME=package)
            cmd = [exe, *test_args]
        else:
            env = dict(os.environ)
            cmd = ["cargo", "test", "--doc", *cargo_args, *(["--", *test_args] if test_args else [])]
        t0 = time.monotonic()
        done = subprocess.run(cmd, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        took = time.monotonic() - t0
        # A selection without a library has no doctests: cargo says so and fails.
        ok = done.returncode == 0 or (not exe and b"no library targets found" in done.stdout)
        with lock:
            print(f"\n     Running {label}: {'ok' if ok else 'FAILED'} in {took:.1f}s", flush=True)
            sys.stdout.buffer.write(done.stdout)
            sys.stdout.flush()
            results.append((label, key(b) if exe else "doctests", took, ok))

    alone = [b for b in runs if (b[0], b[2]) in ALONE]
    for b in alone:
        run(b)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(run, [b for b in runs if b not in alone]))

    wall = time.monotonic() - start_all
    print(f"\n==== {len(results)} test binaries, {jobs} at a time, in {wall:.0f}s "
          f"({sum(r[2] for r in results):.0f}s one after another)")
    for label, _, took, ok in sorted(results, key=lambda r: -r[2]):
        print(f"{took:8.1f}s  {'ok    ' if ok else 'FAILED'}  {label}")
    past.update({k: round(t, 1) for _, k, t, _ in results})
    try:
        with open(times_path, "w", encoding="utf-8") as f:
            json.dump(past, f, indent=0, sort_keys=True)
    except OSError:
        pass
    failed = [r[0] for r in results if not r[3]]
    if failed:
        print("\nFAILED: " + ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
