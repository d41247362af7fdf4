#!/usr/bin/env python3
"""The README's "Where tests skip" row for CI says which tests the sanitizer pass leaves to the
plain build; this holds it to the build: run in a sanitizer build directory, it lists the tests
ctest has there as disabled and checks that each is named in the row (by its whole name, or by
the part after its last slash where the row names a group's members after a first whole name):
a test dropped from the sanitizer pass is said in the README or this fails. (The row also names
tests that skip there by their own condition, integration/valgrind and the package tests, and
tests that do run, in its reasons; those are not held.)
Usage: check_sanitizer_row.py BUILD_DIR README"""
import json
import re
import subprocess
import sys

ROW = "| a Debian 12 host or VM, as root (CI) |"


def disabled_tests(build):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True,
                         text=True, check=True).stdout
    names = []
    for t in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        if props.get("DISABLED"):
            names.append(t["name"])
    return names


def row_names(readme):
    rows = [l for l in open(readme, encoding="utf-8") if l.startswith(ROW)]
    if len(rows) != 1:
        sys.exit("FAIL: %d rows start with %r in %s (want 1)" % (len(rows), ROW, readme))
    return re.findall(r"`([^`]+)`", rows[0])


def main():
    build, readme = sys.argv[1], sys.argv[2]
    disabled = disabled_tests(build)
    named = row_names(readme)
    tails = {n for n in named if "/" not in n}
    whole = {n for n in named if "/" in n}
    failed = []
    for t in disabled:
        # benchmarks and the rules/fleet tests run none of the build's code: the row says so in
        # words ("the benchmarks"), and the comment in tests/CMakeLists.txt lists them
        if t.startswith(("bench/", "rules/", "fleet/", "layout/")) or t == "integration/expocheck":
            continue
        if t not in whole and t.split("/", 1)[1] not in tails:
            failed.append("%s is disabled in the sanitizer build but the README's row does not name it" % t)
    for f in failed:
        print("FAIL: " + f)
    print("%d disabled tests, %d names in the row: %s" % (len(disabled), len(named),
                                                          "FAILED" if failed else "they agree"))
    sys.exit(1 if failed else 0)


main()
