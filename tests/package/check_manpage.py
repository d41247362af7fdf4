#!/usr/bin/env python3
"""diskpulse(8): `man --warnings` silent on the built page and the installed one (80 columns);
every flag of `diskpulse --help` is documented and every flag documented exists, and every key of
`diskpulse --check-config` is one of those flags (both come from the option table); every metric
family is documented: the names in the sources, in the golden outputs, and in the output of a
--once run on this host; signals, files, environment and exit codes are there; the
block-latency buckets it gives are the daemon's.
Usage: check_manpage.py BUILD_DIR DISKPULSE_BINARY"""
import glob
import os
import re
import shutil
import sys
import tempfile

import pkg


def render(args):
    p = pkg.run(["man", "--warnings", "-E", "UTF-8"] + args, env=dict({k: v for k, v in os.environ.items() if k != "MAN_KEEP_FORMATTING"}, MANWIDTH="80"))
    return p.returncode, p.stdout, p.stderr.strip()


def families_in_sources():
    names = set()
    # Every C file of the source folders, at any depth (collectors/smart/smart.c), leaving out the
    # tests and any build tree configured inside the source tree.
    for top in sorted(os.listdir(pkg.SOURCE)):
        root = os.path.join(pkg.SOURCE, top)
        if top.startswith(".") or top == "tests" or not os.path.isdir(root) \
                or os.path.exists(os.path.join(root, "CMakeCache.txt")):
            continue
        for path in glob.glob(os.path.join(root, "**", "*.[ch]"), recursive=True):
            with open(path, errors="replace") as f:
                names |= set(re.findall(r'"((?:diskpulse|process)_[a-z0-9_]*[a-z0-9])"', f.read()))
    return names


def families_in_text(text):
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def seconds_text(v):
    """0.00005 as the man page writes it: 50µs; 128 as 128s."""
    return "%.0fµs" % (v * 1e6) if v < 1e-3 else ("%gms" % (v * 1e3) if v < 1 else "%gs" % v)


def check_block_buckets(binary):
    """The buckets the man page gives for the block-latency histograms are the daemon's: the
    text page's default bounds as --help gives them, the native ones from the collector's
    constants (it once gave "1µs to 10s, at most 1.2 times apart" for both)."""
    helptext = pkg.run([binary, "--help"]).stdout
    bounds = [float(x) for x in re.search(r"--biolatency\.buckets=\S+.*\(default ([0-9.,]+)\)",
                                          helptext).group(1).split(",")]
    with open(os.path.join(pkg.SOURCE, "collectors", "biolatency", "biolatency_shared.h")) as f:
        shared = f.read()
    const = {k: int(v) for k, v in re.findall(
        r"#define BIOLAT_NATIVE_(MIN|MAX|SCHEMA)\s+\(?(-?\d+)\)?", shared)}
    with open(os.path.join(pkg.SOURCE, "docs", "diskpulse.8.scd")) as f:
        man = " ".join(f.read().split())
    section = man[man.index("## Block I/O latency"):man.index("## HTTP connections")]
    step = 2 ** (2.0 ** -const["SCHEMA"])
    for want in ("by default %d bounds from %s to %s" % (len(bounds), seconds_text(bounds[0]),
                                                       seconds_text(bounds[-1])),
                 "%.2f times apart from %s to %s (schema %d)" % (
                     step, seconds_text(step ** const["MIN"]), seconds_text(step ** const["MAX"]),
                     const["SCHEMA"])):
        pkg.check(want in section, "the man page's block-latency buckets: %r" % want)


def main():
    build, binary = sys.argv[1], sys.argv[2]
    pkg.need_tool("man", "man-db")
    page = os.path.join(build, "diskpulse.8")
    if not os.path.isfile(page):
        pkg.skip("no %s: scdoc was not found when the build was configured (Debian package scdoc)" % page)

    rc, text, warnings = render(["-l", page])
    pkg.check(rc == 0 and warnings == "", "man --warnings -l diskpulse.8: exit %d, %s" % (rc, warnings or "no warning"))
    tmp = tempfile.mkdtemp(prefix="diskpulse-man-")
    try:
        stage = pkg.stage(build, tmp)
        mandir = os.path.join(stage, "usr/share/man") if pkg.cache_value(build, "CMAKE_INSTALL_PREFIX") == "/usr" \
            else os.path.join(stage, pkg.cache_value(build, "CMAKE_INSTALL_PREFIX").lstrip("/"), "share/man")
        pkg.check(os.path.isfile(os.path.join(mandir, "man8", "diskpulse.8.gz")), "installed as man8/diskpulse.8.gz")
        rc, installed, warnings = render(["-M", mandir, "8", "diskpulse"])
        pkg.check(rc == 0 and warnings == "" and installed == text,
                  "man -M <installed> 8 diskpulse: the same page, %s" % (warnings or "no warning"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    flat = re.sub(r"\s+", " ", text)

    # Flags, both ways.
    help_text = pkg.run([binary, "--help"], check_rc=True).stdout
    flags = sorted(set(re.findall(r"^\s+(--(?:\[no-\])?[a-z][a-z0-9.-]*)", help_text, re.M)))
    pkg.check(len(flags) >= 25, "--help lists %d flags" % len(flags))
    missing = [f for f in flags if f not in flat]
    pkg.check(not missing, "every flag of --help is in the manual page%s" % (": missing " + " ".join(missing) if missing else ""))
    options = text[text.find("OPTIONS"):text.find("CONFIGURATION FILE")]

    # A number's range, as --help shows it from the option table, is the range the manual page
    # and the README give: "(default 64, 1 to 4096)" there, "(1 to 4096" or "(1 to 4096;" here.
    readme = open(os.path.join(pkg.SOURCE, "README.md"), encoding="utf-8").read()
    scd = open(os.path.join(pkg.SOURCE, "docs", "diskpulse.8.scd"), encoding="utf-8").read()
    ranges = re.findall(r"^\s+(--[a-z][a-z0-9.-]*)=N .*\(default \d+, (\d+) to (\d+)\)$", help_text, re.M)
    pkg.check(len(ranges) >= 4, "--help gives the range of %d numbers" % len(ranges))
    for flag, lo, hi in ranges:
        entry = re.search(r"\*" + re.escape(flag) + r"\*=_N_\n((?:\t.*\n)+)", scd)
        pkg.check(entry is not None, "the manual page has an entry for %s" % flag)
        body = re.sub(r"\s+", " ", entry.group(1))
        pkg.check("(%s to %s" % (lo, hi) in body, "the manual page gives %s's range as --help does, %s to %s" % (flag, lo, hi))
        row = re.search(r"^\| `" + re.escape(flag) + r"=N` \|.*$", readme, re.M)
        pkg.check(row is not None and "(%s to %s" % (lo, hi) in row.group(0),
                  "the README's row of %s gives its range as --help does, %s to %s" % (flag, lo, hi))
    documented = set(re.findall(r"(--(?:\[no-\])?[a-z][a-z0-9.-]*[a-z0-9])", options))
    known = set(flags) | {f.replace("[no-]", "") for f in flags} | {f.replace("[no-]", "no-") for f in flags}
    stale = sorted(documented - known)
    pkg.check(not stale, "every flag in OPTIONS exists%s" % (": not in --help: " + " ".join(stale) if stale else ""))

    # The config file's keys, as --check-config writes them (from the option table): each is a
    # flag of --help, so documented above.
    state = tempfile.mkdtemp(prefix="diskpulse-man-state-")
    try:
        dump = pkg.run([binary, "--check-config", "--state.directory=" + state], check_rc=True).stdout
    finally:
        shutil.rmtree(state, ignore_errors=True)
    keys = sorted(set(re.findall(r"^([a-z][a-z0-9.-]*) = ", dump, re.M)))
    pkg.check(len(keys) >= 25, "--check-config lists %d config-file keys" % len(keys))
    undocumented = [k for k in keys if "--" + k not in known]
    pkg.check(not undocumented, "every key of --check-config is a flag of --help%s" %
              (": not in --help: " + " ".join(undocumented) if undocumented else ""))

    # Metric families: the sources' names, the golden outputs' and what this host's --once shows.
    fams = families_in_sources()
    for golden in glob.glob(os.path.join(pkg.SOURCE, "tests", "golden", "*.prom")):
        with open(golden) as f:
            fams |= families_in_text(f.read())
    state = tempfile.mkdtemp(prefix="diskpulse-man-state-")
    try:
        once = pkg.run([binary, "--once", "--state.directory=" + state], timeout=120)
        fams |= families_in_text(once.stdout)
    finally:
        shutil.rmtree(state, ignore_errors=True)
    # Histogram and summary families appear in TYPE lines under their own names.
    pkg.check(len(fams) >= 100, "%d metric families found in the sources and outputs" % len(fams))
    missing = sorted(f for f in fams if not re.search(r"(?<![a-z0-9_])%s(?![a-z0-9_])" % re.escape(f), flat))
    pkg.check(not missing, "every metric family is in the manual page%s" % (": missing " + " ".join(missing) if missing else ""))

    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "CONFIGURATION FILE", "METRICS", "SIGNALS",
                    "ENVIRONMENT", "FILES", "EXIT STATUS", "SEE ALSO"):
        pkg.check(re.search(r"^%s$" % section, text, re.M) is not None, "section %s" % section)
    signals = text[text.find("\nSIGNALS"):text.find("\nENVIRONMENT")]
    for sig in ("SIGHUP", "SIGTERM", "SIGINT"):
        pkg.check(sig in signals, "SIGNALS: %s" % sig)
    files = text[text.find("\nFILES"):text.find("\nEXIT STATUS")]
    for path in ("/etc/diskpulse/diskpulse.conf", "/var/lib/diskpulse", "/lib/systemd/system/diskpulse.service",
                 "/lib/systemd/system/diskpulse.socket", "/usr/lib/sysusers.d/diskpulse.conf", "/proc/diskstats"):
        pkg.check(path in files, "FILES: %s" % path)
    env = text[text.find("\nENVIRONMENT"):text.find("\nFILES")]
    for var in ("LISTEN_FDS", "NOTIFY_SOCKET", "WATCHDOG_USEC", "STATE_DIRECTORY", "JOURNAL_STREAM"):
        pkg.check(var in env, "ENVIRONMENT: %s" % var)
    status = text[text.find("\nEXIT STATUS"):text.find("\nPRIVILEGES")]
    for code in ("0", "1", "2"):
        pkg.check(re.search(r"^\s+%s$" % code, status, re.M) is not None, "EXIT STATUS: %s" % code)
    # The exit codes it documents are the binary's.
    pkg.check(pkg.run([binary, "--diskstats.interval=banana"]).returncode == 2, "a bad flag value exits 2")
    pkg.check(pkg.run([binary, "--path.procfs=/nonexistent/proc", "--once"]).returncode == 1,
              "a root directory that cannot be opened exits 1")
    check_block_buckets(binary)
    pkg.finish()


main()
