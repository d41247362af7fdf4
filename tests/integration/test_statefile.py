"""The canary's baseline state file on a real ext4 on a loop device (needs root): written 0600
under umask 0, a file with a bad line keeps the other records (and a copy aside), a full
filesystem keeps the old file byte for byte with nothing left behind, a corrupt file is set
aside and learning restarts. The state directory and the canary target are two loop
filesystems (the canary's own work file on a full filesystem would free room when it stops); the
target's loop disk gets a serial from a udev database directory of the test's own
(--path.udev.data), so its baseline is persisted as a real disk's would be."""
import glob
import os
import re
import shutil
import signal
import stat
import sys
import tempfile

import dp

BIN = sys.argv[1]
FAST = ["--no-collector.smart", "--canary.interval=100ms", "--diskstats.interval=100ms"]
STATE = "canary-baselines"
SERIAL = "DPTEST-STATEFILE-0001"
OTHER = ("disk=serial:some-other-disk mode=append path=/srv/other baseline=0.0125 updates=99 "
         "updated=1700000000000000 warmup=-")
# the same record as the daemon writes it back (format version 2: with its regime; since the
# warm-up became the first day, an ended warm-up is written as dayobs=-, not warmup=-)
OTHER_V2 = OTHER.replace(" baseline=", " regime=idle baseline=").replace(" warmup=-", " ")


def daemon(fs, tgt, udev, *extra):
    old = os.umask(0)  # the daemon must not rely on the umask
    try:
        return dp.Daemon(BIN, *FAST, "--state.directory=" + fs.mnt, "--canary.path=" + tgt.mnt,
                         "--path.udev.data=" + udev, *extra)
    finally:
        os.umask(old)


def target_up(d, path):
    def once():
        m = d.scrape()
        return m if dp.value(m, "diskpulse_sync_target_up", path=path) == 1 else None
    return dp.wait_until(once, 15)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def asides(fs, tag):
    return sorted(glob.glob(os.path.join(fs.mnt, "%s.%s-*" % (STATE, tag))))


def temps(fs):
    return glob.glob(os.path.join(fs.mnt, ".%s.tmp-*" % STATE))


def main():
    dp.need_loop_fs()
    udev = tempfile.mkdtemp(prefix="diskpulse-udev-")
    try:
        with dp.LoopFs(size_mb=16, mkfs_args=["-m", "0"]) as fs, dp.LoopFs(size_mb=32) as tgt:
            with open("/sys/block/%s/dev" % tgt.dev) as f:
                majmin = f.read().strip()
            with open(os.path.join(udev, "b" + majmin), "w") as f:
                f.write("E:ID_SERIAL=%s\n" % SERIAL)
            path = os.path.join(fs.mnt, STATE)

            # 1. the first save, with umask 0: 0600
            with daemon(fs, tgt, udev) as d:
                m = target_up(d, tgt.mnt)
                dp.check(m is not None, "a canary target on the loop filesystem is up")
                dp.check(m is not None and dp.value(m, "diskpulse_state_write_errors_total", file=STATE) == 0,
                         "diskpulse_state_write_errors_total{file=\"%s\"} is 0" % STATE)
                rc, _ = d.stop()
                dp.check(rc == 0, "stopped with status 0")
            text = read(path).decode()
            mine = [l for l in text.splitlines() if SERIAL in l]
            dp.check(len(mine) == 1, "the baseline of the loop disk is saved, keyed by its serial: %r" % mine)
            dp.check(mode_of(path) == 0o600, "saved with mode 0600 under umask 0 (got %03o)" % mode_of(path))
            if len(mine) != 1:
                dp.finish()

            # 2. a warm baseline of this disk, another disk's record, a bad line; mode 0644
            warm = re.sub(r"baseline=\S+", "baseline=0.0042", mine[0])
            warm = re.sub(r"updates=\S+", "updates=40", warm)
            warm = re.sub(r"dayobs=\S+", "dayobs=-", warm)  # past the warm-up, no hour of a day yet
            planted = ("diskpulse-canary-baselines 1\n%s\n%s\n"
                       "disk=serial:broken mode=fdatasync path=/x baseline=banana\n" % (warm, OTHER))
            with open(path, "w") as f:
                f.write(planted)
            os.chmod(path, 0o644)
            with daemon(fs, tgt, udev) as d:
                m = target_up(d, tgt.mnt)
                b = m and dp.value(m, "diskpulse_sync_baseline_seconds", path=tgt.mnt)
                dp.check(b == 0.0042, "a bad line of another disk: this disk's baseline is restored (%s)" % b)
                kept = asides(fs, "corrupt")
                dp.check(len(kept) == 1 and read(kept[0]) == planted.encode(),
                         "the whole file is kept aside byte for byte: %s" % [os.path.basename(k) for k in kept])
                dp.check(mode_of(path) == 0o600, "a 0644 file is tightened to 0600 at start")
                dp.check("bad_lines=1" in d.output() and "level=warn" in d.output(),
                         "the bad line is logged at warning")

                # 3. the filesystem fills up under the running daemon
                filled = dp.fill_filesystem(fs.mnt)
                before = read(path)
                ok = True
                for _ in range(20):
                    ok = ok and d.scrape() is not None
                dp.check(ok, "full filesystem (%d KiB written): scrapes go on" % (filled >> 10))
                rc, _ = d.stop()
                dp.check(rc == 0, "full filesystem: stopped with status 0")
            # still full, a target new to the file (another path on the same disk) must be saved:
            # its prober's save after the first probe fails, and the stop's once more
            sub = os.path.join(tgt.mnt, "sub")
            os.makedirs(sub, exist_ok=True)
            # Still full for certain: ext4 gives back blocks it held for delayed allocation once
            # they are written out, so room can appear after the fill (a run in a chroot found
            # some and the save succeeded); written out, then topped up.
            os.sync()
            dp.fill_filesystem(fs.mnt, "filler-top")
            with daemon(fs, tgt, udev, "--canary.path=" + sub) as d:
                dp.check(target_up(d, sub) is not None, "full filesystem: a new target is up")
                dp.wait_until(lambda: "errno=ENOSPC" in d.output(), 10)
                rc, _ = d.stop()
                log = d.output()
                dp.check(rc == 0, "full filesystem: stopped with status 0")
                dp.check(re.search(r'msg="cannot save the canary baselines".*errno=ENOSPC', log) is not None,
                         "full filesystem: the failed save is logged with ENOSPC")
                dp.check(read(path) == before, "full filesystem: the old baseline file is intact byte for byte")
                dp.check(not temps(fs), "full filesystem: no temp file left (%s)" % temps(fs))
            dp.unfill_filesystem(fs.mnt)

            # 4. room again: the good records are written, the other disk's included
            with daemon(fs, tgt, udev) as d:
                target_up(d, tgt.mnt)
                d.stop()
            text = read(path).decode()
            other = [l for l in text.splitlines() if l.startswith(OTHER_V2)]
            dp.check(len(other) == 1 and " dayobs=- " in other[0] and "baseline=0.0042" in text
                     and "banana" not in text,
                     "room again: this disk's and the other disk's records saved, the bad line not")
            dp.check(mode_of(path) == 0o600, "rewritten with mode 0600")
            for k in asides(fs, "corrupt"):
                os.unlink(k)

            # 5. a corrupt file: set aside, learning starts afresh, the daemon serves
            garbage = b"\x00\xff not a state file at all\n" * 50
            with open(path, "wb") as f:
                f.write(garbage)
            with daemon(fs, tgt, udev) as d:
                m = target_up(d, tgt.mnt)
                dp.check(m is not None and dp.value(m, "diskpulse_sync_baseline_seconds", path=tgt.mnt) is None,
                         "a corrupt file: learning starts afresh (no baseline)")
                kept = asides(fs, "corrupt")
                # renamed, not copied: what is at the name now, if anything, is the new file the
                # prober writes for the disk (new to it) after its first probe
                dp.check(len(kept) == 1 and read(kept[0]) == garbage and
                         (not os.path.exists(path) or garbage not in read(path)),
                         "a corrupt file is renamed aside with a timestamp: %s" % [os.path.basename(k) for k in kept])
                dp.check(re.search(r'level=warn msg="canary baselines file unusable, set aside; learning starts '
                                   r'afresh".*set_aside=%s\.corrupt-\d{8}T\d{6}Z\.\d+ errno=EBADMSG' % STATE,
                                   d.output()) is not None, "a corrupt file: logged at warning with its new name")
                d.signal(signal.SIGHUP)
                dp.check(target_up(d, tgt.mnt) is not None, "a corrupt file: still serving after a reload")
                rc, _ = d.stop()
                dp.check(rc == 0, "a corrupt file: stopped with status 0")
            text = read(path).decode()
            dp.check(SERIAL in text and "baseline=0.0042" not in text and mode_of(path) == 0o600,
                     "a corrupt file: a fresh file written, 0600")
    finally:
        shutil.rmtree(udev, ignore_errors=True)
    dp.finish()


if __name__ == "__main__":
    main()
