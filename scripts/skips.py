#!/usr/bin/env python3
"""Says what the last ctest run in a build directory skipped, and why: every test that exited
with the skip code (its "SKIP: reason" line), then every case skipped inside a test that passed
(cmocka's "[  SKIPPED ]" with the reason printed before it, and the tests' own "skip ..." lines).
Usage: skips.py BUILD_DIR"""
import os
import re
import sys


def blocks(text):
    """(test name, its output, its status word) for each test in ctest's LastTest.log."""
    for m in re.finditer(r"^\d+/\d+ Test: (\S+)\n(.*?)^Test (\w+)", text, re.M | re.S):
        yield m.group(1), m.group(2), m.group(3)


def main():
    log = os.path.join(sys.argv[1], "Testing", "Temporary", "LastTest.log")
    try:
        with open(log, errors="replace") as f:
            text = f.read()
    except OSError as e:
        print("skips: no ctest log (%s)" % e)
        return
    whole, partial = [], []
    for name, out, status in blocks(text):
        reason = re.findall(r"SKIP: (.*)", out)
        if status == "Failed":
            continue
        if reason:
            whole.append((name, reason[-1].strip()))
            continue
        lines = out.splitlines()
        used = set()
        for i, line in enumerate(lines):
            m = re.match(r"\[  SKIPPED \] ([A-Za-z_]\w*)\s*$", line)
            if not m:
                continue
            for j in range(i - 1, max(-1, i - 6), -1):
                if "skip" in lines[j].lower() and "SKIPPED" not in lines[j]:
                    used.add(j)
                    partial.append((name, "%s: %s" % (m.group(1), lines[j].strip())))
                    break
            else:
                if not any(n == name and w.startswith(m.group(1) + ":") for n, w in partial):
                    partial.append((name, "%s: no reason printed" % m.group(1)))
        for i, line in enumerate(lines):
            if i not in used and re.match(r"\s*skip(ped)?\b", line, re.I):
                partial.append((name, line.strip()))
    print("skipped here (%d):" % len(whole))
    for name, why in whole:
        print("  %s: %s" % (name, why))
    if partial:
        print("skipped in part (cases inside tests that passed, %d):" % len(partial))
        seen = set()
        for name, why in partial:
            if (name, why) not in seen:
                seen.add((name, why))
                print("  %s: %s" % (name, why))


main()
