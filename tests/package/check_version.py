#!/usr/bin/env python3
"""One version everywhere: project()'s VERSION in CMakeLists.txt is the newest release of NEWS.md
and of packaging/debian/changelog; every release tag vX.Y.Z has its NEWS section and changelog
entry; and the build's version (the daemon's --version, diskpulse_build_info, the package) is
what the rule in CMakeLists.txt makes of `git describe`, worked out here on its own: the tag's
version on a tagged commit, X.Y.Z+N.gREVISION N commits after it, NEXT~N.gREVISION when
project() is already at the next release, project()'s VERSION without git or a tag. And dpkg
sorts those as the rule says: a snapshot after its release, a pre-release before its release.
Usage: check_version.py BUILD_DIR DAEMON"""
import os
import re
import shutil
import subprocess
import sys

import pkg


def news_versions():
    with open(os.path.join(pkg.SOURCE, "NEWS.md"), encoding="utf-8") as f:
        return re.findall(r"^## (\d+\.\d+\.\d+)\s*$", f.read(), re.M)


def changelog_versions():
    with open(os.path.join(pkg.SOURCE, "packaging", "debian", "changelog"), encoding="utf-8") as f:
        return re.findall(r"^diskpulse \(([^)]+)\) ", f.read(), re.M)


def project_version():
    with open(os.path.join(pkg.SOURCE, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"^project\(diskpulse VERSION (\d+\.\d+\.\d+)", f.read(), re.M).group(1)


def git(*args):
    p = subprocess.run(["git", "-C", pkg.SOURCE] + list(args), capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def expected_version(project):
    """The rule of CMakeLists.txt, from git describe: (version, why)."""
    if not os.path.lexists(os.path.join(pkg.SOURCE, ".git")):
        return project, "no git: project()'s VERSION"
    desc = git("describe", "--tags", "--match", "v[0-9]*", "--long", "--abbrev=12", "HEAD")
    m = re.fullmatch(r"v(\d+\.\d+\.\d+)-(\d+)-g([0-9a-f]+)", desc or "")
    if not m:
        return project, "no release tag: project()'s VERSION"
    tag, after, rev = m.group(1), int(m.group(2)), m.group(3)
    if vkey(tag) == vkey(project):
        return ((project, "the release v%s" % tag) if after == 0 else
                ("%s+%d.g%s" % (project, after, rev), "%d commits after v%s" % (after, tag)))
    return "%s~%d.g%s" % (project, after, rev), "a pre-release of %s after v%s" % (project, tag)


def dpkg_lt(a, b):
    return subprocess.run(["dpkg", "--compare-versions", a, "lt", b]).returncode == 0


def main():
    build, daemon = sys.argv[1], sys.argv[2]
    project = project_version()
    news, log = news_versions(), changelog_versions()
    pkg.check(news and news[0] == project, "NEWS.md's newest release is project()'s VERSION %s (%s)"
              % (project, news[:1]))
    pkg.check(log and log[0] == project, "packaging/debian/changelog's newest entry is %s (%s)" % (project, log[:1]))
    pkg.check(news == sorted(news, key=vkey, reverse=True) and len(set(news)) == len(news),
              "NEWS.md's releases are newest first, each once: %s" % news)
    tags = [t[1:] for t in (git("tag", "--list", "v[0-9]*") or "").split()]
    missing = [t for t in tags if t not in news or t not in log]
    pkg.check(not missing, "every release tag has a NEWS.md section and a changelog entry (%d tags%s)"
              % (len(tags), "; missing: " + ", ".join(missing) if missing else ""))
    want, why = expected_version(project)
    got = pkg.project_version(build)
    pkg.check(got == want, "the build's version is %s (%s): %s" % (want, why, got))
    out = subprocess.run([daemon, "--version"], capture_output=True, text=True).stdout
    pkg.check(out.startswith("diskpulse version %s " % want), "--version says %s: %r" % (want, out.strip()))
    # dpkg's order of the three forms, on this release's numbers
    if shutil.which("dpkg"):
        nxt = "%d.%d.0" % (vkey(project)[0], vkey(project)[1] + 1)
        order = [project, project + "+1.g0123456789ab", project + "+12.g0123456789ab", nxt + "~3.g0123456789ab", nxt]
        pkg.check(all(dpkg_lt(a, b) for a, b in zip(order, order[1:])),
                  "dpkg sorts a release, its snapshots and the next pre-release and release in order: %s"
                  % " < ".join(order))
    pkg.finish()


main()
