"""Synthetic host trees for the benchmarks: proc/ (diskstats in the 20-column format of Linux 5.5+,
uptime), sys/block/NAME/ (dev, queue/rotational, queue/write_cache) and udev/bMAJ:MIN (the
properties udev records for disks and device-mapper volumes), laid out as tests/fixtures are,
for the --path.procfs, --path.sysfs and --path.udev.data roots.

A tree of N devices holds N whole devices that the default device filter keeps (NVMe namespaces,
SCSI disks, device-mapper volumes, in the proportions of a JBOD or SAN host) plus one partition
per disk, which the filter drops, as on a real host. Counter values are deterministic and of
real magnitudes, so page sizes are what a real host would give. bump() advances every counter,
as a busy host's kernel would between two samples."""
import os
import tempfile

# The device filter both exporters are given: node_exporter's default, written so that POSIX
# ERE and Go's RE2 read it alike.
DEVICE_EXCLUDE = r"^(z?ram|loop|fd|(h|s|v|xv)d[a-z]+|nvme[0-9]+n[0-9]+p)[0-9]+$"

FIELDS = 17


def _sd_name(k):
    """The kernel's name of the k-th SCSI disk: sda..sdz, sdaa..sdzz, sdaaa..."""
    s = ""
    k += 1
    while k > 0:
        k, r = divmod(k - 1, 26)
        s = chr(97 + r) + s
    return "sd" + s


def devices(n):
    """[(name, major, minor, kind, partition-of or None)] for n monitored devices."""
    out = []
    if n <= 2:
        kinds = ["nvme", "sd"][:n]
    else:
        # a quarter NVMe namespaces, half SCSI disks, a quarter device-mapper volumes
        kinds = ["nvme" if i % 4 == 0 else "dm" if i % 4 == 3 else "sd" for i in range(n)]
    counts = {"nvme": 0, "sd": 0, "dm": 0}
    ext_minor = 0  # block extended major 259, as the kernel hands out for NVMe and many disks
    for kind in kinds:
        k = counts[kind]
        counts[kind] += 1
        if kind == "nvme":
            name = "nvme%dn%d" % (k // 4, k % 4 + 1)
            out.append((name, 259, ext_minor, kind, None))
            out.append((name + "p1", 259, ext_minor + 1, "part", name))
            ext_minor += 2
        elif kind == "sd":
            name = _sd_name(k)
            if k < 16:
                major, minor = 8, k * 16
            elif k < 256:
                major, minor = 65 + (k - 16) // 16, (k % 16) * 16
            else:
                major, minor = 259, ext_minor
                ext_minor += 2
            out.append((name, major, minor, kind, None))
            out.append((name + "1", major, minor + 1, "part", name))
        else:
            out.append(("dm-%d" % k, 253, k, kind, None))
    return out


def _counters(i, rnd):
    """17 counters of device i after rnd rounds of bump()."""
    a = 1000003 * (i + 1)
    reads = 50000 + a % 9000000 + rnd * (3 + i % 5)
    writes = 80000 + (a * 7) % 90000000 + rnd * (11 + i % 7)
    discards = (a * 3) % 20000 + (rnd if i % 3 == 0 else 0)
    flushes = (a * 5) % 3000000 + rnd * (1 + i % 2)
    return [reads, reads // 37, reads * 41, reads // 3 + rnd,
            writes, writes // 5, writes * 19, writes // 2 + 2 * rnd,
            i % 3, (reads + writes) // 4 + rnd, (reads + writes) // 2 + 3 * rnd,
            discards, discards // 9, discards * 2048, discards // 4,
            flushes, flushes // 8 + rnd]


def diskstats_text(devs, rnd=0):
    lines = []
    for i, (name, major, minor, kind, _) in enumerate(devs):
        c = _counters(i, rnd)
        lines.append("%4d %7d %s %s\n" % (major, minor, name, " ".join(str(v) for v in c)))
    return "".join(lines)


def _udev_record(i, name, kind, parent):
    if kind == "dm":
        return ("E:DM_NAME=vg%d-lv%d\nE:DM_UUID=LVM-%032x\nE:DM_VG_NAME=vg%d\nE:DM_LV_NAME=lv%d\n"
                "E:DEVTYPE=disk\nG:systemd\n" % (i // 50, i, i * 2654435761, i // 50, i))
    disk = parent or name
    if kind == "nvme" or (kind == "part" and disk.startswith("nvme")):
        rec = ("E:ID_MODEL=Samsung SSD 980 PRO 2TB\nE:ID_SERIAL_SHORT=S6B0NL0W%06dZ\n"
               "E:ID_WWN=eui.002538b%09x\nE:ID_PATH=pci-0000:%02x:00.0-nvme-1\n"
               "E:ID_REVISION=5B2QGXA7\n" % (i, i * 7919, 1 + i % 200))
    else:
        rec = ("E:ID_MODEL=ST16000NM001G-2KK103\nE:ID_SERIAL_SHORT=ZL2%05dQ\n"
               "E:ID_WWN=0x5000c500%08x\nE:ID_PATH=pci-0000:3b:00.0-sas-exp0x500304801f3f7f3f-phy%d-lun-0\n"
               "E:ID_REVISION=SN03\nE:ID_BUS=ata\n" % (i, i * 104729, i % 64))
    return rec + "E:DEVTYPE=%s\nG:systemd\n" % ("partition" if kind == "part" else "disk")


def tempdir(prefix):
    """A new directory for a tree, in memory (/dev/shm) where there is one: thousands of small
    files are written faster there than on a busy disk."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def make_tree(root, n):
    """Writes a tree of n monitored devices under root; returns the device list."""
    devs = devices(n)
    for sub in ("proc", "sys/block", "udev"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    with open(os.path.join(root, "proc", "uptime"), "w") as f:
        f.write("4000000.00 7900000.00\n")
    with open(os.path.join(root, "proc", "diskstats"), "w") as f:
        f.write(diskstats_text(devs))
    for i, (name, major, minor, kind, parent) in enumerate(devs):
        with open(os.path.join(root, "udev", "b%d:%d" % (major, minor)), "w") as f:
            f.write(_udev_record(i, name, kind, parent))
        if kind == "part":
            continue
        q = os.path.join(root, "sys", "block", name, "queue")
        os.makedirs(q, exist_ok=True)
        with open(os.path.join(root, "sys", "block", name, "dev"), "w") as f:
            f.write("%d:%d\n" % (major, minor))
        with open(os.path.join(q, "rotational"), "w") as f:
            f.write("1\n" if kind == "sd" else "0\n")
        with open(os.path.join(q, "write_cache"), "w") as f:
            f.write("write through\n" if kind == "dm" else "write back\n")
    return devs


def bump(root, devs, rnd):
    """Rewrites proc/diskstats as round rnd (every counter advanced), atomically."""
    path = os.path.join(root, "proc", "diskstats")
    with open(path + ".new", "w") as f:
        f.write(diskstats_text(devs, rnd))
    os.replace(path + ".new", path)
