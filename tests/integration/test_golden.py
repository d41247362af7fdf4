#!/usr/bin/env python3
"""Golden end-to-end test: the real binary on fixture trees of every kernel format, by --once and
over HTTP, diffed against tests/golden/*.prom and checked value by value against an independent
computation from the fixture's diskstats. The landing page too: its text form (curl's Accept)
diffed against tests/golden/*.txt and checked against the same computation, its HTML form parsed
(html.parser) and compared cell by cell with the text. UPDATE_GOLDEN=1 rewrites the golden
files."""
import html.parser
import os
import re
import sys
import time

import dp

BIN = sys.argv[1]
VOLATILE = re.compile(r"^(# (HELP|TYPE) )?(process_|diskpulse_collector_duration_seconds|diskpulse_build_info|"
                      r"diskpulse_collection_rounds_|diskpulse_config_reload_success)")
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


# What a browser sends (Firefox).
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def text_tables(text):
    """The tables of the landing page's text form: {title: (headings, rows)}, columns split at
    two spaces or more (no cell holds two spaces in a row); notes are indented."""
    tables, lines, i = {}, text.split("\n"), 0
    while i < len(lines):
        # a title, then a line of headings, then rows up to an empty line or "and N more"
        if lines[i] and not lines[i].startswith(" ") and i + 1 < len(lines) and lines[i + 1] \
                and (i == 0 or not lines[i - 1]):
            title, heads = lines[i], re.split(r" {2,}", lines[i + 1].strip())
            rows, i = [], i + 2
            while i < len(lines) and lines[i] and not lines[i].startswith("and "):
                rows.append(re.split(r" {2,}", lines[i].strip()))
                i += 1
            tables[title] = (heads, rows)
        i += 1
    return tables


class Tables(html.parser.HTMLParser):
    """The <h2> titles and <table>s of an HTML page: {title: (headings, rows)}."""
    def __init__(self):
        super().__init__()
        self.tables, self.title, self.cell, self.row, self.heads, self.rows = {}, None, None, None, None, None
        self.in_h2 = False

    def handle_starttag(self, tag, attrs):
        if tag == "h2":
            self.in_h2, self.title = True, ""
        elif tag == "table":
            self.heads, self.rows = [], []
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "h2":
            self.in_h2 = False
        elif tag in ("td", "th"):
            self.row.append(self.cell)
            self.cell = None
        elif tag == "tr":
            if self.heads == []:
                self.heads = self.row
            else:
                self.rows.append(self.row)
        elif tag == "table":
            self.tables[self.title] = (self.heads, self.rows)

    def handle_data(self, data):
        if self.in_h2:
            self.title += data
        elif self.cell is not None:
            self.cell += data


def check_index(case, fixture, args, d, update):
    """The landing page of the first (since-boot) round: text golden, values, HTML alike."""
    st, h, body = dp.http_get(d.url + "/")
    text = body.decode()
    dp.check(st == 200 and h["Content-Type"] == "text/plain; charset=utf-8" and h.get("Vary") == "Accept",
             "%s: / without Accept is text/plain (Vary: Accept)" % case)
    st, h2, body = dp.http_get(d.url + "/", headers={"Accept": "*/*"})
    dp.check(body.decode() == text and h2["Content-Type"].startswith("text/plain"), "%s: / for curl's */* is the same text" % case)
    dp.check("<" not in text and "\033" not in text, "%s: the text form has no tag and no escape sequence" % case)
    # the first line names the version and revision: not golden
    first, rest = text.split("\n", 1)
    dp.check(first.startswith("diskpulse "), "%s: the text starts with the version" % case)
    golden = os.path.join(dp.GOLDEN, case + ".txt")
    if update:
        open(golden, "w").write(rest)
    expected = open(golden).read()
    dp.check(rest == expected, "%s: / (text) equals %s" % (case, os.path.relpath(golden)))
    if rest != expected:
        import difflib
        sys.stdout.writelines(difflib.unified_diff(expected.splitlines(True), rest.splitlines(True), "golden", "got", n=1))
    wide = [l for l in text.split("\n") if len(l) > 100]
    dp.check(not wide, "%s: every line of / within 100 columns %s" % (case, wide[:2]))
    tables = text_tables(rest)
    heads, rows = tables.get("Devices", ([], []))
    dp.check(heads == ["device", "r/s", "w/s", "r_await_ms", "w_await_ms", "aqu-sz", "%util", "p50_ms", "p99_ms"],
             "%s: the devices' headings %s" % (case, heads))
    vheads, vrows = tables.get("Verdicts", ([], []))
    verdicts = dict((r[0], r[1]) for r in vrows if len(r) == 2)
    dp.check(vheads == ["device", "verdict"] and [r[0] for r in vrows] == [r[0] for r in rows],
             "%s: a verdict per device, in the same order" % case)
    # the numbers, computed again from the fixture (iostat's first report: since boot)
    devs, uptime = read_fixture(fixture)
    include = re.compile(args[0].split("=", 1)[1]) if args else None
    want = sorted(n for n in devs if (include.search(n) if include else not DEFAULT_EXCLUDE.search(n)))
    dp.check(sorted(r[0] for r in rows) == want, "%s: / lists the devices %s" % (case, want))
    bad = []
    for row in rows:
        v = devs[row[0]][2]
        g = lambda f: v.get(f, 0)
        await_ms = lambda t, n: t / n if n else 0
        expect = ["%.1f" % (g("reads") / uptime), "%.1f" % (g("writes") / uptime),
                  "%.2f" % await_ms(g("read_ms"), g("reads") if "read_ms" in v else 0),
                  "%.2f" % await_ms(g("write_ms"), g("writes") if "write_ms" in v else 0),
                  "%.2f" % (g("weighted_ms") / 1000 / uptime), "%.1f" % (100 * min(1.0, g("io_ms") / 1000 / uptime)),
                  "-", "-"]
        if row[1:9] != expect:
            bad.append("%s: %s want %s" % (row[0], row[1:9], expect))
        rate = g("reads") / uptime + g("writes") / uptime
        wait = (g("read_ms") + g("write_ms")) / 1000 / (g("reads") + g("writes")) if g("reads") + g("writes") else 0
        if wait > 0.25 and rate >= 0.1:
            want_verdict = "requests wait %.0f ms on average" % (1000 * wait)
        elif g("weighted_ms") / 1000 / uptime > 4 and wait > 0.05:
            want_verdict = "saturated: %.1f requests queued, %.0f ms wait" % (g("weighted_ms") / 1000 / uptime, 1000 * wait)
        else:
            want_verdict = "ok"
        if verdicts.get(row[0]) != want_verdict:
            bad.append("%s: verdict %r want %r" % (row[0], verdicts.get(row[0]), want_verdict))
    dp.check(not bad, "%s: / numbers and verdicts from the fixture %s" % (case, "; ".join(bad) or "match"))
    # the HTML form: the same tables, cell by cell
    st, h, body = dp.http_get(d.url + "/", headers={"Accept": BROWSER_ACCEPT})
    dp.check(st == 200 and h["Content-Type"] == "text/html; charset=utf-8", "%s: / for a browser is HTML" % case)
    p = Tables()
    p.feed(body.decode())
    p.close()
    dp.check(p.tables == tables, "%s: the HTML tables hold the text form's headings and cells (%s vs %s)"
             % (case, sorted(p.tables), sorted(tables)))


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
            check_index(case, fixture, args, d, update)
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
