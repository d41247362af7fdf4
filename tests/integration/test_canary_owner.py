#!/usr/bin/env python3
"""A canary target on a database's filesystem, as the documentation lays it out.

The service runs as its own user with no capability; PostgreSQL's directory
(/var/lib/postgresql, 0755) belongs to postgres, so probes there fail with EACCES. This test
builds that situation with numeric ids: a postgres-like directory (uid/gid 65533, 0755), and the
shipped tmpfiles.d line (systemd/postgresql-canary.tmpfiles) applied with
`systemd-tmpfiles --create` after only its path prefix and owner names are mapped to the test's
(diskpulse -> nobody, postgres -> 65533). The daemon runs as nobody (setpriv, no capability,
no supplementary group) with both directories as targets: the postgres-owned one is down with
EACCES counted in diskpulse_sync_errors_total and logged; the directory the tmpfiles line made
(mode and owner as the line says) is up and probed. Root only (skips otherwise).

Usage: test_canary_owner.py BINARY
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile

import dp

BIN = sys.argv[1]
NOBODY = 65534
PG = 65533  # the postgres-like owner: an id no test process uses
SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "systemd",
                       "postgresql-canary.tmpfiles")


def sv(m, name, path, **labels):
    return dp.value(m, name, path=path, mode="fdatasync", **labels)


def main():
    if os.geteuid() != 0:
        dp.skip("not running as root (the test changes owners and drops to nobody)")
    setpriv = shutil.which("setpriv")
    tmpfiles = shutil.which("systemd-tmpfiles")
    if not setpriv:
        dp.skip("setpriv not found (Debian package util-linux)")
    if not tmpfiles:
        dp.skip("systemd-tmpfiles not found (Debian package systemd)")
    prefix = [setpriv, "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", "--inh-caps=-all"]
    if subprocess.run(prefix + [BIN, "--version"], capture_output=True).returncode != 0:
        dp.skip("nobody cannot run %s (directory permissions)" % BIN)

    with open(SHIPPED) as f:
        lines = [l.split() for l in f if l.strip() and not l.lstrip().startswith("#")]
    dp.check(len(lines) == 1 and lines[0][0] == "d" and lines[0][1].startswith("/var/lib/postgresql/"),
             "the shipped tmpfiles.d line makes a directory under /var/lib/postgresql: %s" % lines)
    kind, path, mode, user, group = lines[0][:5]
    dp.check((user, group) == ("diskpulse", "postgres"), "... owned by diskpulse, group postgres (%s:%s)" % (user, group))

    tmp = tempfile.mkdtemp(prefix="diskpulse-owner-")
    try:
        os.chmod(tmp, 0o755)
        pgdir = os.path.join(tmp, "postgresql")
        os.mkdir(pgdir, 0o755)
        os.chown(pgdir, PG, PG)
        os.chmod(pgdir, 0o755)  # as Debian's postgresql-common leaves /var/lib/postgresql
        state = os.path.join(tmp, "state")
        os.mkdir(state, 0o700)
        os.chown(state, NOBODY, NOBODY)

        mine = pgdir + path[len("/var/lib/postgresql"):]
        conf = os.path.join(tmp, "canary.conf")
        with open(conf, "w") as f:
            f.write("%s %s %s %d %d -\n" % (kind, mine, mode, NOBODY, PG))
        p = subprocess.run([tmpfiles, "--create", conf], capture_output=True, text=True, timeout=60)
        st = os.stat(mine) if os.path.isdir(mine) else None
        dp.check(p.returncode == 0 and st is not None, "systemd-tmpfiles --create made %s (exit %d %s)"
                 % (mine, p.returncode, p.stderr.strip()))
        if st is None:
            return
        dp.check((st.st_uid, st.st_gid, "%o" % stat.S_IMODE(st.st_mode)) == (NOBODY, PG, mode.lstrip("0") or "0"),
                 "... owner %d:%d mode %o, as the line says" % (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)))

        wrapper = os.path.join(tmp, "as-nobody")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec %s \"$@\"\n" % " ".join("'%s'" % a for a in prefix + [BIN]))
        os.chmod(wrapper, 0o755)
        with dp.Daemon(wrapper, "--no-collector.smart", "--canary.interval=200ms", "--canary.burst=2",
                       "--state.directory=" + state, "--canary.path=" + pgdir, "--canary.path=" + mine) as d:
            m = {}

            def ready():
                nonlocal m
                m = d.scrape()
                return ((sv(m, "diskpulse_sync_errors_total", pgdir, errno="EACCES") or 0) >= 2
                        and sv(m, "diskpulse_sync_target_up", mine) == 1
                        and (sv(m, "diskpulse_sync_probes_total", mine) or 0) >= 3)
            dp.wait_until(ready, 60, poll=0.25)
            eacces = sv(m, "diskpulse_sync_errors_total", pgdir, errno="EACCES") or 0
            dp.check(eacces >= 2 and sv(m, "diskpulse_sync_target_up", pgdir) == 0,
                     "the postgres-owned directory: EACCES counted (%s), target down" % eacces)
            others = [(dict(ls).get("errno"), v) for (n, ls), v in m.items()
                      if n == "diskpulse_sync_errors_total" and dict(ls).get("path") == pgdir and dict(ls).get("errno") != "EACCES"]
            dp.check(not any(v for _, v in others), "... and no other errno (%s)" % others)
            dp.check(sv(m, "diskpulse_sync_target_up", mine) == 1
                     and (sv(m, "diskpulse_sync_probes_total", mine) or 0) >= 3
                     and not any(v for (n, ls), v in m.items()
                                 if n == "diskpulse_sync_errors_total" and dict(ls).get("path") == mine),
                     "the directory the tmpfiles line made: up, %s probes, no error"
                     % sv(m, "diskpulse_sync_probes_total", mine))
            log = d.output()
            lines = [l for l in log.splitlines() if "EACCES" in l and pgdir in l]
            dp.check(bool(lines), "the log names the directory and EACCES: %s" % (lines[:1] or log[-600:]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
dp.finish()
