#!/usr/bin/env python3
"""The README's kernel support table, every cell from a guest test run now: the scenarios of the
kernel matrix (label matrix: Debian's own 5.10 and 6.12 kernels) and the same scenarios on the
host's kernel (the vm tests), run with ctest in BUILD_DIR, which must be configured with
-DDISKPULSE_MATRIX=ON; with -DDISKPULSE_ARM64=ON as well, a row for Debian 12's arm64 kernel in the
arm64 guest (vm/arm64/*, the scenarios that need no SATA disk). Each row says what works on that kernel and what degrades, with the date
and commit of the run.

  support_table.py BUILD_DIR                 run them and print the table
  support_table.py BUILD_DIR --write-readme  ... and put it into README.md

Exit 1 when a test failed (the table still shows it), 77 without the matrix tests."""
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
README = os.path.join(ROOT, "README.md")
BEGIN = "<!-- kernel support table: python3 tests/vm/support_table.py BUILD --write-readme -->"
END = "<!-- end of kernel support table -->"
# (column, scenario): what each column shows. Every scenario but canary_nobarrier and
# biolatency_requeue ends with the strict exposition check of its page.
COLUMNS = [("diskstats against the kernel's, under writes", "basic"),
           ("SMART of the NVMe disk", "smart_nvme"),
           ("SMART of the SATA disk", "smart_ata"),
           ("the canary on ext4, its EIO", "canary_eio"),
           ("the canary's flush count, barriers on and off", "canary_nobarrier"),
           ("a disk unplugged", "hotunplug"),
           ("block I/O latency (null_blk)", "biolatency_nullblk"),
           ("a requeued request counted once (scsi_debug)", "biolatency_requeue")]
SCENARIOS = [s for _, s in COLUMNS]
# What the biolatency scenarios do on a kernel before 5.12 (tests/vm/scenarios/biolatency_*.sh):
# the first checks that the daemon runs on without the collector and passes, the second skips.
# The arm64 guest (qemu-system-aarch64's virt machine) runs those of its scenarios that need
# neither the SATA disk (virt has no AHCI) nor scsi_debug (Debian's arm64 kernel has none), nor
# dmsetup (canary_eio); canary_nobarrier puts its nobarrier filesystem on a second NVMe disk there.
ARM64_SCENARIOS = {"basic", "smart_nvme", "biolatency_nullblk", "canary_nobarrier"}
DEGRADED = {"biolatency_nullblk": ((5, 12), "degrades: `diskpulse_io_latency_up 0`, the reason logged "
                                   "(BPF compare-and-swap is 5.12+)"),
            "biolatency_requeue": ((5, 12), "no collector before 5.12 (see the column before)")}


def run_ctest(build):
    regex = "^(vm/initramfs|vm/(%s)|matrix/.*|vm/arm64/.*)$" % "|".join(SCENARIOS)
    with tempfile.NamedTemporaryFile(suffix=".xml", delete=False) as f:
        junit = f.name
    try:
        p = subprocess.run(["ctest", "-R", regex, "--output-junit", junit], cwd=build,
                           capture_output=True, text=True)
        print(p.stdout[-3000:])
        tree = ET.parse(junit)
    finally:
        os.unlink(junit)
    results = {}
    for case in tree.getroot().iter("testcase"):
        status = case.get("status") or "run"
        if case.find("failure") is not None:
            status = "fail"
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            status = "skip"
        else:
            status = "pass" if status == "run" else status
        results[case.get("name")] = (status, float(case.get("time") or 0))
    return results


def kernel_of(build, series):
    """The kernel release a series' initramfs booted (vmtest writes it beside the cpio)."""
    vm = os.path.join(build, "tests", "vm")
    path = os.path.join(vm, "initramfs.cpio.json" if series == "host" else "arm64/initramfs.cpio.json"
                        if series == "arm64" else os.path.join("matrix-%s" % series, "initramfs.cpio.json"))
    try:
        with open(path) as f:
            return json.load(f).get("kver")
    except (OSError, ValueError):
        return None


def version(release):
    m = re.match(r"(\d+)\.(\d+)", release or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def cell(results, name, scenario, release):
    if name.startswith("vm/arm64/") and scenario not in ARM64_SCENARIOS:
        return "not in the arm64 guest"
    status, secs = results.get(name, ("not run", 0))
    deg = DEGRADED.get(scenario)
    v = version(release)
    if status in ("pass", "skip") and deg and v and v < deg[0]:
        return deg[1]
    if status == "pass":
        return "works (%.0f s)" % secs
    return {"fail": "**FAILS**", "skip": "skipped"}.get(status, status)


def table(build, results):
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    date = datetime.date.today().isoformat()
    series = sorted({n.split("/")[1] for n in results if n.startswith("matrix/")})
    rows = [("host", "vm/%s")] + [(s, "matrix/" + s + "/%s") for s in series]
    if any(n.startswith("vm/arm64/") for n in results):
        rows.append(("arm64", "vm/arm64/%s"))
    out = ["| kernel | " + " | ".join(c for c, _ in COLUMNS) + " |",
           "|---" * (len(COLUMNS) + 1) + "|"]
    for s, pattern in rows:
        release = kernel_of(build, s)
        label = "%s (%s)" % (release or "?", "Debian 12's, installed in the build machine's /boot" if s == "host" else
                             "Debian 12's, arm64 guest" if s == "arm64" else "Debian's " + s)
        out.append("| " + label + " | " + " | ".join(cell(results, pattern % sc, sc, release)
                                                     for sc in SCENARIOS) + " |")
    out.append("")
    arm64 = " -DDISKPULSE_ARM64=ON" if any(s == "arm64" for s, _ in rows) else ""
    out.append("Run on %s at commit %s: `cmake --preset ci -DDISKPULSE_MATRIX=ON%s && "
               "python3 tests/vm/support_table.py build-ci --write-readme`." % (date, commit, arm64))
    return "\n".join(out)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    listed = subprocess.run(["ctest", "-N", "-L", "matrix"], cwd=build, capture_output=True, text=True)
    if "Total Tests: 0" in listed.stdout or listed.returncode != 0:
        print("skip: no matrix tests in %s (configure it with -DDISKPULSE_MATRIX=ON)" % build)
        sys.exit(77)
    results = run_ctest(build)
    text = table(build, results)
    print(text)
    if "--write-readme" in sys.argv[2:]:
        with open(README) as f:
            readme = f.read()
        if BEGIN not in readme or END not in readme:
            sys.exit("README.md has no kernel support table markers")
        i, j = readme.index(BEGIN) + len(BEGIN), readme.index(END)
        with open(README, "w") as f:
            f.write(readme[:i] + "\n" + text + "\n" + readme[j:])
    sys.exit(1 if any(s == "fail" for s, _ in results.values()) else 0)


main()
