#!/usr/bin/env python3
"""Golden end-to-end test: the real binary on fixture trees of every kernel format, by --once and
over HTTP, diffed against tests/golden/*.prom and checked value by value against an independent
computation from the fixture's diskstats. UPDATE_GOLDEN=1 rewrites the golden files."""
import os
import re
import sys
import time

import dp

BIN = sys.argv[1]
VOLATILE = re.compile(r"^(# (HELP|TYPE) )?(process_|diskpulse_collector_duration_seconds|diskpulse_build_info|"
                      r"diskpulse_collection_rounds_total|diskpulse_config_reload_success)")
DEFAULT_EXCLUDE = re.compile(r"^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$")

CASES = [
    ("linux-6.1", "linux-6.1", []),
    ("linux-4.19", "linux-4.19", []),
    ("linux-4.4", "linux-4.4", []),
    ("linux-2.6.18", "linux-2.6.18", []),
    ("linux-2.6.18-partitions", "linux-2.6.18", ["--collector.diskstats.device-include=."]),
    ("malformed", "malformed", []),
]

FIELDS = ["reads", "reads_merged", "read_sectors", "read_ms", "writes", "writes_merged",
          "write_sectors", "write_ms", "io_now", "io_ms", "weighted_ms", "discards",
          "discards_merged", "discard_sectors", "discard_ms", "flushes", "flush_ms"]
COUNTERS = {
    "reads": ("diskpulse_disk_reads_completed_total", 1), "reads_merged": ("diskpulse_disk_reads_merged_total", 1),
    "read_sectors": ("diskpulse_disk_read_bytes_total", 512), "read_ms": ("diskpulse_disk_read_time_seconds_total", 0.001),
    "writes": ("diskpulse_disk_writes_completed_total", 1), "writes_merged": ("diskpulse_disk_writes_merged_total", 1),
    "write_sectors": ("diskpulse_disk_written_bytes_total", 512), "write_ms": ("diskpulse_disk_write_time_seconds_total", 0.001),
    "io_now": ("diskpulse_disk_io_now", 1), "io_ms": ("diskpulse_disk_io_time_seconds_total", 0.001),
    "weighted_ms": ("diskpulse_disk_io_time_weighted_seconds_total", 0.001),
    "discards": ("diskpulse_disk_discards_completed_total", 1), "discards_merged": ("diskpulse_disk_discards_merged_total", 1),
    "discard_sectors": ("diskpulse_disk_discarded_bytes_total", 512), "discard_ms": ("diskpulse_disk_discard_time_seconds_total", 0.001),
    "flushes": ("diskpulse_disk_flush_requests_total", 1), "flush_ms": ("diskpulse_disk_flush_time_seconds_total", 0.001),
}


def stable(text):
    return "".join(l + "\n" for l in text.splitlines() if not VOLATILE.match(l))


def read_fixture(fixture):
    """Independent reading of the fixture's diskstats: {name: (major, minor, {field: value})}."""
    devs = {}
    for line in open(os.path.join(dp.FIXTURES, fixture, "proc", "diskstats")):
        tok = line.split()
        if len(tok) < 3:
            continue
        nums = tok[3:]
        if len(nums) not in (4, 11, 15) and len(nums) < 17:
            continue
        if not all(re.fullmatch(r"\d+", n) and int(n) < 2 ** 64 for n in nums + tok[:2]):
            continue
        if not re.fullmatch(r'[!-~]+', tok[2]) or '"' in tok[2] or "\\" in tok[2]:
            continue
        if len(nums) == 4:
            vals = dict(zip(["reads", "read_sectors", "writes", "write_sectors"], map(int, nums)))
        else:
            vals = dict(zip(FIELDS, map(int, nums[:17])))
        devs.setdefault(tok[2], (int(tok[0]), int(tok[1]), vals))
    uptime = float(open(os.path.join(dp.FIXTURES, fixture, "proc", "uptime")).read().split()[0])
    return devs, uptime


def close(a, b):
    return a is not None and abs(a - b) <= 1e-9 * max(1.0, abs(b))


def check_values(case, fixture, args, metrics):
    devs, uptime = read_fixture(fixture)
    include = re.compile(args[0].split("=", 1)[1]) if args else None
    want = sorted(n for n in devs if (include.search(n) if include else not DEFAULT_EXCLUDE.search(n)))
    got = sorted(dict(ls)["device"] for ls in dp.series(metrics, "diskpulse_disk_info"))
    dp.check(got == want, "%s: devices %s == %s" % (case, got, want))
    dp.check(dp.value(metrics, "diskpulse_disk_devices") == len(want), "%s: diskpulse_disk_devices" % case)
    for name in want:
        major, minor, v = devs[name]
        info = dp.series(metrics, "diskpulse_disk_info")
        dp.check(any(dict(ls)["device"] == name and dict(ls)["major"] == str(major) and dict(ls)["minor"] == str(minor)
                     for ls in info), "%s: %s major:minor %d:%d" % (case, name, major, minor))
        bad = []
        for field, (metric, scale) in COUNTERS.items():
            got_v = dp.value(metrics, metric, device=name)
            if field not in v:
                if got_v is not None:
                    bad.append("%s present though the kernel line lacks it" % metric)
                continue
            if not close(got_v, v[field] * scale):
                bad.append("%s=%s want %s" % (metric, got_v, v[field] * scale))
        g = lambda f: v.get(f, 0)
        # iostat's first report: everything since boot.
        expect = {
            "diskpulse_disk_read_iops": g("reads") / uptime,
            "diskpulse_disk_write_iops": g("writes") / uptime,
            "diskpulse_disk_read_bytes_per_second": g("read_sectors") * 512 / uptime,
            "diskpulse_disk_write_bytes_per_second": g("write_sectors") * 512 / uptime,
            "diskpulse_disk_read_await_seconds": g("read_ms") / g("reads") / 1000 if g("reads") and "read_ms" in v else 0,
            "diskpulse_disk_write_await_seconds": g("write_ms") / g("writes") / 1000 if g("writes") and "write_ms" in v else 0,
            "diskpulse_disk_discard_await_seconds": g("discard_ms") / g("discards") / 1000 if g("discards") else 0,
            "diskpulse_disk_flush_await_seconds": g("flush_ms") / g("flushes") / 1000 if g("flushes") else 0,
            "diskpulse_disk_utilization_ratio": min(1.0, g("io_ms") / 1000 / uptime),
            "diskpulse_disk_queue_depth": g("weighted_ms") / 1000 / uptime,
        }
        for metric, e in expect.items():
            got_v = dp.value(metrics, metric, device=name)
            if not close(got_v, e):
                bad.append("%s=%s want %s" % (metric, got_v, e))
        dp.check(not bad, "%s: %s counters and gauges %s" % (case, name, "; ".join(bad) or "match"))


def main():
    update = os.environ.get("UPDATE_GOLDEN") == "1"
    for case, fixture, args in CASES:
        root = os.path.join(dp.FIXTURES, fixture)
        roots = ["--path.procfs=" + os.path.join(root, "proc"), "--path.sysfs=" + os.path.join(root, "sys"),
                 "--path.udev.data=" + os.path.join(root, "udev"), "--no-collector.smart", "--no-collector.biolatency",
                 "--no-collector.canary"] + args
        rc, out, err = dp.run_once(BIN, *roots)
        dp.check(rc == 0, "%s: --once exits 0 (stderr: %s)" % (case, err.strip()[:200]))
        errors = dp.expocheck.check(out)
        dp.check(not errors, "%s: strict exposition check %s" % (case, errors[:3]))
        golden = os.path.join(dp.GOLDEN, case + ".prom")
        if update:
            os.makedirs(dp.GOLDEN, exist_ok=True)
            open(golden, "w").write(stable(out))
        expected = open(golden).read()
        dp.check(stable(out) == expected, "%s: --once output equals %s" % (case, os.path.relpath(golden)))
        if stable(out) != expected:
            import difflib
            sys.stdout.writelines(difflib.unified_diff(expected.splitlines(True), stable(out).splitlines(True),
                                                       "golden", "got", n=1))
        metrics = dp.parse(out)
        check_values(case, fixture, args, metrics)
        cpu = dp.value(metrics, "process_cpu_seconds_total")
        dp.check(cpu is not None and cpu >= 0, "%s: process_cpu_seconds_total" % case)
        for fam in ("process_resident_memory_bytes", "process_open_fds", "process_max_fds",
                    "process_start_time_seconds", "process_virtual_memory_bytes"):
            dp.check(dp.value(metrics, fam) is not None and dp.value(metrics, fam) > 0, "%s: %s > 0" % (case, fam))
        dp.check(dp.value(metrics, "diskpulse_collector_success", collector="diskstats") == 1,
                 "%s: collector success" % case)
        if case == "malformed":
            dp.check(dp.value(metrics, "diskpulse_diskstats_malformed_lines_total") == 5, "malformed: 5 lines counted")
            dp.check("malformed lines" in err, "malformed: a warning is logged")

        # The same page over HTTP (the long interval keeps the first, since-boot round).
        with dp.Daemon(BIN, "--diskstats.interval=1h", "--diskstats.window=1h", *roots) as d:
            text = d.scrape_text()
        dp.check(stable(text) == expected, "%s: HTTP /metrics equals %s" % (case, os.path.relpath(golden)))
        # the daemon counts its rounds (--once runs one, uncounted): the start-up one, and no other
        # (the page is younger than --diskstats.interval)
        rounds = {dict(ls)["reason"]: v for (n, ls), v in dp.parse(text).items()
                  if n == "diskpulse_collection_rounds_total"}
        dp.check(rounds == {"scrape": 0, "window": 0, "floor": 0, "demand": 0, "fixed": 0, "other": 1},
                 "%s: diskpulse_collection_rounds_total: one round, at start (%s)" % (case, rounds))
        # the daemon's too (not --once's): the configuration loaded at start
        m = dp.parse(text)
        loaded = dp.value(m, "diskpulse_config_reload_success_timestamp_seconds")
        dp.check(dp.value(m, "diskpulse_config_reload_success") == 1 and loaded is not None and
                 abs(loaded - time.time()) < 120,
                 "%s: diskpulse_config_reload_success 1, loaded at start (%s)" % (case, loaded))
    dp.finish()


main()
