#!/usr/bin/env python3
# Host side of the diskpulse VM tests: builds the guest initramfs and runs one scenario under QEMU/TCG.
"""Usage:
  vmtest.py build --out DIR/initramfs.cpio [--daemon BIN] [--kernel-root DIR] [--arch arm64]
  vmtest.py run [--initramfs FILE | --daemon BIN [--kernel-root DIR]] [--root-image IMG] [--arch arm64] [-v]
                scenarios/NAME.sh

The guest boots the host's newest /boot/vmlinuz-VER with the modules of /lib/modules/VER, or with
--kernel-root DIR the same below DIR (a Debian kernel unpacked by kernels.py): `build` records the
kernel in the initramfs's .json and `run` boots that one.

With --arch arm64 (the default is amd64, the build machine's), the guest is an arm64 one under
qemu-system-aarch64 (the virt machine, TCG): --kernel-root is then required (the arm64 kernel that
`kernels.py fetch --arch arm64` unpacks), the daemon is an arm64 build, and the guest's busybox,
smartctl, mkfs.ext4 and their libraries are Debian's arm64 packages, downloaded with `apt-get download`
into the kernel's cache (the kernel root's parent) and unpacked there, never installed. The guest
has the NVMe disk only (virt has no AHCI) and no udev or other host tools.

With --root-image, the guest boots IMG (a raw ext4 image of a Debian root, as a virtio disk,
never written) with its own systemd as PID 1, and the scenario runs as a service there.

Exit codes of `run`: 0 pass, 1 fail, 77 skip (missing prerequisite or the scenario skipped itself).
"""
import argparse
import glob
import json
import lzma
import os
import re
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SBIN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# Loaded at guest boot in this order; crypto first because busybox modprobe ignores softdeps.
BASE_MODULES = ["crc32c_generic", "crct10dif_generic", "crc64_rocksoft_generic",
                "nvme", "ahci", "sd_mod", "ext4"]
# Modules some kernels of the matrix do not have at all, neither as a module nor built in: their
# absence is noted and the initramfs built without them. Any other absent module fails the build.
# crc64-rocksoft came with NVMe's 64-bit protection information in 5.19 (5.10's nvme needs no CRC64).
OPTIONAL_MODULES = {"crc64_rocksoft_generic"}
# Shipped for scenarios to modprobe.
EXTRA_MODULES = ["scsi_debug", "null_blk", "dm-mod", "dm-delay", "dm-flakey", "dm-log-writes", "loop", "sg",
                 "virtio_pci", "virtio_blk", "virtio_net", "md-mod", "raid1"]
TOOLS = ["smartctl", "mkfs.ext4", "e2fsck", "dmsetup", "sdparm", "ioping"]
# The runbook's commands run with the Debian tools it names (docs/runbook.md, "Conventions"), not
# with busybox's: kept apart in RUNBOOK_BIN, which lib.sh's `runbook` puts first on PATH for them
# alone (the scenarios keep busybox's tools).
RUNBOOK_TOOLS = ["bash", "grep", "cat", "head", "timeout", "base64", "dmesg", "last", "curl", "nvme", "iostat",
                 "pidstat"]
RUNBOOK_BIN = "/usr/lib/vmtest/runbook/bin"
UDEV_RULES = ["50-udev-default.rules", "60-block.rules", "60-persistent-storage.rules",
              "60-persistent-storage-dm.rules", "55-dm.rules", "95-dm-notify.rules"]
UDEV_HELPERS = ["/lib/udev/ata_id", "/lib/udev/scsi_id"]
DEFAULT_TIMEOUT = 120
# The arm64 guest. Its programs are Debian's arm64 packages of the kernel's release (kernels.py
# fetch_packages): busybox-static, smartmontools and e2fsprogs with the libraries their smartctl
# and mkfs.ext4 need (the ELF NEEDED closure, found first among these, then among the host's arm64
# libraries).
ARM64_PACKAGES = ["busybox-static", "smartmontools", "libc6", "libcap-ng0", "libgcc-s1", "libselinux1",
                  "libpcre2-8-0", "libstdc++6", "libsystemd0", "libcap2", "libgcrypt20", "libgpg-error0",
                  "liblz4-1", "liblzma5", "libzstd1", "e2fsprogs", "libext2fs2", "libcom-err2", "libblkid1",
                  "libuuid1", "libss2"]
ARM64_LIBDIRS = ["usr/lib/aarch64-linux-gnu", "lib/aarch64-linux-gnu"]
# Debian's arm64 kernel builds no scsi_debug.
ARM64_OPTIONAL_MODULES = {"scsi_debug"}
ARM64_TOOLS = ["smartctl", "mkfs.ext4"]
# where those packages put programs (bookworm's e2fsprogs still ships /sbin)
ARM64_TOOL_DIRS = ["usr/sbin", "sbin", "usr/bin", "bin"]


def say(msg):
    print(f"vmtest: {msg}", flush=True)


def skip(reason):
    say(f"SKIP: {reason}")
    sys.exit(SKIP)


def version_key(ver):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", ver)]


def find_kernel(root="/"):
    """Newest ROOT/boot/vmlinuz-VER that has ROOT/lib/modules/VER: (image path, VER) or (None, None)."""
    root = os.path.abspath(root).rstrip("/")
    found = [p[len(f"{root}/boot/vmlinuz-"):] for p in glob.glob(f"{root}/boot/vmlinuz-*")]
    found = [v for v in found if os.path.isfile(f"{root}/lib/modules/{v}/modules.dep")]
    if not found:
        return None, None
    ver = max(found, key=version_key)
    return f"{root}/boot/vmlinuz-{ver}", ver


def missing_prerequisite(need_qemu=True, kernel_root="/", arch="amd64"):
    if os.geteuid() != 0:
        return "not running as root"
    if arch == "arm64":
        if need_qemu and not shutil.which("qemu-system-aarch64"):
            return "qemu-system-aarch64 not found (Debian package qemu-system-arm)"
        if kernel_root and not find_kernel(kernel_root)[0]:
            return f"no arm64 kernel under {kernel_root} (kernels.py fetch --arch arm64 makes one)"
        if not shutil.which("dpkg-deb"):
            return "dpkg-deb not found: the arm64 guest's programs are unpacked from Debian's packages"
        return None
    if need_qemu and not shutil.which("qemu-system-x86_64"):
        return "qemu-system-x86_64 not found (Debian package qemu-system-x86)"
    if kernel_root and not find_kernel(kernel_root)[0]:
        if kernel_root != "/":
            return f"no boot/vmlinuz-* with matching lib/modules under {kernel_root} (kernels.py fetch makes one)"
        return "no /boot/vmlinuz-* with matching /lib/modules (Debian package linux-image-amd64)"
    if not busybox_path():
        return "static busybox not found (Debian package busybox-static)"
    return None


def busybox_path():
    """A statically linked busybox (ldd refuses it), or None."""
    for p in ("/bin/busybox", "/usr/bin/busybox"):
        if os.path.isfile(p) and subprocess.run(["ldd", p], capture_output=True).returncode != 0:
            return p
    return None


class Cpio:
    """Collects entries and writes them in the newc format the kernel unpacks (parents first).
    Like Debian 12 the tree is merged-/usr: /bin, /sbin, /lib, /lib64 are links into /usr."""
    MERGED = ("bin", "sbin", "lib", "lib64")

    def __init__(self, merged_usr=True):
        self.entries = {}  # archive path -> (mode, source file or bytes)
        if merged_usr:
            for top in self.MERGED:
                self.mkdir(f"usr/{top}")
                self.entries[top] = (0o120777, f"usr/{top}".encode())

    def _norm(self, path):
        path = path.strip("/")
        top, _, rest = path.partition("/")
        return f"usr/{path}" if rest and top in self.MERGED and self.entries.get(top, (0,))[0] == 0o120777 else path

    def mkdir(self, path):
        path = self._norm(path)
        while path and path not in self.entries:
            self.entries[path] = (0o40755, b"")
            path = os.path.dirname(path)

    def add(self, path, data, mode=0o100644, replace=True):
        path = self._norm(path)
        if path in self.entries and not replace:
            return
        self.mkdir(os.path.dirname(path))
        self.entries[path] = (mode, data)

    def copy(self, src, path=None, replace=True):
        mode = 0o100000 | (os.stat(src).st_mode & 0o7777)
        self.add(path or src, os.path.realpath(src), mode, replace)

    def symlink(self, path, target, replace=True):
        self.add(path, target.encode(), 0o120777, replace)

    def write(self, fileobj):
        ino = 0
        for path in sorted(self.entries, key=lambda p: (p.count("/"), p)) + ["TRAILER!!!"]:
            mode, data = self.entries.get(path, (0, b""))
            if isinstance(data, str):
                with open(data, "rb") as f:
                    data = f.read()
            ino += 1
            name = path.encode() + b"\0"
            fields = [ino, mode, 0, 0, 2 if mode & 0o40000 else 1, 0, len(data), 0, 0, 0, 0, len(name), 0]
            head = b"070701" + b"".join(b"%08X" % v for v in fields) + name
            fileobj.write(head + b"\0" * (-len(head) % 4) + data + b"\0" * (-len(data) % 4))


def add_elf(cpio, binary, dest):
    """Copy an ELF binary and every shared library ldd reports for it (same absolute paths)."""
    cpio.copy(binary, dest)
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    for lib in re.findall(r"(?:=>\s*|^\s*)(/\S+)\s+\(0x", out, re.M):
        cpio.copy(lib, lib, replace=False)


def readelf(binary):
    """(NEEDED libraries, program interpreter or None) of an ELF file of any architecture."""
    tool = shutil.which("aarch64-linux-gnu-readelf") or shutil.which("readelf")
    if not tool:
        raise RuntimeError("readelf not found (Debian package binutils): the arm64 libraries are followed with it")
    out = subprocess.run([tool, "-W", "-d", "-l", binary], capture_output=True, text=True, check=True).stdout
    interp = re.search(r"\[Requesting program interpreter: (\S+)\]", out)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(\S+)\]", out), interp and interp.group(1)


def add_elf_cross(cpio, binary, dest, roots):
    """Copy an ELF binary of another architecture and its NEEDED closure (readelf; ldd cannot load
    it): each library from the first of ROOTS holding it in ARM64_LIBDIRS, to the guest's
    /usr/lib/aarch64-linux-gnu, and the program interpreter at the path the binary names."""
    cpio.copy(binary, dest)
    todo, seen = [binary], set()
    while todo:
        needed, interp = readelf(todo.pop())
        if interp and interp not in seen:
            seen.add(interp)
            found = [f"{r}{interp}" for r in roots if os.path.isfile(f"{r}{interp}")]
            if not found:
                raise RuntimeError(f"{binary}: no program interpreter {interp} in {' '.join(roots)}")
            cpio.copy(found[0], interp, replace=False)
        for lib in needed:
            if lib in seen:
                continue
            seen.add(lib)
            found = [f"{r}/{d}/{lib}" for r in roots for d in ARM64_LIBDIRS if os.path.isfile(f"{r}/{d}/{lib}")]
            if not found:
                raise RuntimeError(f"{binary}: library {lib} not found in {' '.join(roots)}")
            cpio.copy(found[0], f"/usr/lib/aarch64-linux-gnu/{lib}", replace=False)
            todo.append(found[0])


def module_names(paths):
    return {os.path.basename(m).split(".ko")[0].replace("-", "_"): m for m in paths}


def add_modules(cpio, kver, kernel_root="/", optional=OPTIONAL_MODULES):
    """Copy BASE_MODULES + EXTRA_MODULES with their dependency closure and filtered module indexes
    from KERNEL_ROOT/lib/modules/KVER to the guest's /lib/modules/KVER. Returns (number copied,
    the BASE_MODULES the guest's init loads: those neither built in nor absent). Raises
    RuntimeError for an absent module that is not in OPTIONAL_MODULES."""
    dest = f"/lib/modules/{kver}"
    root = os.path.join(os.path.abspath(kernel_root), dest.lstrip("/"))
    deps = {}
    with open(f"{root}/modules.dep") as f:
        for line in f:
            mod, _, rest = line.partition(":")
            deps[mod] = rest.split()
    by_name = module_names(deps)
    builtin = set()
    if os.path.isfile(f"{root}/modules.builtin"):
        with open(f"{root}/modules.builtin") as f:
            builtin = set(module_names(f.read().split()))
    absent = [n for n in BASE_MODULES + EXTRA_MODULES if n.replace("-", "_") not in by_name.keys() | builtin]
    for n in absent:
        if n.replace("-", "_") not in optional:
            raise RuntimeError(f"kernel {kver} has no module {n}, neither loadable nor built in")
        say(f"kernel {kver} has no {n} (optional): the guest goes without it")
    todo = [by_name[n.replace("-", "_")] for n in BASE_MODULES + EXTRA_MODULES if n.replace("-", "_") in by_name]
    chosen = set()
    while todo:
        mod = todo.pop()
        if mod not in chosen:
            chosen.add(mod)
            todo.extend(deps[mod])
    # .ko.xz (newer Debian) is stored decompressed: busybox modprobe need not support xz.
    plain = lambda m: m[:-3] if m.endswith(".ko.xz") else m
    for mod in chosen:
        if mod.endswith(".ko.xz"):
            with lzma.open(f"{root}/{mod}") as f:
                cpio.add(f"{dest}/{plain(mod)}", f.read())
        else:
            cpio.copy(f"{root}/{mod}", f"{dest}/{mod}")
    cpio.add(f"{dest}/modules.dep", "".join(
        f"{plain(m)}: {' '.join(map(plain, deps[m]))}\n".replace(": \n", ":\n") for m in sorted(chosen)).encode())
    names = set(module_names(chosen))
    with open(f"{root}/modules.alias") as f:
        aliases = [l for l in f if l.startswith("alias ") and l.split()[-1].replace("-", "_") in names]
    cpio.add(f"{dest}/modules.alias", "".join(aliases).encode())
    for extra in ("modules.builtin", "modules.builtin.modinfo", "modules.order", "modules.softdep"):
        if os.path.isfile(f"{root}/{extra}"):
            cpio.copy(f"{root}/{extra}", f"{dest}/{extra}")
    # A built-in module (6.12's crct10dif_generic, crc64_rocksoft_generic) is there from boot on.
    load = [n for n in BASE_MODULES if n.replace("-", "_") in by_name]
    return len(chosen), load


def add_udev(cpio):
    """systemd-udevd with the storage rules, so the guest has /run/udev/data like a real host."""
    udevd, udevadm = "/lib/systemd/systemd-udevd", shutil.which("udevadm", path=SBIN_PATH)
    if not (os.path.isfile(udevd) and udevadm):
        return False
    add_elf(cpio, udevd, udevd)
    add_elf(cpio, udevadm, "/bin/udevadm")
    for helper in UDEV_HELPERS:
        if os.path.isfile(helper):
            add_elf(cpio, helper, helper)
    for rule in UDEV_RULES:
        if os.path.isfile(f"/lib/udev/rules.d/{rule}"):
            cpio.copy(f"/lib/udev/rules.d/{rule}")
    return True


def add_logreplay(cpio):
    """guest/logreplay.c, the replayer of dm-log-writes logs, built static with the host's C
    compiler as /bin/logreplay; False (and a note) when there is no compiler or static libc."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        say("no C compiler: no logreplay in the guest")
        return False
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "logreplay")
        p = subprocess.run([cc, "-std=c17", "-O2", "-Wall", "-Wextra", "-Werror", "-static", "-o", exe,
                            os.path.join(HERE, "guest", "logreplay.c")], capture_output=True, text=True)
        if p.returncode != 0:
            say("cannot build logreplay: " + p.stderr.strip()[-300:])
            return False
        with open(exe, "rb") as f:
            cpio.add("/bin/logreplay", f.read(), 0o100755)
    return True


def build(out, daemon=None, kernel_root="/", arch="amd64"):
    if arch == "arm64":
        return build_arm64(out, daemon, kernel_root)
    kernel, kver = find_kernel(kernel_root)
    cpio = Cpio()
    for d in ("proc", "sys", "dev", "tmp", "run", "root", "mnt", "etc"):
        cpio.mkdir(d)
    if daemon:
        add_elf(cpio, daemon, "/bin/diskpulse")
    tools = []
    for tool in TOOLS:
        path = shutil.which(tool, path=SBIN_PATH)
        if path:
            add_elf(cpio, path, f"/usr/sbin/{tool}")
            tools.append(tool)
    runbook_tools = []
    for tool in RUNBOOK_TOOLS:
        path = shutil.which(tool, path=SBIN_PATH)
        if path:
            add_elf(cpio, path, f"{RUNBOOK_BIN}/{tool}")
            runbook_tools.append(tool)
    udev = add_udev(cpio)
    replay = add_logreplay(cpio)
    if replay:
        tools.append("logreplay")
    nmods, load = add_modules(cpio, kver, kernel_root)
    busybox = busybox_path()
    cpio.copy(busybox, "/bin/busybox")
    applets = subprocess.run([busybox, "--list-full"], capture_output=True, text=True).stdout.split()
    for applet in applets:
        if applet != "bin/busybox":
            cpio.symlink(applet, "/bin/busybox", replace=False)
    cpio.copy(os.path.join(HERE, "guest", "init"), "/init")
    cpio.copy(os.path.join(HERE, "guest", "lib.sh"), "/lib/vmtest/lib.sh")
    cpio.copy(os.path.join(HERE, "guest", "root-run"), "/lib/vmtest/root-run")
    add_etc(cpio, load)
    # for the runbook's glibc tools (curl localhost:9477): names from /etc/hosts, no DNS
    cpio.add("/etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files\n")
    write_initramfs(cpio, out)
    meta = {"kernel": kernel, "kver": kver, "daemon": daemon, "tools": tools, "udev": udev,
            "runbook_tools": runbook_tools}
    with open(out + ".json", "w") as f:
        json.dump(meta, f)
    say(f"built {out} ({os.path.getsize(out) >> 20} MiB, kernel {kver}, {nmods} modules, "
        f"daemon {'yes' if daemon else 'no'}, tools {' '.join(tools) or 'none'}, udev {'yes' if udev else 'no'}, "
        f"runbook tools {' '.join(runbook_tools) or 'none'})")
    return meta


def add_etc(cpio, load):
    """The guest's /etc: the modules init loads, in order, and the users, groups and hosts."""
    cpio.add("/etc/vmtest/modules", " ".join(load).encode())
    cpio.add("/etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
    cpio.add("/etc/group", b"root:x:0:\ndisk:x:6:\nnogroup:x:65534:\n")
    cpio.add("/etc/hosts", b"127.0.0.1 localhost\n::1 localhost\n")


def write_initramfs(cpio, out):
    """Writes the archive to out, whole or not at all."""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "wb") as f:
        cpio.write(f)
    os.replace(out + ".tmp", out)


def build_arm64(out, daemon, kernel_root):
    """The arm64 guest's initramfs: the same init, lib.sh and module set as amd64's, with Debian's
    arm64 busybox, smartctl and mkfs.ext4; /init is a prelude that installs busybox's applets (the arm64
    busybox cannot be run here to list them) and then runs the shared init."""
    sys.path.insert(0, HERE)
    import kernels
    kernel, kver = find_kernel(kernel_root)
    series = next((s for s in kernels.SERIES if kver.startswith(s + ".")), None)
    if not series:
        raise RuntimeError(f"kernel {kver} is of no series kernels.py knows")
    packages = kernels.fetch_packages(os.path.dirname(os.path.abspath(kernel_root)), series, "arm64", ARM64_PACKAGES)
    busybox = f"{packages}/bin/busybox"
    if not os.path.isfile(busybox):
        raise RuntimeError(f"busybox-static (arm64) has no bin/busybox in {packages}")
    cpio = Cpio()
    for d in ("proc", "sys", "dev", "tmp", "run", "root", "mnt", "etc"):
        cpio.mkdir(d)
    if daemon:
        add_elf_cross(cpio, daemon, "/bin/diskpulse", ["/", packages])
    tools = []
    for tool in ARM64_TOOLS:
        path = next((f"{packages}/{d}/{tool}" for d in ARM64_TOOL_DIRS if os.path.isfile(f"{packages}/{d}/{tool}")),
                    None)
        if path:
            add_elf_cross(cpio, os.path.realpath(path), f"/usr/sbin/{tool}", [packages, "/"])
            tools.append(tool)
    nmods, load = add_modules(cpio, kver, kernel_root, OPTIONAL_MODULES | ARM64_OPTIONAL_MODULES)
    cpio.copy(busybox, "/bin/busybox")
    cpio.add("/init", b"#!/bin/busybox sh\n/bin/busybox --install -s\nexec /lib/vmtest/init\n", 0o100755)
    cpio.copy(os.path.join(HERE, "guest", "init"), "/lib/vmtest/init")
    cpio.copy(os.path.join(HERE, "guest", "lib.sh"), "/lib/vmtest/lib.sh")
    add_etc(cpio, load)
    write_initramfs(cpio, out)
    meta = {"kernel": kernel, "kver": kver, "daemon": daemon, "tools": tools, "udev": False,
            "runbook_tools": [], "arch": "arm64"}
    with open(out + ".json", "w") as f:
        json.dump(meta, f)
    say(f"built {out} ({os.path.getsize(out) >> 20} MiB, arm64, kernel {kver}, {nmods} modules, "
        f"daemon {'yes' if daemon else 'no'}, tools {' '.join(tools) or 'none'}, udev no)")
    return meta


def parse_scenario(path):
    """Header comments: `# qemu: ARGS`, `# disk: ID SIZE`, `# timeout: SEC`, `# append: ARGS`, `# defaults: no`,
    `# prometheus: SCALE GROUP...` (a Prometheus on the host scrapes the guest's daemon, port 9477
    forwarded from the host, with the shipped rules; the durations of the rule groups named divided
    by SCALE; the guest queries it with `prom`), `# alertmanager: yes` (that Prometheus sends its
    alerts to an Alertmanager on the host with the shipped routing, whose receivers post to the
    harness; the guest reads what arrived with `notifications`)."""
    spec = {"qemu": [], "disk": [], "timeout": DEFAULT_TIMEOUT, "append": "", "defaults": True,
            "prometheus": None, "alertmanager": False}
    with open(path) as f:
        for line in f:
            m = re.match(r"#\s*(qemu|disk|timeout|append|defaults|prometheus|alertmanager):\s*(.*?)\s*$", line)
            if not m:
                continue
            key, val = m.groups()
            if key == "qemu":
                spec["qemu"] += shlex.split(val)
            elif key == "disk":
                if len(val.split()) != 2:
                    raise SystemExit(f"vmtest: {path}: want '# disk: ID SIZE', got {line.strip()!r}")
                spec["disk"].append(tuple(val.split()))
            elif key == "timeout":
                spec["timeout"] = int(val)
            elif key == "append":
                spec["append"] += " " + val
            elif key == "alertmanager":
                spec["alertmanager"] = val.lower() in ("yes", "true", "1")
            elif key == "prometheus":
                words = val.split()
                if not words or not re.fullmatch(r"\d+", words[0]):
                    raise SystemExit(f"vmtest: {path}: want '# prometheus: SCALE GROUP...', got {line.strip()!r}")
                spec["prometheus"] = (int(words[0]), words[1:])
            else:
                spec["defaults"] = val.lower() not in ("no", "false", "0")
    return spec


class Qmp:
    """Line-oriented QMP client on an accepted socket; events are kept for `event` requests."""

    def __init__(self, sock):
        self.sock, self.buf, self.events = sock, b"", []
        self.read()  # greeting
        self.command({"execute": "qmp_capabilities"})

    def read(self, deadline=None):
        while b"\n" not in self.buf:
            self.sock.settimeout(None if deadline is None else max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            if not chunk:
                raise EOFError("QMP connection closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def command(self, cmd):
        self.sock.sendall(json.dumps(cmd).encode() + b"\n")
        while True:
            msg = self.read(time.monotonic() + 30)
            if msg is None:
                return {"error": {"class": "HarnessTimeout", "desc": "no QMP reply within 30 s"}}
            if "event" in msg:
                self.events.append(msg)
            else:
                return msg

    def wait_event(self, name, timeout):
        deadline = time.monotonic() + timeout
        while True:
            for ev in self.events:
                if ev["event"] == name:
                    self.events.remove(ev)
                    return ev
            msg = self.read(deadline)
            if msg is None:
                return {"error": {"class": "HarnessTimeout", "desc": f"no {name} event within {timeout} s"}}
            if "event" in msg:
                self.events.append(msg)


def expocheck_reply(data):
    """The strict exposition check (tests/tools/expocheck.py) of a page the guest sent gzipped
    and in base64: "ok SAMPLES FAMILIES" or "fail" and the first errors."""
    sys.path.insert(0, os.path.join(HERE, "..", "tools"))
    import base64
    import gzip
    import expocheck
    try:
        text = gzip.decompress(base64.b64decode(data.strip(), validate=True)).decode("utf-8")
    except (ValueError, OSError, EOFError, UnicodeDecodeError) as e:
        return "fail the page did not arrive whole: %s" % e
    errors = expocheck.check(text)
    if errors:
        return "fail %d errors, the first: %s" % (len(errors), "; ".join(
            "line %d: %s" % e for e in errors[:3]))
    samples = sum(1 for l in text.splitlines() if l and not l.startswith("#"))
    return "ok %d %d" % (samples, sum(1 for l in text.splitlines() if l.startswith("# TYPE ")))


def accept(server, proc, deadline):
    server.settimeout(0.2)
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            return server.accept()[0]
        except socket.timeout:
            pass
    raise RuntimeError("QEMU did not connect its sockets")


def printable(text):
    """Console text without terminal control sequences (SeaBIOS resets the terminal) or CRs."""
    return re.sub(r"\x1b(\[[0-9;?]*[A-Za-z]|[c78])|\r", "", text)


def tail(path, lines):
    try:
        with open(path, errors="replace") as f:
            return printable("".join(f.readlines()[-lines:]))
    except OSError:
        return ""


def follow(path, stop):
    """Stream the console file to stdout until stop is set (verbose mode)."""
    while not os.path.exists(path) and not stop.is_set():
        time.sleep(0.1)
    with open(path, errors="replace") as f:
        while not stop.is_set():
            data = f.read()
            sys.stdout.write(printable(data)) if data else time.sleep(0.1)
            sys.stdout.flush()
        sys.stdout.write(printable(f.read()))


def run(args):
    # With a prebuilt initramfs the kernel is the one its .json names (checked in run_in); a
    # --kernel-root given beside it is checked first, so that a matrix kernel that could not be
    # fetched (and hence no initramfs built) skips the scenario rather than failing it.
    reason = missing_prerequisite(kernel_root=args.kernel_root or (None if args.initramfs else "/"), arch=args.arch)
    if reason:
        skip(reason)
    if args.arch == "arm64" and args.root_image:
        skip("--root-image is for the amd64 guest only")
    if args.arch == "arm64" and not args.initramfs and not args.kernel_root:
        raise SystemExit("vmtest: --arch arm64 needs --initramfs or --kernel-root (an arm64 kernel)")
    name = os.path.splitext(os.path.basename(args.scenario))[0]
    spec = parse_scenario(args.scenario)
    timeout = args.timeout or spec["timeout"]
    if spec["prometheus"] and not shutil.which("prometheus"):
        skip("prometheus is not installed (Debian package prometheus): the scenario needs a live one")
    if spec["alertmanager"]:
        sys.path.insert(0, os.path.join(HERE, "..", "rules"))
        import check_routing
        if not spec["prometheus"]:
            raise SystemExit(f"vmtest: {args.scenario}: '# alertmanager:' needs '# prometheus:'")
        if not check_routing.alertmanager_binary():
            skip("Alertmanager is not installed (Debian package prometheus-alertmanager): the scenario needs one")
    work = tempfile.mkdtemp(prefix=f"vmtest-{name}-")
    try:
        return run_in(args, name, spec, timeout, work)
    finally:
        if args.keep:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def arm64_qemu(qemu, spec):
    """The amd64 command line made arm64's: qemu-system-aarch64's virt machine (TCG, the "max"
    CPU), its PL011 as the console (ttyAMA0), and the NVMe disk alone (virt has no AHCI). The host
    channel stays the guest's /dev/ttyS1: QEMU 7.2's virt has one PL011 only, so a second "-serial"
    goes nowhere; a pci-serial-2x card (two 16550 UARTs on PCI, which Debian's arm64 kernel drives
    with its built-in 8250_pci, no module to load first) gives ttyS0 (unused, null) and ttyS1.
    No clocksource=hpet (there is no HPET): arm64 keeps time with the architected timer, whose
    frequency is fixed, not calibrated."""
    append = qemu[qemu.index("-append") + 1].replace("console=ttyS0 clocksource=hpet ", "console=ttyAMA0 ")
    append = append.replace(" vmtest.wait=nvme0n1,sda", " vmtest.wait=nvme0n1")
    out = ["qemu-system-aarch64", "-M", "virt", "-cpu", "max"] + qemu[1:]
    out[out.index("-append") + 1] = append
    ctl = out.index("chardev:ctl")
    out[ctl - 1:ctl + 1] = ["-chardev", "null,id=unused", "-device", "pci-serial-2x,chardev1=unused,chardev2=ctl"]
    if spec["defaults"]:
        out += ["-device", "nvme,id=nvme0,serial=DPNVME0,drive=nvme0disk"]
    return out


def run_in(args, name, spec, timeout, work):
    initramfs = args.initramfs
    if not initramfs:
        initramfs = os.path.join(work, "base.cpio")
        try:
            build(initramfs, args.daemon, args.kernel_root or "/", args.arch)
        except RuntimeError as e:
            say(f"FAIL: {e}")
            return 1
    elif not os.path.isfile(initramfs + ".json"):
        say(f"FAIL: {initramfs} was not built by vmtest.py build (no .json next to it)")
        return 1
    with open(initramfs + ".json") as f:
        meta = json.load(f)
    if meta.get("arch", "amd64") != args.arch:
        say(f"FAIL: {initramfs} is an {meta.get('arch', 'amd64')} guest's, not {args.arch}'s")
        return 1
    if not os.path.isfile(meta["kernel"]):
        say(f"FAIL: the kernel {meta['kernel']} that {initramfs} was built for is gone")
        return 1
    # The scenario travels as a second cpio archive appended to the shared one.
    initrd = os.path.join(work, "initrd.cpio")
    shutil.copyfile(initramfs, initrd)
    extra = Cpio(merged_usr=False)
    extra.copy(args.scenario, "/scenario.sh")
    with open(initrd, "ab") as f:
        extra.write(f)

    disks = [("nvme0disk", "64M"), ("sata0disk", "64M")] if spec["defaults"] else []
    if args.arch == "arm64":
        disks = disks[:1]
    # clocksource=hpet: under TCG the guest calibrates its TSC against the emulated PIT while
    # the host is busy, and a wrong calibration made the guest's clock run several times too
    # fast (timeouts and intervals in the guest then mean nothing); the HPET is emulated from
    # the host's clock and stays right under load.
    qemu = ["qemu-system-x86_64", "-accel", "tcg", "-m", "1024", "-nographic", "-nodefaults",
            "-no-user-config", "-no-reboot", "-kernel", meta["kernel"], "-initrd", initrd,
            "-append", f"console=ttyS0 clocksource=hpet rdinit=/init panic=-1 loglevel=4 vmtest.name={name}"
            + (" vmtest.wait=nvme0n1,sda" if spec["defaults"] else "") + spec["append"],
            "-serial", f"file:{work}/console.log",
            "-chardev", f"socket,id=ctl,path={work}/ctl.sock", "-serial", "chardev:ctl",
            "-chardev", f"socket,id=qmp,path={work}/qmp.sock", "-mon", "chardev=qmp,mode=control"]
    for disk_id, size in disks + spec["disk"]:
        img = f"{work}/{disk_id}.img"
        with open(img, "wb") as f:
            f.truncate(parse_size(size))
        qemu += ["-drive", f"if=none,id={disk_id},file={img},format=raw,cache=unsafe"]
    if spec["defaults"] and args.arch == "amd64":
        qemu += ["-device", "nvme,id=nvme0,serial=DPNVME0,drive=nvme0disk",
                 "-device", "ahci,id=ahci",
                 "-device", "ide-hd,id=sata0,bus=ahci.0,drive=sata0disk,serial=DPSATA0,rotation_rate=7200"]
    if args.arch == "arm64":
        qemu = arm64_qemu(qemu, spec)
    qemu += spec["qemu"]
    if args.root_image:
        # Read-only for the guest's purposes: its writes go to a temporary overlay.
        qemu += ["-drive", f"if=none,id=rootdisk,file={os.path.abspath(args.root_image)},format=raw,"
                 "cache=unsafe,snapshot=on", "-device", "virtio-blk-pci,drive=rootdisk,serial=DPROOT"]
        i = qemu.index("-append") + 1
        qemu[i] += " vmtest.root=vda"

    prom = am = None
    if spec["alertmanager"]:
        sys.path.insert(0, os.path.join(HERE, "..", "rules"))
        import check_routing
        os.makedirs(f"{work}/am")
        am = check_routing.Alertmanager(f"{work}/am")
        say(f"alertmanager on 127.0.0.1:{am.port}, the shipped routing, receivers posting here")
    if spec["prometheus"]:
        # A Prometheus on the host scrapes the guest's daemon through a forwarded port.
        sys.path.insert(0, os.path.join(HERE, "..", "integration"))
        import dp
        import test_prometheus
        port = dp.free_port()
        scale, groups = spec["prometheus"]
        config = test_prometheus.write_config(work, port, scale, groups, am.port if am else None)
        prom = test_prometheus.Prometheus(config, work)
        say(f"prometheus on {prom.url} scrapes the guest's daemon on 127.0.0.1:{port}")
        qemu += ["-netdev", f"user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:9477",
                 "-device", "virtio-net-pci,netdev=net0,romfile="]
        qemu[qemu.index("-append") + 1] += " vmtest.net=1"

    servers = {}
    for chan in ("ctl", "qmp"):
        servers[chan] = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        servers[chan].bind(f"{work}/{chan}.sock")
        servers[chan].listen(1)
    console = f"{work}/console.log"
    start = time.monotonic()
    deadline = start + timeout
    stop = threading.Event()
    follower = threading.Thread(target=follow, args=(console, stop), daemon=True)
    if args.verbose:
        say("qemu: " + shlex.join(qemu))
        follower.start()
    qemu_err = open(f"{work}/qemu.stderr", "w+")
    proc = subprocess.Popen(qemu, stdin=subprocess.DEVNULL, stdout=qemu_err, stderr=qemu_err)
    results, verdict, boot_at, book = [], None, None, None
    try:
        ctl = accept(servers["ctl"], proc, deadline)
        qmp = Qmp(accept(servers["qmp"], proc, deadline))
        buf = b""
        sel = selectors.DefaultSelector()
        sel.register(ctl, selectors.EVENT_READ)
        while verdict is None:
            left = deadline - time.monotonic()
            if left <= 0:
                verdict = ("fail", f"timeout after {timeout} s")
                break
            if proc.poll() is not None:
                verdict = ("fail", f"QEMU exited with {proc.returncode} before the scenario finished")
                break
            if not sel.select(min(left, 0.5)):
                continue
            chunk = ctl.recv(65536)
            if not chunk:
                verdict = ("fail", "guest control channel closed")
                break
            buf += chunk
            while b"\n" in buf and verdict is None:
                line, _, buf = buf.partition(b"\n")
                verb, _, rest = line.decode(errors="replace").strip("\r").partition(" ")
                reply = "ack"
                if verb == "hello":
                    boot_at = time.monotonic() - start
                    say(f"guest reached init after {boot_at:.1f} s")
                elif verb == "qmp":
                    try:
                        reply = json.dumps(qmp.command(json.loads(rest)))
                    except ValueError as e:
                        reply = json.dumps({"error": {"class": "HarnessBadJSON", "desc": str(e)}})
                elif verb == "event":
                    ev_name, _, ev_timeout = rest.partition(" ")
                    ev_timeout = float(ev_timeout) if re.fullmatch(r"\d+(\.\d*)?", ev_timeout) else 10
                    reply = json.dumps(qmp.wait_event(ev_name, ev_timeout))
                elif verb == "prom":
                    try:
                        reply = json.dumps(test_prometheus.query(prom.url, rest), separators=(",", ":"))
                    except (RuntimeError, OSError, ValueError, AttributeError) as e:
                        reply = json.dumps({"error": str(e)})
                elif verb == "notifications":
                    # what reached the receivers, for a shell: "RECEIVER STATUS ALERT@DEVICE,...;..."
                    reply = ";".join("%s %s %s" % (path.strip("/"), body.get("status"), ",".join(
                        "%s@%s" % (a["labels"].get("alertname"), a["labels"].get("device", ""))
                        for a in body.get("alerts", []))) for path, body in (list(am.got) if am else [])) or "none"
                elif verb == "expocheck":
                    reply = expocheck_reply(rest)
                elif verb in ("runbook", "rbresult"):
                    # the runbook's commands, run in the guest one at a time and checked here
                    if book is None:
                        sys.path.insert(0, os.path.join(HERE, "..", "runbook"))
                        import guest as runbook_guest
                        book = runbook_guest.Session(
                            lambda v, c, w="": (results.append((v, c, w)),
                                                say(f"{v.upper():4} {c}" + (f": {w}" if w else ""))),
                            (lambda expr: test_prometheus.query(prom.url, expr)) if prom else None)
                    reply = book.request(verb, rest)
                elif verb in ("ok", "fail", "skip"):
                    check, _, why = rest.partition("\t")
                    results.append((verb, check, why))
                    say(f"{verb.upper():4} {check}" + (f": {why}" if why else ""))
                elif verb == "done":
                    verdict = ("done", rest)
                elif verb:
                    reply = "unknown"
                ctl.sendall(reply.encode() + b"\n")
    except (RuntimeError, EOFError, OSError) as e:
        verdict = ("fail", str(e))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        qemu_err.close()
        for server in servers.values():
            server.close()
        if prom:
            prom.stop()
        if am:
            am.stop()
        stop.set()
        if follower.is_alive():
            follower.join()
    elapsed = time.monotonic() - start
    fails = [r for r in results if r[0] == "fail"]
    oks = [r for r in results if r[0] == "ok"]
    skips = [r for r in results if r[0] == "skip"]
    if verdict[0] == "done" and not fails:
        if verdict[1] not in ("0", "77"):
            fails.append(("fail", "scenario", f"exited with status {verdict[1]}"))
        elif not oks and not skips:
            fails.append(("fail", "scenario", "reported no results"))
    if verdict[0] == "fail":
        fails.append(("fail", "harness", verdict[1]))
    timing = f"boot {boot_at:.1f} s, total {elapsed:.1f} s" if boot_at else f"total {elapsed:.1f} s"
    if fails:
        if not args.verbose:
            print(f"----- guest console (last {args.tail} lines) -----")
            print(tail(console, args.tail), end="")
            err = tail(f"{work}/qemu.stderr", 20)
            if err:
                print(f"----- qemu stderr -----\n{err}", end="")
            if prom:
                print(f"----- prometheus log (last 20 lines) -----\n{tail(f'{work}/prometheus.log', 20)}", end="")
            if am:
                print(f"----- alertmanager log (last 20 lines) -----\n{tail(f'{work}/am/am.log', 20)}", end="")
            print("-----")
        say(f"{name}: FAIL ({len(oks)} ok, {len(fails)} failed; {timing})")
        for _, check, why in fails:
            say(f"  failed: {check}: {why}")
        return 1
    if skips or verdict[1] == "77":
        say(f"{name}: SKIP ({'; '.join(s[1] + ' ' + s[2] for s in skips)}; {timing})")
        return SKIP
    say(f"{name}: PASS ({len(oks)} checks; {timing})")
    return 0


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text.upper())
    if not m:
        raise SystemExit(f"vmtest: bad disk size {text!r}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the shared guest initramfs")
    b.add_argument("--out", required=True)
    b.add_argument("--daemon", help="diskpulse binary to install as /bin/diskpulse")
    b.add_argument("--kernel-root", default="/", help="boot/vmlinuz-VER and lib/modules/VER below it (default /)")
    b.add_argument("--arch", choices=("amd64", "arm64"), default="amd64", help="the guest's architecture")
    r = sub.add_parser("run", help="boot a guest and run one scenario")
    r.add_argument("scenario")
    r.add_argument("--initramfs", help="prebuilt by `build` (else built into the temp dir)")
    r.add_argument("--daemon", help="diskpulse binary, when no --initramfs is given")
    r.add_argument("--kernel-root",
                   help="the kernel as for build (default /); with --initramfs only checked to be there")
    r.add_argument("--arch", choices=("amd64", "arm64"), default="amd64", help="the guest's architecture")
    r.add_argument("--root-image", help="raw ext4 image of a root with systemd to boot (virtio disk vda)")
    r.add_argument("--timeout", type=int, help="seconds (default: scenario header or %d)" % DEFAULT_TIMEOUT)
    r.add_argument("--tail", type=int, default=80, help="console lines shown on failure")
    r.add_argument("--keep", action="store_true", help="keep the temp dir (console.log, images)")
    r.add_argument("-v", "--verbose", action="store_true", default=bool(os.environ.get("VMTEST_VERBOSE")),
                   help="stream the guest console (also with VMTEST_VERBOSE=1)")
    args = ap.parse_args()
    # ctest's timeout sends SIGTERM: unwind so that QEMU is killed and the temp dir removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if args.cmd == "build":
        if args.arch == "arm64" and args.kernel_root == "/":
            skip("--arch arm64 needs --kernel-root (an arm64 kernel: kernels.py fetch --arch arm64)")
        reason = missing_prerequisite(need_qemu=False, kernel_root=args.kernel_root, arch=args.arch)
        if reason:
            skip(reason)
        if args.arch == "arm64" and args.daemon and not os.path.exists(args.daemon):
            skip(f"no arm64 daemon {args.daemon} (package/arm64 cross-builds it)")
        if args.daemon and not os.access(args.daemon, os.X_OK):
            say(f"FAIL: daemon binary {args.daemon} is not executable")
            return 1
        try:
            build(args.out, args.daemon, args.kernel_root, args.arch)
        except RuntimeError as e:
            say(f"FAIL: {e}")
            return 1
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
