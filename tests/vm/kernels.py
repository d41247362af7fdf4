#!/usr/bin/env python3
# Fetches Debian's own kernels (image and modules) for the guest kernel matrix and caches them.
"""Usage:
  kernels.py fetch --cache DIR [--arch ARCH] SERIES
      SERIES: 5.10 (bullseye), 6.1 (bookworm), 6.12 (bookworm-backports); ARCH: amd64 (default), arm64

Downloads the linux-image package that Debian's linux-image-ARCH of the series' suite depends on,
with `apt-get download` from the Debian mirror this machine's apt uses, and unpacks it (dpkg-deb
-x) into DIR/SERIES (amd64) or DIR/SERIES-ARCH (another architecture: arm64's kernel for a guest
under qemu-system-aarch64): DIR/SERIES/boot/vmlinuz-VER and DIR/SERIES/lib/modules/VER, which
`vmtest.py build --kernel-root DIR/SERIES` takes. apt runs on a source list and state of its own
under DIR, so the host's apt configuration and lists stay untouched. A series already unpacked is
not fetched again. Prints the kernel root on its last line.

Exit codes: 0 done, 1 failure, 77 skip (no apt-get, dpkg-deb or depmod, or the archive unreachable).
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "package"))
import pkg  # noqa: E402  (apt_mirror: the host's own bookworm source, which serves every suite)

SKIP = 77
# The kernel each Debian release shipped: bullseye's 5.10, bookworm's 6.1 (the host's today), and
# the 6.12 of trixie that bookworm-backports carries for Debian 12 hosts.
SERIES = {"5.10": "bullseye", "6.1": "bookworm", "6.12": "bookworm-backports"}
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# The Debian architectures whose kernels are fetched: the build machine's and arm64's.
ARCHES = ("amd64", "arm64")


def say(msg):
    print(f"kernels: {msg}", flush=True)


def skip(reason):
    say(f"SKIP: {reason}")
    sys.exit(SKIP)


def apt_options(state, arch="amd64"):
    """apt-get options that confine apt to STATE: its own one-suite source list, lists, cache and an
    empty dpkg status (the host's installed packages have no say in what is downloaded), and to
    ARCH's packages (another architecture's whatever the host's dpkg knows)."""
    return ["-o", f"Dir::Etc::sourcelist={state}/sources.list", "-o", "Dir::Etc::sourceparts=-",
            "-o", f"Dir::State::Lists={state}/lists", "-o", f"Dir::State::status={state}/status",
            "-o", f"Dir::Cache={state}/cache", "-o", "Debug::NoLocking=1", "-o", f"APT::Architecture={arch}",
            "-o", f"APT::Architectures={arch}", "-q"]


def apt_state(cache, suite, arch="amd64", refresh=True):
    """apt-get confined to SUITE's ARCH packages with its state under CACHE/apt, updated (always
    with REFRESH, else when never updated): (apt-get command, environment, state directory,
    mirror). Skips when there is no apt or mirror, or the update fails."""
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        skip("apt-get or dpkg-deb not found: the kernels come from Debian's archive")
    mirror = pkg.apt_mirror()
    if not mirror:
        skip("no bookworm main source in this machine's apt configuration to fetch Debian's kernels from")
    tag = "" if arch == "amd64" else f"-{arch}"
    state = os.path.join(os.path.abspath(cache), "apt", suite + tag)
    for d in ("lists/partial", "cache/archives/partial"):
        os.makedirs(f"{state}/{d}", exist_ok=True)
    with open(f"{state}/sources.list", "w") as f:
        f.write(f"deb [signed-by={KEYRING}] {mirror} {suite} main\n")
    open(f"{state}/status", "a").close()
    apt = ["apt-get"] + apt_options(state, arch)
    env = dict(os.environ, **pkg.apt_proxy_env(), LANG="C")
    if refresh or not os.path.isfile(f"{state}/.updated"):
        p = subprocess.run(apt + ["update"], capture_output=True, text=True, env=env, timeout=600)
        if p.returncode != 0 or "Err:" in p.stdout:
            skip(f"apt-get update of {mirror} {suite} failed: {(p.stdout + p.stderr).strip()[-400:]}")
        open(f"{state}/.updated", "w").close()
    return apt, env, state, mirror


def kernel_root_complete(root):
    """VER when ROOT holds an unpacked kernel (boot/vmlinuz-VER and its modules.dep), else None."""
    for image in glob.glob(f"{root}/boot/vmlinuz-*"):
        ver = os.path.basename(image)[len("vmlinuz-"):]
        if os.path.isfile(f"{root}/lib/modules/{ver}/modules.dep") and os.path.isfile(f"{root}/.complete"):
            return ver
    return None


def fetch(cache, series, arch="amd64"):
    suite = SERIES[series]
    # amd64's kernels keep the directories they always had (DIR/SERIES, apt/SUITE).
    tag = "" if arch == "amd64" else f"-{arch}"
    root = os.path.join(os.path.abspath(cache), series + tag)
    ver = kernel_root_complete(root)
    if ver:
        say(f"{series} {arch}: {ver} already in the cache")
        return root
    t = time.monotonic()
    apt, env, state, mirror = apt_state(cache, suite, arch)
    # The metapackage names the release's current ABI (linux-image-5.10.0-32-amd64 ...).
    p = subprocess.run(["apt-cache"] + apt_options(state, arch) + ["show", f"linux-image-{arch}"],
                       capture_output=True, text=True, env=env)
    depends = [line.split(":", 1)[1] for line in p.stdout.splitlines() if line.startswith("Depends:")]
    image = depends[0].split("(")[0].strip() if depends else None
    if not image or not image.startswith("linux-image-"):
        say(f"FAIL: no linux-image-{arch} in {suite}: {(p.stdout + p.stderr).strip()[-400:]}")
        sys.exit(1)
    debs = os.path.join(state, "debs")
    os.makedirs(debs, exist_ok=True)
    p = subprocess.run(apt + ["download", image], capture_output=True, text=True, env=env, cwd=debs, timeout=1200)
    found = glob.glob(f"{debs}/{image}_*.deb")
    if p.returncode != 0 or not found:
        skip(f"apt-get download {image} failed: {(p.stdout + p.stderr).strip()[-400:]}")
    deb = max(found, key=os.path.getmtime)
    size = os.path.getsize(deb)
    took = time.monotonic() - t
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
    # bullseye's and bookworm's (and bookworm-backports') images ship their modules in
    # /lib/modules; a package of a release whose files all moved to /usr would ship them in
    # /usr/lib/modules (not met so far): moved to lib/modules, where vmtest.py looks.
    if not os.path.isdir(f"{tmp}/lib/modules") and os.path.isdir(f"{tmp}/usr/lib/modules"):
        os.makedirs(f"{tmp}/lib", exist_ok=True)
        os.rename(f"{tmp}/usr/lib/modules", f"{tmp}/lib/modules")
    # Only boot/ and lib/modules/ are used: the package's documentation goes.
    shutil.rmtree(f"{tmp}/usr", ignore_errors=True)
    ver = next((v for v in os.listdir(f"{tmp}/lib/modules")
                if os.path.isfile(f"{tmp}/boot/vmlinuz-{v}")), None)
    if not ver:
        say(f"FAIL: {deb} has no boot/vmlinuz-VER beside lib/modules/VER")
        sys.exit(1)
    # A package's modules.dep is made by its postinst (depmod), which dpkg-deb -x does not run.
    if not os.path.isfile(f"{tmp}/lib/modules/{ver}/modules.dep"):
        if not shutil.which("depmod", path=pkg.SBIN_PATH):
            skip("depmod not found (Debian package kmod): the unpacked kernel needs its modules.dep")
        subprocess.run([shutil.which("depmod", path=pkg.SBIN_PATH), "-b", tmp, ver], check=True)
    open(f"{tmp}/.complete", "w").write(f"{ver} {os.path.basename(deb)}\n")
    shutil.rmtree(root, ignore_errors=True)
    os.rename(tmp, root)
    os.unlink(deb)  # unpacked now; the .deb would double the cache
    say(f"{series} {arch}: {os.path.basename(deb)} ({size >> 20} MiB) from {mirror} {suite} in {took:.0f} s -> {ver}")
    return root


def fetch_packages(cache, series, arch, packages):
    """PACKAGES of the series' suite for ARCH, downloaded with `apt-get download` and unpacked
    (dpkg-deb -x, never installed) together into DIR/SERIES-ARCH-packages, once for the same list:
    the guest's own programs of another architecture (arm64's static busybox, smartctl and its
    libraries). Returns that directory."""
    suite = SERIES[series]
    root = os.path.join(os.path.abspath(cache), f"{series}-{arch}-packages")
    want = " ".join(sorted(packages)) + "\n"
    if os.path.isfile(f"{root}/.complete") and open(f"{root}/.complete").read() == want:
        return root
    apt, env, state, mirror = apt_state(cache, suite, arch, refresh=False)
    debs = os.path.join(state, "packages")
    shutil.rmtree(debs, ignore_errors=True)
    os.makedirs(debs)
    p = subprocess.run(apt + ["download"] + sorted(packages), capture_output=True, text=True, env=env, cwd=debs,
                       timeout=1200)
    if p.returncode != 0:
        # lists of an earlier day may name versions the mirror no longer has
        apt, env, state, mirror = apt_state(cache, suite, arch, refresh=True)
        p = subprocess.run(apt + ["download"] + sorted(packages), capture_output=True, text=True, env=env,
                           cwd=debs, timeout=1200)
    if p.returncode != 0:
        skip(f"apt-get download {' '.join(packages)} ({arch}) failed: {(p.stdout + p.stderr).strip()[-400:]}")
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for deb in sorted(glob.glob(f"{debs}/*.deb")):
        subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
    open(f"{tmp}/.complete", "w").write(want)
    shutil.rmtree(root, ignore_errors=True)
    os.rename(tmp, root)
    shutil.rmtree(debs, ignore_errors=True)
    say(f"{series} {arch}: {len(packages)} packages from {mirror} {suite} unpacked in {root}")
    return root


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download and unpack one series' kernel (once)")
    f.add_argument("--cache", required=True, help="cache directory (one subdirectory per series)")
    f.add_argument("--arch", choices=ARCHES, default="amd64", help="the kernel's Debian architecture")
    f.add_argument("series", choices=sorted(SERIES))
    args = ap.parse_args()
    print(fetch(args.cache, args.series, args.arch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
