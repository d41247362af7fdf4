/* Which block device backs a canary path: sysfs dev/block links, partitions, dm/md slaves. */
#include "canary_target.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fsroot.h"
#include "util.h"

/* Entries read from one slaves/ directory at most (a bigger md array is refused with -E2BIG). */
#define SLAVES_DIR_MAX 256

/* A kernel block device name: a single, non-empty path component that fits. */
static int check_name(const char *s, size_t len)
{
        if (len == 0)
                return -EINVAL;
        if (len >= CANARY_NAME_MAX)
                return -ENAMETOOLONG;
        if (memchr(s, '/', len) || memchr(s, 0, len))
                return -EINVAL;
        if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
                return -EINVAL;
        return 0;
}

/* Copies the len bytes at s, checked by check_name(), as a string into ret_name (at least
 * CANARY_NAME_MAX bytes); returns 0 or check_name()'s error, ret_name untouched then. */
static int copy_name(const char *s, size_t len, char *ret_name)
{
        int r = check_name(s, len);

        if (r < 0)
                return r;
        memcpy(ret_name, s, len);
        ret_name[len] = 0;
        return 0;
}

/* Parses "MAJ:MIN" as in <sysfs>/block/NAME/dev. */
static int parse_devnum(const char *s, unsigned *ret_major, unsigned *ret_minor)
{
        char buf[64];
        char *colon;
        uint64_t ma, mi;

        if (!strscpy(buf, s, sizeof(buf)))
                return -EINVAL;
        colon = strchr(buf, ':');
        if (!colon)
                return -EINVAL;
        *colon = 0;
        if (parse_u64(buf, &ma) < 0 || parse_u64(colon + 1, &mi) < 0)
                return -EINVAL;
        if (ma > 0xfff || mi > 0xfffff)
                return -EINVAL;
        *ret_major = (unsigned)ma;
        *ret_minor = (unsigned)mi;
        return 0;
}

/* Maps the sysfs directory link at path (dev/block/MAJ:MIN or block/X/slaves/Y) to the name of
 * its whole disk: the link's last component, or the one before it when the target is a
 * partition (it has a "partition" attribute; sysfs-block: /sys/block/<disk>/<part>/). */
static int link_to_disk(int sysfs_fd, const char *path, char ret_name[static CANARY_NAME_MAX])
{
        char target[4096], attr[4200];
        const char *last, *parent, *end;
        struct stat st;
        ssize_t n;

        n = readlinkat(sysfs_fd, path, target, sizeof(target));
        if (n < 0)
                return -errno;
        if ((size_t)n >= sizeof(target))
                return -ENAMETOOLONG;
        target[n] = 0;
        while (n > 0 && target[n - 1] == '/')
                target[--n] = 0;
        end = target + n;
        last = strrchr(target, '/');
        last = last ? last + 1 : target;

        snprintf(attr, sizeof(attr), "%s/partition", path);
        if (fstatat(sysfs_fd, attr, &st, 0) < 0) {
                if (errno != ENOENT)
                        return -errno;
                return copy_name(last, (size_t)(end - last), ret_name);
        }
        /* A partition: its disk is the parent directory, .../block/DISK/PART. */
        if (last == target)
                return -EINVAL;
        end = last - 1; /* the '/' before PART */
        parent = end;
        while (parent > target && parent[-1] != '/')
                parent--;
        return copy_name(parent, (size_t)(end - parent), ret_name);
}

static int read_devnum(int sysfs_fd, const char *disk, unsigned *ret_major, unsigned *ret_minor)
{
        char path[128], buf[64];
        int r;

        snprintf(path, sizeof(path), "block/%s/dev", disk);
        r = read_attr_at(sysfs_fd, path, buf, sizeof(buf));
        if (r < 0)
                return r;
        return parse_devnum(buf, ret_major, ret_minor);
}

static int cmp_names(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds the whole disks that receive the flushes of disk to b: disk itself when it has no
 * slaves, else the leaves below its slaves. */
static int collect(int sysfs_fd, const char *disk, unsigned depth, struct canary_backing *b)
{
        char path[128];
        char *names[SLAVES_DIR_MAX];
        size_t n = 0;
        DIR *d;
        int fd, r = 0;

        if (depth > CANARY_DEPTH_MAX)
                return -ELOOP;

        snprintf(path, sizeof(path), "block/%s/slaves", disk);
        fd = openat(sysfs_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT)
                return -errno;
        if (fd >= 0) {
                struct dirent *de;

                d = fdopendir(fd);
                if (!d) {
                        r = -errno;
                        close(fd);
                        return r;
                }
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        if (n == SLAVES_DIR_MAX) {
                                r = -E2BIG;
                                break;
                        }
                        names[n++] = xstrdup(de->d_name);
                }
                closedir(d);
        }

        if (r == 0 && n == 0) {
                /* A leaf: a disk that receives the flushes itself. */
                unsigned ma, mi;

                r = read_devnum(sysfs_fd, disk, &ma, &mi);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < b->n_disks; i++)
                        if (strcmp(b->disks[i].name, disk) == 0)
                                return 0; /* two partitions of one disk: one disk */
                if (b->n_disks == CANARY_DISKS_MAX)
                        return -E2BIG;
                if (!strscpy(b->disks[b->n_disks].name, disk, CANARY_NAME_MAX))
                        return -ENAMETOOLONG;
                b->disks[b->n_disks].major = ma;
                b->disks[b->n_disks].minor = mi;
                b->n_disks++;
                return 0;
        }

        qsort(names, n, sizeof(names[0]), cmp_names);
        for (size_t i = 0; i < n && r == 0; i++) {
                char slave[CANARY_NAME_MAX], spath[CANARY_NAME_MAX * 2 + 32];

                r = check_name(names[i], strlen(names[i]));
                if (r < 0)
                        break;
                snprintf(spath, sizeof(spath), "block/%s/slaves/%s", disk, names[i]);
                r = link_to_disk(sysfs_fd, spath, slave);
                if (r < 0)
                        break;
                r = collect(sysfs_fd, slave, depth + 1, b);
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        return r;
}

int canary_resolve(int sysfs_fd, dev_t st_dev, struct canary_backing *ret)
{
        struct canary_backing b = {};
        char path[64];
        int r;

        if (major(st_dev) == 0)
                return -ENODEV;

        snprintf(path, sizeof(path), "dev/block/%u:%u", major(st_dev), minor(st_dev));
        r = link_to_disk(sysfs_fd, path, b.device);
        if (r < 0)
                return r;
        r = read_devnum(sysfs_fd, b.device, &b.major, &b.minor);
        if (r < 0)
                return r;
        r = collect(sysfs_fd, b.device, 0, &b);
        if (r < 0)
                return r;
        *ret = b;
        return 0;
}

const char *canary_backing_key_device(const struct canary_backing *b)
{
        return b->n_disks == 1 ? b->disks[0].name : b->device;
}

const char *canary_resolve_reason(int r)
{
        switch (r) {
        case 0:
                return "resolved";
        case -ENODEV:
                return "the filesystem has no single backing block device (major 0: tmpfs, "
                       "overlayfs, btrfs, nfs, fuse...); no device label and no flush ratio";
        case -ENOENT:
                return "the path or a sysfs entry of its device is missing (directory moved or "
                       "removed, device removed, or sysfs not mounted at --path.sysfs)";
        case -ELOOP:
                return "dm/md slaves nested too deep or in a cycle";
        case -E2BIG:
                return "too many disks below the device";
        case -ENAMETOOLONG:
        case -EINVAL:
                return "unexpected device name in sysfs";
        default:
                return "reading sysfs failed";
        }
}

/* Reads field 16 (flushes completed) of <sysfs>/block/NAME/stat; Documentation/block/stat.rst:
 * one line of 11 (before 4.18), 15 (4.18+) or 17 (5.5+) decimal values. */
static int read_flushes(int sysfs_fd, const char *disk, uint64_t *ret)
{
        char path[128], buf[512];
        char *p, *tok, *save = NULL;
        uint64_t v = 0;
        unsigned field = 0;
        int r;

        snprintf(path, sizeof(path), "block/%s/stat", disk);
        r = read_attr_at(sysfs_fd, path, buf, sizeof(buf));
        if (r < 0)
                return r;
        for (p = buf; (tok = strtok_r(p, " \t\n", &save)); p = NULL) {
                uint64_t x;

                if (parse_u64(tok, &x) < 0)
                        return -EINVAL;
                field++;
                if (field == 16)
                        v = x;
        }
        if (field < 11)
                return -EINVAL;
        if (field < 17)
                return -ENODATA;
        *ret = v;
        return 0;
}

int canary_flushes(int sysfs_fd, const struct canary_backing *b, uint64_t *ret)
{
        uint64_t sum = 0;

        if (!b || b->n_disks == 0)
                return -EINVAL;
        for (size_t i = 0; i < b->n_disks; i++) {
                uint64_t v;
                int r = read_flushes(sysfs_fd, b->disks[i].name, &v);

                if (r < 0)
                        return r;
                sum += v;
        }
        *ret = sum;
        return 0;
}
