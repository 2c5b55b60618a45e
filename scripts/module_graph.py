#!/usr/bin/env python3
"""Module circles in the workspace's crates (ARCHITECTURE.md, "Invariants").

For every crate under crates/ and adapters/ (or the crate folders given as arguments), the
graph of its modules: a module is a source file's module path (`src/agent/turn/mod.rs` is
`agent::turn`, `src/agent/turn/step.rs` is `agent::turn::step`, `src/lib.rs` and `src/main.rs`
the root). A file whose code names a path `crate::…`, `super::…` or `self::…` (in a `use` or
inline) depends on the deepest module that path names, following `use` re-exports on the way
(`crate::Foo`, where the root says `pub use talk::Foo`, names `talk`). Parents using their
children and children using their ancestors are not circles; two modules that diverge are
compared at the depth where they diverge (`agent::channel::x` naming `agent::talk::y` is the
edge `agent::channel -> agent::talk`).

Comments, strings and the items compiled for tests only (`#[cfg(test)]`, `#[cfg(all(test, …))]`:
inline test modules, test-only helpers, `mod x;` files) are left out.
Glob imports (`pub use types::*`) are not followed: such a path names the module holding the glob.

Exits 1 naming each circle (a strongly connected component of more than one module, with one
cycle through it and the line behind each edge); `--list` prints every component and exits 0.
`--forbid MODULE CRATE…` instead fails naming each use of the top-level MODULE from outside it
(the adapters' `testing`: production code never uses the test support).
Standard library only.
"""

import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strip_code(text):
    """The text with comments, string and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        m = re.match(r'b?r(#*)"', text[i:i + 260]) if c in "br" else None
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find('"' + m.group(1), i + m.end())
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:end]))
            i = end
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j + 1]))
            i = j + 1
            continue
        if c == "'":
            # A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'", text[i:i + 12])
            if m:
                out.append("' '")
                i += m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def skip_item(code, i):
    """The index just past the item starting at `i` (its `;`, or its block's closing brace)."""
    n, depth = len(code), 0
    while i < n:
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ";" and depth == 0:
            return i + 1
        elif c == "{":
            braces, i = 1, i + 1
            while i < n and braces:
                braces += {"{": 1, "}": -1}.get(code[i], 0)
                i += 1
            # `impl X {…}`, `mod tests {…}`, `fn f() {…}`: the block ends the item.
            return i
        elif c in ",}" and depth == 0:
            # An attribute on a struct field, match arm or expression: up to its end.
            return i
        i += 1
    return n


CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
# `#[cfg(all(test, …))]`: also compiled for tests only (an `any(test, …)` is not).
CFG_ALL = re.compile(r"#\s*\[\s*cfg\s*\(\s*all\s*\(((?:[^()]|\([^()]*\))*)\)\s*\)\s*\]")


def test_only_attrs(code):
    """The spans of the attributes that compile their item for tests only."""
    spans = [m.span() for m in CFG_TEST.finditer(code)]
    for m in CFG_ALL.finditer(code):
        args = re.sub(r"\([^()]*\)", "()", m.group(1))
        if "test" in (a.strip() for a in args.split(",")):
            spans.append(m.span())
    return sorted(spans)


def strip_cfg_test(code):
    """`code` without the items compiled for tests only (blanked, newlines kept)."""
    while True:
        spans = test_only_attrs(code)
        if not spans:
            return code
        start, end = spans[0]
        end = skip_item(code, end)
        code = code[:start] + re.sub(r"[^\n]", " ", code[start:end]) + code[end:]


def module_of(src, path):
    """The module path (a tuple) of the file `path` under a crate's `src`."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod" or (len(rel) == 1 and rel[0] in ("lib", "main")):
        rel = rel[:-1]
    return tuple(rel)


def test_only_files(src, files):
    """Files that are modules declared `#[cfg(test)] mod x;` (and everything below them)."""
    out = set()
    for path in files:
        code = strip_code(open(path, encoding="utf-8").read())
        here = module_of(src, path)
        for start, end in test_only_attrs(code):
            m = re.compile(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;").match(code, end)
            if m:
                out.add(here + (m.group(1),))
    return out


def parse_tree(code, i):
    """The paths of a use tree (or a plain path) starting at `i`: a list of name lists."""
    n = len(code)

    def ws(i):
        while i < n and code[i].isspace():
            i += 1
        return i

    def tree(i):
        i = ws(i)
        if i < n and code[i] == "{":
            paths, i = [], i + 1
            while True:
                i = ws(i)
                if i >= n:
                    return paths, i
                if code[i] == "}":
                    return paths, i + 1
                if code[i] == ",":
                    i += 1
                    continue
                sub, j = tree(i)
                if j == i:
                    return paths, i
                paths += sub
                i = j
        if i < n and code[i] == "*":
            return [["*"]], i + 1
        m = IDENT.match(code, i)
        if not m:
            return [[]], i
        name, i = m.group(0), m.end()
        j = ws(i)
        if code.startswith("::", j) and not code.startswith("::<", ws(j)):
            rest, k = tree(j + 2)
            return [[name] + p for p in rest], k
        alias = re.compile(r"\s+as\s+([A-Za-z_][A-Za-z0-9_]*)").match(code, i)
        if alias:
            # `use a::b as c`: the import is named `c` (kept as the path's last entry, `as:c`).
            return [[name, "as:" + alias.group(1)]], alias.end()
        return [[name]], i

    return tree(i)[0]


PATH_START = re.compile(r"(?<![A-Za-z0-9_:])\$?(crate|super|self)\s*::")
USE = re.compile(r"(?<![A-Za-z0-9_:])use\s+(?:::)?")


def code_of(path):
    return strip_cfg_test(strip_code(open(path, encoding="utf-8").read()))


def imports_of(code):
    """The names a file's `use` declarations bring in: {name: path (a list of names)}."""
    out = {}
    for m in USE.finditer(code):
        for names in parse_tree(code, m.end()):
            if not names or names[-1] == "*":
                continue
            key = names[-1]
            if key.startswith("as:"):
                names, key = names[:-1], key[3:]
            if names[-1] == "self":
                names = names[:-1]
                key = key if key != "self" else names[-1] if names else None
            if key and key != "_" and names:
                out[key] = names
    return out


class Crate:
    """A crate's modules and the names each module imports (to follow re-exports)."""

    def __init__(self, modules, imports):
        self.modules = modules
        self.imports = imports

    def resolve(self, here, names, seen=frozenset()):
        """The deepest module `names` (a path written in module `here`) names, following
        `use` re-exports (`crate::Foo` where the root says `pub use talk::Foo` is `talk`);
        None for a path into another crate."""
        if not names:
            return here
        first = names[0]
        if first == "crate":
            base, names = (), names[1:]
        elif first in ("self", "super"):
            base = here
            while names and names[0] in ("self", "super"):
                if names[0] == "super":
                    base = base[:-1]
                names = names[1:]
        elif here + (first,) in self.modules:
            base = here
        elif first in self.imports.get(here, {}) and (here, first) not in seen:
            base = self.resolve(here, self.imports[here][first], seen | {(here, first)})
            if base is None:
                return None
            names = names[1:]
        else:
            return None
        return self.walk(base, names, seen)

    def walk(self, target, names, seen):
        for name in names:
            if target + (name,) in self.modules:
                target = target + (name,)
                continue
            imported = self.imports.get(target, {}).get(name)
            if imported is None or (target, name) in seen:
                break
            found = self.resolve(target, imported, seen | {(target, name)})
            if found is None:
                break
            target = found
        return target


def edges_of(crate, here, code):
    """(target module, line) for each module path named in the file's non-test code."""
    found = []
    for m in PATH_START.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        for names in parse_tree(code, m.end()):
            names = [m.group(1)] + [n for n in names if n != "*" and not n.startswith("as:")]
            target = crate.resolve(here, names)
            if target is not None:
                found.append((target, line))
    return found


def collapse(a, b):
    """The sibling edge `a -> b` stands for, or None (same line of descent)."""
    k = 0
    while k < len(a) and k < len(b) and a[k] == b[k]:
        k += 1
    if k == len(a) or k == len(b):
        return None
    return a[:k + 1], b[:k + 1]


def components(nodes, graph):
    """Strongly connected components (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def a_cycle(comp, graph):
    """A shortest cycle through the component's first module (breadth first)."""
    members = set(comp)
    start = comp[0]
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, ())):
            if w == start:
                cycle = [v]
                while prev[cycle[-1]] is not None:
                    cycle.append(prev[cycle[-1]])
                return list(reversed(cycle)) + [start]
            if w in members and w not in prev:
                prev[w] = v
                queue.append(w)
    return comp + [start]


def name(module):
    return "::".join(module) or "crate"


def crate_graph(crate):
    src = os.path.join(crate, "src")
    files = []
    for root, _, names in os.walk(src):
        files += [os.path.join(root, f) for f in names if f.endswith(".rs")]
    files.sort()
    modules = {module_of(src, f) for f in files}
    tests = test_only_files(src, files)
    codes = {}
    for path in files:
        here = module_of(src, path)
        if not any(here[:len(t)] == t for t in tests):
            codes[path] = (here, code_of(path))
    crate = Crate(modules, {here: imports_of(code) for here, code in codes.values()})
    graph, why = {}, {}
    uses = []
    for path, (here, code) in codes.items():
        for target, line in edges_of(crate, here, code):
            uses.append((here, target, "%s:%d" % (path, line)))
            edge = collapse(here, target)
            if edge is None:
                continue
            graph.setdefault(edge[0], set()).add(edge[1])
            why.setdefault(edge, "%s:%d (%s)" % (path, line, name(target)))
    return modules, graph, why, uses


SELF_TEST = {
    # A circle between siblings, one through a `use` tree, one through a root re-export; what is
    # not a circle: parents and children, test-only code, comments, strings.
    "src/lib.rs": "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\npub use e::Thing;\n",
    "src/a/mod.rs": "mod x;\nuse crate::b::B; // crate::c::C\npub struct A;\n",
    "src/a/x.rs": "pub fn f() -> super::A { let _ = \"crate::c::C\"; super::A }\n",
    "src/b.rs": "use crate::{a::{self, x}, d};\npub struct B;\n",
    "src/c.rs": "use crate::a::A;\npub struct C;\n#[cfg(test)]\nmod tests { use crate::d::D; }\n",
    "src/d.rs": "pub struct D;\n#[cfg(all(test, feature = \"x\"))]\nfn t() { crate::c::C; }\n",
    "src/e.rs": "pub struct Thing(crate::d::D);\n",
    "src/f.rs": "",
}


def self_test():
    """The checker finds the circles it should and nothing else (run by check-invariants.sh)."""
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        for rel, text in SELF_TEST.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        # d -> e through `crate::Thing` closes e -> d.
        with open(os.path.join(root, "src/d.rs"), "a", encoding="utf-8") as f:
            f.write("pub fn g(_: crate::Thing) {}\n")
        modules, graph, _, _ = crate_graph(root)
        comps = sorted(c for c in components(modules, graph) if len(c) > 1)
        want = [[("a",), ("b",)], [("d",), ("e",)]]
        if comps != want:
            print("module_graph.py self-test: found %r, want %r" % (comps, want), file=sys.stderr)
            return 1
    return 0


def forbid(module, crates):
    """Fails naming each use of the top-level `module` (e.g. `testing`) from outside it."""
    bad = 0
    for crate in crates:
        if not os.path.isdir(os.path.join(crate, "src")):
            continue
        for here, target, where in crate_graph(crate)[3]:
            if target[:1] == (module,) and here[:1] != (module,):
                print("%s: %s uses %s: only tests may" % (where, name(here), name(target)),
                      file=sys.stderr)
                bad += 1
    if bad:
        return 1
    print("no code outside `%s` uses it in %d crates" % (module, len(crates)))
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if argv[:1] == ["--forbid"] and len(argv) > 2:
        return forbid(argv[1], [a.rstrip("/") for a in argv[2:]])
    listing = "--list" in argv
    crates = [a.rstrip("/") for a in argv if a != "--list"]
    if not crates:
        for parent in ("crates", "adapters"):
            for d in sorted(os.listdir(parent)):
                if os.path.isfile(os.path.join(parent, d, "Cargo.toml")):
                    crates.append(os.path.join(parent, d))
    circles = 0
    for crate in crates:
        if not os.path.isdir(os.path.join(crate, "src")):
            continue
        modules, graph, why, _ = crate_graph(crate)
        comps = [c for c in components(modules, graph) if len(c) > 1]
        out = sys.stdout if listing else sys.stderr
        for comp in sorted(comps):
            circles += 1
            cycle = a_cycle(comp, graph)
            steps = list(zip(cycle, cycle[1:]))
            members = ", ".join(name(m) for m in comp)
            print("%s: module circle among %s" % (crate, members), file=out)
            print("  cycle: " + " -> ".join(name(m) for m in cycle), file=out)
            for a, b in steps:
                print("    %s -> %s: %s" % (name(a), name(b), why[(a, b)]), file=out)
            for a in comp:
                for b in sorted(graph.get(a, ())):
                    if b in comp and (a, b) not in steps:
                        print("    also %s -> %s: %s" % (name(a), name(b), why[(a, b)]), file=out)
    if listing:
        print("%d module circle(s) in %d crate(s)" % (circles, len(crates)))
        return 0
    if circles:
        print("%d module circle(s): move the shared code into the lower module, or a new module "
              "both use (ARCHITECTURE.md, \"Invariants\")" % circles, file=sys.stderr)
        return 1
    print("modules: no circles in %d crates" % len(crates))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
