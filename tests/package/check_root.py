#!/usr/bin/env python3
"""Builds the fresh Debian 12 root the package tests install the .deb into (debootstrap minbase
with the .deb's dependencies, from this machine's apt source), once per build directory.
Usage: check_root.py BUILD_DIR"""
import os
import sys

import pkg


def main():
    build = sys.argv[1]
    pkg.need_root()
    if pkg.sanitized(build):
        pkg.skip("a sanitizer build: the package is tested from the plain build")
    if not pkg.deb_path(build):
        pkg.skip("no .deb in %s (made by the package/deb test)" % build)
    root = pkg.fresh_root(build)
    pkg.check(os.path.isfile(os.path.join(root, "etc", "debian_version")), "root at %s" % root)
    with open(os.path.join(root, "etc", "debian_version")) as f:
        version = f.read().strip()
    pkg.check(version.startswith("12."), "Debian %s" % version)
    for p in ["systemd"] + pkg.deb_depends_packages(pkg.deb_path(build)) + list(pkg.ROOT_EXTRA):
        st = pkg.chroot(root, "dpkg-query", "-W", "-f=${Status}", p).stdout
        pkg.check(st == "install ok installed", "%s installed" % p)
    pkg.finish()


main()
