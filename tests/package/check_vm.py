#!/usr/bin/env python3
"""The .deb under systemd on real (emulated) disks: the fresh Debian 12 root with the package
installed becomes an ext4 image that a QEMU guest (TCG) with an NVMe and a SATA disk boots with
its own systemd; tests/package/vm_systemd.sh then checks SMART under the shipped unit and
measures which capability each disk needs (tests/vm/vmtest.py runs it).
Usage: check_vm.py BUILD_DIR INITRAMFS"""
import os
import shutil
import signal
import sys
import tempfile

import pkg


def main():
    build, initramfs = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # ctest's timeout: remove the image
    pkg.need_root()
    if pkg.sanitized(build):
        pkg.skip("a sanitizer build: the package is tested from the plain build")
    pkg.need_tool("qemu-system-x86_64", "qemu-system-x86")
    mkfs = pkg.need_tool("mkfs.ext4", "e2fsprogs")
    deb = pkg.deb_path(build)
    if not deb:
        pkg.skip("no .deb in %s (made by the package/deb test)" % build)
    if not os.path.isfile(initramfs):
        pkg.skip("no guest initramfs %s (the vm/initramfs test makes it; it skips without a kernel "
                 "or static busybox)" % initramfs)
    base = pkg.fresh_root(build)
    tmp = tempfile.mkdtemp(prefix="diskpulse-vm-")
    try:
        root = pkg.copy_root(base, os.path.join(tmp, "root"))
        shutil.copy(deb, os.path.join(root, "root", "diskpulse.deb"))
        p = pkg.chroot(root, "dpkg", "-i", "/root/diskpulse.deb")
        if not pkg.check(p.returncode == 0, "dpkg -i into the root (offline)"):
            print(p.stdout + p.stderr)
            pkg.finish()
        os.unlink(os.path.join(root, "root", "diskpulse.deb"))
        with open(os.path.join(root, "etc", "hostname"), "w") as f:
            f.write("vmtest\n")
        image = os.path.join(tmp, "root.img")
        p = pkg.run([mkfs, "-q", "-F", "-L", "dproot", "-d", root, image, "1G"], timeout=600)
        if not pkg.check(p.returncode == 0, "ext4 image of the root (mkfs.ext4 -d)"):
            print(p.stdout + p.stderr)
            pkg.finish()
        shutil.rmtree(root)
        vmtest = os.path.join(pkg.SOURCE, "tests", "vm", "vmtest.py")
        scenario = os.path.join(pkg.HERE, "vm_systemd.sh")
        r = pkg.run([sys.executable, vmtest, "run", "--initramfs", initramfs, "--root-image", image, scenario],
                    capture_output=False, timeout=900)
        if r.returncode == pkg.SKIP:
            pkg.skip("vmtest.py skipped the guest (see above)")
        pkg.check(r.returncode == 0, "the guest scenario passed (vmtest.py exit %d)" % r.returncode)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pkg.finish()


main()
