#!/usr/bin/env python3
"""Where a running diskpulse's memory goes: for the process and each of its children (the
privileged helper and its zygote), Pss, Rss and private kB per mapping (/proc/PID/smaps), a
library's segments summed under its file name, anonymous mappings as [anon] (malloc arenas beyond
the main heap, thread stacks other than the main one), largest Pss first.

"dirty" is the part of a library's mappings that is anonymous: the pages its relocations or its
data wrote (copy-on-write, shared only with forked children), the rest is the file's clean pages,
shared with every process that maps the library (their Pss falls as more processes map it, so
compare Rss and dirty across hosts, Pss on one host).

Usage: smaps_pss.py PID [--top N]    (needs the right to read /proc/PID/smaps: root or the owner)"""
import argparse
import re
import sys

MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")
FIELDS = ("Rss", "Pss", "Private_Clean", "Private_Dirty", "Anonymous")


def by_mapping(pid):
    """{name: {field: kB}} of one process."""
    out = {}
    cur = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            if MAPPING.match(line):
                parts = line.split()
                name = parts[5] if len(parts) > 5 else "[anon]"
                cur = out.setdefault(name.rsplit("/", 1)[-1], dict.fromkeys(FIELDS, 0))
                continue
            key, _, rest = line.partition(":")
            if cur is not None and key in FIELDS:
                cur[key] += int(rest.split()[0])
    return out


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pid", type=int)
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    total = 0
    for pid in [a.pid] + children(a.pid):
        maps = by_mapping(pid)
        pss = sum(m["Pss"] for m in maps.values())
        total += pss
        print("%s (%d): Pss %d kB, Rss %d kB" % (comm(pid), pid, pss,
                                                 sum(m["Rss"] for m in maps.values())))
        print("%8s %8s %8s %8s  %s" % ("Pss", "Rss", "private", "dirty", "mapping"))
        rows = sorted(maps.items(), key=lambda kv: -kv[1]["Pss"])
        for name, m in rows[:a.top]:
            if m["Rss"]:
                print("%8d %8d %8d %8d  %s" % (m["Pss"], m["Rss"], m["Private_Clean"] +
                                               m["Private_Dirty"], m["Anonymous"], name))
        print()
    print("all: Pss %d kB" % total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
