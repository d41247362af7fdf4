#!/usr/bin/env python3
"""The runbook's commands as code: docs/runbook.md read into sections (one per "## " heading) and
the shell commands of their ```sh blocks, for the tests that run each section's commands in the
situation where its alert fires (tests/runbook/test_*.py on the host, tests/vm guests).

A command is one logical line of a ```sh block: continuation lines (ending in a backslash) joined,
the trailing comment (a '#' outside quotes after a blank) kept apart as its note, comment-only
lines dropped. Placeholders are the runbook's capitalised words (DEV, DIR, DISK, SIBLING...,
PEER..., HOST, ...): substitute() replaces them as whole words.

run_section() runs every command of a section with a test's expectations and fails any command the
test did not give one for, so a command added to the runbook without a test is a failure, not a
silent gap; a command listed in cannot_run.py (it needs hardware no test has) is skipped with its
reason. A runner runs each command where the test set its situation up: run_local() on this host;
a test may pass its own (a container's nsenter, a guest's channel): runner(text, timeout) ->
(exit status or None on a timeout, output).

Claims (tests/runbook/check_coverage.py holds them): a test that runs sections says so at the top
level of its file, RUNBOOK_SECTIONS = {"SECTION": "the situation it sets up", ...} in Python or a
comment line "# runbook: SECTION[, SECTION...]" in a shell scenario, and every command of a
claimed section must match an expectation of a claiming file: Expect("REGEX", ...) in Python (a
string literal, so that it can be read without running the test), a line
"# runbook-expect: REGEX" in a shell scenario. Several files may claim one section and run a
part of it each (run_section's `only`).

Usage as a script: runbook.py [SECTION] lists the sections and their commands."""
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUNBOOK = os.path.join(ROOT, "docs", "runbook.md")

PREAMBLE = ""  # the commands before the first "## " heading


class Command:
    """One logical command line of a section: its text (without the comment), its comment, the
    line of docs/runbook.md it starts on, and its kind: "sh" (a ```sh block, run in a shell on
    the host) or "promql" (a ```promql block, an expression to query in Prometheus)."""

    def __init__(self, text, note, lineno, kind="sh"):
        self.text, self.note, self.lineno, self.kind = text, note, lineno, kind

    def __repr__(self):
        return "Command(%r, line %d)" % (self.text, self.lineno)


def split_comment(line):
    """(command, comment) of one shell line: the comment starts at a '#' outside quotes that
    follows a blank (or starts the line)."""
    quote = None
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 2
            continue
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip(), line[i + 1:].strip()
        i += 1
    return line.rstrip(), ""


def sections(path=RUNBOOK):
    """{heading text: [Command, ...]} in the runbook's order; PREAMBLE ("") holds the commands
    before the first "## " heading."""
    out = {PREAMBLE: []}
    current = PREAMBLE
    in_sh = False
    kind = "sh"
    pending, pending_note, pending_line = None, "", 0
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not in_sh:
                if line.startswith("## "):
                    current = line[3:].strip()
                    out.setdefault(current, [])
                elif line.strip() in ("```sh", "```promql"):
                    in_sh, kind = True, line.strip()[3:]
                continue
            if line.strip() == "```":
                if pending is not None:
                    raise ValueError("line %d: a continued command ends its block" % pending_line)
                in_sh = False
                continue
            text, note = split_comment(line) if kind == "sh" else (line, "")
            if pending is not None:
                text = pending + " " + text.strip()
                note = (pending_note + " " + note).strip()
                start = pending_line
            else:
                start = lineno
            if text.endswith("\\"):
                pending, pending_note, pending_line = text[:-1].rstrip(), note, start
                continue
            pending = None
            if text.strip():
                out[current].append(Command(text.strip(), note, start, kind))
    return out


def first_steps(path=RUNBOOK):
    """{heading: the text of its "**First:**" paragraph} for the sections that have one."""
    out = {}
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        heading, _, body = part.partition("\n")
        m = re.match(r"\s*\*\*First:\*\* (.*?)(?:\n\n|\Z)", body, re.S)
        if m:
            out[heading.strip()] = " ".join(m.group(1).split())
    return out


def code_commands(paragraph, secs=None):
    """The code spans of a paragraph that are commands: a lower-case word and more, where the word
    begins a command of some block of the runbook or an option (" -x") follows (`write through`
    is no command, `fsfreeze -u DIR` is). A first step's commands must be in its section's blocks,
    so that running the section runs its first step."""
    secs = secs if secs is not None else sections()
    words = {c.text.split()[0] for cmds in secs.values() for c in cmds}
    return [c for c in re.findall(r"`([^`]+)`", paragraph)
            if re.match(r"[a-z][\w.-]* \S", c) and (c.split()[0] in words or " -" in c)]


def placeholders(text):
    """The placeholders a command holds: capitalised words of two or more letters that are not
    inside a longer word (DEV, DIR, PEER..., LBA); environment-like words a command really uses
    (PATH in 'dd if=PATH' is one; $VAR references are not) are the caller's to substitute."""
    return sorted(set(m.group(1) for m in re.finditer(r"(?<![\w$-])([A-Z][A-Z0-9_]+)(?:\.\.\.)?(?![\w-])", text)))


def substitute(text, values):
    """text with each placeholder NAME (and NAME...) of values replaced as a whole word; a list
    value is joined with blanks (PEER... -> the peers); a key that is no placeholder
    ("localhost:9477") is replaced wherever it occurs."""
    for name, val in sorted(values.items(), key=lambda kv: -len(kv[0])):
        if isinstance(val, (list, tuple)):
            val = " ".join(shlex.quote(v) for v in val)
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            text = text.replace(name, str(val))  # a literal, as "localhost:9477" for a test's port
            continue
        text = re.sub(r"(?<![\w$-])%s(?:\.\.\.)?(?![\w-])" % re.escape(name),
                      lambda _m, v=str(val): v, text)
    return text


def has(*patterns, absent=()):
    """A check: every regular expression of patterns is found in the output (MULTILINE), none of
    absent is."""
    def check(rc, out):
        missing = [p for p in patterns if not re.search(p, out, re.M)]
        present = [p for p in absent if re.search(p, out, re.M)]
        return (not missing and not present,
                "shows %s%s" % (", ".join(repr(p) for p in patterns) or "its output",
                                (" and not %s" % ", ".join(repr(p) for p in absent)) if absent else "")
                + (" (missing %s)" % missing if missing else "")
                + (" (yet shows %s)" % present if present else ""))
    return check


class Expect:
    """What a test expects of one command: `match`, a regular expression searched in the command's
    text as the runbook has it (before substitution); `check(rc, out)` returns (ok, what) or a
    bool (a list: one check for each command it matches, in the section's order, for a command
    that comes twice); `rc`, the exit status it must end with (None: any); `timeout` in seconds;
    `values`, placeholder values for this command only."""

    def __init__(self, match, check=None, rc=0, timeout=120, values=None, why=""):
        self.match, self.check, self.rc, self.timeout = match, check, rc, timeout
        self.values, self.why = values or {}, why


def expectation(cmd, expects):
    hits = [e for e in expects if re.search(e.match, cmd.text)]
    if len(hits) > 1:
        raise ValueError("%r matches %d expectations: %s" % (cmd.text, len(hits),
                                                             [e.match for e in hits]))
    return hits[0] if hits else None


def run_local(text, timeout, env=None):
    """Runs one command with bash as the runbook's reader would (pipefail off, as typed);
    returns (exit status, stdout and stderr together)."""
    try:
        p = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=timeout,
                           env=env, errors="replace")
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        if isinstance(out, bytes):
            out = out.decode("utf-8", "replace")
        return None, out + "\n[timed out after %s s]" % timeout


def cannot_run(name, cmd):
    """The reason cannot_run.py gives for not running cmd of section name, or None."""
    sys.path.insert(0, HERE)
    import cannot_run as cr  # noqa: E402  (beside this file)
    for sec, rx, why in cr.CANNOT_RUN:
        if sec == name and re.search(rx, cmd.text):
            return why
    return None


def run_section(name, values, expects, check, runner=run_local, only=None, promql=None):
    """Runs each command of section `name` (placeholders replaced from values) with runner(text,
    timeout) -> (rc, output) and records through check(cond, what) that each ended with its
    expected status and passed its check; a command without an expectation fails, one that
    cannot_run.py lists is skipped with its reason. `only`: a regular expression choosing some
    of the section's commands (the rest are another test's, or another moment's), or a function
    of the Command (its .text, .note, .lineno). A ```promql expression goes to promql(text,
    timeout) -> (rc, output) (a test's Prometheus); without one it fails. Returns {command text
    as in the runbook: (rc, output)}."""
    cmds = sections()[name]
    check(cmds, "section %r has commands" % name)
    results = {}
    seen = {}
    for cmd in cmds:
        if only and not (only(cmd) if callable(only) else re.search(only, cmd.text)):
            continue
        why = cannot_run(name, cmd)
        if why:
            print("# not run: %s (%s)" % (cmd.text, why))
            continue
        e = expectation(cmd, expects)
        if not check(e is not None, "%s: an expectation for line %d: %s" % (name, cmd.lineno, cmd.text)):
            continue
        vals = dict(values)
        vals.update(e.values)
        text = substitute(cmd.text, vals)
        if cmd.kind == "promql" and not check(promql is not None, "%s: a Prometheus to query line %d in"
                                                  % (name, cmd.lineno)):
            continue
        rc, out = (promql if cmd.kind == "promql" else runner)(text, e.timeout)
        results[cmd.text] = (rc, out)
        shown = out if len(out) < 2000 else out[:1000] + "\n[...]\n" + out[-1000:]
        print("$ " + text + "\n" + shown.rstrip())
        if e.rc is not None:
            check(rc == e.rc, "%s: %s exits %s (expected %s)" % (name, text, rc, e.rc))
        nth = seen[id(e)] = seen.get(id(e), -1) + 1
        fn = e.check[nth] if isinstance(e.check, (list, tuple)) else e.check
        if fn:
            r = fn(rc, out)
            ok, what = r if isinstance(r, tuple) else (r, "shows what the runbook says")
            check(bool(ok), "%s: %s: %s" % (name, text, what))
    return results


def main():
    secs = sections()
    want = sys.argv[1] if len(sys.argv) > 1 else None
    for name, cmds in secs.items():
        if want and name != want:
            continue
        print("## " + (name or "(preamble)"))
        for c in cmds:
            print("  %4d  %s%s" % (c.lineno, c.text, ("    # " + c.note) if c.note else ""))
            ph = placeholders(c.text)
            if ph:
                print("        placeholders: " + ", ".join(ph))


if __name__ == "__main__":
    main()
