#!/usr/bin/env python3
"""The runbook's device sections run in the QEMU guest of tests/vm, where their alerts fire: what
each command must show there, per section and situation, and the host side of the guest's
`runbook` helper (tests/vm/guest/lib.sh) that runs them.

A scenario (tests/vm/scenarios/*.sh, header line `# runbook: SECTION, ...`) makes the situation
real, confirms with the host's Prometheus and the shipped rules that the alert fires (or, where
the guest's devices cannot produce the condition, says so: NOT_PRODUCED), then calls
`runbook SECTION SITUATION DEV=... SIBLING=a,b`. vmtest.py hands that request to a Session here,
which runs runbook.run_section() with the expectations below: each command of the section goes
to the guest, runs there with bash and the Debian tools the runbook names, and its exit status
and output come back to be checked on the host. A command without an expectation fails, so a
command added to one of these sections without a check here is a failure, not a gap.

The checks hold what the runbook says a command shows (the field, the value, the device), and
where the host's Prometheus scrapes the guest's daemon (`# prometheus:` header), that the value
a command shows is the value the daemon exports.

Usage as a script: guest.py lists the situations and what could not be produced."""
import base64
import queue
import re
import threading

import runbook
from runbook import Expect

# Conditions the guest's devices cannot produce, so the section's commands run on the nearest
# real device (QEMU 7.2's NVMe and AHCI, the guest kernel's scsi_debug; tests/vm/README.md) and
# the alert itself is not seen firing. Checked facts: FACTS.md "QEMU test devices".
NOT_PRODUCED = {
    "DiskpulseWearForecast": "QEMU's NVMe reports percentage used 0 always, its AHCI disk has no wear "
                             "attribute, scsi_debug no solid state media page: no wear can rise",
    "DiskpulseWearExhausted": "as DiskpulseWearForecast: no emulated drive reports wear",
    "DiskpulseSpareLow": "QEMU's NVMe reports available spare 0 and a threshold of 0 (none), which "
                         "the rule leaves out on purpose",
    "DiskpulseMediaErrorsIncreasing": "no emulated drive counts media errors (QEMU's NVMe media_errors "
                                      "stays 0 when a read fails, its AHCI disk has no attribute 187 "
                                      "or 198, scsi_debug no error counter pages): the unreadable "
                                      "sector is real, the counter the alert watches does not move",
    "DiskpulseSectorsReallocated": "QEMU's AHCI attribute 5 is fixed at 0 and it has no 196-198; "
                                   "scsi_debug keeps no grown defect list",
    "DiskpulseTemperatureHigh": "QEMU's NVMe temperature is fixed at 323 K, below its WCTEMP (343 K); "
                                "scsi_debug 40 C under its 65 C trip, QEMU's AHCI 31 C: the drive's "
                                "own over-temperature threshold is set below 323 K instead",
    "DiskpulseTemperatureCritical": "as DiskpulseTemperatureHigh (CCTEMP 373 K)",
    "DiskpulseUnsafeShutdown": "QEMU's NVMe counts no unsafe shutdowns (always 0) and its AHCI disk "
                               "has no attribute 174 or 192",
    "DiskpulseNvmeErrorLogGrowing": "QEMU's NVMe keeps no error information log (0 entries, whatever "
                                    "fails)",
    "DiskpulseNvmeThermalThrottling": "QEMU's NVMe reports no thermal management time (always 0)",
    "DiskpulseSataLinkErrors": "QEMU's AHCI emulates no link: no CRC errors, no attribute 199",
}


class Context:
    """What a section's checks may consult: the section as the runbook has it, the placeholder
    values of this run and, when the scenario has a Prometheus on the host, the series the daemon
    exports."""

    def __init__(self, section, values, prom=None):
        self.section, self.values, self._prom = section, values, prom
        self.required = []  # (regex, why): commands the section must hold

    def _series(self, selector):
        if not self._prom:
            return None
        try:
            res = self._prom(selector)
        except Exception:  # noqa: BLE001 -- a failed query is "no value", reported by the check
            return None
        return res if isinstance(res, list) and len(res) == 1 else None

    def metric(self, selector):
        """The value of the one series the host's Prometheus has for selector; None without a
        Prometheus, or when it has none or several."""
        res = self._series(selector)
        return float(res[0]["value"][1]) if res else None

    def label(self, selector, name):
        """Label name of the one series the host's Prometheus has for selector, or None."""
        res = self._series(selector)
        return res[0]["metric"].get(name) if res else None

    def note(self, match):
        """The comment of the section's first command whose text matches, as the runbook has it
        ("" when there is none)."""
        for c in runbook.sections()[self.section]:
            if re.search(match, c.text):
                return c.note
        return ""

    def require(self, match, why):
        """The section must hold a command matching match (a step the situation needs)."""
        self.required.append((match, why))


# --- what an output shows ---------------------------------------------------------------------

def result(ok, what):
    return bool(ok), what


def all_of(*checks):
    """A check that passes when every one of checks passes; says what each found."""
    def check(rc, out):
        oks, whats = [], []
        for c in checks:
            r = c(rc, out)
            ok, what = r if isinstance(r, tuple) else (r, "")
            oks.append(bool(ok))
            whats.append(("" if ok else "NOT: ") + what)
        return all(oks), "; ".join(whats)
    return check


def has(pattern, what=None, flags=re.M):
    rx = re.compile(pattern, flags)
    return lambda rc, out: result(rx.search(out), what or "shows /%s/" % pattern)


def lacks(pattern, what=None, flags=re.M):
    rx = re.compile(pattern, flags)
    return lambda rc, out: result(not rx.search(out), what or "does not show /%s/" % pattern)


def nvme_log(out):
    """{field: text} of `nvme smart-log` (nvme-cli 2.3: "name<tabs>: value" lines)."""
    return {m.group(1).strip(): m.group(2).strip()
            for m in re.finditer(r"^([A-Za-z][\w .]*?)\s*:\s*(.*)$", out, re.M)}


def number(text):
    """The leading integer of a field ("0x2", "50°C (323 Kelvin)", "0%", "3 (1.54 MB)")."""
    m = re.match(r"\s*(0x[0-9a-fA-F]+|\d+)", text or "")
    return int(m.group(1), 0) if m else None


def samples(out):
    """[(name, {label: value}, value)] of the exposition lines in out (a curl | grep output)."""
    found = []
    for line in out.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$", line)
        if not m or line.startswith("#"):
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        try:
            found.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            pass
    return found


def sample(out, name, **labels):
    """The value of the first sample name{labels...} in out, or None."""
    for n, l, v in samples(out):
        if n == name and all(l.get(k) == str(w) for k, w in labels.items()):
            return v
    return None


def exports(name, want=None, **labels):
    """A check on a curl | grep output: the sample name{labels} is there (with value want)."""
    sel = "%s{%s}" % (name, ",".join('%s="%s"' % kv for kv in sorted(labels.items())))

    def check(rc, out):
        v = sample(out, name, **labels)
        if want is None:
            return result(v is not None, "shows %s (%s)" % (sel, v))
        return result(v is not None and abs(v - want) < 1e-9, "shows %s = %s (%s)" % (sel, want, v))
    return check



def field_matches(ctx, name, selector, scale=1):
    """A check on `nvme smart-log`: field name is there and, with a Prometheus, equals what the
    daemon exports for selector (divided by scale: a percentage against a ratio)."""
    def check(rc, out):
        got = number(nvme_log(out).get(name))
        want = ctx.metric(selector)
        if got is None:
            return result(False, "shows the field %s" % name)
        if want is None:
            return result(ctx._prom is None, "shows %s %s (%s: no value to compare)" % (name, got, selector))
        return result(abs(got * scale - want) < 1e-6,
                      "shows %s %s, as the daemon's %s = %s" % (name, got, selector, want))
    return check


def noted(ctx, match, *fields):
    """A check of a command whose runbook comment says which fields it shows: each of fields is
    named in that comment and shown in the output as a field ("name : value", nvme-cli's form)."""
    note = ctx.note(match)

    def check(rc, out):
        missing = [f for f in fields if f not in note]
        absent = [f for f in fields if not re.search(r"^%s\s*:" % re.escape(f), out, re.M)]
        return result(not missing and not absent, "the comment (%s) names %s, all shown%s%s" % (
            note, ", ".join(fields), "; not named: %s" % missing if missing else "",
            "; not shown: %s" % absent if absent else ""))
    return check



# --- expectations, per (section, situation) ------------------------------------------------------

EXPECT = {}


def expects(section, *situations):
    """Registers fn(ctx) -> [Expect...] or ([Expect...], only) for section in each situation."""
    def deco(fn):
        for s in situations:
            EXPECT[(section, s)] = fn
        return fn
    return deco


NVME_SMART_LOG = r"^nvme smart-log /dev/\S+\s*$"


def nvme_smart_log(ctx, dev, fields, note=(), why=""):
    """`nvme smart-log` of the alert's drive (the test matches any device the runbook may name,
    and holds that the log is DEV's): every field listed equal to what the daemon exports, the
    fields the runbook's comment names (note) there."""
    checks = [has(r"^Smart Log for NVME device:%s namespace-id:ffffffff" % dev, "the log of %s" % dev)]
    for name, selector, scale in fields:
        checks.append(field_matches(ctx, name, selector % {"dev": dev}, scale))
    if note:
        checks.append(noted(ctx, NVME_SMART_LOG, *note))
    return Expect(NVME_SMART_LOG, all_of(*checks), why=why)


NVME_HEALTH = [("critical_warning", 'diskpulse_nvme_critical_warning{device="%(dev)s"}', 1),
               ("available_spare", 'diskpulse_smart_available_spare_ratio{device="%(dev)s"}', 0.01),
               ("media_errors", 'diskpulse_smart_media_errors_total{device="%(dev)s"}', 1)]


def smartctl_read(rc, out):
    """smartctl's exit status is a bit mask (smartctl(8)): bits 0 and 1 clear mean it parsed its
    command line and opened the device; the others report what it found (2: a command failed,
    as QEMU's unsupported log pages do; 3: DISK FAILING; 6: errors logged...)."""
    return result(rc is not None and rc & 3 == 0, "smartctl read the drive (exit status %s)" % rc)


def disk_failing(rc, out):
    return result(rc is not None and rc & 8, "exit status %s has bit 3, DISK FAILING" % rc)


def smartctl_x_nvme(ctx, dev, *more):
    """`smartctl -x` of the alert's NVMe drive: its serial (as the daemon's smart_info has it)."""
    serial = ctx.label('diskpulse_smart_info{device="%s"}' % dev, "serial")
    return Expect(r"^smartctl -x /dev/\S+", all_of(
        smartctl_read,
        has(r"^Model Number:\s+QEMU NVMe Ctrl", "the NVMe identity"),
        has(r"^Serial Number:\s+%s$" % re.escape(serial) if serial else r"^Serial Number:",
            "the serial of %s (%s)" % (dev, serial)),
        has(r"^SMART/Health Information \(NVMe Log 0x02\)", "the health log"), *more), rc=None)


@expects("DiskpulseSmartUnhealthy", "nvme")
def _(ctx):
    """An NVMe drive with critical warning bit 2 (reliability) set by QEMU and an unreadable
    sector: the drive's verdict FAILED, the daemon's healthy 0, the kernel's read error."""
    dev = ctx.values["DEV"]
    warn = ctx.metric('diskpulse_nvme_critical_warning{device="%s"}' % dev)
    return [
        # smartctl's exit status has bit 3 set when the drive says it is failing (smartctl(8))
        Expect(r"^smartctl -H ", all_of(
            has(r"^SMART overall-health self-assessment test result: FAILED!", "the verdict FAILED"),
            has(r"^- NVM subsystem reliability has been degraded", "the reliability bit"),
            disk_failing),
            rc=None),
        smartctl_x_nvme(ctx, dev, has(r"^Critical Warning:\s+0x04$", "Critical Warning 0x04")),
        nvme_smart_log(ctx, dev, NVME_HEALTH, note=("critical_warning", "available_spare", "media_errors")),
        Expect(r"^curl .*diskpulse_smart_\(healthy\|info\)", all_of(
            exports("diskpulse_smart_healthy", 0, device=dev),
            exports("diskpulse_smart_info", 1, device=dev, protocol="nvme"),
            exports("diskpulse_nvme_critical_warning", 4, device=dev),
            exports("diskpulse_nvme_critical_warning_flag", 1, device=dev, flag="reliability"),
            lambda rc, out: result(warn == 4 or warn is None, "Prometheus has the warning (%s)" % warn))),
        Expect(r"^dmesg -T \| grep -i DEV$",
               has(r"^\[.*\] critical medium error, dev %s, sector 65536 " % dev, "the unreadable sector of %s" % dev)),
    ], r"."


@expects("DiskpulseSmartUnhealthy", "scsi")
def _(ctx):
    """A scsi_debug disk that predicts its failure (informational exceptions TEST=1) and has an
    unreadable sector (opts=2): the NVMe command is not for it."""
    dev = ctx.values["DEV"]
    return ([
        Expect(r"^smartctl -H ", all_of(
            has(r"^SMART Health Status: FAILURE PREDICTION THRESHOLD EXCEEDED", "the failure prediction"),
            disk_failing),
            rc=None),
        Expect(r"^smartctl -x /dev/DEV\b", all_of(
            smartctl_read, has(r"^Product:\s+scsi_debug", "the SCSI identity"),
            has(r"^SMART Health Status: FAILURE PREDICTION THRESHOLD EXCEEDED", "the failure prediction"),
            has(r"^Current temperature = \d+", "the temperature page")), rc=None),
        Expect(r"^curl .*diskpulse_smart_\(healthy\|info\)", all_of(
            exports("diskpulse_smart_healthy", 0, device=dev),
            exports("diskpulse_smart_info", 1, device=dev, protocol="scsi"),
            exports("diskpulse_scsi_failure_predicted", 1, device=dev))),
        Expect(r"^dmesg -T \| grep -i DEV$", all_of(
            has(r"^\[.*\] critical medium error, dev %s, sector 4660 " % dev, "the unreadable sector of %s" % dev),
            has(r"^\[.*\] sd .* \[%s\] .*Sense Key : Medium Error" % dev, "the sense key"))),
    ], r"^(?!nvme )")


@expects("DiskpulseNvmeCriticalWarning", "reliability", "temperature")
def _(ctx):
    """A warning bit set on an NVMe drive: reliability (QEMU's smart_critical_warning) or
    temperature (the drive's over-temperature threshold set below its temperature)."""
    dev, flag = ctx.values["DEV"], ctx.values.get("FLAG")
    bit = {"reliability": 4, "temperature": 2}[flag]
    return [
        nvme_smart_log(ctx, dev, NVME_HEALTH + [
            ("temperature", 'diskpulse_smart_temperature_celsius{device="%(dev)s"}', 1)],
            note=("critical_warning", "temperature", "available_spare", "media_errors")),
        smartctl_x_nvme(ctx, dev, has(r"^Critical Warning:\s+0x%02x$" % bit, "Critical Warning 0x%02x" % bit)),
        Expect(r"^curl .*diskpulse_nvme_\(critical_warning\|temperature\)", all_of(
            exports("diskpulse_nvme_critical_warning", bit, device=dev),
            exports("diskpulse_nvme_critical_warning_flag", 1, device=dev, flag=flag),
            exports("diskpulse_nvme_temperature_celsius", 50, device=dev))),
        Expect(r"^dmesg -T \| grep -i nvme$", has(r"^\[.*\] nvme nvme\d+: ", "the controllers' kernel lines")),
    ]


NVME_WEAR = [("percentage_used", 'diskpulse_smart_wear_used_ratio{device="%(dev)s"}', 0.01)]


@expects("DiskpulseWearForecast", "healthy")
@expects("DiskpulseWearExhausted", "healthy")
def _(ctx):
    """A healthy NVMe drive being written to (by dd): its wear field and write counters, who
    writes."""
    dev = ctx.values["DEV"]
    written = ctx.metric('diskpulse_smart_written_bytes_total{device="%s"}' % dev)
    return [
        Expect(NVME_SMART_LOG, all_of(
            nvme_smart_log(ctx, dev, NVME_WEAR, note=("percentage_used", "Data Units Written")).check,
            lambda rc, out: result(
                number(nvme_log(out).get("Data Units Written")) is not None,
                "shows Data Units Written (%s; the daemon: %s bytes, 512,000 a unit)"
                % (nvme_log(out).get("Data Units Written"), written)))),
        smartctl_x_nvme(ctx, dev, has(r"^Percentage Used:\s+\d+%", "Percentage Used"),
                        has(r"^Data Units Written:\s+[\d,]+", "Data Units Written")),
        Expect(r"^curl .*diskpulse_smart_\(wear_used_ratio\|written_bytes_total\)", all_of(
            exports("diskpulse_smart_wear_used_ratio", ctx.metric(
                'diskpulse_smart_wear_used_ratio{device="%s"}' % dev), device=dev),
            exports("diskpulse_smart_written_bytes_total", None, device=dev))),
        Expect(r"^curl .*diskpulse_smart_\(media_errors_total\|available_spare\)", all_of(
            exports("diskpulse_smart_media_errors_total", 0, device=dev),
            exports("diskpulse_smart_available_spare_ratio", None, device=dev),
            exports("diskpulse_smart_available_spare_threshold_ratio", None, device=dev))),
        # the later reports (the first is the average since boot) show the writes
        Expect(r"^iostat -dx", all_of(
            lambda rc, out: result(len(re.findall(r"^%s\s" % dev, out, re.M)) == 3, "three reports of %s" % dev),
            lambda rc, out: result(iostat_last(out, dev, "wkB/s") > 0,
                                   "wkB/s %s > 0 in the last report" % iostat_last(out, dev, "wkB/s"))), timeout=60),
        Expect(r"^pidstat -d 5 3\b", has(r"^Average:\s+0\s+\d+\s+[\d.]+\s+[1-9][\d.]*\s.*\bdd$",
                                         "the writer (dd, root) with kB_wr/s > 0"), timeout=60),
    ], None


def iostat_last(out, dev, column):
    """The value of column for dev in the last report of an `iostat -dx` output (-1: none)."""
    head, value = None, -1.0
    for line in out.splitlines():
        words = line.split()
        if words and words[0].startswith("Device"):
            head = words
        elif head and words and words[0] == dev and column in head:
            value = float(words[head.index(column)])
    return value


@expects("DiskpulseSpareLow", "healthy")
def _(ctx):
    """A healthy NVMe drive: its spare, the drive's threshold for it, as the daemon exports them."""
    dev = ctx.values["DEV"]
    return [
        nvme_smart_log(ctx, dev, [
            ("available_spare", 'diskpulse_smart_available_spare_ratio{device="%(dev)s"}', 0.01),
            ("available_spare_threshold", 'diskpulse_smart_available_spare_threshold_ratio{device="%(dev)s"}', 0.01),
            ("percentage_used", 'diskpulse_smart_wear_used_ratio{device="%(dev)s"}', 0.01),
            ("media_errors", 'diskpulse_smart_media_errors_total{device="%(dev)s"}', 1)],
            note=("available_spare", "available_spare_threshold", "percentage_used", "media_errors")),
        Expect(r"^curl .*diskpulse_smart_available_spare'", all_of(
            exports("diskpulse_smart_available_spare_ratio", None, device=dev),
            exports("diskpulse_smart_available_spare_threshold_ratio", None, device=dev))),
    ]


@expects("DiskpulseMediaErrorsIncreasing", "nvme")
def _(ctx):
    """An NVMe drive with an unreadable sector: the kernel logs it; the drive's own count (QEMU's
    stays 0) is what the alert watches. The self-test commands run on the SCSI disk."""
    dev = ctx.values["DEV"]
    return ([
        smartctl_x_nvme(ctx, dev, has(r"^Media and Data Integrity Errors:\s+\d+", "Media and Data Integrity Errors")),
        nvme_smart_log(ctx, dev, [("media_errors", 'diskpulse_smart_media_errors_total{device="%(dev)s"}', 1)],
                       note=("media_errors",)),
        Expect(r"^curl .*diskpulse_smart_media_errors_total", exports("diskpulse_smart_media_errors_total", None, device=dev)),
        Expect(r"^dmesg -T \| grep -i -E 'medium error", all_of(
            has(r"^\[.*\] critical medium error, dev %s, sector 65536 " % dev, "the unreadable sector"),
            has(r"^\[.*\] %s: I/O Cmd\(0x2\) @ LBA 65536, 1 blocks, I/O Error" % dev, "the failed read"))),
        # QEMU 7.2's controller has no Device Self-test (tests/runbook/cannot_run.py): the command
        # reaches it, well formed, and is refused as an opcode it does not know
        Expect(r"^nvme device-self-test /dev/DEV -s 2", has(
            r"NVMe status: (INVALID_OPCODE|Invalid Command Opcode)", "the controller refuses the opcode"), rc=None),
    ], r"^(smartctl -x|nvme|curl|dmesg)")


@expects("DiskpulseMediaErrorsIncreasing", "scsi")
def _(ctx):
    """A scsi_debug disk with an unreadable sector: the kernel's medium error; its self-test."""
    dev = ctx.values["DEV"]
    return ([
        Expect(r"^smartctl -x /dev/DEV\b", all_of(
            smartctl_read, has(r"^Product:\s+scsi_debug"), has(r"^Error Counter logging not supported",
                                               "says the disk keeps no error counter log")), rc=None),
        Expect(r"^curl .*diskpulse_smart_media_errors_total", all_of(
            lambda rc, out: result(sample(out, "diskpulse_smart_media_errors_total", device=dev) is None,
                                   "no media error count for %s (none reported)" % dev))),
        Expect(r"^dmesg -T \| grep -i -E 'medium error", all_of(
            has(r"^\[.*\] critical medium error, dev %s, sector 4660 " % dev, "the unreadable sector"),
            has(r"^\[.*\] sd .* \[%s\] .*Add\. Sense: Unrecovered read error" % dev, "unrecovered read error"))),
        Expect(r"^smartctl -t long /dev/DEV", has(r"^Extended Background Self Test has begun", "the test begun")),
        Expect(r"^nvme device-self-test", lambda rc, out: result(False, "not for a SCSI disk"), rc=None),
    ], r"^(smartctl|curl|dmesg)")


@expects("DiskpulseSectorsReallocated", "ata")
def _(ctx):
    """QEMU's AHCI disk: attribute 5 as the daemon exports it, a long self-test that QEMU logs at
    once (a real disk takes hours)."""
    dev = ctx.values["DEV"]
    raw5 = ctx.metric('diskpulse_ata_attribute_raw{device="%s",id="5"}' % dev)
    return [
        Expect(r"^smartctl -A /dev/DEV\s*(#|$)", all_of(
            has(r"^\s*5 Reallocated_Sector_Ct\s.*\s(\d+)$", "attribute 5 Reallocated_Sector_Ct"),
            lambda rc, out: result(raw5 is not None and re.search(
                r"^\s*5 Reallocated_Sector_Ct\s.*\s%d$" % raw5, out, re.M),
                "its raw value is the daemon's %s" % raw5))),
        Expect(r"^smartctl -x /dev/DEV\b", all_of(
            smartctl_read, has(r"^Device Model:\s+QEMU HARDDISK"), has(r"^\s*5 Reallocated_Sector_Ct\s"),
            has(r"^SMART Error Log Version: 1", "the error log")), rc=None),
        Expect(r"^curl .*diskpulse_ata_attribute_raw", all_of(
            exports("diskpulse_ata_attribute_raw", raw5, device=dev, id="5"),
            lambda rc, out: result({l["id"] for n, l, v in samples(out) if n == "diskpulse_ata_attribute_raw"} == {"5"},
                                   "only attribute 5 of 5/196/197/198 (QEMU has no 196-198)"))),
        Expect(r"^smartctl -t long /dev/DEV", all_of(
            has(r"^Testing has begun\.", "the test begun"),
            has(r"^Please wait \d+ minutes for test to complete\.", "its duration"))),
        Expect(r"^dmesg -T \| grep -i DEV$", has(r"^\[.*\] sd [\d:]+: \[%s\] " % dev, "the kernel's lines for %s" % dev)),
    ]


@expects("DiskpulseTemperatureHigh", "nvme")
@expects("DiskpulseTemperatureCritical", "nvme")
def _(ctx):
    """An NVMe drive whose over-temperature threshold was set below its temperature (QEMU: 323 K
    fixed): the temperature, the thresholds as the daemon exports them."""
    dev = ctx.values["DEV"]
    warn = ctx.metric('diskpulse_smart_temperature_warning_threshold_celsius{device="%s"}' % dev)
    crit = ctx.metric('diskpulse_smart_temperature_critical_threshold_celsius{device="%s"}' % dev)
    return [
        Expect(NVME_SMART_LOG, all_of(
            has(r"^Smart Log for NVME device:%s namespace-id:ffffffff" % dev, "the log of %s" % dev),
            noted(ctx, NVME_SMART_LOG, "temperature", "Warning Temperature Time"),
            field_matches(ctx, "temperature", 'diskpulse_smart_temperature_celsius{device="%s"}' % dev),
            field_matches(ctx, "Warning Temperature Time",
                          'diskpulse_nvme_warning_temperature_seconds_total{device="%s"}' % dev, 60),
            field_matches(ctx, "critical_warning", 'diskpulse_nvme_critical_warning{device="%s"}' % dev))),
        Expect(r"^nvme smart-log /dev/\S+ \| grep -i temperature", all_of(
            noted(ctx, r"^nvme smart-log /dev/\S+ \| grep -i temperature", "Critical Composite Temperature Time"),
            field_matches(ctx, "Critical Composite Temperature Time",
                          'diskpulse_nvme_critical_temperature_seconds_total{device="%s"}' % dev, 60),
            has(r"^temperature\s*: 50°C \(323 Kelvin\)", "the temperature"))),
        # WCTEMP and CCTEMP in kelvin, the daemon's thresholds in Celsius
        Expect(r"^nvme id-ctrl /dev/\S+ \| grep", all_of(
            has(r"^wctemp\s*: 343$", "wctemp 343"), has(r"^cctemp\s*: 373$", "cctemp 373"),
            lambda rc, out: result(warn in (None, 70.0) and crit in (None, 100.0),
                                   "the daemon's thresholds %s and %s C" % (warn, crit)))),
        smartctl_x_nvme(ctx, dev, has(r"^Warning  Comp\. Temp\. Threshold:\s+70 Celsius", "the warning threshold"),
                        has(r"^Temperature:\s+50 Celsius", "the temperature")),
        Expect(r"^curl .*diskpulse_smart_temperature\|diskpulse_nvme_'", all_of(
            exports("diskpulse_smart_temperature_celsius", 50, device=dev),
            exports("diskpulse_smart_temperature_warning_threshold_celsius", 70, device=dev),
            exports("diskpulse_smart_temperature_critical_threshold_celsius", 100, device=dev),
            exports("diskpulse_nvme_thermal_management_seconds_total", 0, device=dev, level="1"))),
    ], r"."


@expects("DiskpulseUnsafeShutdown", "healthy")
def _(ctx):
    """A healthy NVMe drive: its count of unsafe shutdowns as the daemon exports it."""
    dev = ctx.values["DEV"]
    return ([Expect(r"^nvme smart-log /dev/\S+ \| grep unsafe_shutdowns", field_matches(
        ctx, "unsafe_shutdowns", 'diskpulse_smart_unsafe_shutdowns_total{device="%s"}' % dev))],
        r"^nvme ")


@expects("DiskpulseNvmeErrorLogGrowing", "healthy")
def _(ctx):
    """A healthy NVMe drive: its error information log, the fields the runbook names, the count."""
    dev = ctx.values["DEV"]
    return [
        Expect(r"^nvme error-log /dev/\S+ \| head", all_of(
            has(r"^Error Log Entries for device:%s entries:" % dev, "the log of %s" % dev),
            noted(ctx, r"^nvme error-log ", "status_field", "sqid", "cmdid", "lba"))),
        Expect(r"^nvme smart-log /dev/\S+ \| grep num_err_log_entries", field_matches(
            ctx, "num_err_log_entries", 'diskpulse_nvme_error_log_entries_total{device="%s"}' % dev)),
    ]


@expects("DiskpulseNvmeThermalThrottling", "healthy")
def _(ctx):
    """A healthy NVMe drive: its thermal management times and transitions as the daemon exports them."""
    dev = ctx.values["DEV"]
    checks = [field_matches(ctx, "Thermal Management T%d Total Time" % t,
                            'diskpulse_nvme_thermal_management_seconds_total{device="%s",level="%d"}' % (dev, t))
              for t in (1, 2)]
    checks += [field_matches(ctx, "Thermal Management T%d Trans Count" % t,
                             'diskpulse_nvme_thermal_transitions_total{device="%s",level="%d"}' % (dev, t))
               for t in (1, 2)]
    return [
        Expect(r"^nvme smart-log /dev/\S+ \| grep -i -E", all_of(
            has(r"^temperature\s*: \d+°C", "the temperature"), *checks)),
        Expect(r"^curl .*diskpulse_nvme_thermal", all_of(
            exports("diskpulse_nvme_thermal_management_seconds_total", 0, device=dev, level="1"),
            exports("diskpulse_smart_temperature_celsius", 50, device=dev))),
    ]


@expects("DiskpulseSataLinkErrors", "link-reset")
def _(ctx):
    """A SATA disk whose read timed out (QEMU throttled it) and whose link the kernel reset: the
    kernel's line for its port. QEMU has no attribute 199 (cannot_run.py)."""
    return ([Expect(r"^dmesg -T \| grep -i -E 'ata\[0-9\]\+", all_of(
        has(r"^\[.*\] ata\d+: hard resetting link$", "the link reset"),
        lacks(r"^(?!\[.*\] ata\d+).", "only the ports' lines")))], r"^dmesg")


def read_errors(ctx, dev, reason, stale_after=None):
    """The curl line of the SMART reading sections: up 0, the reason counted, the helper up; the
    last read (stale_after: at least that many seconds ago, as Prometheus sees it)."""
    age = ctx.metric('time() - diskpulse_smart_last_read_timestamp_seconds{device="%s"}' % dev)
    checks = [exports("diskpulse_smart_up", 0, device=dev),
              lambda rc, out: result((sample(out, "diskpulse_smart_read_errors_total", device=dev, reason=reason) or 0) >= 1,
                                     "counts reason=%s for %s" % (reason, dev))]
    if stale_after is not None:
        checks += [exports("diskpulse_smart_last_read_timestamp_seconds", None, device=dev),
                   exports("diskpulse_smart_skipped_total", 0, device=dev, reason="standby"),
                   lambda rc, out: result(age is not None and age > stale_after,
                                          "the last read %s s ago (> %s)" % (age, stale_after))]
    return checks


@expects("DiskpulseSmartReadsFailing", "device_status")
def _(ctx):
    """QEMU's SATA disk with SMART switched off: the drive refuses the reads (device_status) and
    smartctl fails too. journalctl and systemctl run under systemd (tests/package/vm_systemd.sh)."""
    dev = ctx.values["DEV"]
    return ([
        Expect(r"^curl .*diskpulse_smart_\(up\|read_errors_total", all_of(
            *read_errors(ctx, dev, "device_status"), exports("diskpulse_helper_up", 1))),
        # QEMU refuses SMART READ DATA with SMART off (its IDENTIFY still says enabled)
        Expect(r"^smartctl -x /dev/DEV", all_of(
            has(r"^Device Model:\s+QEMU HARDDISK", "the drive answers IDENTIFY"),
            has(r"^Read SMART Data failed: ", "SMART READ DATA fails"),
            has(r"^SMART overall-health self-assessment test result: UNKNOWN!", "no verdict"),
            lambda rc, out: result(rc is not None and rc & 4, "exit status %s has bit 2, a command failed" % rc)),
            rc=None),
    ], r"^(curl|smartctl)")


@expects("DiskpulseSmartReadsFailing", "permission")
def _(ctx):
    """The daemon without capabilities (in a user namespace): reason="permission" while smartctl,
    as root, reads the drive, which is how the runbook tells a unit that lost them."""
    dev = ctx.values["DEV"]
    return ([
        Expect(r"^curl .*diskpulse_smart_\(up\|read_errors_total", all_of(
            *read_errors(ctx, dev, "permission"), exports("diskpulse_helper_up", 1),
            lacks(r'^diskpulse_smart_last_read_timestamp_seconds\{device="%s"\}' % dev, "no read ever succeeded"))),
        smartctl_x_nvme(ctx, dev),
    ], r"^(curl|smartctl)")


@expects("DiskpulseSmartDataStale", "device_status")
def _(ctx):
    """QEMU's SATA disk with SMART switched off for longer than the (scaled) hour: the last read
    timestamp stands still, no standby skip explains it."""
    dev = ctx.values["DEV"]
    return ([Expect(r"^curl .*diskpulse_smart_\(last_read_timestamp_seconds", all_of(
        *read_errors(ctx, dev, "device_status", stale_after=30)))], r"^curl")


@expects("DiskpulseSmartReadsFailing", "systemd")
def _(ctx):
    """The packaged unit under the guest's systemd, narrowed by a drop-in to lack CAP_SYS_ADMIN:
    the journal names the device and the reason, systemctl the capabilities the unit lost."""
    dev = ctx.values["DEV"]
    return ([
        Expect(r"^journalctl -u diskpulse \| grep 'SMART read failed'", has(
            r"SMART read failed.*\bdevice=%s\b.*\breason=permission\b" % dev, "the read of %s failed: permission" % dev)),
        Expect(r"^systemctl show diskpulse -p CapabilityBoundingSet", all_of(
            has(r"^CapabilityBoundingSet=.*\bcap_sys_rawio\b", "the bounding set as the drop-in left it"),
            lacks(r"^CapabilityBoundingSet=.*\bcap_sys_admin\b", "without cap_sys_admin, which NVMe needs"),
            has(r"^AmbientCapabilities=", "the ambient set"), has(r"^User=diskpulse$", "User=diskpulse"))),
    ], r"^(journalctl|systemctl)")


@expects("DiskpulseSmartDataStale", "systemd")
def _(ctx):
    """The same unit: the journal's SMART lines say why reads stopped succeeding (the stale data
    itself is made in vm/runbook_smart, whose guest has no journal)."""
    dev = ctx.values["DEV"]
    return ([Expect(r"^journalctl -u diskpulse \| grep -i smart", has(
        r"SMART read failed.*\bdevice=%s\b.*\breason=permission\b" % dev, "the failed reads of %s and why" % dev))],
        r"^journalctl")


@expects("DiskpulseUnsafeShutdown", "systemd")
def _(ctx):
    """A root booted by its own systemd: last -x lists the boot records it keeps in wtmp, where a
    boot that follows no shutdown record tells a crash or power cut (this image boots once)."""
    return ([Expect(r"^last -x \| head", all_of(
        has(r"^reboot\s+system boot\s+\S+", "this boot's record"),
        lacks(r"cannot open", "wtmp is there")))], r"^last")


@expects("DiskpulseDiskSlowerThanSiblings", "md")
def _(ctx):
    """An md RAID1 over two dm-delay mappings, 20 ms added to every I/O of one (DEV) while the
    array is written to: its w_await beside its sibling's, the disk under it for smartctl."""
    dev, sib, under = ctx.values["DEV"], ctx.values["SIBLING"], ctx.values["UNDER"]

    ctx.require(r"^ls /sys/block/DEV/slaves", "a command that finds the disk under a dm member, for smartctl")

    def slower(rc, out):
        d, s = iostat_last(out, dev, "w_await"), iostat_last(out, sib, "w_await")
        return result(d > 10 and d > 2 * s, "%s's w_await %s ms over twice %s's %s ms" % (dev, d, sib, s))
    return [
        Expect(r"^cat /proc/mdstat", has(r"^md\d+ : active raid1 .*\b%s\[\d\].*|^md\d+ : active raid1 .*\b%s\[\d\]"
                                         % (dev, dev), "the array with %s" % dev)),
        Expect(r"^iostat -dx", all_of(
            lambda rc, out: result(len(re.findall(r"^%s\s" % dev, out, re.M)) == 3, "three reports of %s" % dev),
            slower), timeout=60),
        Expect(r"^ls /sys/block/DEV/slaves", has(r"^%s$" % under, "the disk under %s: %s" % (dev, under))),
        Expect(r"^smartctl -x /dev/DEV", all_of(smartctl_read, has(r"^SMART/Health Information", "its health log")),
               rc=None, values={"DEV": under}),
        # a slow member, not a failing one: the kernel logged no reset, retry or timeout, the
        # runbook's "None" branch (grep's 1: nothing found)
        Expect(r"^dmesg -T \| grep -i -E 'DEV\|reset\|retry\|timeout'", lambda rc, out: result(
            not out.strip(), "nothing: no reset, retry or timeout"), rc=1),
        Expect(r"^curl .*diskpulse_disk_set_info", all_of(
            exports("diskpulse_disk_set_info", 1, device=dev, set="md0"),
            exports("diskpulse_disk_set_info", 1, device=sib, set="md0"))),
    ]


# --- the host side of lib.sh's `runbook` -------------------------------------------------------

class Session:
    """Runs the sections a guest asks for, one request at a time: `runbook SECTION SITUATION
    NAME=VALUE...` starts one (run_section in a thread whose runner hands each command to the
    guest), `rbresult RC BASE64` returns a command's outcome; the answer is the next command
    (`cmd TIMEOUT BASE64`) or `end FAILED`. record(verb, name, why) reports each check."""

    def __init__(self, record, prom=None):
        self.record, self.prom = record, prom
        self.to_guest, self.from_guest = queue.Queue(), queue.Queue()

    def request(self, verb, rest):
        if verb == "runbook":
            words = rest.split()
            if len(words) < 2:
                self.record("fail", "runbook", "want 'runbook SECTION SITUATION NAME=VALUE...', got %r" % rest)
                return "end 1"
            section, situation, values = words[0], words[1], {}
            for w in words[2:]:
                name, _, val = w.partition("=")
                values[name] = val.split(",") if "," in val else val
            threading.Thread(target=self._run, args=(section, situation, values), daemon=True).start()
        elif verb == "rbresult":
            rc, _, data = rest.partition(" ")
            out = base64.b64decode(data).decode("utf-8", "replace") if data else ""
            self.from_guest.put((int(rc) if rc.lstrip("-").isdigit() else None, out))
        try:
            item = self.to_guest.get(timeout=300)
        except queue.Empty:
            self.record("fail", "runbook", "no next command within 300 s")
            return "end 1"
        return item

    def _runner(self, text, timeout):
        self.to_guest.put("cmd %d %s" % (timeout, base64.b64encode(text.encode()).decode()))
        rc, out = self.from_guest.get()
        if rc in (124, 137):  # timeout(1): the command ran out of time (then was killed)
            return None, out + "\n[timed out after %s s]" % timeout
        return rc, out

    def _run(self, section, situation, values):
        failed = []

        def check(cond, what):
            name = "runbook[%s] %s" % (situation, what)
            self.record("ok" if cond else "fail", name[:400])
            if not cond:
                failed.append(what)
            return cond

        try:
            fn = EXPECT.get((section, situation))
            if not check(fn is not None, "expectations for this section and situation"):
                return
            # values hold placeholders only: a context word like FLAG is the checks' alone
            ctx = Context(section, values, self.prom)
            got = fn(ctx)
            exp, only = got if isinstance(got, tuple) else (got, None)
            placeholders = {k: v for k, v in values.items() if k not in CONTEXT_WORDS}
            print("vmtest: runbook %s in situation %s: %s" % (section, situation, fn.__doc__ or ""))
            if section in NOT_PRODUCED:
                print("vmtest: runbook %s: the alert's condition is not produced here: %s"
                      % (section, NOT_PRODUCED[section]))
            for match, why in ctx.required:
                check(any(re.search(match, c.text) for c in runbook.sections()[section]),
                      "%s: the section holds %s" % (section, why))
            runbook.run_section(section, placeholders, exp, check, runner=self._runner, only=only)
        except Exception as e:  # noqa: BLE001 -- a broken expectation is a failed check, not a hung guest
            check(False, "expectations raised %r" % e)
        finally:
            self.to_guest.put("end %d" % len(failed))


# Values a scenario passes that are no placeholders of the runbook, for the checks (FLAG: the
# critical warning's flag label; UNDER: the disk under a dm device).
CONTEXT_WORDS = {"FLAG", "UNDER"}


def main():
    for (section, situation), fn in sorted(EXPECT.items()):
        print("%s (%s): %s" % (section, situation, " ".join((fn.__doc__ or "").split())))
    print()
    for section, why in sorted(NOT_PRODUCED.items()):
        print("not produced: %s: %s" % (section, why))


if __name__ == "__main__":
    main()
