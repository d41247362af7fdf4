#!/usr/bin/env python3
"""Every name ARCHITECTURE.md and the parts' READMEs point a reader to exists: a `function()` or
a `MACRO_NAME` is defined in the sources, a `file.c`, `file.{c,h}` or `folder/` is in the tree.
A map that names a function which was renamed or a file which was split sends the newcomer to
nothing; this check fails instead. Placeholders a reader fills in (NAME, ID) are not names. And
README.md's map of the tree has a line for every folder of sources (it once left out
collectors/biolatency/).

Usage: check_docs_names.py SOURCE_DIR
       check_docs_names.py --self-test SOURCE_DIR"""
import os
import re
import shutil
import sys
import tempfile

FLOORS = ("lib", "collectors", "exporters", "privsep", "daemon")
TREES = FLOORS + ("tests", "docs", "etc", "packaging", "scripts", "systemd")
CODE = re.compile(r"`([^`\n]+)`")
FUNC = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(\)$")
MACRO = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
FILE = re.compile(r"^(?:[A-Za-z0-9_.-]+/)*([A-Za-z0-9_-]+)\.(?:\{([a-z,]+)\}|(c|h|py|md|cmake|rules|yml|scd|txt))$")
PLACEHOLDER = re.compile(r"NAME|(?:^|_)ID$")


def sources(root):
    """name -> text of every C source and header of the floors, and of the CMake files (a
    function of the build, a file it generates)."""
    out = {}
    for f in ("CMakeLists.txt",):
        with open(os.path.join(root, f), errors="replace") as fh:
            out[f] = fh.read()
    for floor in FLOORS:
        for d, _, files in os.walk(os.path.join(root, floor)):
            for f in files:
                if f.endswith((".c", ".h", ".cmake")):
                    with open(os.path.join(d, f), errors="replace") as fh:
                        out[os.path.relpath(os.path.join(d, f), root)] = fh.read()
    return out


def tree_files(root):
    names, paths = set(), set()
    for top in TREES:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            rel = os.path.relpath(d, root)
            paths.add(rel + "/")
            for f in files:
                names.add(f)
                paths.add(os.path.join(rel, f))
    for f in os.listdir(root):
        names.add(f)
        paths.add(f)
    return names, paths


def docs(root):
    out = ["ARCHITECTURE.md"]
    for floor in FLOORS:
        for d, _, files in os.walk(os.path.join(root, floor)):
            if "README.md" in files:
                out.append(os.path.relpath(os.path.join(d, "README.md"), root))
    return sorted(out)


def check(root):
    src = sources(root)
    blob = "\n".join(src.values())
    names, paths = tree_files(root)
    errors = []
    for doc in docs(root):
        with open(os.path.join(root, doc), errors="replace") as fh:
            text = fh.read()
        here = os.path.dirname(doc)
        for no, line in enumerate(text.split("\n"), 1):
            for tok in CODE.findall(line):
                tok = tok.strip()
                if PLACEHOLDER.search(tok):
                    continue
                m = FUNC.match(tok)
                if m:
                    if not re.search(r"\b%s\s*\(" % re.escape(m.group(1)), blob):
                        errors.append("%s:%d: %s is called or defined nowhere in the sources" % (doc, no, tok))
                    continue
                if MACRO.match(tok):
                    # ours or the system's (O_DSYNC, CAP_BPF): the sources name it somewhere
                    if not re.search(r"\b%s\b" % re.escape(tok), blob):
                        errors.append("%s:%d: %s is named nowhere in the sources" % (doc, no, tok))
                    continue
                m = FILE.match(tok)
                if m:
                    exts = (m.group(2) or m.group(3)).split(",")
                    stem = tok[: tok.rindex(".")]
                    for e in exts:
                        f = "%s.%s" % (stem, e)
                        ok = (f in paths or os.path.join(here, f) in paths) if "/" in f else \
                            (f in names or re.search(r"\b%s\b" % re.escape(f), blob))  # generated
                        if not ok:
                            errors.append("%s:%d: %s is no file of the tree" % (doc, no, f))
                    continue
                # a folder of ours (block/ in a sysfs path is the system's)
                if re.match(r"^[a-z0-9_]+(/[a-z0-9_]+)*/$", tok) and tok.split("/")[0] in TREES and \
                        tok not in paths and os.path.join(here, tok) not in paths:
                    errors.append("%s:%d: %s is no folder of the tree" % (doc, no, tok))
    return errors + check_readme_tree(root)


def check_readme_tree(root):
    """The other way round for README.md's map of the tree ("How it is built"): every folder of
    sources (a floor, or a part's folder under collectors/ and exporters/) has its line there,
    and every folder the map names is one."""
    with open(os.path.join(root, "README.md"), errors="replace") as fh:
        text = fh.read()
    m = re.search(r"^## How it is built\n.*?^```\n(.*?)^```", text, re.M | re.S)
    if not m:
        return ["README.md: no map of the tree under 'How it is built'"]
    named = set(re.findall(r"^([a-z0-9_]+/(?:[a-z0-9_]+/)?)\s", m.group(1), re.M))
    want = set()
    for floor in FLOORS:
        top = os.path.join(root, floor)
        if floor in ("collectors", "exporters"):
            want |= {"%s/%s/" % (floor, d) for d in os.listdir(top)
                     if os.path.isdir(os.path.join(top, d))
                     and any(f.endswith(".c") for f in os.listdir(os.path.join(top, d)))}
        else:
            want.add(floor + "/")
    errors = ["README.md: the map of the tree has no line for %s" % d for d in sorted(want - named)]
    errors += ["README.md: the map of the tree names %s, which is no folder" % d
               for d in sorted(named - {d for d in named if os.path.isdir(os.path.join(root, d))})]
    return errors


def self_test(root):
    cases = [
        ("a function that was renamed", "`round_run()`", "`round_go()`", "round_go() is called or defined nowhere"),
        ("a file that was split", "`iostat.c`", "`iostat_math.c`", "iostat_math.c is no file"),
        ("a macro that is gone", "`CANARY_FAMILY_DRIFT`", "`CANARY_FAMILY_DRIFTS`", "CANARY_FAMILY_DRIFTS is named nowhere"),
        ("a part missing from the README's map", "\ncollectors/biolatency/", "\ncollectors/biolatenc/",
         "the map of the tree has no line for collectors/biolatency/", "README.md"),
    ]
    fails = 0
    for what, old, new, expect, *doc in cases:
        doc = doc[0] if doc else "ARCHITECTURE.md"
        tmp = tempfile.mkdtemp(prefix="diskpulse-docnames-")
        try:
            for top in TREES:
                if os.path.isdir(os.path.join(root, top)):
                    shutil.copytree(os.path.join(root, top), os.path.join(tmp, top))
            for f in os.listdir(root):
                if os.path.isfile(os.path.join(root, f)):
                    shutil.copy(os.path.join(root, f), tmp)
            if check(tmp):
                print("FAIL: the unchanged copy is refused: %s" % check(tmp)[:3])
                return 1
            p = os.path.join(tmp, doc)
            text = open(p).read()
            if old not in text:
                print("FAIL: %s: %s is not in %s" % (what, old.strip(), doc))
                fails += 1
                continue
            open(p, "w").write(text.replace(old, new, 1))
            errors = check(tmp)
            ok = any(expect in e for e in errors)
            print("%s: %s -> %s" % ("ok" if ok else "FAIL", what, "; ".join(errors) or "accepted"))
            fails += not ok
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if fails else 0


def main():
    if sys.argv[1] == "--self-test":
        return self_test(sys.argv[2])
    errors = check(sys.argv[1])
    for e in errors:
        print("FAILED " + e)
    if not errors:
        print("ok     every name in ARCHITECTURE.md and the parts' READMEs exists, and README.md's map "
              "of the tree has every folder of sources")
    return 1 if errors else 0


sys.exit(main())
