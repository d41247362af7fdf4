#!/usr/bin/env python3
"""`cpack -G DEB` makes diskpulse_<version>_<arch>.deb; its control fields, its Depends: (what
dpkg-shlibdeps computes for the binary, plus systemd-sysusers for the postinst and the
libraries loaded with dlopen()), conffiles,
maintainer scripts, the exact list of its files with owners and modes, their contents (as
`cmake --install` lays them out), and lintian: no error, and no warning or other tag that
packaging/lintian.md does not explain. The .deb stays in the build directory for the tests
that install it.
Usage: check_deb.py BUILD_DIR"""
import glob
import os
import re
import shutil
import sys
import tempfile


import pkg

EXPECTED = pkg.DEB_PATHS
SYSUSERS_DEP = "systemd | systemd-standalone-sysusers | systemd-sysusers"
# Loaded with dlopen() when configured (lib/dynlib.h: a web config file, its users), so not in
# dpkg-shlibdeps' list, and named in Depends: by packaging/install.cmake.
DLOPEN_DEPS = ["libyaml-0-2", "libcrypt1"]


def shlibdeps(binary):
    """What dpkg-shlibdeps says the binary needs."""
    tmp = tempfile.mkdtemp(prefix="diskpulse-shlibdeps-")
    try:
        os.makedirs(os.path.join(tmp, "debian"))
        with open(os.path.join(tmp, "debian", "control"), "w") as f:
            f.write("Source: diskpulse\n\nPackage: diskpulse\nArchitecture: any\n")
        p = pkg.run(["dpkg-shlibdeps", "-O", "-e" + binary], cwd=tmp, check_rc=True)
        m = re.search(r"^shlibs:Depends=(.*)$", p.stdout, re.M)
        return m.group(1).strip() if m else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def package_of(path):
    """The package that holds a library, by its path as ldd shows it (merged /usr or not)."""
    if not path:
        return None
    real = os.path.realpath(path)
    for p in (path, real, real[4:] if real.startswith("/usr/") else "/usr" + real):
        r = pkg.run(["dpkg", "-S", p])
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


def main():
    build = sys.argv[1]
    if pkg.sanitized(build):
        pkg.skip("a sanitizer build: no package is made from it (the plain build's is tested)")
    prefix = pkg.cache_value(build, "CMAKE_INSTALL_PREFIX")
    if prefix != "/usr":
        pkg.skip("CMAKE_INSTALL_PREFIX is %s: the package is made from a /usr build (the presets')" % prefix)
    cpack = pkg.need_tool("cpack", "cmake")
    pkg.need_tool("dpkg-shlibdeps", "dpkg-dev")
    for old in glob.glob(os.path.join(build, "diskpulse_*.deb")):
        os.unlink(old)
    p = pkg.run([cpack, "-G", "DEB"], cwd=build, timeout=600)
    print(p.stdout[-1500:] + p.stderr[-1500:])
    version = pkg.project_version(build)
    arch = pkg.run(["dpkg", "--print-architecture"], check_rc=True).stdout.strip()
    deb = os.path.join(build, "diskpulse_%s_%s.deb" % (version, arch))
    if not pkg.check(p.returncode == 0 and os.path.isfile(deb), "cpack -G DEB made %s" % os.path.basename(deb)):
        pkg.finish()
    print(pkg.run(["dpkg-deb", "--info", deb]).stdout)

    # Control fields.
    fields = {f: pkg.deb_field(deb, f) for f in ("Package", "Version", "Architecture", "Maintainer", "Section",
                                                  "Priority", "Homepage", "Description", "Installed-Size")}
    pkg.check(fields["Package"] == "diskpulse" and fields["Version"] == version and fields["Architecture"] == arch,
              "Package diskpulse, Version %s, Architecture %s" % (fields["Version"], fields["Architecture"]))
    pkg.check(re.fullmatch(r".+ <[^@\s]+@[^@\s]+>", fields["Maintainer"]) is not None, "Maintainer: %s" % fields["Maintainer"])
    pkg.check(fields["Section"] == "admin" and fields["Priority"] == "optional", "Section admin, Priority optional")
    desc = fields["Description"].splitlines()
    pkg.check(len(desc) >= 4 and desc[0] != desc[1].strip(), "Description: a synopsis and an extended text (%d lines)" % len(desc))

    # Depends: dpkg-shlibdeps' answer for the binary in the package, and the sysusers provider.
    members = pkg.data_members(deb)
    tmp = tempfile.mkdtemp(prefix="diskpulse-deb-")
    try:
        binary = os.path.join(tmp, "diskpulse")
        with open(binary, "wb") as f:
            f.write(members["usr/sbin/diskpulse"][1])
        computed = shlibdeps(binary)
        depends = pkg.deb_field(deb, "Depends")
        print("Depends: " + depends)
        print("dpkg-shlibdeps: " + str(computed))
        items = [d.strip() for d in depends.split(",")]
        pkg.check(computed is not None and sorted(items) == sorted([SYSUSERS_DEP] + DLOPEN_DEPS +
                                                                   [d.strip() for d in computed.split(",")]),
                  "Depends: is dpkg-shlibdeps' list plus %s and the dlopen()ed %s" % (SYSUSERS_DEP, DLOPEN_DEPS))
        pkg.check(computed is not None and not any(re.split(r"[\s(]", d.strip())[0] in DLOPEN_DEPS
                                                   for d in computed.split(",")),
                  "the binary does not link %s (dpkg-shlibdeps does not list them)" % DLOPEN_DEPS)
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(\S+)\]", pkg.run(["readelf", "-d", binary]).stdout)
        paths = dict(re.findall(r"^\s*(\S+) => (/\S+)", pkg.run(["ldd", binary]).stdout, re.M))
        names = {re.split(r"[\s(]", d)[0] for d in items}
        for soname in needed:
            owner = package_of(paths.get(soname, ""))
            pkg.check(owner in names, "NEEDED %s (%s, package %s) is in Depends:" % (soname, paths.get(soname), owner))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # Control archive: conffiles, maintainer scripts.
    ctrl = tempfile.mkdtemp(prefix="diskpulse-ctrl-")
    try:
        pkg.run(["dpkg-deb", "--control", deb, ctrl], check_rc=True)
        with open(os.path.join(ctrl, "conffiles")) as f:
            conffiles = f.read().split()
        pkg.check(conffiles == ["/etc/diskpulse/diskpulse.conf"], "conffiles: %s" % conffiles)
        for script in ("postinst", "prerm", "postrm"):
            path = os.path.join(ctrl, script)
            mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0
            ok = mode == 0o755 and pkg.run(["sh", "-n", path]).returncode == 0
            pkg.check(ok, "%s: mode %o, parses with sh -n" % (script, mode))
        pkg.check(not os.path.exists(os.path.join(ctrl, "preinst")), "no preinst")
        with open(os.path.join(ctrl, "postinst")) as f:
            postinst = f.read()
        pkg.check("systemd-sysusers" in postinst and "diskpulse.conf" in postinst, "postinst creates the user with systemd-sysusers")
        pkg.check("deb-systemd-helper" in postinst and "deb-systemd-invoke" in postinst,
                  "postinst enables and starts through deb-systemd-helper and deb-systemd-invoke")
        with open(os.path.join(ctrl, "md5sums")) as f:
            sums = dict(reversed(l.split(None, 1)) for l in f.read().splitlines())
        files = [n for n, (m, _) in members.items() if m.isfile()]
        pkg.check(sorted(k.strip() for k in sums) == sorted(files), "md5sums lists every file (%d)" % len(files))
    finally:
        shutil.rmtree(ctrl, ignore_errors=True)

    # Contents: exactly the expected paths, owned by root, with the expected modes.
    print(pkg.run(["dpkg-deb", "--contents", deb]).stdout)
    got = pkg.member_modes(members)
    extra = sorted(set(got) - set(EXPECTED))
    missing = sorted(set(EXPECTED) - set(got))
    pkg.check(not extra and not missing, "the package holds exactly the expected %d paths%s%s" % (
        len(EXPECTED), (": unexpected " + " ".join(extra)) if extra else "", (": missing " + " ".join(missing)) if missing else ""))
    wrong = sorted("%s %s (want %s)" % (n, got[n], EXPECTED[n]) for n in set(got) & set(EXPECTED) if got[n] != EXPECTED[n])
    pkg.check(not wrong, "types and modes%s" % (": " + ", ".join(wrong) if wrong else ""))
    owners = sorted(n for n, (m, _) in members.items() if (m.uid, m.gid, m.uname, m.gname) != (0, 0, "root", "root"))
    pkg.check(not owners, "everything owned by root:root%s" % (": not " + " ".join(owners) if owners else ""))

    # The files are the ones `cmake --install` lays out (the binary stripped: its code only).
    stage = tempfile.mkdtemp(prefix="diskpulse-stage-")
    try:
        pkg.stage(build, stage)
        differ = []
        for n, (m, data) in members.items():
            if not m.isfile() or n == "usr/sbin/diskpulse":
                continue
            with open(os.path.join(stage, n), "rb") as f:
                if f.read() != data:
                    differ.append(n)
        pkg.check(not differ, "files as cmake --install lays them out%s" % (": differ " + " ".join(differ) if differ else ""))
        for name in ("diskpulse.service", "diskpulse.socket"):
            with open(os.path.join(pkg.SOURCE, "systemd", name), "rb") as f:
                pkg.check(f.read() == members["lib/systemd/system/" + name][1], "%s as in systemd/" % name)
        with open(os.path.join(pkg.SOURCE, "systemd", "diskpulse.sysusers"), "rb") as f:
            pkg.check(f.read() == members["usr/lib/sysusers.d/diskpulse.conf"][1], "sysusers.d/diskpulse.conf as in systemd/")
        sections = pkg.run(["readelf", "-S", os.path.join(stage, "usr/sbin/diskpulse")]).stdout
        stripped = pkg.run(["sh", "-c", "dpkg-deb --fsys-tarfile '%s' | tar -xO ./usr/sbin/diskpulse | "
                            "readelf -S /dev/stdin 2>/dev/null || true" % deb]).stdout
        pkg.check(".debug_info" not in stripped, "the packaged binary is stripped (the staged one has %s)"
                  % ("debug info" if ".debug_info" in sections else "none"))
    finally:
        shutil.rmtree(stage, ignore_errors=True)

    # The packaged changelog's newest entry is the package's version; below it (a snapshot's
    # entry comes first), packaging/debian/changelog whole.
    log = pkg.run(["sh", "-c", "dpkg-deb --fsys-tarfile '%s' | tar -xO ./usr/share/doc/diskpulse/changelog.gz | "
                   "gzip -dc" % deb]).stdout
    with open(os.path.join(pkg.SOURCE, "packaging", "debian", "changelog")) as f:
        released = f.read()
    pkg.check(log.startswith("diskpulse (%s) " % version) and log.endswith(released),
              "the packaged changelog starts with version %s and holds packaging/debian/changelog: %s"
              % (version, log.splitlines()[0] if log else "(none)"))

    # lintian.
    if shutil.which("lintian"):
        p = pkg.run(["lintian", "--allow-root", "--pedantic", "--display-info", "--display-experimental", deb], timeout=600)
        print(p.stdout + p.stderr)
        tags = re.findall(r"^([EWIPX]): diskpulse(?: \w+)?: (\S+)", p.stdout, re.M)
        errors = sorted({t for lvl, t in tags if lvl == "E"})
        pkg.check(not errors and p.returncode in (0, 1), "lintian: no error%s" % (": " + " ".join(errors) if errors else ""))
        pkg.check(not re.search(r"^E: ", p.stdout + p.stderr, re.M) or errors, "lintian ran (exit %d)" % p.returncode)
        documented = pkg.documented_lintian_tags()
        undocumented = sorted({"%s:%s" % (lvl, t) for lvl, t in tags if lvl != "E" and t not in documented})
        pkg.check(not undocumented, "every lintian tag is explained in packaging/lintian.md%s"
                  % (": not " + " ".join(undocumented) if undocumented else ""))
        gone = sorted(documented - {t for _, t in tags})
        if gone:
            pkg.note("packaging/lintian.md explains tags lintian no longer reports: " + " ".join(gone))
    elif not pkg.failures():
        pkg.skip("lintian not found (Debian package lintian); everything else passed")
    pkg.finish()


main()
