#!/usr/bin/env python3
"""The arm64 package, cross-built: the arm64 preset (cmake/aarch64-linux-gnu.cmake, Debian's
cross toolchain and the libraries' arm64 -dev packages) configured and built in a directory of its
own (BUILD/package-arm64, made afresh, kept when a check fails), and `cpack -G DEB` there makes
diskpulse_<version>_arm64.deb. Compared with the build machine's package that package/deb made
in BUILD_DIR: Architecture: arm64; the packaged binary is an AArch64 ELF (its header's e_machine)
linking the same libraries (NEEDED) and naming no amd64 path; the BPF object it embeds was
compiled for the BPF target with the arm64 __TARGET_ARCH; Depends: names the same packages and is
what dpkg-shlibdeps computes for arm64; the same paths with the same modes, every other file the
same bytes; and lintian reports exactly the tags it reports for the amd64 package, no error and no
warning. The daemon it built is kept as BUILD/diskpulse-arm64 for the arm64 guest (vm/arm64).
Skips when the cross toolchain or the arm64 libraries are not installed
(`scripts/deps.sh arm64` installs them).
Usage: check_arm64.py BUILD_DIR"""
import glob
import os
import re
import shutil
import struct
import sys
import tempfile
import time

import pkg

TRIPLET = "aarch64-linux-gnu"
# ELF e_machine (include/uapi/linux/elf-em.h): the daemon's and the BPF object's.
EM_X86_64 = 62
EM_AARCH64 = 183
EM_BPF = 247
# The libraries the arm64 preset links, by an arm64 pkg-config file each (scripts/deps.sh arm64).
ARM64_PC = ("libsystemd", "libmicrohttpd", "libudev", "zlib", "yaml-0.1", "gnutls", "libcrypt", "libpcre2-8",
            "libbpf", "libprotobuf-c")


def elf_machine(data):
    """e_machine of an ELF image (bytes), or None when it is no 64-bit little-endian ELF."""
    if len(data) < 20 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    return struct.unpack_from("<H", data, 18)[0]


def shlibdeps(binary, arch):
    """dpkg-shlibdeps' shlibs:Depends for binary, as built for the Debian architecture arch."""
    tmp = tempfile.mkdtemp(prefix="diskpulse-shlibdeps-")
    try:
        os.makedirs(os.path.join(tmp, "debian"))
        with open(os.path.join(tmp, "debian", "control"), "w") as f:
            f.write("Source: diskpulse\n\nPackage: diskpulse\nArchitecture: any\n")
        p = pkg.run(["dpkg-shlibdeps", "-O", "-e" + binary], cwd=tmp, check_rc=True,
                    env=dict(os.environ, DEB_HOST_ARCH=arch))
        m = re.search(r"^shlibs:Depends=(.*)$", p.stdout, re.M)
        return m.group(1).strip() if m else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def needed(binary):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(\S+)\]", pkg.run(["readelf", "-d", binary]).stdout)


def main():
    build = sys.argv[1]
    if os.path.exists(os.path.join(build, "diskpulse-arm64")):
        os.unlink(os.path.join(build, "diskpulse-arm64"))  # an earlier run's: only this one's is kept
    if pkg.sanitized(build):
        pkg.skip("a sanitizer build: no package is made from it (the plain build's is tested)")
    gcc = shutil.which(TRIPLET + "-gcc")
    if not gcc:
        pkg.skip("%s-gcc not found: no cross toolchain (Debian package crossbuild-essential-arm64; "
                 "scripts/deps.sh arm64 installs it and the arm64 libraries)" % TRIPLET)
    pcdir = "/usr/lib/%s/pkgconfig" % TRIPLET
    absent = [m for m in ARM64_PC if not os.path.exists(os.path.join(pcdir, m + ".pc"))]
    if absent:
        pkg.skip("no arm64 development files for %s in %s (the libraries' -dev:arm64 packages; "
                 "scripts/deps.sh arm64 installs them)" % (", ".join(absent), pcdir))
    cpack = pkg.need_tool("cpack", "cmake")
    pkg.need_tool("dpkg-shlibdeps", "dpkg-dev")
    pkg.need_tool("lintian", "lintian")
    pkg.need_tool("file", "file")
    amd64_deb = pkg.deb_path(build)
    if not amd64_deb:
        pkg.check(False, "the build machine's .deb is in %s (package/deb makes it)" % build)
        pkg.finish()
    host_arch = pkg.deb_field(amd64_deb, "Architecture")

    # The arm64 preset, in a directory of its own.
    out = os.path.join(build, "package-arm64")
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.monotonic()
    p = pkg.run(["cmake", "--preset", "arm64", "-B", out], cwd=pkg.SOURCE, timeout=300)
    print(p.stdout[-3000:] + p.stderr[-3000:])
    if not pkg.check(p.returncode == 0, "cmake --preset arm64 -B %s (exit %d)" % (out, p.returncode)):
        pkg.finish()
    # What CMake found for the toolchain file (CMakeFiles/<cmake version>/: the compiler and the
    # system it builds for).
    found = ""
    for name in ("CMakeCCompiler.cmake", "CMakeSystem.cmake"):
        for path in glob.glob(os.path.join(out, "CMakeFiles", "*", name)):
            with open(path) as f:
                found += f.read()
    compiler = re.search(r'^set\(CMAKE_C_COMPILER "([^"]*)"\)', found, re.M)
    processor = re.search(r'^set\(CMAKE_SYSTEM_PROCESSOR "([^"]*)"\)', found, re.M)
    crossing = re.search(r'^set\(CMAKE_CROSSCOMPILING "([^"]*)"\)', found, re.M)
    pkg.check(compiler is not None and os.path.realpath(compiler.group(1)) == os.path.realpath(gcc),
              "the compiler is %s: %s" % (gcc, compiler.group(1) if compiler else None))
    pkg.check(processor is not None and processor.group(1) == "aarch64" and crossing is not None
              and crossing.group(1) == "TRUE", "cross-compiling for aarch64: CMAKE_SYSTEM_PROCESSOR %s, "
              "CMAKE_CROSSCOMPILING %s" % (processor and processor.group(1), crossing and crossing.group(1)))
    pkg.check("libbpf" in p.stdout and "biolatency: BPF program" in p.stdout,
              "configured with biolatency's BPF program (arm64's libbpf)")
    t1 = time.monotonic()
    p = pkg.run(["nice", "-n", "10", "cmake", "--build", out, "-j2"], timeout=1800)
    t2 = time.monotonic()
    if not pkg.check(p.returncode == 0, "cmake --build (exit %d)" % p.returncode):
        print(p.stdout[-4000:] + p.stderr[-4000:])
        pkg.finish()
    p = pkg.run([cpack, "-G", "DEB"], cwd=out, timeout=600)
    t3 = time.monotonic()
    print(p.stdout[-1500:] + p.stderr[-1500:])
    pkg.note("configure %.0f s, build (-j2, nice) %.0f s, cpack %.0f s" % (t1 - t0, t2 - t1, t3 - t2))
    version = pkg.project_version(out)
    deb = os.path.join(out, "diskpulse_%s_arm64.deb" % version)
    debs = sorted(os.path.basename(d) for d in glob.glob(os.path.join(out, "diskpulse_*.deb")))
    if not pkg.check(p.returncode == 0 and debs == [os.path.basename(deb)],
                     "cpack -G DEB made %s only: %s" % (os.path.basename(deb), debs)):
        pkg.finish()
    print(pkg.run(["dpkg-deb", "--info", deb]).stdout)
    pkg.note("%s: %d bytes (%s: %d)" % (os.path.basename(deb), os.path.getsize(deb), os.path.basename(amd64_deb),
                                        os.path.getsize(amd64_deb)))

    # Control fields.
    arch = pkg.deb_field(deb, "Architecture")
    pkg.check(arch == "arm64", "Architecture: %s" % arch)
    for field in ("Package", "Version", "Section", "Priority", "Maintainer", "Description"):
        a, b = pkg.deb_field(deb, field), pkg.deb_field(amd64_deb, field)
        pkg.check(a == b, "%s: as in the %s package (%s)" % (field, host_arch, a.splitlines()[0] if a else a))

    members = pkg.data_members(deb)
    host_members = pkg.data_members(amd64_deb)
    tmp = tempfile.mkdtemp(prefix="diskpulse-arm64-")
    try:
        # The binary: AArch64, the libraries of the amd64 one.
        binary = os.path.join(tmp, "diskpulse")
        with open(binary, "wb") as f:
            f.write(members["usr/sbin/diskpulse"][1])
        host_binary = os.path.join(tmp, "diskpulse-" + host_arch)
        with open(host_binary, "wb") as f:
            f.write(host_members["usr/sbin/diskpulse"][1])
        machine = elf_machine(members["usr/sbin/diskpulse"][1])
        pkg.check(machine == EM_AARCH64, "usr/sbin/diskpulse: ELF e_machine %s (EM_AARCH64 is %d)" % (machine, EM_AARCH64))
        described = pkg.run(["file", "-b", binary]).stdout.strip()
        print("file: " + described)
        pkg.check(described.startswith("ELF 64-bit LSB") and "ARM aarch64" in described
                  and "/lib/ld-linux-aarch64.so.1" in described and ", stripped" in described,
                  "file says a stripped 64-bit ARM aarch64 executable with arm64's dynamic loader")
        mine, theirs = needed(binary), needed(host_binary)
        print("NEEDED: %s\nNEEDED (%s): %s" % (mine, host_arch, theirs))
        pkg.check(mine and sorted(mine) == sorted(theirs), "links the same libraries as the %s binary (%d)"
                  % (host_arch, len(mine)))
        with open(binary, "rb") as f:
            image = f.read()
        leaked = sorted({m.decode() for m in re.findall(rb"/usr/(?:lib|include)/x86_64-linux-gnu[^\0\s]*", image)})
        pkg.check(not leaked, "names no amd64 library or header path%s" % (": " + " ".join(leaked) if leaked else ""))

        # The BPF program: built for the BPF target with arm64's __TARGET_ARCH, and in the binary.
        obj = os.path.join(out, "bpf", "biolatency.bpf.o")
        data = open(obj, "rb").read() if os.path.exists(obj) else b""
        pkg.check(elf_machine(data) == EM_BPF, "bpf/biolatency.bpf.o: ELF e_machine %s (EM_BPF is %d)"
                  % (elf_machine(data), EM_BPF))
        rule = ""
        for path in glob.glob(os.path.join(out, "CMakeFiles", "part_biolatency.dir", "build.make")):
            with open(path) as f:
                rule = f.read()
        pkg.check(re.search(r"-target bpf .*-D__TARGET_ARCH_arm64\b", rule) is not None,
                  "the BPF object is compiled with -target bpf -D__TARGET_ARCH_arm64")
        pkg.check(bool(data) and data in image, "the binary embeds that object (the skeleton, %d bytes)" % len(data))

        # Depends: the same packages; what dpkg-shlibdeps says for arm64.
        depends = pkg.deb_field(deb, "Depends")
        host_depends = pkg.deb_field(amd64_deb, "Depends")
        print("Depends: %s\nDepends (%s): %s" % (depends, host_arch, host_depends))
        names, host_names = pkg.deb_depends_packages(deb), pkg.deb_depends_packages(amd64_deb)
        pkg.check(sorted(names) == sorted(host_names), "Depends: names the packages the %s package's does: %s"
                  % (host_arch, " ".join(sorted(names))))
        if depends != host_depends:
            pkg.note("the versions differ from the %s package's (each architecture's symbols files)" % host_arch)
        computed = shlibdeps(binary, "arm64")
        print("dpkg-shlibdeps (arm64): %s" % computed)
        items = [d.strip() for d in depends.split(",")]
        pkg.check(computed is not None and all(d.strip() in items for d in computed.split(",")),
                  "Depends: holds dpkg-shlibdeps' list for the arm64 binary")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # Contents: the paths and modes of the amd64 package; its bytes but the binary's.
    got, want = pkg.member_modes(members), pkg.member_modes(host_members)
    pkg.check(got == want and set(got) == set(pkg.DEB_PATHS),
              "the %d paths and modes of the %s package (%s)" % (len(got), host_arch, " ".join(
                  sorted(set(got) ^ set(want)) + sorted(n for n in got if n in want and got[n] != want[n])) or "none differ"))
    differ = sorted(n for n, (m, d) in members.items() if m.isfile() and n != "usr/sbin/diskpulse"
                    and n in host_members and d != host_members[n][1])
    pkg.check(not differ, "every file but the binary has the bytes of the %s package's%s"
              % (host_arch, (": differ " + " ".join(differ)) if differ else ""))
    owners = sorted(n for n, (m, _) in members.items() if (m.uid, m.gid, m.uname, m.gname) != (0, 0, "root", "root"))
    pkg.check(not owners, "everything owned by root:root%s" % (": not " + " ".join(owners) if owners else ""))

    # lintian: the amd64 package's tags exactly (packaging/lintian.md explains them).
    rc, tags, text = pkg.lintian_tags(deb)
    print(text)
    host_rc, host_tags, host_text = pkg.lintian_tags(amd64_deb)
    print("(%s) %s" % (host_arch, host_text))
    bad = sorted({"%s:%s" % (lvl, t) for lvl, t in tags if lvl in "EW"})
    pkg.check(rc == 0 and not bad, "lintian: exit %d, no error or warning%s" % (rc, ": " + " ".join(bad) if bad else ""))
    mine, theirs = sorted(set(tags)), sorted(set(host_tags))
    pkg.check(mine == theirs and mine, "lintian reports the tags it reports for the %s package: %s%s" % (
        host_arch, " ".join("%s:%s" % t for t in mine),
        "" if mine == theirs else " (%s: %s)" % (host_arch, " ".join("%s:%s" % t for t in theirs))))
    if not pkg.failures():
        # the arm64 guest's daemon (tests/vm, vm/arm64/initramfs): the binary this package ships
        shutil.copy2(os.path.join(out, "diskpulse"), os.path.join(build, "diskpulse-arm64"))
        shutil.rmtree(out, ignore_errors=True)
    pkg.finish()


main()
