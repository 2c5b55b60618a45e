#!/usr/bin/env python3
"""Arrows running back up between the workspace's crates (ARCHITECTURE.md, "Invariants").

The workspace's crates depend on each other one way: adapters and serve on frogbot-channel and
frogbot-model, the engine (frogbot-core) on those, the store crates on the engine, the test
harnesses on the stores, serve on everything. An arrow running back up is a dev-dependency of a
crate X on a workspace crate Y whose normal dependency closure (`[dependencies]` and
`[build-dependencies]`, optional ones too, any target, through the workspace's crates) contains
X: Y sits above X, and X's tests build X a second time under Y. Tests needing the crates above
live in a crate on top (frogbot-engine-tests). A crate naming itself as a dev-dependency (to turn
on a feature for its own tests) is no arrow.

Reads `cargo metadata --format-version 1 --no-deps` (run here, in the workspace's root, or in the
folder given with `--manifest-dir`). Exits 1 naming each arrow and the path by which Y reaches X;
`--self-test` plants a small workspace with one arrow, one self dev-dependency and one arrow
running down, and checks that only the arrow is found. Standard library only.
"""

import json
import os
import subprocess
import sys
import tempfile


def metadata(root):
    """`cargo metadata --no-deps` of the workspace at `root` (no network: path crates only)."""
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=root, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(out.stdout)


def arrows(meta):
    """[(x, y, path)]: x's dev-dependency y, and the normal-dependency path y -> … -> x."""
    members = set(meta["workspace_members"])
    packages = [p for p in meta["packages"] if p["id"] in members]
    names = {p["name"] for p in packages}
    normal = {p["name"]: set() for p in packages}
    dev = {p["name"]: set() for p in packages}
    for p in packages:
        for d in p["dependencies"]:
            # A workspace crate is a path dependency on a member (`rename` does not change `name`).
            if d["name"] not in names or not d.get("path"):
                continue
            (dev if d["kind"] == "dev" else normal)[p["name"]].add(d["name"])

    def path_to(start, goal):
        """A shortest normal-dependency path start -> … -> goal, or None."""
        seen, frontier = {start: None}, [start]
        while frontier:
            nxt = []
            for n in frontier:
                for m in sorted(normal[n]):
                    if m not in seen:
                        seen[m] = n
                        nxt.append(m)
            frontier = nxt
        if goal not in seen:
            return None
        path = [goal]
        while seen[path[-1]] is not None:
            path.append(seen[path[-1]])
        return path[::-1]

    found = []
    for x in sorted(dev):
        for y in sorted(dev[x]):
            if y == x:
                continue
            path = path_to(y, x)
            if path:
                found.append((x, y, path))
    return found, len(packages)


def report(found, count):
    for x, y, path in found:
        print("%s: dev-dependency %s runs back up (%s)" % (x, y, " -> ".join(path)),
              file=sys.stderr)
    if found:
        print("%d arrow(s) running back up: move the tests needing the crates above into a crate "
              "on top (ARCHITECTURE.md, \"Invariants\")" % len(found), file=sys.stderr)
        return 1
    print("crates: no arrow runs back up among %d workspace crates" % count)
    return 0


SELF_TEST = {
    "Cargo.toml": '[workspace]\nresolver = "3"\nmembers = ["low", "mid", "top", "side"]\n',
    # low's tests use top, which depends on mid, which depends on low: one arrow, low -> top.
    # low also names itself (a feature for its own tests): no arrow.
    "low/Cargo.toml": '[package]\nname = "low"\nversion = "0.1.0"\nedition = "2024"\n'
                      '[features]\ntesting = []\n'
                      '[dev-dependencies]\nlow = { path = ".", features = ["testing"] }\n'
                      'top = { path = "../top" }\n',
    "mid/Cargo.toml": '[package]\nname = "mid"\nversion = "0.1.0"\nedition = "2024"\n'
                      '[dependencies]\nlow = { path = "../low" }\n',
    # top reaches mid through an optional dependency: still in its closure.
    "top/Cargo.toml": '[package]\nname = "top"\nversion = "0.1.0"\nedition = "2024"\n'
                      '[dependencies]\nmid = { path = "../mid", optional = true }\n',
    # side's tests use low, below it: an arrow running down.
    "side/Cargo.toml": '[package]\nname = "side"\nversion = "0.1.0"\nedition = "2024"\n'
                       '[dependencies]\nmid = { path = "../mid" }\n'
                       '[dev-dependencies]\nlow = { path = "../low" }\n',
}


def self_test():
    """The checker finds the planted arrow and nothing else (run by check-invariants.sh)."""
    with tempfile.TemporaryDirectory() as root:
        for rel, text in SELF_TEST.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
            if rel != "Cargo.toml":
                src = os.path.join(root, os.path.dirname(rel), "src")
                os.makedirs(src, exist_ok=True)
                with open(os.path.join(src, "lib.rs"), "w", encoding="utf-8") as f:
                    f.write("")
        found, _ = arrows(metadata(root))
        want = [("low", "top", ["top", "mid", "low"])]
        if found != want:
            print("crate_arrows.py self-test: found %r, want %r" % (found, want), file=sys.stderr)
            return 1
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    root = "."
    if argv[:1] == ["--manifest-dir"] and len(argv) == 2:
        root = argv[1]
    elif argv:
        print("usage: crate_arrows.py [--self-test | --manifest-dir DIR]", file=sys.stderr)
        return 2
    return report(*arrows(metadata(root)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
