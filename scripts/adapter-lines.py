#!/usr/bin/env python3
"""The adapters' production source, as issue 39 measures it: non-blank lines of adapters/*/src
outside the testing modules (src/testing/, testing.rs), per adapter, with and without the inline
`#[cfg(test)] mod … { … }` unit tests. `-v` lists every file. Reads files only; prints figures."""
import glob
import re
import sys


def without_unit_tests(lines):
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip().startswith("#[cfg(test)]"):
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("#["):
                j += 1
            if j < len(lines) and re.match(r"\s*(pub(\(\w+\))?\s+)?mod\s+\w+\s*;", lines[j]):
                i = j + 1
                continue
            if j < len(lines) and re.match(r"\s*(pub(\(\w+\))?\s+)?mod\s+\w+\s*\{", lines[j]):
                depth, k = 0, j
                while k < len(lines):
                    depth += lines[k].count("{") - lines[k].count("}")
                    if depth <= 0:
                        break
                    k += 1
                i = k + 1
                continue
        out.append(lines[i])
        i += 1
    return out


def main():
    verbose = "-v" in sys.argv
    totals = {}
    for path in sorted(glob.glob("adapters/*/src/**/*.rs", recursive=True)):
        if "/testing/" in path or path.endswith("/testing.rs"):
            continue
        lines = open(path, encoding="utf-8").read().split("\n")
        all_lines = sum(1 for line in lines if line.strip())
        prod = sum(1 for line in without_unit_tests(lines) if line.strip())
        adapter = path.split("/")[1]
        a, p = totals.get(adapter, (0, 0))
        totals[adapter] = (a + all_lines, p + prod)
        if verbose:
            print(f"{all_lines:6} {prod:6}  {path}")
    print(f"{'with unit tests':>16} {'without':>8}  adapter")
    for adapter, (a, p) in sorted(totals.items()):
        print(f"{a:16} {p:8}  {adapter}")
    print(f"{sum(a for a, _ in totals.values()):16} {sum(p for _, p in totals.values()):8}  all four")


if __name__ == "__main__":
    main()
