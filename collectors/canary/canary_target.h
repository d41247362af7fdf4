/* Which block device backs a canary path: its diskstats name and the physical disks below it. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/* Kernel DISK_NAME_LEN is 32 including the NUL (include/linux/blkdev.h). */
#define CANARY_NAME_MAX 32
/* Physical disks collected below one device (an md/dm stack over more is refused: -E2BIG). */
#define CANARY_DISKS_MAX 32
/* Levels of slaves followed (dm on dm on md ...); deeper or a cycle gives -ELOOP. */
#define CANARY_DEPTH_MAX 8

struct canary_disk {
        char name[CANARY_NAME_MAX]; /* kernel name of a whole disk: "sda", "nvme0n1", "loop0" */
        unsigned major, minor;
};

struct canary_backing {
        /* The device as the diskstats metrics name it: a partition is replaced by its disk
         * (sda1 -> sda, nvme0n1p2 -> nvme0n1), dm and md devices keep their name (dm-0, md0). */
        char device[CANARY_NAME_MAX];
        unsigned major, minor; /* of device (the disk for a partition) */
        /* The whole disks that finally receive the flushes: the leaves of the slaves/ tree of a
         * dm/md device, each partition mapped to its disk, deduplicated; for a plain disk just
         * itself. A loop device is a leaf: the disk under its backing file is not followed. */
        size_t n_disks;
        struct canary_disk disks[CANARY_DISKS_MAX];
};

/* Resolves the device behind st_dev (the st_dev of the canary directory; the caller does the
 * fstat()) below sysfs_fd, the --path.sysfs root (an O_PATH directory fd is enough).
 *
 * Reads, per Documentation/ABI/testing/sysfs-block and Documentation/ABI/stable/sysfs-devices:
 *  - <sysfs>/dev/block/MAJ:MIN, a symlink to .../block/DISK or .../block/DISK/PART; a partition
 *    (it has a "partition" attribute) maps to DISK, the parent directory in the link;
 *  - <sysfs>/block/NAME/slaves/ (dm, md): entries are symlinks to the slaves' sysfs dirs,
 *    followed recursively (at most CANARY_DEPTH_MAX levels), partitions mapped to their disk;
 *  - <sysfs>/block/NAME/dev ("MAJ:MIN") of each leaf disk.
 * Identity (serial, WWN) is not read here.
 *
 * Returns 0 and fills *ret; on failure *ret is untouched and:
 *  -ENODEV  major 0: an anonymous device (tmpfs, overlayfs, btrfs, nfs, fuse...), no single
 *           block device backs the path (see canary_resolve_reason());
 *  -ENOENT  a sysfs entry is missing (device gone, sysfs not mounted at the root);
 *  -ELOOP   slaves nested deeper than CANARY_DEPTH_MAX (or a cycle);
 *  -E2BIG   more than CANARY_DISKS_MAX disks;
 *  -ENAMETOOLONG / -EINVAL  a name that does not fit or is not a kernel device name;
 *  other -errno from readlinkat()/openat().
 * Pure with respect to sysfs_fd (no globals, no other paths); any thread. */
int canary_resolve(int sysfs_fd, dev_t st_dev, struct canary_backing *ret);

/* The device whose identity (WWN, serial) keys the baselines of a path backed by b: its one
 * physical disk, or for a dm/md device over several the device itself. Pure. */
const char *canary_backing_key_device(const struct canary_backing *b);

/* A sentence that explains an error of canary_resolve() to an operator (static string). */
const char *canary_resolve_reason(int r);

/* Sums the flushes completed (field 16 of Documentation/block/stat.rst, Linux 5.5+; see also
 * Documentation/ABI/testing/procfs-diskstats) of <sysfs>/block/NAME/stat over b->disks.
 * Returns 0 and sets *ret, or -ENODATA when a disk's stat has fewer than 17 fields (kernel
 * without flush accounting), -EINVAL on garbage, -ENOENT for a vanished disk, other -errno;
 * *ret untouched on failure. Any thread. */
int canary_flushes(int sysfs_fd, const struct canary_backing *b, uint64_t *ret);
