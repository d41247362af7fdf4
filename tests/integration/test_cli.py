#!/usr/bin/env python3
"""Command line and config file: help, version, every bad value refused with a message naming it,
the config file and its precedence, --check-config, --once on this host, SIGHUP reload, logs."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import dp

BIN = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="diskpulse-cli-")


def run(*args, timeout=20):
    """The binary with args, its state (and default canary target) in TMP unless args name one."""
    if not any(a.startswith("--state.directory") for a in args) and "--help" not in args:
        args = args + ("--state.directory=" + os.path.join(TMP, "state"),)
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=timeout)


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def help_and_version():
    r = run("--version")
    dp.check(r.returncode == 0 and re.match(r"^diskpulse version \d+\.\d+\.\d+([+~]\d+\.g[0-9a-f]{12})? \(revision \S+\)\n$", r.stdout),
             "--version: %r" % r.stdout)
    r = run("--help")
    dp.check(r.returncode == 0, "--help exits 0")
    for flag in ("--web.listen-address", "--web.systemd-socket", "--web.max-connections", "--config.file",
                 "--path.procfs", "--path.sysfs", "--path.udev.data", "--path.dev",
                 "--collector.diskstats.device-include", "--collector.diskstats.device-exclude",
                 "--diskstats.interval", "--diskstats.window", "--[no-]collector.diskstats", "--state.directory",
                 "--log.level", "--log.format", "--once", "--check-config", "--version", "--help"):
        dp.check(flag in r.stdout, "--help lists %s" % flag)


def bad_values():
    cases = [
        (["--diskstats.interval=abc"], "diskstats.interval", "abc"),
        (["--diskstats.interval=0s"], "diskstats.interval", "0s"),
        (["--diskstats.interval=5ms"], "diskstats.interval", "5ms"),
        (["--diskstats.window=500ms"], "diskstats.window", "500ms"),
        (["--diskstats.interval", "10x"], "diskstats.interval", "10x"),
        (["--web.listen-address=nohost"], "web.listen-address", "nohost"),
        (["--web.listen-address=:99999"], "web.listen-address", ":99999"),
        (["--web.listen-address=[::1]9477"], "web.listen-address", "[::1]9477"),
        (["--web.max-connections=0"], "web.max-connections", "0"),
        (["--web.max-connections=many"], "web.max-connections", "many"),
        (["--log.level=loud"], "log.level", "loud"),
        (["--log.format=xml"], "log.format", "xml"),
        (["--collector.diskstats.device-include=("], "device-include", "("),
        (["--collector.diskstats.device-exclude=[z-a]"], "device-exclude", "[z-a]"),
        (["--collector.diskstats=maybe"], "collector.diskstats", "maybe"),
        (["--no-diskstats.interval"], "diskstats.interval", ""),
        (["--bogus"], "bogus", ""),
        (["--bogus=1"], "bogus", ""),
        (["positional"], "positional", ""),
        (["--diskstats.interval"], "diskstats.interval", ""),
        (["--path.procfs="], "path.procfs", ""),
    ]
    for args, name, value in cases:
        r = run("--check-config", *args)
        msg = r.stderr.strip()
        dp.check(r.returncode != 0 and name in msg and value in msg and r.stdout == "",
                 "%s refused: %r" % (" ".join(args), msg))
    r = run("--once", "--path.procfs=/nonexistent-root")
    dp.check(r.returncode != 0 and "/nonexistent-root" in r.stderr and "path.procfs" in r.stderr,
             "a missing procfs root is refused: %r" % r.stderr.strip()[-200:])


def config_file():
    cfg = write("good.conf", """# diskpulse test config
web.listen-address = 127.0.0.1:1234
web.listen-address = [::1]:1234

diskstats.interval = 2s
diskstats.window = "30s"
--log.level = debug
collector.diskstats.device-exclude = ^loop[0-9]+$
web.max-connections = 10
""")
    r = run("--config.file=" + cfg, "--check-config")
    out = r.stdout
    dp.check(r.returncode == 0 and "configuration OK" in out, "--check-config accepts a good file")
    for line in ("web.listen-address = 127.0.0.1:1234", "web.listen-address = [::1]:1234", "diskstats.interval = 2s",
                 "diskstats.window = 30s", "log.level = debug", "web.max-connections = 10",
                 "collector.diskstats.device-exclude = ^loop[0-9]+$"):
        dp.check(line in out, "config applied: %s" % line)
    dp.check(":9477" not in out, "listen addresses in the file replace the default")
    r = run("--config.file=" + cfg, "--check-config", "--diskstats.interval=3s", "--web.listen-address=:1")
    dp.check("diskstats.interval = 3s" in r.stdout and "web.listen-address = :1\n" in r.stdout
             and "1234" not in r.stdout, "flags win over the file")
    for text, where, what in (
        ("diskstats.interval = 2s\nbogus.key = 1\n", ":2:", "bogus.key"),
        ("\n\n# c\ndiskstats.window = 1x\n", ":4:", "1x"),
        ("log.level\n", ":1:", "name = value"),
        ("once = true\n", ":1:", "once"),
        ("web.listen-address = nohost\n", ":1:", "nohost"),
    ):
        path = write("bad.conf", text)
        r = run("--config.file=" + path, "--check-config")
        dp.check(r.returncode != 0 and path + where in r.stderr and what in r.stderr,
                 "bad config line refused with file:line: %r" % r.stderr.strip())
    example = os.path.join(dp.HERE, "..", "..", "etc", "diskpulse.conf")
    r = run("--config.file=" + example, "--check-config")
    dp.check(r.returncode == 0 and "configuration OK" in r.stdout, "the shipped example config is valid")
    r = run("--config.file=" + os.path.join(TMP, "missing.conf"), "--check-config")
    dp.check(r.returncode != 0 and "missing.conf" in r.stderr, "an unreadable config file is refused")


def once_on_this_host():
    r = run("--once")
    dp.check(r.returncode == 0, "--once on this host exits 0 (%s)" % r.stderr.strip()[-200:])
    m = dp.parse(r.stdout)
    exclude = re.compile(r"^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$")
    want = sorted({l.split()[2] for l in open("/proc/diskstats") if not exclude.search(l.split()[2])})
    got = sorted(dict(ls)["device"] for ls in dp.series(m, "diskpulse_disk_info"))
    dp.check(got == want, "--once lists this host's devices %s" % got)
    r = run("--once", "--no-collector.diskstats")
    m = dp.parse(r.stdout)
    dp.check(r.returncode == 0 and not dp.series(m, "diskpulse_disk_info")
             and dp.value(m, "diskpulse_collector_success", collector="diskstats") is None,
             "--no-collector.diskstats turns it off")


def once_with_canary():
    d = os.path.join(TMP, "canary")
    os.mkdir(d)
    gone = os.path.join(TMP, "no-such-dir")
    r = run("--once", "--no-collector.diskstats", "--no-collector.smart", "--canary.path=" + d,
            "--canary.path=%s:append" % d, "--canary.path=" + gone)
    m = dp.parse(r.stdout)
    dp.check(r.returncode == 0, "--once with canary targets exits 0 (%s)" % r.stderr.strip()[-200:])
    for mode in ("fdatasync", "append"):
        n = dp.value(m, "diskpulse_sync_probes_total", path=d, mode=mode)
        ci = dp.value(m, "diskpulse_sync_latency_seconds_count", path=d, mode=mode, regime="idle")
        cb = dp.value(m, "diskpulse_sync_latency_seconds_count", path=d, mode=mode, regime="busy")
        up = dp.value(m, "diskpulse_sync_target_up", path=d, mode=mode)
        dp.check(n == 17 and ci == 1 and cb == 1 and up == 1,
                 "--once runs one %s cycle, a spaced probe and the default burst of 16: probes %s, idle count %s, "
                 "busy count %s, up %s" % (mode, n, ci, cb, up))
    dp.check(dp.value(m, "diskpulse_sync_errors_total", path=gone, errno="ENOENT") == 1 and
             dp.value(m, "diskpulse_sync_target_up", path=gone) == 0,
             "--once: a missing directory is one ENOENT and down, not a failure")
    dp.check(dp.value(m, "diskpulse_collector_success", collector="canary") == 0,
             "--once: the canary collector reports a target down")
    dp.check(not [n for n in os.listdir(d)], "--once leaves no file in the canary directory")
    r = run("--once", "--no-collector.diskstats", "--no-collector.smart", "--canary.path=" + d,
            "--canary.burst=0")
    m = dp.parse(r.stdout)
    dp.check(r.returncode == 0 and dp.value(m, "diskpulse_sync_probes_total", path=d) == 1 and
             not [k for k in m if ("regime", "busy") in k[1]] and
             dp.value(m, "diskpulse_sync_busy_idle_ratio", path=d) is None,
             "--canary.burst=0: one probe, no busy regime, no busy/idle ratio")
    r = run("--check-config", "--canary.path=" + d, "--canary.interval=1m")
    dp.check(r.returncode == 0 and "canary.path = %s:fdatasync" % d in r.stdout and
             "canary.interval = 1m" in r.stdout, "--check-config shows the canary targets")
    r = run("--once", "--no-collector.diskstats", "--no-collector.smart", "--no-collector.canary")
    dp.check(r.returncode == 0 and "diskpulse_sync_" not in r.stdout, "--no-collector.canary turns it off")


def reload_on_sighup():
    cfg = write("reload.conf", "collector.diskstats.device-include = ^no-such-device$\n")
    with dp.Daemon(BIN, "--config.file=" + cfg) as d:
        m = d.scrape()
        dp.check(dp.value(m, "diskpulse_disk_devices") == 0, "before reload: no device included")
        started = dp.value(m, "diskpulse_config_reload_success_timestamp_seconds")
        dp.check(dp.value(m, "diskpulse_config_reload_success") == 1 and started is not None and
                 abs(started - time.time()) < 60,
                 "at start: diskpulse_config_reload_success 1, loaded at %s (now %.0f)" % (started, time.time()))
        time.sleep(1.1)  # the next load's timestamp is a second later at least
        write("reload.conf", "collector.diskstats.device-include = .\nlog.level = debug\n")
        d.signal(signal.SIGHUP)
        n = 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not n:
            n = dp.value(d.scrape(), "diskpulse_disk_devices")
            time.sleep(0.1)
        dp.check(n and n > 0, "SIGHUP re-reads the config: %s devices" % n)
        restart = "listen addresses and paths change only on restart"

        def loaded():
            return dp.value(d.scrape(), "diskpulse_config_reload_success_timestamp_seconds")

        def hup(text):
            """Writes the file, sends SIGHUP and waits for "configuration reloaded" and for a page
            made after it (the log line comes before the round that shows the reload: a page read
            at once may still show the load before); the log."""
            before, was = d.output().count("configuration reloaded"), loaded()
            write("reload.conf", text)
            d.signal(signal.SIGHUP)
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and d.output().count("configuration reloaded") == before:
                time.sleep(0.05)
            dp.check(dp.wait_until(lambda: loaded() != was, 10),
                     "a page made after the reload shows its load time (was %s)" % was)
            return d.output()

        out = hup("collector.diskstats.device-include = .\nlog.level = debug\nsmart.interval = 1h\n"
                  "canary.baseline-period = 1m\nweb.max-connections = 99\n")
        dp.check("configuration reloaded" in out and restart not in out,
                 "a reload of options applied at once or read at start only warns of nothing")
        out = hup("collector.diskstats.device-include = .\nlog.level = debug\npath.sysfs = /nonexistent-sys\n")
        dp.check(out.count(restart) == 1, "a changed --path.sysfs on SIGHUP: \"%s\"" % restart)
        dp.check(dp.value(d.scrape(), "diskpulse_disk_devices") == n, "and the running roots stay")
        out = hup("collector.diskstats.device-include = .\nlog.level = debug\npath.sysfs = /nonexistent-sys\n")
        dp.check(out.count(restart) == 2, "the warning again on the next reload: still not restarted")
        m = d.scrape()
        good = dp.value(m, "diskpulse_config_reload_success_timestamp_seconds")
        dp.check(dp.value(m, "diskpulse_config_reload_success") == 1 and good and good >= started + 1,
                 "after good reloads: success 1, loaded at %s, after the start's %s" % (good, started))
        write("reload.conf", "diskstats.interval = nonsense\n")
        d.signal(signal.SIGHUP)
        dp.check(dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_config_reload_success") == 0, 10),
                 "a bad config on SIGHUP: diskpulse_config_reload_success 0")
        m = d.scrape()
        dp.check(d.proc.poll() is None and dp.value(m, "diskpulse_disk_devices") == n,
                 "a bad config on SIGHUP keeps the running one and serving")
        dp.check(dp.value(m, "diskpulse_config_reload_success_timestamp_seconds") == good,
                 "a bad config on SIGHUP: the timestamp stays the last good load's (%s)" %
                 dp.value(m, "diskpulse_config_reload_success_timestamp_seconds"))
        dp.check("nonsense" in d.output() and "reload failed" in d.output(), "the bad reload is logged")
        time.sleep(1.1)
        write("reload.conf", "collector.diskstats.device-include = ^no-such-device$\n")
        d.signal(signal.SIGHUP)
        dp.check(dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_config_reload_success") == 1, 10),
                 "the file fixed, SIGHUP: diskpulse_config_reload_success 1 again")
        m = d.scrape()
        fixed = dp.value(m, "diskpulse_config_reload_success_timestamp_seconds")
        dp.check(fixed and fixed >= good + 1, "and the timestamp is the new load's: %s > %s" % (fixed, good))
        dp.check(dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_disk_devices") == 0, 10),
                 "and the fixed file's settings run: no device included")
        rc, took = d.stop()
        dp.check(rc == 0 and took < 1, "SIGTERM after reloads: exit %d in %.3f s" % (rc, took))


def json_logs():
    with dp.Daemon(BIN, "--log.format=json", "--log.level=debug") as d:
        d.stop()
        lines = [l for l in d.output().splitlines() if l.strip()]
    ok = True
    for l in lines:
        try:
            obj = json.loads(l)
            ok = ok and {"ts", "level", "msg"} <= obj.keys()
        except ValueError:
            ok = False
    dp.check(lines and ok, "--log.format=json writes one JSON object per line (%d lines)" % len(lines))


help_and_version()
bad_values()
config_file()
once_on_this_host()
once_with_canary()
reload_on_sighup()
json_logs()
dp.finish()
