"""--help gives the range that is enforced, for every number, duration and size (the real binary):
every option whose argument is N, DUR or BYTES shows "(default DEF, LO to HI)" or "(default DEF,
at least LO)"; --check-config accepts LO and HI and refuses the value just below LO and just
above HI (exit 2, the message naming the flag). A bound that names another option
("--web.read-header-timeout to 1h", "--diskstats.interval to 3600 x --diskstats.interval") is
tried with that option set. The README's flag table and the man page give the same range.
--web.max-connections and --web.max-connections-per-address say what happens beyond them, as the
README does.
Usage: test_help.py BINARY"""
import os
import re
import subprocess
import sys
import tempfile

import dp

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
UNITS = {"ms": 1000, "s": 10**6, "m": 60 * 10**6, "h": 3600 * 10**6, "d": 86400 * 10**6}
LINE = re.compile(r"^  --([a-z.-]+)=(\S+)\s+(.*)$")
RANGE = re.compile(r"\(default ([^,()]+)(?:, (?:(.+) to (.+)|at least (.+)))?\)$")


def usec(text):
    """A duration as the daemon writes it (1m30s, 24h, 100ms) in microseconds."""
    total, pos = 0, 0
    for m in re.finditer(r"(\d+)(ms|s|m|h|d)", text):
        if m.start() != pos:
            raise ValueError(text)
        total += int(m.group(1)) * UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(text)
    return total


def size(text):
    m = re.fullmatch(r"(\d+)(?: bytes?|k|M)?", text)
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * {"k": 1024, "M": 1 << 20}.get(text[-1], 1)


def dur_arg(us):
    if us % 1000:
        raise ValueError(us)
    return "%dms" % (us // 1000)


KINDS = {
    # argument: (read a bound, write a value, the step just beyond a bound)
    "DUR": (usec, dur_arg, 1000),
    "N": (int, str, 1),
    "BYTES": (size, str, 1),
}


def run(binary, state, args):
    p = subprocess.run([binary, "--check-config", "--state.directory=" + state] + args,
                       capture_output=True, text=True, timeout=30)
    return p.returncode, p.stderr.strip()


def bound(text, kind, binary_defaults):
    """(value, extra args) for a bound: a number, or another option ('--NAME', 'K x --NAME')
    taken at its default and set explicitly."""
    m = re.fullmatch(r"(?:(\d+) x )?--([a-z.-]+)", text)
    if not m:
        return KINDS[kind][0](text), []
    other = m.group(2)
    value = KINDS[kind][0](binary_defaults[other]) * int(m.group(1) or 1)
    return value, ["--%s=%s" % (other, binary_defaults[other])]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30).stdout
    opts = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            opts[m.group(1)] = (m.group(2), m.group(3))
    defaults = {}
    for name, (arg, text) in opts.items():
        r = RANGE.search(text)
        if r:
            defaults[name] = r.group(1)
    readme = open(os.path.join(SRC, "README.md"), encoding="utf-8").read()
    man = open(os.path.join(SRC, "docs", "diskpulse.8.scd"), encoding="utf-8").read()
    state = tempfile.mkdtemp(prefix="diskpulse-help-")
    numeric = [n for n, (arg, _) in opts.items() if arg in KINDS]
    dp.check(len(numeric) >= 15, "--help lists %d numeric, duration and size options" % len(numeric))
    for name in numeric:
        arg, text = opts[name]
        r = RANGE.search(text)
        if not dp.check(r and (r.group(2) or r.group(4)),
                        "--%s's help gives its range: %r" % (name, text[-60:])):
            continue
        lo_text = r.group(2) or r.group(4)
        hi_text = r.group(3)
        read, write, step = KINDS[arg]
        lo, lo_args = bound(lo_text, arg, defaults)
        tries = [(lo, lo_args, True)]
        if lo - step > 0 or arg == "N" and lo - step >= 0:
            tries.append((lo - step, lo_args, False))
        if hi_text:
            hi, hi_args = bound(hi_text, arg, defaults)
            tries += [(hi, hi_args, True), (hi + step, hi_args, False)]
        # options bounded below by this one follow it, so that its own bounds are what is tried
        followers = [n for n in numeric if n != name and
                     (RANGE.search(opts[n][1]).group(2) or "") == "--" + name]
        for value, extra, ok in tries:
            follow = ["--%s=%s" % (n, write(value)) for n in followers]
            rc, err = run(binary, state, extra + follow + ["--%s=%s" % (name, write(value))])
            dp.check(rc == (0 if ok else 2) and (ok or name in err),
                     "--%s=%s %s (exit %d%s)" % (name, write(value),
                                                 "accepted" if ok else "refused", rc,
                                                 ": " + err if err else ""))
        # the README's table row and the man page's entry state the same range
        rng = "%s to %s" % (lo_text, hi_text) if hi_text else "at least %s" % lo_text
        row = next((l for l in readme.splitlines() if l.startswith("| `--%s=" % name)), "")
        plain = re.sub(r"[`*_]", "", row)
        dp.check(rng.replace("--", "") in plain.replace("--", ""),
                 "README's row of --%s gives %r" % (name, rng))
        head = "\n*--%s*=" % name
        entry = man.split(head, 1)[1].split("\n*--", 1)[0] if head in man else ""
        plain = re.sub(r"[`*_]", "", " ".join(entry.split()))
        dp.check(rng.replace("--", "") in plain.replace("--", ""),
                 "the man page's --%s gives %r" % (name, rng))
    # beyond the connection limits: what the README says
    for name, phrase in (("web.max-connections", "takes the place of a waiting one of an address "
                          "holding more"),
                         ("web.max-connections-per-address", "takes the place of the address's "
                          "own that has waited over a second for its request")):
        row = next((l for l in readme.splitlines() if l.startswith("| `--%s=" % name)), "")
        dp.check(phrase in opts.get(name, ("", ""))[1] and phrase in row,
                 "--%s's help and README say a new connection %s" % (name, phrase))
    os.rmdir(state)
    dp.finish()


if __name__ == "__main__":
    main()
