#!/usr/bin/env python3
"""The daemon is collector-blind: no file daemon/*.c but the registry (daemon/registry.c) names a
collector's functions, types, options or id. A line is refused when it matches
`diskstats_|canary_|biolat|smart_|COLLECTOR_[A-Z]` (issue 35's rule) or holds the name of a
collector of daemon/registry.h's REGISTRY_COLLECTORS followed by '_', comments included: the
daemon reaches a collector only through lib/collector.h and the registry's calls
(registry_count(), registry_def(), registry_commanded()).

Usage: check_blind.py SOURCE_DIR
       check_blind.py --self-test   (a forbidden line must be found, the registry's left alone)"""
import glob
import os
import re
import sys
import tempfile

RULE = r"diskstats_|canary_|biolat|smart_|COLLECTOR_[A-Z]"
ALLOWED = {"registry.c"}


def registered(src):
    """The collectors' names in daemon/registry.h: the X(ID, NAME) lines of REGISTRY_COLLECTORS."""
    with open(os.path.join(src, "daemon", "registry.h"), encoding="utf-8") as f:
        return re.findall(r"^\s*X\(\s*[A-Z0-9_]+\s*,\s*([a-z0-9_]+)\s*\)", f.read(), re.M)


def violations(src):
    """(file, line number, line) of every line of daemon/*.c that names a collector."""
    names = registered(src)
    rule = re.compile("|".join([RULE] + [re.escape(n) + "_" for n in names]))
    found = []
    for path in sorted(glob.glob(os.path.join(src, "daemon", "*.c"))):
        if os.path.basename(path) in ALLOWED:
            continue
        with open(path, encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                if rule.search(line):
                    found.append((os.path.relpath(path, src), no, line.rstrip("\n")))
    return names, found


def check(src):
    names, found = violations(src)
    if not names:
        print("no collector found in daemon/registry.h's REGISTRY_COLLECTORS")
        return 1
    for path, no, line in found:
        print("%s:%d: names a collector (the registry alone may): %s" % (path, no, line.strip()))
    if found:
        print("%d line(s) of daemon/*.c name a collector; reach it through lib/collector.h's hooks "
              "and the registry's calls instead" % len(found))
        return 1
    print("daemon/*.c names no collector (%s) outside registry.c" % ", ".join(names))
    return 0


def self_test():
    """A tree with a registry of one collector "disk": each forbidden line is found, alone; the
    registry's own lines and a clean file are not."""
    bad = ['#include "diskstats_collector.h"', "round_sample(&d->round, COLLECTOR_DISKSTATS);",
           "o->canary_import", "smart_read(x);", "/* biolatency's loader */", "disk_thing();"]
    with tempfile.TemporaryDirectory() as src:
        os.mkdir(os.path.join(src, "daemon"))
        with open(os.path.join(src, "daemon", "registry.h"), "w") as f:
            f.write("#define REGISTRY_COLLECTORS(X) \\\n        X(DISK, disk)\n")
        with open(os.path.join(src, "daemon", "registry.c"), "w") as f:
            f.write("const struct collector_def *const collector_defs[COLLECTOR_MAX];\n")
        with open(os.path.join(src, "daemon", "round.c"), "w") as f:
            f.write("for (size_t i = 0; i < registry_count(); i++)\n")
        names, found = violations(src)
        if names != ["disk"] or found:
            print("self-test: a clean tree: %r %r" % (names, found))
            return 1
        for line in bad:
            with open(os.path.join(src, "daemon", "daemon.c"), "w") as f:
                f.write("/* clean */\n%s\n" % line)
            _, found = violations(src)
            if found != [(os.path.join("daemon", "daemon.c"), 2, line)]:
                print("self-test: %r not found alone: %r" % (line, found))
                return 1
    print("self-test passed")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    return check(sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())
