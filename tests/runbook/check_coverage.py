#!/usr/bin/env python3
"""Every command of the runbook is run by a test, or listed with the reason it cannot be.

For each section of docs/runbook.md that has shell commands (the preamble included, as ""):
- some test file claims it (RUNBOOK_SECTIONS at the top level of a Python test, a comment line
  "# runbook: SECTION[, SECTION...]" in a shell scenario; see tests/runbook/runbook.py), and
  ctest really runs that file: it is named on the command line of a test of the build directory
  (ctest --show-only=json-v1);
- each of its commands matches an expectation of a claiming file (Expect("REGEX", ...) with a
  string literal in Python, "# runbook-expect: REGEX" in a shell scenario) or an entry of
  tests/runbook/cannot_run.py;
- the commands its "**First:**" step names are among its commands, so running the section runs
  the first step.
And the list of commands that cannot run stays short: at most MAX_CANNOT entries and at most a
tenth of the runbook's commands, each with a reason and each matching a command of its section
(none left over from a command that changed). Claims of sections the runbook does not have fail.
Usage: check_coverage.py BUILD_DIR"""
import ast
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import runbook  # noqa: E402
import cannot_run  # noqa: E402

MAX_CANNOT = 12

failures = []


def check(cond, what):
    print(("ok     " if cond else "FAILED ") + what)
    if not cond:
        failures.append(what)
    return cond


def python_claims(path):
    """(RUNBOOK_SECTIONS keys, [expectation regexes]) of a Python file, or None when it claims
    nothing."""
    with open(path, encoding="utf-8") as f:
        src = f.read()
    if "RUNBOOK_SECTIONS" not in src:
        return None
    tree = ast.parse(src, path)
    claims = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "RUNBOOK_SECTIONS"
                                                for t in node.targets):
            claims = ast.literal_eval(node.value)
    if claims is None:
        return None
    regexes = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name == "Expect" and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                regexes.append(node.args[0].value)
    return dict(claims), regexes


GUEST_PY = os.path.join(HERE, "guest.py")
GUEST_CALLS_RE = re.compile(r"^\s*runbook\s+\S+", re.M)


def python_claims_regexes(path):
    """The string-literal first arguments of every Expect(...) call in a Python file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    # Module-level string constants, for Expect(NAME, ...) with a regex kept in one.
    consts = {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
              and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
              for t in node.targets if isinstance(t, ast.Name)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name != "Expect" or not node.args:
                continue
            a = node.args[0]
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                out.append(a.value)
            elif isinstance(a, ast.Name) and a.id in consts:
                out.append(consts[a.id])
    return out


def shell_claims(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    names = []
    for m in re.finditer(r"^# runbook: (.+)$", text, re.M):
        names += [n.strip() for n in m.group(1).split(",") if n.strip()]
    if not names:
        return None
    regexes = re.findall(r"^# runbook-expect: (.+?)\s*$", text, re.M)
    # A guest scenario runs a section with lib.sh's `runbook SECTION SITUATION ...`, and the host
    # checks it with the expectations of tests/runbook/guest.py: those count for the sections
    # the scenario really calls it for, and a claimed section it never calls fails.
    called = set(re.findall(r"^\s*runbook\s+(\S+)", text, re.M))
    for n in names:
        check(n in called or not GUEST_CALLS_RE.search(text),
              "%s claims %s and runs it (runbook %s ...)" % (os.path.relpath(path, ROOT), n, n))
    if called:
        regexes += python_claims_regexes(GUEST_PY)
    return {n: "" for n in names}, regexes


def claimants():
    """{path: (claims, regexes)} of every test file under tests/ that claims sections."""
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "**", "*"), recursive=True)):
        if not os.path.isfile(path) or "/fixtures/" in path or "/corpus/" in path:
            continue
        if path.endswith(".py") and os.path.abspath(path) != os.path.abspath(__file__):
            got = python_claims(path)
        elif path.endswith(".sh"):
            got = shell_claims(path)
        else:
            continue
        if got:
            out[os.path.abspath(path)] = got
    return out


def ctest_files(build):
    """The absolute paths named on the command lines of the build directory's tests."""
    p = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        raise RuntimeError("ctest --show-only: %s" % p.stderr)
    files = set()
    for t in json.loads(p.stdout).get("tests", []):
        for arg in t.get("command", []):
            if os.path.isabs(arg):
                files.add(os.path.realpath(arg))
    return files


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    secs = runbook.sections()
    claims = claimants()
    run_by_ctest = ctest_files(build)
    total = sum(len(c) for c in secs.values())

    for path, (names, _) in sorted(claims.items()):
        rel = os.path.relpath(path, ROOT)
        # Run by ctest: named on a test's command line, or named by a file that is (the package's
        # guest scenario, tests/package/vm_systemd.sh, is started by check_vm.py).
        base = os.path.basename(path)
        runner = os.path.realpath(path) in run_by_ctest or any(
            f.endswith(".py") and os.path.isfile(f) and ('"%s"' % base) in open(f, encoding="utf-8").read()
            for f in run_by_ctest)
        check(runner, "%s (claims %d sections) is run by ctest" % (rel, len(names)))
        for n in names:
            check(n in secs, "%s claims %r, a section of the runbook" % (rel, n or "(preamble)"))

    entries = cannot_run.CANNOT_RUN
    check(len(entries) <= MAX_CANNOT and len(entries) * 10 <= total,
          "%d commands of %d cannot run (at most %d and a tenth)" % (len(entries), total, MAX_CANNOT))
    for sec, rx, why in entries:
        hits = [c for c in secs.get(sec, []) if re.search(rx, c.text)]
        check(hits and len(why.split()) >= 5,
              "cannot_run: %s / %s matches %d command(s), with a reason (%s)" % (sec or "(preamble)", rx,
                                                                               len(hits), why))

    firsts = runbook.first_steps()
    for name, cmds in secs.items():
        label = name or "(preamble)"
        texts = [c.text for c in cmds]
        for fc in runbook.code_commands(firsts.get(name, ""), secs):
            check(any(fc in t for t in texts),
                  "%s: its first step's `%s` is among its commands" % (label, fc))
        if not cmds:
            continue
        mine = {p: v for p, v in claims.items() if name in v[0]}
        if not check(mine, "%s (%d commands) is claimed by %s" % (
                label, len(cmds), ", ".join(os.path.relpath(p, ROOT) for p in mine) or "no test")):
            continue
        regexes = [rx for _, (_, rxs) in mine.items() for rx in rxs]
        for c in cmds:
            by = [rx for rx in regexes if re.search(rx, c.text)]
            skip = [why for sec, rx, why in entries if sec == name and re.search(rx, c.text)]
            check(by or skip, "%s line %d: %s -- %s" % (
                label, c.lineno, c.text, ("run (%s)" % by[0]) if by else
                ("cannot run: %s" % skip[0]) if skip else "neither run nor listed"))

    if failures:
        print("%d check(s) failed:" % len(failures))
        for f in failures:
            print("  FAILED " + f)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
