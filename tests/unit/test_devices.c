/* Unit tests of device identity: udev database parser, \xNN decoding, the file source on a tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmptree.h"
#include "devices.h"
#include "fsroot.h"
#include "util.h"

/* device_udev_parse: collects properties as "KEY=VALUE" strings. */
struct props {
        char kv[32][160];
        size_t n;
};

static void collect(const char *key, size_t klen, const char *value, size_t vlen, void *ud)
{
        struct props *p = ud;

        assert_true(p->n < ARRAY_SIZE(p->kv));
        assert_true(klen + vlen + 2 <= sizeof p->kv[0]);
        snprintf(p->kv[p->n++], sizeof p->kv[0], "%.*s=%.*s", (int)klen, key, (int)vlen, value);
}

/* A udev database file as systemd 252 writes it for a SATA SSD. */
static const char udev_sata[] =
    "S:disk/by-id/ata-Samsung_SSD_860_EVO_500GB_S3Z1NB0K123456A\n"
    "S:disk/by-path/pci-0000:00:17.0-ata-1\n"
    "S:disk/by-id/wwn-0x5002538e40a1b2c3\n"
    "W:19\n"
    "I:1234567\n"
    "E:ID_ATA=1\n"
    "E:ID_TYPE=disk\n"
    "E:ID_BUS=ata\n"
    "E:ID_MODEL=Samsung_SSD_860_EVO_500GB\n"
    "E:ID_MODEL_ENC=Samsung\\x20SSD\\x20860\\x20EVO\\x20500GB\\x20\\x20\\x20\\x20\n"
    "E:ID_REVISION=RVT04B6Q\n"
    "E:ID_SERIAL=Samsung_SSD_860_EVO_500GB_S3Z1NB0K123456A\n"
    "E:ID_SERIAL_SHORT=S3Z1NB0K123456A\n"
    "E:ID_WWN=0x5002538e40a1b2c3\n"
    "E:ID_PATH=pci-0000:00:17.0-ata-1\n"
    "E:ID_PATH_TAG=pci-0000_00_17_0-ata-1\n"
    "E:ID_PART_TABLE_TYPE=gpt\n"
    "E:DEVLINKS=/dev/disk/by-id/a=b /dev/disk/by-path/c\n"
    "E:ID_FS_TYPE=\n"
    "G:systemd\n"
    "Q:systemd\n"
    "V:1\n";

static void test_udev_data_parse_real(void **state)
{
        struct props p = {.n = 0};
        (void)state;

        assert_int_equal(device_udev_parse(udev_sata, strlen(udev_sata), collect, &p), 14);
        assert_int_equal(p.n, 14);
        assert_string_equal(p.kv[0], "ID_ATA=1");
        assert_string_equal(p.kv[3], "ID_MODEL=Samsung_SSD_860_EVO_500GB");
        assert_string_equal(p.kv[4],
                            "ID_MODEL_ENC=Samsung\\x20SSD\\x20860\\x20EVO\\x20500GB\\x20\\x20\\x20"
                            "\\x20");
        assert_string_equal(p.kv[7], "ID_SERIAL_SHORT=S3Z1NB0K123456A");
        assert_string_equal(p.kv[8], "ID_WWN=0x5002538e40a1b2c3");
        /* the first '=' splits; the value keeps the others */
        assert_string_equal(p.kv[12], "DEVLINKS=/dev/disk/by-id/a=b /dev/disk/by-path/c");
        /* an empty value */
        assert_string_equal(p.kv[13], "ID_FS_TYPE=");
}

static void test_udev_data_parse_edges(void **state)
{
        struct props p = {.n = 0};
        const char no_nl[] = "E:A=1\nE:B=2";
        const char cut[] = "E:A=1\nE:B=2\nE:C=3\n";
        (void)state;

        /* empty input and blank lines */
        assert_int_equal(device_udev_parse("", 0, collect, &p), 0);
        assert_int_equal(device_udev_parse("\n\n", 2, collect, &p), 0);
        assert_int_equal(p.n, 0);

        /* no trailing newline */
        assert_int_equal(device_udev_parse(no_nl, strlen(no_nl), collect, &p), 2);
        assert_string_equal(p.kv[1], "B=2");

        /* only len bytes are read: "E:B" is cut before its '=' */
        p.n = 0;
        assert_int_equal(device_udev_parse(cut, 9, collect, &p), -EINVAL);
        assert_int_equal(p.n, 1);
        assert_string_equal(p.kv[0], "A=1");
        p.n = 0;
        assert_int_equal(device_udev_parse(cut, 11, collect, &p), 2);
        assert_string_equal(p.kv[1], "B=2");
}

static void test_udev_data_parse_malformed(void **state)
{
        static const char *const bad[] = {
            "garbage\n", "E\n", "E:\n", "E:NOEQUALS\n", "E:=novalue\n", "EE:A=1\n", ":E\n",
        };
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct props p = {.n = 0};
                char buf[128];
                /* good properties around the bad line are still reported */
                snprintf(buf, sizeof buf, "E:BEFORE=1\n%sE:AFTER=2\n", bad[i]);
                int r = device_udev_parse(buf, strlen(buf), collect, &p);
                if (r != -EINVAL)
                        fail_msg("\"%s\": got %d, want -EINVAL", bad[i], r);
                assert_int_equal(p.n, 2);
                assert_string_equal(p.kv[0], "BEFORE=1");
                assert_string_equal(p.kv[1], "AFTER=2");
        }

        /* other record types are skipped, not errors */
        struct props p = {.n = 0};
        const char ok[] = "S:x\nL:0\nW:1\nI:2\nG:g\nQ:q\nV:1\nZ:unknown\n";
        assert_int_equal(device_udev_parse(ok, strlen(ok), collect, &p), 0);
        assert_int_equal(p.n, 0);
}

static void decode(const char *in, char *out, size_t size)
{
        device_udev_decode(in, strlen(in), out, size);
}

static void test_udev_decode(void **state)
{
        char out[DEV_STR_MAX];
        (void)state;

        decode("Samsung\\x20SSD\\x20860", out, sizeof out);
        assert_string_equal(out, "Samsung SSD 860");
        /* ID_MODEL_ENC pads with \x20: trimmed */
        decode("ST4000NM0035-1V4\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20", out, sizeof out);
        assert_string_equal(out, "ST4000NM0035-1V4");
        decode("   padded both sides \t", out, sizeof out);
        assert_string_equal(out, "padded both sides");
        decode("\\x20\\x20lead", out, sizeof out);
        assert_string_equal(out, "lead");
        /* upper and lower case hex */
        decode("\\x4A\\x4a\\x2f\\x5c", out, sizeof out);
        assert_string_equal(out, "JJ/\\");
        /* not an escape: kept as is */
        decode("a\\xZZb", out, sizeof out);
        assert_string_equal(out, "a\\xZZb");
        decode("a\\x2", out, sizeof out);
        assert_string_equal(out, "a\\x2");
        decode("a\\y", out, sizeof out);
        assert_string_equal(out, "a\\y");
        decode("end\\", out, sizeof out);
        assert_string_equal(out, "end\\");
        /* an escape that ends the input exactly */
        decode("x\\x41", out, sizeof out);
        assert_string_equal(out, "xA");
        decode("", out, sizeof out);
        assert_string_equal(out, "");
        decode("    ", out, sizeof out);
        assert_string_equal(out, "");
        decode("\\x20", out, sizeof out);
        assert_string_equal(out, "");
}

static void test_udev_decode_bounds(void **state)
{
        char out[8];
        const char in[] = "ABC\\x20DEFGH";
        (void)state;

        /* cut to size - 1 and terminated */
        memset(out, 'Z', sizeof out);
        decode("0123456789", out, sizeof out);
        assert_string_equal(out, "0123456");
        memset(out, 'Z', sizeof out);
        decode("0123456789", out, 1);
        assert_string_equal(out, "");
        assert_int_equal(out[1], 'Z');
        /* size 0 writes nothing */
        memset(out, 'Z', sizeof out);
        device_udev_decode("abc", 3, out, 0);
        assert_int_equal(out[0], 'Z');
        /* only len bytes of the input are read */
        device_udev_decode(in, 6, out, sizeof out);
        assert_string_equal(out, "ABC\\x2");
        device_udev_decode(in, 7, out, sizeof out);
        assert_string_equal(out, "ABC"); /* the decoded space is trailing: trimmed */
        device_udev_decode(in, 8, out, sizeof out);
        assert_string_equal(out, "ABC D");
}

/* --- The file source on a fixture tree --- */

struct tree {
        char root[64];
        int sysfs_fd, udev_fd;
};

static void put(const char *root, const char *rel, const char *content)
{
        char path[512], *p;
        int fd;

        snprintf(path, sizeof path, "%s/%s", root, rel);
        for (p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
                *p = 0;
                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                        fail_msg("mkdir %s: %s", path, strerror(errno));
                *p = '/';
        }
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                fail_msg("open %s: %s", path, strerror(errno));
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
        close(fd);
}

static int tree_setup(void **state)
{
        struct tree *t = calloc(1, sizeof(*t));
        char dir[96];

        if (!t)
                return -1;
        snprintf(t->root, sizeof t->root, "/tmp/diskpulse-test-devices-XXXXXX");
        if (!mkdtemp(t->root))
                return -1;

        /* sda: SATA disk with a full udev record; sysfs has a model too (udev must win) */
        put(t->root, "sys/block/sda/queue/rotational", "1\n");
        put(t->root, "sys/block/sda/queue/write_cache", "write back\n");
        put(t->root, "sys/block/sda/device/model", "ST4000NM0035-1V4        \n");
        put(t->root, "sys/block/sda/device/rev", "TN03\n");
        put(t->root, "udev/b8:0",
            "S:disk/by-id/ata-ST4000NM0035-1V4107_ZC1ABCDE\n"
            "I:1000\n"
            "E:ID_MODEL=ST4000NM0035-1V4107\n"
            "E:ID_MODEL_ENC=ST4000NM0035-1V4107\\x20\\x20\\x20\\x20\n"
            "E:ID_SERIAL=ST4000NM0035-1V4107_ZC1ABCDE\n"
            "E:ID_SERIAL_SHORT=ZC1ABCDE\n"
            "E:SCSI_IDENT_SERIAL=ZC1ABCDE0000C9123ABC\n"
            "E:ID_WWN=0x5000c500a1b2c3d4\n"
            "E:ID_PATH=pci-0000:00:1f.2-ata-1.0\n"
            "E:ID_REVISION=TN04\n"
            "G:systemd\n");

        /* sdb: no SCSI_IDENT_SERIAL, no ID_MODEL_ENC; write through, SSD */
        put(t->root, "sys/block/sdb/queue/rotational", "0\n");
        put(t->root, "sys/block/sdb/queue/write_cache", "write through\n");
        put(t->root, "udev/b8:16",
            "E:ID_SERIAL=QEMU_HARDDISK_QM00001\n"
            "E:ID_SERIAL_SHORT=QM00001\n"
            "E:ID_MODEL=QEMU_HARDDISK\n");

        /* sdc: ID_SERIAL only; a malformed line does not lose the good ones */
        put(t->root, "sys/block/sdc/queue/rotational", "1\n");
        put(t->root, "udev/b8:32", "E:ID_SERIAL=only-long-serial\nbroken line\nE:ID_PATH=p\n");

        /* nvme0n1: no udev record; everything from sysfs */
        put(t->root, "sys/block/nvme0n1/queue/rotational", "0\n");
        put(t->root, "sys/block/nvme0n1/queue/write_cache", "write back\n");
        put(t->root, "sys/block/nvme0n1/device/model",
            "Samsung SSD 970 EVO Plus 1TB            \n");
        put(t->root, "sys/block/nvme0n1/device/serial", "S4EWNX0R123456A     \n");
        put(t->root, "sys/block/nvme0n1/device/firmware_rev", "2B2QEXM7\n");
        put(t->root, "sys/block/nvme0n1/wwid", "eui.0025385391b2c3d4\n");

        /* vda: virtio, serial at the block level, device/wwid */
        put(t->root, "sys/block/vda/serial", "virtio-serial-1\n");
        put(t->root, "sys/block/vda/device/wwid", "t10.VIRTIO\n");
        put(t->root, "sys/block/vda/queue/rotational", "2\n");
        put(t->root, "sys/block/vda/queue/write_cache", "write around\n");

        /* md membership: sda holds md1 itself and md0 through sda1; sdb's sdb1 is in md0 and a
         * dm device holds sdb (not an md array: not a set) */
        put(t->root, "sys/block/sda/holders/md1", "");
        put(t->root, "sys/block/sda/sda1/holders/md0", "");
        put(t->root, "sys/block/sdb/sdb1/holders/md0", "");
        put(t->root, "sys/block/sdb/holders/dm-0", "");

        /* loop0: nothing at all */
        put(t->root, "sys/block/loop0/dev", "7:0\n");

        snprintf(dir, sizeof dir, "%s/sys", t->root);
        t->sysfs_fd = root_open(dir);
        snprintf(dir, sizeof dir, "%s/udev", t->root);
        t->udev_fd = root_open(dir);
        if (t->sysfs_fd < 0 || t->udev_fd < 0)
                return -1;
        *state = t;
        return 0;
}

static int tree_teardown(void **state)
{
        struct tree *t = *state;

        close(t->sysfs_fd);
        close(t->udev_fd);
        if (test_remove_tree(t->root) < 0)
                return -1;
        free(t);
        return 0;
}

static void lookup(struct devsrc *src, const char *name, unsigned major, unsigned minor,
                   struct device_info *info)
{
        memset(info, 0x55, sizeof(*info));
        assert_int_equal(src->ops->lookup(src, name, major, minor, info), 0);
}

static void test_files_full_udev_record(void **state)
{
        struct tree *t = *state;
        struct devsrc *src = devsrc_files_new(t->sysfs_fd, t->udev_fd);
        struct device_info info;

        lookup(src, "sda", 8, 0, &info);
        /* ID_MODEL_ENC decoded and trimmed, before ID_MODEL and sysfs */
        assert_string_equal(info.model, "ST4000NM0035-1V4107");
        /* SCSI_IDENT_SERIAL > ID_SERIAL_SHORT > ID_SERIAL */
        assert_string_equal(info.serial, "ZC1ABCDE0000C9123ABC");
        assert_string_equal(info.wwn, "0x5000c500a1b2c3d4");
        assert_string_equal(info.path, "pci-0000:00:1f.2-ata-1.0");
        /* udev's revision wins over sysfs' device/rev */
        assert_string_equal(info.revision, "TN04");
        assert_int_equal(info.rotational, 1);
        assert_string_equal(info.write_cache, "write back");
        devsrc_free(src);
}

static void test_files_serial_precedence(void **state)
{
        struct tree *t = *state;
        struct devsrc *src = devsrc_files_new(t->sysfs_fd, t->udev_fd);
        struct device_info info;

        lookup(src, "sdb", 8, 16, &info);
        assert_string_equal(info.serial, "QM00001");
        assert_string_equal(info.model, "QEMU_HARDDISK");
        assert_string_equal(info.wwn, "");
        assert_string_equal(info.path, "");
        assert_string_equal(info.revision, "");
        assert_int_equal(info.rotational, 0);
        assert_string_equal(info.write_cache, "write through");

        lookup(src, "sdc", 8, 32, &info);
        assert_string_equal(info.serial, "only-long-serial");
        assert_string_equal(info.path, "p");
        assert_string_equal(info.model, "");
        assert_int_equal(info.rotational, 1);
        assert_string_equal(info.write_cache, "");
        devsrc_free(src);
}

static void test_files_sysfs_fallback(void **state)
{
        struct tree *t = *state;
        struct devsrc *src = devsrc_files_new(t->sysfs_fd, t->udev_fd);
        struct device_info info;

        /* no b259:0 in the udev directory */
        lookup(src, "nvme0n1", 259, 0, &info);
        assert_string_equal(info.model, "Samsung SSD 970 EVO Plus 1TB");
        assert_string_equal(info.serial, "S4EWNX0R123456A");
        assert_string_equal(info.wwn, "eui.0025385391b2c3d4");
        assert_string_equal(info.revision, "2B2QEXM7");
        assert_string_equal(info.path, "");
        assert_int_equal(info.rotational, 0);
        assert_string_equal(info.write_cache, "write back");
        assert_string_equal(info.sets, "");

        lookup(src, "vda", 253, 0, &info);
        assert_string_equal(info.serial, "virtio-serial-1");
        assert_string_equal(info.wwn, "t10.VIRTIO");
        assert_string_equal(info.model, "");
        /* values outside the documented sets are unknown */
        assert_int_equal(info.rotational, -1);
        assert_string_equal(info.write_cache, "");
        devsrc_free(src);
}

/* The md arrays holding a disk or its partitions, sorted; other holders are not sets; a list
 * longer than the buffer is cut at an array name; the stamp moves when an array is assembled. */
static void test_device_sets(void **state)
{
        struct tree *t = *state;
        struct devsrc *src = devsrc_files_new(t->sysfs_fd, t->udev_fd);
        struct device_info info;
        char buf[8], path[256];
        uint64_t before, after;

        lookup(src, "sda", 8, 0, &info);
        assert_string_equal(info.sets, "md0,md1");
        lookup(src, "sdb", 8, 16, &info);
        assert_string_equal(info.sets, "md0");
        lookup(src, "loop0", 7, 0, &info);
        assert_string_equal(info.sets, "");
        device_sets(t->sysfs_fd, "sda", buf, sizeof buf);
        assert_string_equal(buf, "md0,md1");
        device_sets(t->sysfs_fd, "sda", buf, 5);
        assert_string_equal(buf, "md0");
        device_sets(t->sysfs_fd, "nosuchdisk", buf, sizeof buf);
        assert_string_equal(buf, "");

        before = device_stamp(t->sysfs_fd, t->udev_fd, NULL, "sdc", 8, 32);
        put(t->root, "sys/block/sdc/holders/md2", "");
        after = device_stamp(t->sysfs_fd, t->udev_fd, NULL, "sdc", 8, 32);
        assert_true(before != after);
        snprintf(path, sizeof path, "%s/sys/block/sdc/holders/md2", t->root);
        assert_int_equal(unlink(path), 0);
        assert_true(device_stamp(t->sysfs_fd, t->udev_fd, NULL, "sdc", 8, 32) == before);
        devsrc_free(src);
}

static void test_files_nothing_known(void **state)
{
        struct tree *t = *state;
        struct devsrc *src = devsrc_files_new(t->sysfs_fd, t->udev_fd);
        struct device_info info;
        struct dev_event ev;

        lookup(src, "loop0", 7, 0, &info);
        assert_string_equal(info.model, "");
        assert_string_equal(info.serial, "");
        assert_string_equal(info.wwn, "");
        assert_string_equal(info.path, "");
        assert_string_equal(info.revision, "");
        assert_int_equal(info.rotational, -1);
        assert_string_equal(info.write_cache, "");

        /* a device that is not in sysfs at all */
        lookup(src, "sdq", 65, 0, &info);
        assert_string_equal(info.model, "");
        assert_int_equal(info.rotational, -1);

        /* the file source has no hotplug monitor */
        assert_int_equal(src->ops->monitor_fd(src), -1);
        assert_int_equal(src->ops->receive(src, &ev), 0);
        assert_null(devsrc_free(src));
        assert_null(devsrc_free(NULL));
}

static void test_files_without_udev_dir(void **state)
{
        struct tree *t = *state;
        struct devsrc *src = devsrc_files_new(t->sysfs_fd, -1);
        struct device_info info;

        /* the udev record is not read: sysfs fallbacks for sda */
        lookup(src, "sda", 8, 0, &info);
        assert_string_equal(info.model, "ST4000NM0035-1V4");
        assert_string_equal(info.revision, "TN03");
        assert_string_equal(info.serial, "");
        assert_int_equal(info.rotational, 1);
        devsrc_free(src);
}

/* device_info_fill with a getter: a fixed table. */
static const char *table_get(const char *key, void *ud)
{
        const char *const *kv = ud;

        for (size_t i = 0; kv[i]; i += 2)
                if (strcmp(kv[i], key) == 0)
                        return kv[i + 1];
        return NULL;
}

static void test_files_stamp(void **state)
{
        struct tree *t = *state;
        struct devsrc *src = devsrc_files_new(t->sysfs_fd, t->udev_fd);
        uint64_t a = src->ops->stamp(src, "sda", 8, 0), b = src->ops->stamp(src, "sdb", 8, 16);
        struct timespec later[2] = {{.tv_sec = 1700000000}, {.tv_sec = 1700000000}};
        char path[128];

        /* the same while nothing changes, and another device's is another */
        assert_true(src->ops->stamp(src, "sda", 8, 0) == a);
        assert_true(a != b);
        /* the write cache mode switched by hand (no uevent) */
        put(t->root, "sys/block/sda/queue/write_cache", "write through\n");
        assert_true(src->ops->stamp(src, "sda", 8, 0) != a);
        a = src->ops->stamp(src, "sda", 8, 0);
        /* rotational is not watched: it comes with the device's events */
        put(t->root, "sys/block/sda/queue/rotational", "0\n");
        assert_true(src->ops->stamp(src, "sda", 8, 0) == a);
        /* udev rewrote its record (a new file, or the same one touched) */
        put(t->root, "udev/b8:0", "E:ID_MODEL=other\n");
        assert_true(src->ops->stamp(src, "sda", 8, 0) != a);
        a = src->ops->stamp(src, "sda", 8, 0);
        snprintf(path, sizeof path, "%s/udev/b8:0", t->root);
        assert_int_equal(utimensat(AT_FDCWD, path, later, 0), 0);
        assert_true(src->ops->stamp(src, "sda", 8, 0) != a);
        /* a device without any of it still has one, and it is stable */
        assert_true(src->ops->stamp(src, "loop0", 7, 0) == src->ops->stamp(src, "loop0", 7, 0));
        devsrc_free(src);
}

static void test_device_info_fill(void **state)
{
        struct tree *t = *state;
        struct device_info info;
        const char *only_model[] = {"ID_MODEL", "Disk_Model", NULL};
        const char *enc_empty[] = {"ID_MODEL_ENC", "\\x20\\x20", "ID_MODEL", "Fallback", NULL};
        const char *long_serial[] = {
            "ID_SERIAL",
            "0123456789012345678901234567890123456789012345678901234567890123456789"
            "0123456789012345678901234567890123456789012345678901234567890123456789",
            NULL};

        device_info_fill(&info, t->sysfs_fd, "nvme0n1", table_get, (void *)only_model);
        /* udev beats sysfs for the model; the rest still comes from sysfs */
        assert_string_equal(info.model, "Disk_Model");
        assert_string_equal(info.serial, "S4EWNX0R123456A");

        /* an ID_MODEL_ENC of only spaces is empty: the next source is used */
        device_info_fill(&info, t->sysfs_fd, "loop0", table_get, (void *)enc_empty);
        assert_string_equal(info.model, "Fallback");

        /* cut to DEV_STR_MAX - 1 */
        device_info_fill(&info, t->sysfs_fd, "loop0", table_get, (void *)long_serial);
        assert_int_equal(strlen(info.serial), DEV_STR_MAX - 1);
        assert_memory_equal(info.serial, long_serial[1], DEV_STR_MAX - 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_files_stamp, tree_setup, tree_teardown),
            cmocka_unit_test(test_udev_data_parse_real),
            cmocka_unit_test(test_udev_data_parse_edges),
            cmocka_unit_test(test_udev_data_parse_malformed),
            cmocka_unit_test(test_udev_decode),
            cmocka_unit_test(test_udev_decode_bounds),
            cmocka_unit_test(test_files_full_udev_record),
            cmocka_unit_test(test_files_serial_precedence),
            cmocka_unit_test(test_files_sysfs_fallback),
            cmocka_unit_test(test_device_sets),
            cmocka_unit_test(test_files_nothing_known),
            cmocka_unit_test(test_files_without_udev_dir),
            cmocka_unit_test(test_device_info_fill),
        };
        return cmocka_run_group_tests(tests, tree_setup, tree_teardown);
}
