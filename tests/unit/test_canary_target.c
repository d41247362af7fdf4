/* Unit tests of collectors/canary/canary_target.c on sysfs fixture trees built like the kernel's
 * (links into devices/, partitions, dm/md slaves, nesting, cycles), plus a live check of / on
 * /sys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmptree.h"
#include "canary_target.h"
#include "fsroot.h"
#include "util.h"

static char root[256];
static int sysfd = -1;

#define SDA  "devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda"
#define SDB  "devices/pci0000:00/0000:00:1f.2/ata2/host1/target1:0:0/1:0:0:0/block/sdb"
#define NVME "devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1"
#define VIRT "devices/virtual/block"
#define LONG "a_block_device_name_of_forty_characters"

static const char STAT17_100[] = "1 2 3 4 5 6 7 8 0 10 11 12 13 14 15 100 17\n";
static const char STAT17_23[] = "   9 0 0 0 5 0 0 0 0 0 0 0 0 0 0 23 4\n";
static const char STAT15[] = "1 2 3 4 5 6 7 8 0 10 11 12 13 14 15\n";
static const char STAT11[] = "1 2 3 4 5 6 7 8 0 10 11\n";

static void mkdirs(const char *rel)
{
        char p[3 * PATH_MAX];

        snprintf(p, sizeof p, "%s/%s", root, rel);
        for (char *s = p + strlen(root) + 1; *s; s++)
                if (*s == '/') {
                        *s = 0;
                        mkdir(p, 0755);
                        *s = '/';
                }
        mkdir(p, 0755);
}

static void put(const char *dir, const char *file, const char *content)
{
        char p[3 * PATH_MAX];
        FILE *f;

        mkdirs(dir);
        snprintf(p, sizeof p, "%s/%s/%s", root, dir, file);
        f = fopen(p, "w");
        assert_non_null(f);
        fputs(content, f);
        fclose(f);
}

static void lnk(const char *dir, const char *name, const char *target)
{
        char p[3 * PATH_MAX];

        mkdirs(dir);
        snprintf(p, sizeof p, "%s/%s/%s", root, dir, name);
        assert_int_equal(symlink(target, p), 0);
}

/* A disk (or dm/md device) directory at path with dev and stat, linked from block/ and
 * dev/block/. */
static void disk(const char *path, const char *name, const char *devnum, const char *stat)
{
        char d[PATH_MAX], t[2 * PATH_MAX];

        snprintf(d, sizeof d, "%s", path);
        put(d, "dev", devnum);
        if (stat)
                put(d, "stat", stat);
        mkdirs(strcat(strcpy(t, d), "/slaves"));
        snprintf(t, sizeof t, "../%s", path);
        lnk("block", name, t);
        snprintf(t, sizeof t, "../../%s", path);
        lnk("dev/block", devnum, t);
}

static void part(const char *diskpath, const char *name, const char *devnum, const char *no)
{
        char d[PATH_MAX], t[2 * PATH_MAX];

        snprintf(d, sizeof d, "%s/%s", diskpath, name);
        put(d, "dev", devnum);
        put(d, "partition", no);
        snprintf(t, sizeof t, "../../%s", d);
        lnk("dev/block", devnum, t);
}

/* block/NAME/slaves/SLAVE -> the slave's directory, relative like the kernel's link from
 * devices/virtual/block/NAME/slaves/. */
static void slave(const char *name, const char *slavename, const char *slavepath)
{
        char d[PATH_MAX], t[2 * PATH_MAX];

        snprintf(d, sizeof d, VIRT "/%s/slaves", name);
        snprintf(t, sizeof t, "../../../../%s", slavepath + strlen("devices/"));
        lnk(d, slavename, t);
}

static int setup_tree(void **state)
{
        const char *base = getenv("TMPDIR");

        (void)state;
        snprintf(root, sizeof root, "%s/test_canary_target.XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(root))
                return -1;

        disk(SDA, "sda", "8:0", STAT17_100);
        part(SDA, "sda1", "8:1", "1");
        part(SDA, "sda2", "8:2", "2");
        disk(SDB, "sdb", "8:16", STAT17_23);
        part(SDB, "sdb1", "8:17", "1");
        disk(NVME, "nvme0n1", "259:0", STAT15);
        part(NVME, "nvme0n1p2", "259:2", "2");
        disk(VIRT "/loop0", "loop0", "7:0", STAT11);

        /* dm-0 on sda1; dm-1 on dm-0 and sdb1 (nested); md0 on sda2 and sdb1. */
        disk(VIRT "/dm-0", "dm-0", "253:0", STAT17_100);
        slave("dm-0", "sda1", SDA "/sda1");
        disk(VIRT "/dm-1", "dm-1", "253:1", STAT17_100);
        slave("dm-1", "dm-0", VIRT "/dm-0");
        slave("dm-1", "sdb1", SDB "/sdb1");
        disk(VIRT "/md0", "md0", "9:0", STAT17_100);
        slave("md0", "sda2", SDA "/sda2");
        slave("md0", "sdb1", SDB "/sdb1");
        /* md1 on two partitions of the same disk: the disk once. */
        disk(VIRT "/md1", "md1", "9:1", NULL);
        slave("md1", "sda1", SDA "/sda1");
        slave("md1", "sda2", SDA "/sda2");
        /* A cycle, which the kernel never makes but a broken tree could. */
        disk(VIRT "/dm-2", "dm-2", "253:2", NULL);
        disk(VIRT "/dm-3", "dm-3", "253:3", NULL);
        slave("dm-2", "dm-3", VIRT "/dm-3");
        slave("dm-3", "dm-2", VIRT "/dm-2");
        /* A slave whose sysfs directory is gone. */
        disk(VIRT "/dm-4", "dm-4", "253:4", NULL);
        slave("dm-4", "sdz", "devices/pci0000:00/gone/block/sdz");
        /* A name longer than DISK_NAME_LEN. */
        disk(VIRT "/" LONG, LONG, "250:0", NULL);
        /* Garbage in stat. */
        disk(VIRT "/dm-5", "dm-5", "253:5", "1 2 x 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n");

        sysfd = root_open(root);
        return sysfd < 0 ? -1 : 0;
}

static int teardown_tree(void **state)
{
        (void)state;
        close(sysfd);
        return test_remove_tree(root);
}

static struct canary_backing resolve_ok(unsigned ma, unsigned mi)
{
        struct canary_backing b;

        memset(&b, 0x5a, sizeof b);
        assert_int_equal(canary_resolve(sysfd, makedev(ma, mi), &b), 0);
        return b;
}

static void test_partition_maps_to_disk(void **state)
{
        struct canary_backing b;

        (void)state;
        b = resolve_ok(8, 1);
        assert_string_equal(b.device, "sda");
        assert_int_equal(b.major, 8);
        assert_int_equal(b.minor, 0);
        assert_int_equal(b.n_disks, 1);
        assert_string_equal(b.disks[0].name, "sda");
        assert_int_equal(b.disks[0].major, 8);
        assert_int_equal(b.disks[0].minor, 0);

        b = resolve_ok(259, 2);
        assert_string_equal(b.device, "nvme0n1");
        assert_int_equal(b.major, 259);
        assert_int_equal(b.minor, 0);
        assert_int_equal(b.n_disks, 1);
        assert_string_equal(b.disks[0].name, "nvme0n1");
}

static void test_whole_disk_and_loop(void **state)
{
        struct canary_backing b;

        (void)state;
        b = resolve_ok(8, 16);
        assert_string_equal(b.device, "sdb");
        assert_int_equal(b.n_disks, 1);
        assert_string_equal(b.disks[0].name, "sdb");

        /* A loop device is its own leaf: the disk under its backing file is not followed. */
        b = resolve_ok(7, 0);
        assert_string_equal(b.device, "loop0");
        assert_int_equal(b.n_disks, 1);
        assert_string_equal(b.disks[0].name, "loop0");
        assert_int_equal(b.disks[0].major, 7);
}

static void test_dm_md_slaves(void **state)
{
        struct canary_backing b;

        (void)state;
        b = resolve_ok(253, 0);
        assert_string_equal(b.device, "dm-0");
        assert_int_equal(b.major, 253);
        assert_int_equal(b.minor, 0);
        assert_int_equal(b.n_disks, 1);
        assert_string_equal(b.disks[0].name, "sda");

        /* Nested: dm-1 on (dm-0 on sda1) and sdb1. */
        b = resolve_ok(253, 1);
        assert_string_equal(b.device, "dm-1");
        assert_int_equal(b.n_disks, 2);
        assert_string_equal(b.disks[0].name, "sda");
        assert_string_equal(b.disks[1].name, "sdb");
        assert_int_equal(b.disks[1].minor, 16);

        b = resolve_ok(9, 0);
        assert_string_equal(b.device, "md0");
        assert_int_equal(b.n_disks, 2);
        assert_string_equal(b.disks[0].name, "sda");
        assert_string_equal(b.disks[1].name, "sdb");

        b = resolve_ok(9, 1);
        assert_string_equal(b.device, "md1");
        assert_int_equal(b.n_disks, 1);
        assert_string_equal(b.disks[0].name, "sda");
}

static void test_errors(void **state)
{
        struct canary_backing b, orig;

        (void)state;
        memset(&b, 0x5a, sizeof b);
        orig = b;
        /* tmpfs, overlayfs, btrfs: anonymous major 0. */
        assert_int_equal(canary_resolve(sysfd, makedev(0, 42), &b), -ENODEV);
        assert_non_null(strstr(canary_resolve_reason(-ENODEV), "tmpfs"));
        assert_int_equal(canary_resolve(sysfd, makedev(8, 5), &b), -ENOENT);
        assert_int_equal(canary_resolve(sysfd, makedev(253, 2), &b), -ELOOP);
        assert_int_equal(canary_resolve(sysfd, makedev(253, 4), &b), -ENOENT);
        assert_int_equal(canary_resolve(sysfd, makedev(250, 0), &b), -ENAMETOOLONG);
        assert_memory_equal(&b, &orig, sizeof b); /* untouched on failure */
        for (int r = -1; r > -200; r--)
                assert_non_null(canary_resolve_reason(r));
}

static void test_flushes(void **state)
{
        struct canary_backing b;
        uint64_t v = 7;

        (void)state;
        b = resolve_ok(253, 1); /* sda 100 + sdb 23 */
        assert_int_equal(canary_flushes(sysfd, &b, &v), 0);
        assert_int_equal(v, 123);
        b = resolve_ok(8, 1);
        assert_int_equal(canary_flushes(sysfd, &b, &v), 0);
        assert_int_equal(v, 100);

        v = 7;
        b = resolve_ok(259, 2); /* 15 fields: no flush accounting (4.18..5.4) */
        assert_int_equal(canary_flushes(sysfd, &b, &v), -ENODATA);
        b = resolve_ok(7, 0); /* 11 fields (before 4.18) */
        assert_int_equal(canary_flushes(sysfd, &b, &v), -ENODATA);
        b = resolve_ok(253, 5);
        assert_int_equal(canary_flushes(sysfd, &b, &v), -EINVAL);
        b = resolve_ok(9, 1); /* md1's leaf is sda; md1's own stat is missing and unread */
        assert_int_equal(canary_flushes(sysfd, &b, &v), 0);
        assert_int_equal(v, 100);
        /* A vanished disk. */
        strcpy(b.disks[0].name, "sdq");
        assert_int_equal(canary_flushes(sysfd, &b, &v), -ENOENT);
        assert_int_equal(v, 100);
}

static void test_live_root(void **state)
{
        _cleanup_close_ int fd = -1;
        struct canary_backing b;
        struct stat st;
        struct statfs sf;
        uint64_t flushes;
        int r;

        (void)state;
        assert_int_equal(stat("/", &st), 0);
        fd = root_open("/sys");
        if (fd < 0) {
                printf("skip live check: /sys: %s\n", strerror(-fd));
                return;
        }
        r = canary_resolve(fd, st.st_dev, &b);
        if (r == -ENODEV) {
                assert_int_equal(statfs("/", &sf), 0);
                printf("skip live check: / is on an anonymous device %u:%u (f_type 0x%lx%s): %s\n",
                       major(st.st_dev), minor(st.st_dev), (unsigned long)sf.f_type,
                       sf.f_type == 0x794c7630   ? ", overlayfs"
                       : sf.f_type == 0x01021994 ? ", tmpfs"
                       : sf.f_type == 0x9123683e ? ", btrfs"
                                                 : "",
                       canary_resolve_reason(r));
                return;
        }
        assert_int_equal(r, 0);
        printf("live: / on %u:%u -> device %s (%u:%u), disks:", major(st.st_dev), minor(st.st_dev),
               b.device, b.major, b.minor);
        for (size_t i = 0; i < b.n_disks; i++)
                printf(" %s(%u:%u)", b.disks[i].name, b.disks[i].major, b.disks[i].minor);
        r = canary_flushes(fd, &b, &flushes);
        if (r == 0)
                printf("; flushes %llu\n", (unsigned long long)flushes);
        else
                printf("; flushes: %s\n", strerror(-r));
        assert_true(r == 0 || r == -ENODATA);
        assert_true(b.n_disks >= 1);
}

/* As root: a real partition maps to its disk in the real sysfs, and its disk's flush counter is
 * read. The partition is added with BLKPG (util-linux addpart), which needs no partition-table
 * parser in the kernel (this machine's has none), on a loop device with partitions enabled. */
static void test_live_loop_partition(void **state)
{
        char img[] = "/var/tmp/test_canary_target.XXXXXX", cmd[512], dev[64] = "", path[256];
        char devnum[32];
        _cleanup_close_ int sfd = -1;
        struct canary_backing b;
        unsigned ma, mi;
        uint64_t fl;
        bool found = false;
        FILE *p;
        int fd, r, rf = 0;

        (void)state;
        if (geteuid() != 0) {
                printf("skip live partition check: not root\n");
                return;
        }
        fd = mkstemp(img);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 16 << 20), 0);
        close(fd);
        snprintf(cmd, sizeof cmd, "losetup -P -f --show '%s' 2>/dev/null", img);
        p = popen(cmd, "r");
        if (!p || !fgets(dev, sizeof dev, p)) {
                if (p)
                        pclose(p);
                unlink(img);
                printf("skip live partition check: losetup -P failed\n");
                return;
        }
        pclose(p);
        dev[strcspn(dev, "\n")] = 0;
        snprintf(cmd, sizeof cmd, "addpart %s 1 2048 16384", dev);
        if (system(cmd) != 0)
                printf("addpart failed\n");
        unlink(img); /* the loop device holds the file */
        /* The partition's sysfs entry: /sys/block/loopN/loopNp1/dev. */
        snprintf(path, sizeof path, "/sys/block/%s/%sp1/dev", dev + 5, dev + 5);
        for (int i = 0; i < 50 && access(path, F_OK) < 0; i++)
                usleep(20000);
        r = read_attr_at(AT_FDCWD, path, devnum, sizeof devnum);
        if (r >= 0 && sscanf(devnum, "%u:%u", &ma, &mi) == 2) {
                sfd = root_open("/sys");
                assert_true(sfd >= 0);
                r = canary_resolve(sfd, makedev(ma, mi), &b);
                rf = r == 0 ? canary_flushes(sfd, &b, &fl) : r;
                found = true;
        }
        /* Detach before asserting, so a failure leaves no loop device behind. */
        snprintf(cmd, sizeof cmd, "losetup -d %s", dev);
        assert_int_equal(system(cmd), 0);
        unlink(img);
        if (!found) {
                printf("skip live partition check: no %s\n", path);
                return;
        }
        assert_int_equal(r, 0);
        printf("live: %sp1 (%u:%u) -> %s, disks %zu: %s; flushes %d\n", dev, ma, mi, b.device,
               b.n_disks, b.disks[0].name, rf);
        assert_string_equal(b.device, dev + 5);
        assert_int_equal(b.n_disks, 1);
        assert_string_equal(b.disks[0].name, dev + 5);
        assert_true(rf == 0 || rf == -ENODATA);
        unlink(img);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_partition_maps_to_disk),
            cmocka_unit_test(test_whole_disk_and_loop),
            cmocka_unit_test(test_dm_md_slaves),
            cmocka_unit_test(test_errors),
            cmocka_unit_test(test_flushes),
            cmocka_unit_test(test_live_root),
            cmocka_unit_test(test_live_loop_partition),
        };
        return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}
