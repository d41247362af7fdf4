#!/usr/bin/env python3
"""The layout's rules, checked on the sources: every part declared in the top CMakeLists.txt
(diskpulse_part(NAME FOLDER SOURCES ... USES ... LIBS ...)) uses only what its floor may use
(lib: nothing; a collector: lib and other collectors; an exporter: lib and other exporters;
privsep: lib; daemon: everything), the parts form no cycle, every C file of the source folders
belongs to a part and is built, and every #include "..." resolves within the part's own folder
or a folder of a part it uses, as the compiler will resolve it. A header named *_internal.h is
for its own part only. Prints the table of parts and their dependencies.
Usage: check_layout.py SOURCE_DIR        check the tree
       check_layout.py --self-test SOURCE_DIR   show that a copy with a forbidden include, or a
                                                 forbidden USES, is refused"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

FLOORS = ("lib", "collectors", "exporters", "privsep", "daemon")
MAY_USE = {
    "lib": {"lib"},
    "collectors": {"lib", "collectors"},
    "exporters": {"lib", "exporters"},
    "privsep": {"lib"},
    "daemon": set(FLOORS),
}
# Compiled into the executable, which sees every part: checked as a file of its folder's part.
EXECUTABLE = {"daemon/main.c"}


def parse_parts(source):
    text = open(os.path.join(source, "CMakeLists.txt")).read()
    text = re.sub(r'"[^"]*"', '""', re.sub(r"#[^\n]*", "", text))
    body = text[text.index("endfunction()"):]  # the calls, not the function's definition
    parts = {}
    for m in re.finditer(r"\bdiskpulse_part\(([^)]*)\)", body):
        words = m.group(1).split()
        name, folder, fields, key = words[0], words[1], {"SOURCES": [], "USES": [], "LIBS": []}, None
        for w in words[2:]:
            if w in fields:
                key = w
            elif key:
                fields[key].append(w)
        parts[name] = {"name": name, "dir": folder, "floor": folder.split("/")[0],
                       "sources": fields["SOURCES"], "uses": fields["USES"], "order": len(parts)}
    return parts


def check(source, out=print):
    errors = []
    parts = parse_parts(source)
    if not parts:
        return ["no diskpulse_part() call found in CMakeLists.txt"]
    by_dir = {p["dir"]: p for p in parts.values()}

    for p in parts.values():
        if p["floor"] not in FLOORS:
            errors.append("part %s: folder %s is on no floor (%s)" % (p["name"], p["dir"], ", ".join(FLOORS)))
            continue
        for u in p["uses"]:
            q = parts.get(u)
            if q is None:
                errors.append("part %s uses %s, which is no part" % (p["name"], u))
            elif q is p:
                errors.append("part %s uses itself" % p["name"])
            elif q["floor"] not in MAY_USE[p["floor"]]:
                errors.append("part %s (%s/) may not use %s (%s/): %s/ uses only %s" % (
                    p["name"], p["floor"], u, q["floor"], p["floor"], ", ".join(sorted(MAY_USE[p["floor"]]))))
            elif q["order"] > p["order"]:
                errors.append("part %s uses %s, which is defined after it" % (p["name"], u))

    # Cycles (definition order already forbids them in CMake; checked here on the table itself).
    state = {}

    def visit(n, path):
        if state.get(n) == 1:
            errors.append("cycle: %s" % " -> ".join(path + [n]))
            return
        if state.get(n) == 2 or n not in parts:
            return
        state[n] = 1
        for u in parts[n]["uses"]:
            visit(u, path + [n])
        state[n] = 2
    for n in parts:
        visit(n, [])

    # Every C file of the source folders belongs to a part; every listed source exists.
    headers = {}  # header name -> folders holding it
    for floor in FLOORS:
        for root, _, files in os.walk(os.path.join(source, floor)):
            rel = os.path.relpath(root, source)
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(rel, f)
                if rel not in by_dir:
                    errors.append("%s: in no part (no diskpulse_part() has folder %s)" % (path, rel))
                    continue
                if f.endswith(".h"):
                    headers.setdefault(f, []).append(rel)
                elif f not in by_dir[rel]["sources"] and path not in EXECUTABLE:
                    errors.append("%s: not in the SOURCES of part %s" % (path, by_dir[rel]["name"]))
    for p in parts.values():
        for s in p["sources"]:
            if not os.path.isfile(os.path.join(source, p["dir"], s)):
                errors.append("part %s: source %s/%s does not exist" % (p["name"], p["dir"], s))
    for h, dirs in headers.items():
        if len(dirs) > 1:
            errors.append("header %s is in %s: bare includes need unique names" % (h, " and ".join(dirs)))

    # Every include resolves where the compiler will look: the part's folder, then its USES.
    includes = {}
    for p in parts.values():
        visible = [p["dir"]] + [parts[u]["dir"] for u in p["uses"] if u in parts]
        folder = os.path.join(source, p["dir"])
        if not os.path.isdir(folder):
            errors.append("part %s: folder %s does not exist" % (p["name"], p["dir"]))
            continue
        for f in sorted(os.listdir(folder)):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(p["dir"], f)
            with open(os.path.join(source, path), errors="replace") as fh:
                lines = fh.read().split("\n")
            for no, line in enumerate(lines, 1):
                m = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
                if not m:
                    continue
                name = m.group(2)
                if m.group(1) == "<":
                    if name in headers:
                        errors.append('%s:%d: <%s> is ours: include it as "%s"' % (path, no, name, name))
                    continue
                found = [d for d in visible if os.path.isfile(os.path.join(source, d, name))]
                if not found:
                    where = headers.get(name)
                    if where:
                        owner = by_dir[where[0]]
                        errors.append("%s:%d: includes %s of part %s (%s), which part %s does not use" % (
                            path, no, name, owner["name"], owner["dir"], p["name"]))
                    else:
                        errors.append("%s:%d: includes %s, which no part has" % (path, no, name))
                    continue
                if name.endswith("_internal.h") and found[0] != p["dir"]:
                    errors.append("%s:%d: includes %s, internal to %s" % (path, no, name, found[0]))
                if found[0] != p["dir"]:
                    includes.setdefault(p["name"], set()).add(by_dir[found[0]]["name"])

    if not errors:
        used_by = {n: sorted(q for q in parts if n in parts[q]["uses"]) for n in parts}
        out("%-11s %-22s %-6s %-48s %s" % ("part", "folder", "lines", "uses (includes from)", "used by"))
        for p in sorted(parts.values(), key=lambda p: p["order"]):
            lines = 0
            for f in os.listdir(os.path.join(source, p["dir"])):
                if f.endswith((".c", ".h")):
                    with open(os.path.join(source, p["dir"], f), errors="replace") as fh:
                        lines += fh.read().count("\n")
            uses = " ".join(u if u in includes.get(p["name"], ()) else "(%s)" % u for u in p["uses"])
            out("%-11s %-22s %6d %-48s %s" % (p["name"], p["dir"] + "/", lines, uses or "-",
                                            " ".join(used_by[p["name"]]) or "-"))
        out("(a part in parentheses is allowed but not included from today)")
    return errors


def self_test(source):
    """A copy of the tree with one violation at a time must be refused, and the copy without
    one accepted: the check is not vacuous."""
    cases = [
        ("a collector includes an exporter's header", "collectors/diskstats/diskstats.c",
         '#include "diskstats.h"\n', '#include "diskstats.h"\n#include "expo.h"\n', "which part diskstats does not use"),
        ("an exporter includes a collector's header", "exporters/http/http.c",
         '#include "http.h"\n', '#include "http.h"\n#include "smart.h"\n', "which part http does not use"),
        ("a collector includes the helper", "collectors/smart/smart.c",
         '#include "smart.h"\n', '#include "smart.h"\n#include "privsep.h"\n', "which part smart does not use"),
        ("lib includes a collector's header", "lib/util.c",
         '#include "util.h"\n', '#include "util.h"\n#include "devices.h"\n', "which part lib does not use"),
        ("daemon includes the helper's internal header", "daemon/prestart.c",
         '#include "privsep.h"\n', '#include "privsep.h"\n#include "privsep_internal.h"\n', "internal to privsep"),
        ("a collector is given an exporter in USES", "CMakeLists.txt",
         "USES lib devices)", "USES lib devices exposition)", "may not use exposition"),
        ("a file outside every part", "collectors/stray.c", None, "/* nothing */\n", "in no part"),
    ]
    failures = 0
    for what, rel, old, new, expect in cases:
        tmp = tempfile.mkdtemp(prefix="diskpulse-layout-")
        try:
            for d in FLOORS:
                shutil.copytree(os.path.join(source, d), os.path.join(tmp, d))
            shutil.copy(os.path.join(source, "CMakeLists.txt"), tmp)
            if not check(tmp, out=lambda *_: None) == []:
                print("FAIL: the unchanged copy is refused")
                return 1
            path = os.path.join(tmp, rel)
            if old is None:
                text = new
            else:
                text = open(path).read()
                if old not in text:
                    print("FAIL: %s: %r not found in %s" % (what, old, rel))
                    failures += 1
                    continue
                text = text.replace(old, new, 1)
            with open(path, "w") as f:
                f.write(text)
            errors = check(tmp, out=lambda *_: None)
            ok = any(expect in e for e in errors)
            print("%s: %s -> %s" % ("ok" if ok else "FAIL", what, "; ".join(errors) or "accepted"))
            failures += not ok
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--self-test":
        return self_test(sys.argv[2])
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    errors = check(sys.argv[1])
    for e in errors:
        print("layout: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
