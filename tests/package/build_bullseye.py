#!/usr/bin/env python3
"""The Debian 11 package: diskpulse_<version>~deb11_<arch>.deb, built from this tree inside a
fresh Debian 11 root (debootstrap --variant=minbase bullseye, from the mirror this machine's apt
uses) with Debian 11's compiler and libraries, so that its Depends are Debian 11's. Debian 11's
libbpf (0.3) and bpftool (5.10) are too old for the biolatency program: Debian 12's libbpf 1.1
and bpftool 7.1 are built from Debian 12's source packages (apt-get source) inside the root, and
libbpf is linked statically (DISKPULSE_LIBBPF_STATIC). Debian 11's CMake is 3.18: configured
without the presets, tests off.
Usage: build_bullseye.py OUT_DIR (the root is kept in OUT_DIR/bullseye-build-root)"""
import glob
import os
import shutil
import sys
import time

import pkg

SUITE = "bullseye"
# The build's Debian 11 packages (scripts/deps.sh's build list, without libbpf-dev and bpftool:
# built below) and what building libbpf and bpftool needs.
BUILD_PKGS = ("gcc", "make", "cmake", "pkg-config", "python3", "libsystemd-dev", "libmicrohttpd-dev", "libudev-dev",
              "zlib1g-dev", "libyaml-dev", "libgnutls28-dev", "libcrypt-dev", "libpcre2-dev", "scdoc", "clang-16",
              "llvm-16", "protobuf-c-compiler", "libprotobuf-c-dev", "libelf-dev", "dpkg-dev", "file", "systemd",
              "xz-utils", "git")
SOURCES = ("deb {m} bullseye main\ndeb {m} bullseye-updates main\n"
           "deb-src {m} bookworm main\n")
BUILD = r"""set -eu
cd /root/src
apt-get source --download-only libbpf/bookworm linux/bookworm >/dev/null
dpkg-source -x libbpf_*.dsc libbpf >/dev/null
# libbpf's Makefile may write libbpf.pc before it makes OBJDIR (seen with -j2)
mkdir -p /root/libbpf-obj
make -C libbpf/src -j"$(nproc)" BUILD_STATIC_ONLY=1 OBJDIR=/root/libbpf-obj PREFIX=/opt/libbpf \
    LIBDIR=/opt/libbpf/lib install >/root/libbpf.log 2>&1
v=$(ls linux_*.orig.tar.xz | sed 's/linux_\(.*\)\.orig\.tar\.xz/\1/')
mkdir -p linux
tar -xJf linux_$v.orig.tar.xz -C linux --strip-components=1 linux-$v/tools linux-$v/kernel/bpf \
    linux-$v/include linux-$v/scripts linux-$v/Makefile linux-$v/arch/x86/include
make -C linux/tools/bpf/bpftool -j"$(nproc)" CLANG=clang-16 LLVM_STRIP=llvm-strip-16 >/root/bpftool.log 2>&1
install -m 0755 linux/tools/bpf/bpftool/bpftool /opt/libbpf/bpftool
cd /root/diskpulse
PKG_CONFIG_PATH=/opt/libbpf/lib/pkgconfig cmake -S . -B /root/build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_INSTALL_PREFIX=/usr -DDISKPULSE_WERROR=ON -DDISKPULSE_TESTS=OFF -DDISKPULSE_BIOLATENCY=ON \
    -DDISKPULSE_LIBBPF_STATIC=ON -DDISKPULSE_BPFTOOL=/opt/libbpf/bpftool -DDISKPULSE_DEB_VERSION_SUFFIX=~deb11
cmake --build /root/build -j"$(nproc)"
cd /root/build && cpack -G DEB
"""


def build(out, keep_root=True):
    """Builds the package in OUT/bullseye-build-root and copies it to out; returns its path. The
    root (about 1.5 GB) is removed afterwards unless keep_root."""
    pkg.need_root()
    debootstrap = pkg.need_tool("debootstrap", "debootstrap")
    mirror = pkg.apt_mirror()
    if not mirror:
        pkg.skip("no Debian main source in this machine's apt configuration for debootstrap")
    root = os.path.join(out, "bullseye-build-root")
    shutil.rmtree(root, ignore_errors=True)
    t = time.monotonic()
    p = pkg.run(["nice", debootstrap, "--variant=minbase", SUITE, root, mirror], timeout=1200,
                env=dict(os.environ, **pkg.apt_proxy_env()))
    if p.returncode != 0:
        pkg.skip("debootstrap %s failed (exit %d): %s" % (SUITE, p.returncode, (p.stdout + p.stderr).strip()[-600:]))
    with open(os.path.join(root, "etc/apt/sources.list"), "w") as f:
        f.write(SOURCES.format(m=mirror))
    p = pkg.chroot(root, "sh", "-c", "apt-get update -q && apt-get install -y -q --no-install-recommends "
                   + " ".join(BUILD_PKGS), timeout=1800)
    if p.returncode != 0:
        raise RuntimeError("apt-get in the %s root: %s" % (SUITE, (p.stdout + p.stderr)[-2000:]))
    os.makedirs(os.path.join(root, "root/src"))
    pkg.copy_source(pkg.SOURCE, os.path.join(root, "root/diskpulse"))
    # The version (git describe) and the package's dates (the commit's) come from git, as in the
    # host's build: the copy gets the repository too, at the source's commit.
    head = pkg.run(["git", "-C", pkg.SOURCE, "rev-parse", "HEAD"])
    if head.returncode == 0 and os.path.lexists(os.path.join(pkg.SOURCE, ".git")):
        repo = os.path.join(root, "root/diskpulse/.git")
        pkg.run(["git", "clone", "--quiet", "--bare", "--no-local", pkg.SOURCE, repo], check_rc=True)
        pkg.run(["git", "-C", repo, "config", "core.bare", "false"], check_rc=True)
        pkg.run(["git", "-C", repo, "update-ref", "--no-deref", "HEAD", head.stdout.strip()], check_rc=True)
    p = pkg.chroot(root, "nice", "sh", "-c", BUILD, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError("the build in the %s root: %s" % (SUITE, (p.stdout + p.stderr)[-3000:]))
    debs = glob.glob(os.path.join(root, "root/build/diskpulse_*~deb11_*.deb"))
    if len(debs) != 1:
        raise RuntimeError("no single ~deb11 package: %s" % debs)
    deb = shutil.copy(debs[0], out)
    if not keep_root:
        shutil.rmtree(root, ignore_errors=True)
    pkg.note("%s built in %.0f s: %s" % (os.path.basename(deb), time.monotonic() - t, pkg.deb_field(deb, "Depends")))
    return deb


if __name__ == "__main__":
    print(build(os.path.abspath(sys.argv[1])))
