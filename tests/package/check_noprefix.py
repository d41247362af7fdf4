#!/usr/bin/env python3
"""The .deb cannot be made wrong, and is reproducible: a build directory configured the plain way,
without a preset or any -D (`cmake -S . -B DIR && cmake --build DIR && cpack -G DEB`), from a copy
of the source tree at another path, installs under /usr and makes the same package as the
presets' build, byte for byte (package/deb's .deb in BUILD_DIR: another source path, another
build path, -Werror or not, the same bytes). On a difference it names each
archive member that differs and how (order, time, owner, mode, bytes). And on its own: nothing
under /usr/local, exactly the paths the package/deb test expects, the conffiles of the control
archive present in the data archive, no lintian error (and no tag packaging/lintian.md does not
explain). A control: a build directory configured with CMAKE_INSTALL_PREFIX=/usr/local makes no
package at all; cpack stops with an error that names the prefix and the fix, before anything is
installed.
The source copy (BUILD/package-noprefix-src: tracked and untracked files, not ignored ones, and
the commit of the tree) and the build directory (BUILD/package-noprefix, tests off) are made
afresh on every run, and kept when a check fails.
Usage: check_noprefix.py BUILD_DIR"""
import glob
import os
import shutil
import sys
import tempfile
import time

import pkg


def main():
    build = sys.argv[1]
    if pkg.sanitized(build):
        pkg.skip("a sanitizer build: no package is made from it (the plain build's is tested)")
    cpack = pkg.need_tool("cpack", "cmake")
    pkg.need_tool("dpkg-deb", "dpkg")
    pkg.need_tool("dpkg-shlibdeps", "dpkg-dev")
    lintian = pkg.need_tool("lintian", "lintian")

    # The control first (seconds): another prefix makes no package.
    local = os.path.join(build, "package-localprefix")
    shutil.rmtree(local, ignore_errors=True)
    p = pkg.run(["cmake", "-S", pkg.SOURCE, "-B", local, "-DCMAKE_INSTALL_PREFIX=/usr/local",
                 "-DDISKPULSE_TESTS=OFF"], timeout=300)
    pkg.check(p.returncode == 0 and "cpack will refuse" in " ".join(p.stderr.split()),
              "configured with CMAKE_INSTALL_PREFIX=/usr/local: a warning that cpack will refuse (exit %d)" % p.returncode)
    p = pkg.run([cpack, "-G", "DEB"], cwd=local, timeout=300)
    out = " ".join((p.stdout + p.stderr).split())
    print(out[-800:])
    pkg.check(p.returncode != 0 and "CMAKE_INSTALL_PREFIX=/usr/local, not /usr" in out
              and "-DCMAKE_INSTALL_PREFIX=/usr" in out,
              "cpack in a /usr/local build directory fails (exit %d), naming the prefix and the fix" % p.returncode)
    pkg.check(not glob.glob(os.path.join(local, "*.deb")) and not os.path.exists(os.path.join(local, "_CPack_Packages")),
              "... before making or staging anything")
    shutil.rmtree(local, ignore_errors=True)

    # The plain way, afresh, from a copy of the tree.
    plain = os.path.join(build, "package-noprefix")
    src = os.path.join(build, "package-noprefix-src")
    shutil.rmtree(plain, ignore_errors=True)
    shutil.rmtree(src, ignore_errors=True)
    t0 = time.monotonic()
    pkg.copy_source(pkg.SOURCE, src, same_commit=True)
    pkg.run(["cmake", "-S", src, "-B", plain, "-DDISKPULSE_TESTS=OFF"], timeout=300, check_rc=True)
    pkg.check(pkg.cache_value(plain, "CMAKE_INSTALL_PREFIX") == "/usr",
              "configured without a preset: CMAKE_INSTALL_PREFIX is %s" % pkg.cache_value(plain, "CMAKE_INSTALL_PREFIX"))
    t1 = time.monotonic()
    pkg.run(["nice", "cmake", "--build", plain, "-j2"], timeout=1800, check_rc=True)
    t2 = time.monotonic()
    p = pkg.run([cpack, "-G", "DEB"], cwd=plain, timeout=600)
    t3 = time.monotonic()
    debs = glob.glob(os.path.join(plain, "diskpulse_*.deb"))
    pkg.note("copy and configure %.0f s, build (-j2, tests off) %.0f s, cpack %.0f s" % (t1 - t0, t2 - t1, t3 - t2))
    if not pkg.check(p.returncode == 0 and len(debs) == 1, "cpack -G DEB made %s" % [os.path.basename(d) for d in debs]):
        print(p.stdout[-1500:] + p.stderr[-1500:])
        pkg.finish()
    deb = debs[0]
    print(pkg.run(["dpkg-deb", "-c", deb], check_rc=True).stdout)

    # Reproducible: the presets' .deb (package/deb), built from another path, has the same bytes.
    presets = pkg.deb_path(build)
    epochs = (pkg.package_epoch(build), pkg.package_epoch(plain))
    if not presets:
        pkg.check(False, "the presets' .deb is in %s (package/deb makes it)" % build)
    elif not epochs[0] and not os.environ.get("SOURCE_DATE_EPOCH"):
        pkg.note("not compared with the presets' .deb: the tree is no git work tree and no "
                 "SOURCE_DATE_EPOCH is set, so cpack stamps the files with the current time")
    else:
        diffs = pkg.deb_differences(presets, deb)
        if diffs and epochs[0] != epochs[1]:
            diffs.insert(0, "SOURCE_DATE_EPOCH %s in %s, %s here (configured at another commit? "
                         "or SOURCE_DATE_EPOCH in the environment?)" % (epochs[0] or "unset", build,
                                                                         epochs[1] or "unset"))
        pkg.check(not diffs, "reproducible: built from a copy of the tree (%s), the same bytes as the presets' "
                  "%s in %s (sha256 %s)%s" % (src, os.path.basename(presets), build, pkg.sha256_file(presets)[:16],
            "" if not diffs else ": differences:\n  " + "\n  ".join(diffs[:60])
            + ("\n  ... %d more" % (len(diffs) - 60) if len(diffs) > 60 else "")))
    got = pkg.member_modes(pkg.data_members(deb))
    local_paths = sorted(n for n in got if n.startswith("usr/local"))
    pkg.check(not local_paths, "nothing under /usr/local%s" % (": " + " ".join(local_paths) if local_paths else ""))
    extra = sorted(set(got) - set(pkg.DEB_PATHS))
    missing = sorted(set(pkg.DEB_PATHS) - set(got))
    pkg.check(not extra and not missing, "exactly the %d paths of the presets' package%s%s" % (
        len(pkg.DEB_PATHS), (": unexpected " + " ".join(extra)) if extra else "",
        (": missing " + " ".join(missing)) if missing else ""))
    wrong = sorted(n for n in set(got) & set(pkg.DEB_PATHS) if got[n] != pkg.DEB_PATHS[n])
    pkg.check(not wrong, "types and modes as expected%s" % (": " + " ".join(wrong) if wrong else ""))

    ctrl = tempfile.mkdtemp(prefix="diskpulse-ctrl-")
    try:
        pkg.run(["dpkg-deb", "--control", deb, ctrl], check_rc=True)
        with open(os.path.join(ctrl, "conffiles")) as f:
            conffiles = f.read().split()
    finally:
        shutil.rmtree(ctrl, ignore_errors=True)
    pkg.check(bool(conffiles), "conffiles: %s" % conffiles)
    for c in conffiles:
        pkg.check(got.get(c.lstrip("/")) == "f644", "conffile %s is a file (0644) of the package" % c)
    for unit in ("diskpulse.service", "diskpulse.socket"):
        data = pkg.run(["sh", "-c", "dpkg-deb --fsys-tarfile '%s' | tar -xO ./lib/systemd/system/%s" % (deb, unit)]).stdout
        pkg.check("/usr/local" not in data, "%s names no /usr/local path" % unit)
        if unit == "diskpulse.service":
            pkg.check("ExecStart=/usr/sbin/diskpulse --config.file=/etc/diskpulse/diskpulse.conf" in data,
                      "diskpulse.service runs /usr/sbin/diskpulse with /etc/diskpulse/diskpulse.conf")

    rc, tags, text = pkg.lintian_tags(deb)
    print(text)
    errors = sorted({t for lvl, t in tags if lvl == "E"})
    pkg.check(not errors and rc in (0, 1), "lintian (%s): no error%s" % (lintian, ": " + " ".join(errors) if errors else ""))
    documented = pkg.documented_lintian_tags()
    undocumented = sorted({"%s:%s" % (lvl, t) for lvl, t in tags if lvl != "E" and t not in documented})
    pkg.check(not undocumented, "every lintian tag is explained in packaging/lintian.md%s"
              % (": not " + " ".join(undocumented) if undocumented else ""))
    if not pkg.failures():
        shutil.rmtree(plain, ignore_errors=True)
        shutil.rmtree(src, ignore_errors=True)
    pkg.finish()


main()
