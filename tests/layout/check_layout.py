#!/usr/bin/env python3
"""The layout's rules, checked on the sources. The rules are written once, in layout.rules at the
top of the tree (read by CMake too): which floor may use which (lib: nothing; a collector: lib and
other collectors; an exporter: lib and other exporters; privsep: lib; daemon: everything), the
prefixes of each part's exported symbols, and the violations of those known today.

Every part declared in the top CMakeLists.txt (diskpulse_part(NAME FOLDER SOURCES ... USES ...
LIBS ...)) uses only what its floor may use, the parts form no cycle, every C file of the source
folders belongs to a part and is built, and every #include "..." resolves within the part's own
folder or a folder of a part it uses, as the compiler will resolve it. A header named
*_internal.h is for its own part only. Prints the table of parts and their dependencies.

With --symbols, every symbol that a built part's object files define and export (nm) starts with
one of the part's prefixes; a violation is allowed only while it is listed as known, and a known
entry that is no longer a violation is an error too (the list only shrinks).

Usage: check_layout.py SOURCE_DIR        check the tree
       check_layout.py --self-test SOURCE_DIR   show that a copy with a forbidden include, or a
                                                 forbidden USES, is refused, that the rules are
                                                 read from layout.rules, and that the symbol
                                                 check refuses a new violation and a stale one
       check_layout.py --cmake-self-test SOURCE_DIR CMAKE
                                                 show that CMake, reading layout.rules, refuses
                                                 a forbidden USES at configure time
       check_layout.py --symbols SOURCE_DIR NM PART=OBJECT[;OBJECT...]...
                                                 check the symbols of the built parts"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

RULES = "layout.rules"
MAY_TOUCH = "**May touch:**"
# Compiled into the executable, which sees every part: checked as a file of its folder's part.
EXECUTABLE = {"daemon/main.c"}


class RulesError(Exception):
    pass


def read_rules(source):
    """layout.rules as {"floors": [floor, ...] bottom up, "may_use": {floor: set},
    "prefixes": {part: [name, ...]}, "known": {part: set}}; RulesError when it is malformed."""
    path = os.path.join(source, RULES)
    rules = {"floors": [], "may_use": {}, "prefixes": {}, "known": {}}
    with open(path) as f:
        for no, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            where = "%s:%d" % (RULES, no)
            key, args = words[0], words[1:]
            if key == "floor":
                if len(args) < 2:
                    raise RulesError("%s: floor FLOOR MAY-USE..." % where)
                if args[0] in rules["may_use"]:
                    raise RulesError("%s: floor %s given twice" % (where, args[0]))
                rules["floors"].append(args[0])
                rules["may_use"][args[0]] = set(args[1:])
            elif key == "prefix":
                if len(args) < 2:
                    raise RulesError("%s: prefix PART NAME..." % where)
                rules["prefixes"].setdefault(args[0], []).extend(args[1:])
            elif key == "known":
                if len(args) != 2:
                    raise RulesError("%s: known PART SYMBOL" % where)
                rules["known"].setdefault(args[0], set()).add(args[1])
            else:
                raise RulesError("%s: unknown rule %r (floor, prefix, known)" % (where, key))
    for floor, used in rules["may_use"].items():
        for u in sorted(used - set(rules["floors"])):
            raise RulesError("%s: floor %s may use %s, which is no floor" % (RULES, floor, u))
    if not rules["floors"]:
        raise RulesError("%s: no floor" % RULES)
    return rules


COLLECTOR_PARTS = "collectors/*/part.cmake"


def strip_cmake(text):
    """Strings and comments, left to right: a '#' in a string starts no comment."""
    return re.sub(r'"(?:[^"\\]|\\.)*"|#[^\n]*', lambda m: '""' if m.group(0)[0] == '"' else "", text)


def parse_parts(source):
    """The diskpulse_part() calls in the order CMake makes them: the top CMakeLists.txt's, with
    the collectors' part.cmake files (name order) where it includes them. The word COLLECTORS in
    USES stands for every part on the collectors floor defined before."""
    text = open(os.path.join(source, "CMakeLists.txt")).read()
    marker = text.find(COLLECTOR_PARTS)
    if marker >= 0:
        folder = os.path.join(source, "collectors")
        included = "".join(strip_cmake(open(os.path.join(folder, d, "part.cmake")).read())
                           for d in sorted(os.listdir(folder))
                           if os.path.isfile(os.path.join(folder, d, "part.cmake")))
        line_end = text.find("\n", marker)
        text = strip_cmake(text[:line_end]) + included + strip_cmake(text[line_end:])
    else:
        text = strip_cmake(text)
    body = text[text.index("endfunction()"):]  # the calls, not the function's definition
    parts = {}
    for m in re.finditer(r"\bdiskpulse_part\(([^)]*)\)", body):
        words = m.group(1).split()
        name, folder, fields, key = words[0], words[1], {"SOURCES": [], "USES": [], "LIBS": []}, None
        for w in words[2:]:
            if w in fields:
                key = w
            elif key == "USES" and w == "COLLECTORS":
                fields[key].extend(p["name"] for p in parts.values() if p["floor"] == "collectors")
            elif key:
                fields[key].append(w)
        parts[name] = {"name": name, "dir": folder, "floor": folder.split("/")[0],
                       "sources": fields["SOURCES"], "uses": fields["USES"], "order": len(parts)}
    return parts


def check(source, out=print):
    errors = []
    try:
        rules = read_rules(source)
    except (OSError, RulesError) as e:
        return [str(e)]
    floors, may_use = rules["floors"], rules["may_use"]
    parts = parse_parts(source)
    if not parts:
        return ["no diskpulse_part() call found in CMakeLists.txt"]
    by_dir = {p["dir"]: p for p in parts.values()}

    for p in parts.values():
        if p["floor"] not in floors:
            errors.append("part %s: folder %s is on no floor (%s)" % (p["name"], p["dir"], ", ".join(floors)))
            continue
        for u in p["uses"]:
            q = parts.get(u)
            if q is None:
                errors.append("part %s uses %s, which is no part" % (p["name"], u))
            elif q is p:
                errors.append("part %s uses itself" % p["name"])
            elif q["floor"] not in may_use[p["floor"]]:
                errors.append("part %s (%s/) may not use %s (%s/): %s/ uses only %s" % (
                    p["name"], p["floor"], u, q["floor"], p["floor"], ", ".join(sorted(may_use[p["floor"]]))))
            elif q["order"] > p["order"]:
                errors.append("part %s uses %s, which is defined after it" % (p["name"], u))

    # Prefixes and known violations name parts (a part without a prefix line has NAME_).
    for key in ("prefixes", "known"):
        for n in rules[key]:
            if n not in parts:
                errors.append("%s: %s of %s, which is no part" % (RULES, key, n))

    # Each part's README says what it may touch: a line "**May touch:** `a`, `b` (...)" whose
    # backquoted names before the first "(" are exactly its USES, so the README cannot drift
    # from what the compiler lets the part include.
    for p in parts.values():
        readme = os.path.join(source, p["dir"], "README.md")
        try:
            with open(readme, errors="replace") as fh:
                lines = [l for l in fh.read().split("\n") if l.startswith(MAY_TOUCH)]
        except OSError:
            errors.append("part %s: no %s/README.md" % (p["name"], p["dir"]))
            continue
        if len(lines) != 1:
            errors.append("%s/README.md: %d lines start with %s, not one" % (p["dir"], len(lines), MAY_TOUCH))
            continue
        said = re.findall(r"`([a-z_]+)`", lines[0][len(MAY_TOUCH):].split("(")[0])
        if sorted(said) != sorted(p["uses"]):
            errors.append("%s/README.md: %s names %s, but part %s USES %s" % (
                p["dir"], MAY_TOUCH, ", ".join(said) or "nothing", p["name"], ", ".join(p["uses"]) or "nothing"))

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
    for floor in floors:
        for root, _, files in os.walk(os.path.join(source, floor)):
            rel = os.path.relpath(root, source)
            for f in sorted(files):
                if f.endswith(".proto") and rel in by_dir:
                    # protoc-c makes NAME.pb-c.h of it at build time: the folder's header
                    headers.setdefault(f[:-len(".proto")] + ".pb-c.h", []).append(rel)
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(rel, f)
                if rel not in by_dir:
                    errors.append("%s: in no part (no diskpulse_part() has folder %s)" % (path, rel))
                    continue
                if f.endswith(".h"):
                    headers.setdefault(f, []).append(rel)
                elif f.endswith(".bpf.c"):
                    pass  # a BPF program, built by the part's own BPF build (clang -target bpf)
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
                # a header protoc-c makes at build time from a .proto of the folder is the part's
                proto = name[:-len(".pb-c.h")] + ".proto" if name.endswith(".pb-c.h") else None
                found = [d for d in visible if os.path.isfile(os.path.join(source, d, name))
                         or (proto and os.path.isfile(os.path.join(source, d, proto)))]
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


def violates(name, prefixes):
    """True when name starts with none of the prefixes (a NAME ending in '_') and is none of the
    names (any other NAME)."""
    return not any(name.startswith(p) if p.endswith("_") else name == p for p in prefixes)


def part_prefixes(rules, part):
    """The part's prefixes: its prefix lines', or its name and '_' when it has none."""
    return rules["prefixes"].get(part, [part + "_"])


def check_symbols(rules, symbols, out=print):
    """symbols: {part: {symbol: object file}} of the built parts. Prints each violation; returns
    the errors: a violation not known, a known one that is gone."""
    errors = []
    for part in sorted(symbols):
        prefixes = part_prefixes(rules, part)
        known = rules["known"].get(part, set())
        bad = {n: o for n, o in symbols[part].items() if violates(n, prefixes)}
        for n in sorted(bad):
            listed = n in known
            out("%s %-10s %-28s (%s)" % ("known  " if listed else "NEW    ", part, n, os.path.basename(bad[n])))
            if not listed:
                errors.append("part %s exports %s (%s), which starts with none of %s: rename it "
                              "or make it static" % (part, n, os.path.basename(bad[n]), " ".join(prefixes)))
        for n in sorted(known - set(bad)):
            errors.append("%s: known %s %s is no longer a violation (%s): remove the line" % (
                RULES, part, n, "renamed or static" if n not in symbols[part] else "now allowed"))
    for part in sorted(set(rules["known"]) - set(symbols)):
        errors.append("%s: known violations of %s, which was not checked" % (RULES, part))
    n_bad = sum(1 for part in symbols for n in symbols[part]
                if violates(n, part_prefixes(rules, part)))
    out("%d part(s), %d exported symbol(s), %d violation(s) of the prefix rule, %d of them known" % (
        len(symbols), sum(len(v) for v in symbols.values()), n_bad,
        sum(len(v) for v in rules["known"].values())))
    return errors


def nm_symbols(nm, objects):
    """{symbol: object file} of what the objects define and export."""
    out = {}
    res = subprocess.run([nm, "-A", "-P", "--defined-only", "-g"] + objects,
                         capture_output=True, text=True, check=True)
    for line in res.stdout.splitlines():
        obj, _, rest = line.rpartition(": ")
        fields = rest.split()
        # Names the compiler and the sanitizers make (__asan_*, __odr_asan_*, ...) are not ours.
        if len(fields) >= 2 and not fields[0].startswith(("__", ".")):
            out[fields[0]] = obj
    return out


def symbols_main(source, nm, specs):
    try:
        rules = read_rules(source)
    except (OSError, RulesError) as e:
        print("layout: " + str(e))
        return 1
    symbols = {}
    for spec in specs:
        part, _, objs = spec.partition("=")
        objects = [o for o in re.split(r"[;:]", objs) if o]
        if not part or not objects:
            print("layout: %r: expected PART=OBJECT[;OBJECT...]" % spec)
            return 2
        symbols[part] = nm_symbols(nm, objects)
    errors = check_symbols(rules, symbols)
    for e in errors:
        print("layout: " + e)
    return 1 if errors else 0


def self_test(source):
    """A copy of the tree with one violation at a time must be refused, and the copy without
    one accepted: the check is not vacuous. The rules come from layout.rules: changing them there
    changes what is refused. The symbol check refuses a new violation and a stale known one."""
    try:
        floors = read_rules(source)["floors"]
    except (OSError, RulesError) as e:
        print("FAIL: %s" % e)
        return 1
    cases = [
        ("a collector includes an exporter's header", "collectors/diskstats/diskstats.c",
         '#include "diskstats.h"\n', '#include "diskstats.h"\n#include "expo.h"\n', "which part diskstats does not use"),
        ("an exporter includes a collector's header", "exporters/http/http.c",
         '#include "http.h"\n', '#include "http.h"\n#include "smart.h"\n', "which part http does not use"),
        ("a collector includes the helper", "collectors/smart/smart.c",
         '#include "smart.h"\n', '#include "smart.h"\n#include "privsep.h"\n', "which part smart does not use"),
        ("lib includes a collector's header", "lib/util.c",
         '#include "util.h"\n', '#include "util.h"\n#include "devices.h"\n', "which part lib does not use"),
        ("lib includes the header protoc-c makes for the exposition", "lib/util.c",
         '#include "util.h"\n', '#include "util.h"\n#include "prometheus_metrics.pb-c.h"\n',
         "includes prometheus_metrics.pb-c.h of part exposition"),
        ("daemon includes the helper's internal header", "daemon/prestart.c",
         '#include "privsep.h"\n', '#include "privsep.h"\n#include "privsep_internal.h"\n', "internal to privsep"),
        ("a collector is given an exporter in USES", "collectors/diskstats/part.cmake",
         "USES lib devices)", "USES lib devices exposition)", "may not use exposition"),
        ("a file outside every part", "collectors/stray.c", None, "/* nothing */\n", "in no part"),
        ("a README that says less than the part uses", "collectors/diskstats/README.md",
         "`lib`, `devices`", "`lib`", "but part diskstats USES lib, devices"),
        # The rules are read from layout.rules, not from the checker: a floor that may no longer
        # use its own floor makes today's diskstats -> devices refused.
        ("layout.rules: collectors may use only lib", RULES,
         "floor collectors  lib collectors\n", "floor collectors  lib\n", "may not use devices"),
        ("layout.rules: a prefix line for a part that does not exist", RULES,
         "prefix process    process_\n", "prefix proces     process_\n", "prefixes of proces, which is no part"),
        ("layout.rules: a rule of no known kind", RULES,
         "floor lib ", "flor lib ", "unknown rule"),
    ]
    failures = 0
    for what, rel, old, new, expect in cases:
        tmp = tempfile.mkdtemp(prefix="diskpulse-layout-")
        try:
            for d in floors:
                shutil.copytree(os.path.join(source, d), os.path.join(tmp, d))
            shutil.copy(os.path.join(source, "CMakeLists.txt"), tmp)
            shutil.copy(os.path.join(source, RULES), tmp)
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

    # The symbol check on made-up symbols, with the real rules.
    rules = read_rules(source)
    part = "canary"
    known = {"canary": {"woken"}}
    sym_cases = [
        ("symbols: all prefixed", {part: {"canary_new": "canary.o"}}, {}, None),
        ("symbols: a new unprefixed one", {part: {"canary_new": "canary.o", "woken": "canary.o"}}, {},
         "part canary exports woken"),
        ("symbols: a known violation that is gone", {part: {"canary_new": "canary.o"}}, known,
         "is no longer a violation"),
        ("symbols: a known violation still there", {part: {"canary_new": "canary.o", "woken": "canary.o"}},
         {"canary": {"woken"}}, None),
        ("symbols: a part without a prefix line has its name and _",
         {"newpart": {"newpart_read": "newpart.o"}}, {}, None),
        ("symbols: ... and nothing else", {"newpart": {"newpart_read": "newpart.o", "read_all": "newpart.o"}},
         {}, "part newpart exports read_all"),
        ("symbols: a known entry that the prefixes now allow", {part: {"canary_x": "canary.o"}},
         {"canary": {"canary_x"}}, "no longer a violation (now allowed)"),
    ]
    for what, symbols, known_override, expect in sym_cases:
        r = dict(rules, known=known_override)
        errors = check_symbols(r, symbols, out=lambda *_: None)
        ok = (not errors) if expect is None else any(expect in e for e in errors)
        print("%s: %s -> %s" % ("ok" if ok else "FAIL", what, "; ".join(errors) or "accepted"))
        failures += not ok
    return 1 if failures else 0


def cmake_self_test(source, cmake):
    """CMake itself refuses a USES across floors at configure time, by the rules it reads from
    layout.rules: a copy of the tree (no build directories) with one change at a time is
    configured (tests off) and must stop with the expected message; the unchanged copy must
    configure."""
    cases = [
        ("unchanged", None, None, None, None),
        ("CMake: an exporter is given a collector in USES", "CMakeLists.txt",
         "USES lib exposition connguard webconfig LIBS", "USES lib exposition connguard webconfig smart LIBS",
         "may not use smart"),
        ("CMake: layout.rules says collectors may use only lib", RULES,
         "floor collectors  lib collectors\n", "floor collectors  lib\n", "may not use devices"),
    ]
    failures = 0
    ignore = shutil.ignore_patterns("build*", ".git", "__pycache__")
    for what, rel, old, new, expect in cases:
        tmp = tempfile.mkdtemp(prefix="diskpulse-layout-cmake-")
        try:
            tree = os.path.join(tmp, "src")
            shutil.copytree(source, tree, ignore=ignore)
            if rel:
                path = os.path.join(tree, rel)
                text = open(path).read()
                if old not in text:
                    print("FAIL: %s: %r not found in %s" % (what, old, rel))
                    failures += 1
                    continue
                with open(path, "w") as f:
                    f.write(text.replace(old, new, 1))
            res = subprocess.run([cmake, "-S", tree, "-B", os.path.join(tmp, "build"),
                                  "-DDISKPULSE_TESTS=OFF"], capture_output=True, text=True)
            said = " ".join((res.stdout + res.stderr).split())
            if expect is None:
                ok = res.returncode == 0
                verdict = "configures" if ok else "refused: " + said[-400:]
            else:
                ok = res.returncode != 0 and expect in said
                m = re.search(r"part \S+ \([^)]*\) may not use [^:]*: .*?(?= Call Stack|$)", said)
                verdict = ("refused: " + m.group(0)) if m else ("exit %d: %s" % (res.returncode, said[-400:]))
            print("%s: %s -> %s" % ("ok" if ok else "FAIL", what, verdict))
            failures += not ok
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--self-test":
        return self_test(sys.argv[2])
    if len(sys.argv) == 4 and sys.argv[1] == "--cmake-self-test":
        return cmake_self_test(sys.argv[2], sys.argv[3])
    if len(sys.argv) >= 4 and sys.argv[1] == "--symbols":
        return symbols_main(sys.argv[2], sys.argv[3], sys.argv[4:])
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    errors = check(sys.argv[1])
    for e in errors:
        print("layout: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
