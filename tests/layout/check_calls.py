#!/usr/bin/env python3
"""No circle of calls between the files of a part: a part's files form layers, each calling only
the ones below it. The graph comes from the compiler: every C file of a part is compiled again,
as the build compiles it (compile_commands.json) but at -O0 with GCC's -fcallgraph-info, which
writes each translation unit's call graph (a .ci file, VCG format: a node per function, an edge
per call, functions of other units drawn as ellipses); `nm` on the object says which functions a
file defines globally. A call from file A to a global function of file B of the same part is an
edge A -> B; any cycle among a part's files fails the check. Calls through function pointers
(ops tables, thread start routines) are not calls in this graph: they are the sanctioned way for
a lower file to reach a higher one.

Prints each part's files in layers (a file calls only files of lower layers).

Usage: check_calls.py BUILD_DIR SOURCE_DIR [--known-cycles PART,...]
  BUILD_DIR holds compile_commands.json (the top CMakeLists.txt sets CMAKE_EXPORT_COMPILE_COMMANDS).
  --known-cycles names parts whose cycles are reported but do not fail (yet).
Runs a self-test first (two files calling each other must be found, a one-way pair must not).
Exits 77 (skipped) when the compiler has no -fcallgraph-info (clang)."""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

SKIP = 77


def part_of(rel):
    """The part of a source path relative to the source dir (its folder's last name), or None."""
    parts = rel.split("/")
    if parts[0] in ("lib", "privsep", "daemon") and len(parts) == 2:
        return parts[0]
    if parts[0] in ("collectors", "exporters") and len(parts) == 3:
        return parts[1]
    return None


def callgraph_command(entry, src, obj):
    """The build's command for src, changed to write obj and its .ci at -O0, warnings not errors."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MT", "-MF", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD", "-Werror") or a == entry["file"]:
            continue
        out.append(a)
    return out + ["-O0", "-fcallgraph-info", "-c", src, "-o", obj]


NODE = re.compile(r'node: \{ title: "([^"]+)"[^}]*?(shape : ellipse)?\s*\}')
EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')


def read_graph(ci):
    """(functions defined in the unit, calls as (caller, callee) pairs to functions it does not
    define)."""
    text = open(ci).read()
    defined, external = set(), set()
    for m in NODE.finditer(text):
        (external if m.group(2) else defined).add(m.group(1))
    calls = [(a, b) for a, b in EDGE.findall(text) if b in external and b not in defined]
    return defined, calls


def global_functions(obj):
    out = subprocess.run(["nm", "-g", "--defined-only", obj], capture_output=True, text=True,
                         check=True).stdout
    return {f[2] for f in (line.split() for line in out.splitlines()) if len(f) == 3 and f[1] in "TW"}


def compile_units(units, tmp):
    """units: list of (name, entry, src). Returns {name: (globals, calls)} or raises."""
    def one(i_unit):
        i, (name, entry, src) = i_unit
        obj = os.path.join(tmp, "u%d.o" % i)
        cmd = callgraph_command(entry, src, obj)
        r = subprocess.run(cmd, cwd=entry.get("directory", tmp), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("%s: %s\n%s" % (name, " ".join(cmd), r.stderr))
        _, calls = read_graph(obj[:-2] + ".ci")
        return name, (global_functions(obj), calls)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, enumerate(units)))


def file_graph(files, graphs):
    """Edges between the given files: {a: {b: [(caller, callee), ...]}}."""
    owner = {}
    for f in files:
        for fn in graphs[f][0]:
            owner[fn] = f
    edges = {f: {} for f in files}
    for f in files:
        for caller, callee in graphs[f][1]:
            g = owner.get(callee)
            if g and g != f:
                edges[f].setdefault(g, []).append((caller, callee))
    return edges


def cycles(edges):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def cycle_path(edges, comp):
    """One circle through the component, as [a, b, ..., a]."""
    comp = set(comp)
    start = min(comp)
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in edges[path[-1]] if w in comp)
        back = [w for w in nxt if w == start]
        if back and len(path) > 1:
            return path + [start]
        fresh = [w for w in nxt if w not in seen]
        if not fresh:
            # close the circle at the first file seen again
            w = nxt[0]
            return path[path.index(w):] + [w]
        path.append(fresh[0])
        seen.add(fresh[0])


def layers(edges):
    """Files by layer: 0 calls no other file, n calls only layers below n (no cycle)."""
    level = {}

    def depth(v):
        if v in level:
            return level[v]
        level[v] = 1 + max((depth(w) for w in edges[v]), default=-1)
        return level[v]

    for v in edges:
        depth(v)
    out = {}
    for v, n in level.items():
        out.setdefault(n, []).append(v)
    return [sorted(out[n]) for n in sorted(out)]


def base(path):
    return path.rsplit("/", 1)[-1]


def check_parts(units, graphs, known, out=print):
    """Returns the number of parts with a cycle that is not known."""
    by_part = {}
    for name, part in units:
        by_part.setdefault(part, []).append(name)
    failures, known_seen = 0, set()
    for part in sorted(by_part):
        files = sorted(by_part[part])
        edges = file_graph(files, graphs)
        found = cycles(edges)
        n_edges = sum(len(v) for v in edges.values())
        if not found:
            shown = "  <-  ".join(" ".join(base(f) for f in layer) for layer in layers(edges))
            out("%-11s %2d files, %2d calling pairs, no cycle: %s" % (part, len(files), n_edges, shown))
            continue
        for comp in found:
            path = cycle_path(edges, comp)
            steps = []
            for a, b in zip(path, path[1:]):
                caller, callee = edges[a][b][0]
                # GCC names a static function "FILE:NAME"
                steps.append("%s (%s calls %s)" % (base(a), caller.rsplit(":", 1)[-1], callee))
            line = "%s: %s call one another, e.g. %s -> %s" % (
                part, ", ".join(base(f) for f in comp), " -> ".join(steps), base(path[-1]))
            if part in known:
                known_seen.add(part)
                out("%-11s known, left for now: %s" % (part, line))
            else:
                failures += 1
                out("ERROR " + line)
    for part in sorted(set(known) - known_seen):
        out("note: %s has no cycle any more: take it off --known-cycles" % part)
    return failures


def self_test(compiler, tmp):
    """A pair that calls each other must be found, a one-way pair must not."""
    d = os.path.join(tmp, "selftest")
    os.makedirs(os.path.join(d, "privsep"))
    sources = {
        "privsep/low.c": "int high_f(int);\nint low_f(int);\nint low_g(int);\n"
                         "int low_f(int x) { return x + 1; }\n"
                         "int low_g(int x) { return high_f(x); }\n",
        "privsep/high.c": "int low_f(int);\nint high_f(int);\n"
                          "int high_f(int x) { return low_f(x) * 2; }\n",
    }
    for rel, text in sources.items():
        with open(os.path.join(d, rel), "w") as f:
            f.write(text)
    units = [("privsep/low.c", "privsep"), ("privsep/high.c", "privsep")]

    def run(tag):
        entries = [(rel, {"command": "%s -std=gnu17 -c %s" % (compiler, rel), "file": rel,
                          "directory": d}, os.path.join(d, rel)) for rel, _ in units]
        t = os.path.join(tmp, tag)
        os.makedirs(t)
        graphs = compile_units(entries, t)
        lines = []
        return check_parts(units, graphs, set(), lines.append), lines

    failures, lines = run("cyclic")
    if failures != 1 or "high.c (high_f calls low_f) -> low.c (low_g calls high_f) -> high.c" \
            not in lines[0]:
        return "a cycle between two files was not found: %s" % lines
    with open(os.path.join(d, "privsep/low.c"), "w") as f:
        f.write("int low_f(int);\nint low_f(int x) { return x + 1; }\n")
    failures, lines = run("oneway")
    if failures != 0 or "low.c  <-  high.c" not in lines[0]:
        return "a one-way pair was reported wrongly: %s" % lines
    return None


def main(argv):
    known = set()
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--known-cycles":
            known |= {p for p in argv[i + 1].split(",") if p}
            i += 2
            continue
        args.append(argv[i])
        i += 1
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    build, source = (os.path.realpath(a) for a in args)
    db = json.load(open(os.path.join(build, "compile_commands.json")))
    entries = {}
    for e in db:
        src = os.path.realpath(os.path.join(e.get("directory", build), e["file"]))
        rel = os.path.relpath(src, source)
        part = part_of(rel)
        if part and rel.endswith(".c"):
            entries[rel] = (part, e, src)
    if not entries:
        print("no source of a part in %s/compile_commands.json" % build, file=sys.stderr)
        return 1
    first = next(iter(entries.values()))[1]
    compiler = first["arguments"][0] if "arguments" in first else shlex.split(first["command"])[0]
    with tempfile.TemporaryDirectory(prefix="check_calls.") as tmp:
        probe = subprocess.run([compiler, "-fcallgraph-info", "-x", "c", "-c", "/dev/null", "-o",
                                os.path.join(tmp, "probe.o")], capture_output=True, text=True)
        if probe.returncode != 0:
            print("%s has no -fcallgraph-info (GCC >= 10 has): skipped" % compiler)
            return SKIP
        problem = self_test(compiler, tmp)
        if problem:
            print("ERROR self-test: " + problem)
            return 1
        print("self-test: a cycle between two files is found, a one-way pair passes")
        units = sorted((rel, part) for rel, (part, _, _) in entries.items())
        graphs = compile_units([(rel, entries[rel][1], entries[rel][2]) for rel, _ in units], tmp)
        failures = check_parts(units, graphs, known)
    if failures:
        print("%d part(s) with a cycle of calls between their files" % failures)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
