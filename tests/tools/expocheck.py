#!/usr/bin/env python3
"""Strict checker of the Prometheus text exposition format 0.0.4.

Stricter than `promtool check metrics` of Debian 12, which accepts duplicate series, a family split
in two groups, histograms without +Inf or with unordered buckets. Usage: expocheck.py [FILE|-]...
Exit status 0 when every file is valid; each problem is printed as FILE:LINE: message.
"""
import math
import re
import sys

NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_value(s):
    if s in ("+Inf", "Inf"):
        return math.inf
    if s == "-Inf":
        return -math.inf
    if s == "NaN":
        return math.nan
    if not re.match(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$", s):
        raise ValueError("bad number %r" % s)
    return float(s)


def parse_labels(text, pos):
    """Parses `{a="b",...}` starting at text[pos] == '{'. Returns (list of pairs, new pos)."""
    labels = []
    pos += 1
    while True:
        if pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        m = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*").match(text, pos)
        if not m:
            raise ValueError("bad label name at column %d" % (pos + 1))
        name = m.group(0)
        pos = m.end()
        if text[pos:pos + 2] != '="':
            raise ValueError("expected =\" after label %s" % name)
        pos += 2
        value = []
        while True:
            if pos >= len(text):
                raise ValueError("unterminated label value")
            c = text[pos]
            if c == "\\":
                nxt = text[pos + 1:pos + 2]
                if nxt == "n":
                    value.append("\n")
                elif nxt in ('"', "\\"):
                    value.append(nxt)
                else:
                    raise ValueError("bad escape \\%s in label %s" % (nxt, name))
                pos += 2
                continue
            if c == '"':
                pos += 1
                break
            if c == "\n":
                raise ValueError("raw newline in label value")
            value.append(c)
            pos += 1
        labels.append((name, "".join(value)))
        if pos < len(text) and text[pos] == ",":
            pos += 1
            continue
        if pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        raise ValueError("expected , or } after label %s" % name)


def family_of(sample, types):
    """The family a sample name belongs to, given the TYPEs seen so far."""
    for suffix in ("_bucket", "_sum", "_count"):
        if sample.endswith(suffix):
            base = sample[: -len(suffix)]
            if types.get(base) in ("histogram", "summary"):
                if suffix == "_bucket" and types[base] != "histogram":
                    continue
                return base
    return sample


def check(text):
    """Returns a list of (line number, message)."""
    errors = []
    err = lambda n, m: errors.append((n, m))
    if not text:
        return [(0, "empty exposition")]
    if not text.endswith("\n"):
        err(text.count("\n") + 1, "the last line does not end with a newline")
    types, helps = {}, {}
    finished = set()  # families whose group has ended
    current = None
    series = {}
    fam_samples = {}
    for n, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
        if line == "":
            err(n, "empty line")
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME_RE.match(name):
                    err(n, "invalid metric name %r" % name)
                    continue
                if name != current:
                    if name in finished or (current is not None and name in fam_samples):
                        err(n, "family %s appears in two groups" % name)
                    if current is not None:
                        finished.add(current)
                    current = name
                if parts[1] == "HELP":
                    if name in helps:
                        err(n, "second HELP for %s" % name)
                    helps[name] = parts[3] if len(parts) > 3 else ""
                    if re.search(r"\\[^n\\]", helps[name]):
                        err(n, "bad escape in HELP of %s" % name)
                else:
                    t = parts[3] if len(parts) > 3 else ""
                    if t not in TYPES:
                        err(n, "unknown type %r for %s" % (t, name))
                    if name in types:
                        err(n, "second TYPE for %s" % name)
                    if name in fam_samples:
                        err(n, "TYPE for %s after its samples" % name)
                    types[name] = t
            continue
        m = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*").match(line)
        if not m:
            err(n, "invalid sample line")
            continue
        sname = m.group(0)
        pos = m.end()
        labels = []
        try:
            if pos < len(line) and line[pos] == "{":
                labels, pos = parse_labels(line, pos)
            if pos >= len(line) or line[pos] != " ":
                raise ValueError("expected a space before the value")
            rest = line[pos + 1:].split(" ")
            if len(rest) not in (1, 2):
                raise ValueError("expected value [timestamp]")
            value = parse_value(rest[0])
            if len(rest) == 2 and not re.match(r"^-?\d+$", rest[1]):
                raise ValueError("bad timestamp")
        except ValueError as e:
            err(n, str(e))
            continue
        names = [k for k, _ in labels]
        if len(set(names)) != len(names):
            err(n, "duplicate label name in %s" % sname)
        for k in names:
            if k.startswith("__"):
                err(n, "reserved label name %s" % k)
        fam = family_of(sname, types)
        if fam != current:
            if fam in finished or fam in fam_samples:
                err(n, "family %s appears in two groups" % fam)
            if current is not None:
                finished.add(current)
            current = fam
        t = types.get(fam, "untyped")
        if t in ("counter", "gauge", "untyped") and sname != fam:
            err(n, "sample %s does not belong to %s family %s" % (sname, t, fam))
        if t == "counter" and (value < 0 or math.isnan(value)):
            err(n, "counter %s is %s" % (sname, rest[0]))
        key = (sname, tuple(sorted(labels)))
        if key in series:
            err(n, "duplicate series %s%s (first on line %d)" % (sname, dict(labels), series[key]))
        series[key] = n
        fam_samples.setdefault(fam, []).append((n, sname, labels, value))
    for fam, samples in fam_samples.items():
        t = types.get(fam)
        if t == "histogram":
            check_histogram(fam, samples, err)
        elif t == "summary":
            check_summary(fam, samples, err)
    return errors


def group_key(labels, drop):
    return tuple(sorted((k, v) for k, v in labels if k != drop))


def check_histogram(fam, samples, err):
    groups = {}
    for n, sname, labels, value in samples:
        g = groups.setdefault(group_key(labels, "le"), {"buckets": [], "sum": None, "count": None, "line": n})
        if sname == fam + "_bucket":
            le = dict(labels).get("le")
            if le is None:
                err(n, "bucket of %s without le" % fam)
                continue
            try:
                g["buckets"].append((n, parse_value(le), value))
            except ValueError:
                err(n, "bad le %r" % le)
        elif sname == fam + "_sum":
            g["sum"] = value
        elif sname == fam + "_count":
            g["count"] = value
        else:
            err(n, "sample %s in histogram %s" % (sname, fam))
    for key, g in groups.items():
        b = g["buckets"]
        if not b or b[-1][1] != math.inf:
            err(g["line"], "histogram %s%s has no +Inf bucket last" % (fam, dict(key)))
        for (n1, le1, v1), (n2, le2, v2) in zip(b, b[1:]):
            if not le2 > le1:
                err(n2, "histogram %s buckets not in increasing le order" % fam)
            if v2 < v1:
                err(n2, "histogram %s bucket counts decrease" % fam)
        if g["count"] is None or g["sum"] is None:
            err(g["line"], "histogram %s%s lacks _sum or _count" % (fam, dict(key)))
        elif b and b[-1][1] == math.inf and g["count"] != b[-1][2]:
            err(g["line"], "histogram %s _count differs from the +Inf bucket" % fam)


def check_summary(fam, samples, err):
    groups = {}
    for n, sname, labels, value in samples:
        g = groups.setdefault(group_key(labels, "quantile"), {"sum": None, "count": None, "line": n})
        if sname == fam:
            q = dict(labels).get("quantile")
            try:
                if q is None or not 0 <= parse_value(q) <= 1:
                    raise ValueError
            except ValueError:
                err(n, "summary %s sample with bad quantile %r" % (fam, q))
        elif sname == fam + "_sum":
            g["sum"] = value
        elif sname == fam + "_count":
            g["count"] = value
    for key, g in groups.items():
        if g["count"] is None or g["sum"] is None:
            err(g["line"], "summary %s%s lacks _sum or _count" % (fam, dict(key)))


def main(argv):
    bad = 0
    for path in argv[1:] or ["-"]:
        data = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            print("%s: not UTF-8: %s" % (path, e))
            bad += 1
            continue
        for n, msg in check(text):
            print("%s:%d: %s" % (path, n, msg))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
