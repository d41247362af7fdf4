/* Unit tests of privsep_request_valid() and of privsep_devio_exec()'s refusal to open the wrong node. */
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
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmptree.h"
#include "devio.h"
#include "devio_linux.h"
#include "privsep_proto.h"

static struct devio_request mkreq(uint32_t kind, const char *name, uint32_t n, const uint32_t *cmds,
                                  const uint32_t *params)
{
        struct devio_request r;

        memset(&r, 0, sizeof r);
        r.kind = kind;
        snprintf(r.name, sizeof r.name, "%s", name);
        r.n = n;
        for (uint32_t i = 0; i < n && i < DEVIO_MAX_CMDS; i++) {
                r.cmds[i].cmd = cmds[i];
                r.cmds[i].param = params ? params[i] : 0;
        }
        return r;
}

static struct devio_request one(uint32_t kind, const char *name, uint32_t cmd, uint32_t param)
{
        return mkreq(kind, name, 1, &cmd, &param);
}

static void valid_requests(void **state)
{
        (void)state;
        const uint32_t nvme[] = {DEVIO_NVME_IDENTIFY_CTRL, DEVIO_NVME_SMART_LOG};
        const uint32_t ata[] = {DEVIO_ATA_CHECK_POWER_MODE, DEVIO_ATA_IDENTIFY,
                                DEVIO_ATA_SMART_READ_DATA, DEVIO_ATA_SMART_READ_THRESHOLDS,
                                DEVIO_ATA_SMART_RETURN_STATUS};
        const uint32_t scsi[] = {DEVIO_SCSI_INQUIRY,           DEVIO_SCSI_INQUIRY_VPD,
                                 DEVIO_SCSI_INQUIRY_VPD,       DEVIO_SCSI_LOG_SENSE,
                                 DEVIO_SCSI_LOG_SENSE,         DEVIO_SCSI_LOG_SENSE,
                                 DEVIO_SCSI_READ_DEFECT_GLIST, DEVIO_SCSI_READ_DEFECT_GLIST};
        const uint32_t scsi_params[] = {0, 0x00, 0xb1, 0x0d, 0x2f, 0x0d | 0x01 << 8, 0, 5};
        struct devio_request r;

        r = mkreq(DEVIO_NVME, "nvme0", 2, nvme, NULL);
        assert_int_equal(privsep_request_valid(&r), 0);
        r = mkreq(DEVIO_NVME, "nvme12n3", 2, nvme, NULL);
        assert_int_equal(privsep_request_valid(&r), 0);
        r = mkreq(DEVIO_ATA, "sda", 5, ata, NULL);
        assert_int_equal(privsep_request_valid(&r), 0);
        r = mkreq(DEVIO_ATA, "sdaab", 1, ata, NULL);
        assert_int_equal(privsep_request_valid(&r), 0);
        r = mkreq(DEVIO_SCSI, "sdb", DEVIO_MAX_CMDS, scsi, scsi_params);
        assert_int_equal(privsep_request_valid(&r), 0);
        /* the longest name that fits */
        char longname[DEVIO_NAME_MAX];
        memset(longname, 'z', sizeof longname - 1);
        longname[0] = 's';
        longname[1] = 'd';
        longname[sizeof longname - 1] = '\0';
        r = one(DEVIO_SCSI, longname, DEVIO_SCSI_INQUIRY, 0);
        assert_int_equal(privsep_request_valid(&r), 0);
}

static void bad_kind_and_commands(void **state)
{
        (void)state;
        struct devio_request r;

        assert_int_equal(privsep_request_valid(NULL), -EINVAL);
        r = one(DEVIO_KIND_MAX, "sda", DEVIO_SCSI_INQUIRY, 0);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(0xffffffffu, "sda", DEVIO_SCSI_INQUIRY, 0);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(DEVIO_SCSI, "sda", DEVIO_CMD_MAX, 0);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(DEVIO_SCSI, "sda", 0x80000000u, 0);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        /* a command of another kind */
        r = one(DEVIO_ATA, "sda", DEVIO_NVME_SMART_LOG, 0);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(DEVIO_ATA, "sda", DEVIO_SCSI_LOG_SENSE, 0x0d);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(DEVIO_NVME, "nvme0", DEVIO_ATA_IDENTIFY, 0);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(DEVIO_SCSI, "sda", DEVIO_ATA_SMART_READ_DATA, 0);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        /* one bad command among good ones */
        const uint32_t mixed[] = {DEVIO_ATA_IDENTIFY, DEVIO_ATA_SMART_READ_DATA,
                                  DEVIO_SCSI_INQUIRY};
        r = mkreq(DEVIO_ATA, "sda", 3, mixed, NULL);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
}

static void bad_params(void **state)
{
        (void)state;
        struct devio_request r;

        r = one(DEVIO_NVME, "nvme0", DEVIO_NVME_SMART_LOG, 1);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(DEVIO_ATA, "sda", DEVIO_ATA_IDENTIFY, 0xec);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(DEVIO_SCSI, "sda", DEVIO_SCSI_INQUIRY, 1);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(DEVIO_SCSI, "sda", DEVIO_SCSI_INQUIRY_VPD, 0x100);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(DEVIO_SCSI, "sda", DEVIO_SCSI_LOG_SENSE, 0x40); /* a PC bit */
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(DEVIO_SCSI, "sda", DEVIO_SCSI_LOG_SENSE, 0x10000);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = one(DEVIO_SCSI, "sda", DEVIO_SCSI_READ_DEFECT_GLIST, 8);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
}

static void bad_counts(void **state)
{
        (void)state;
        const uint32_t c[DEVIO_MAX_CMDS] = {0};
        struct devio_request r;

        r = mkreq(DEVIO_NVME, "nvme0", 0, c, NULL);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r = mkreq(DEVIO_NVME, "nvme0", DEVIO_MAX_CMDS, c, NULL);
        assert_int_equal(privsep_request_valid(&r), 0);
        r.n = DEVIO_MAX_CMDS + 1;
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        r.n = 0xffffffffu;
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
}

static void bad_names(void **state)
{
        (void)state;
        static const char *const ata[] = {
            "",       "sd",   "sda1", "sda/b", "../sda", "sd/a", "..",    ".",
            "sda/..", "/sda", "SDA",  "sdA",   "hda",    "vda",  "loop0", "sg0",
            "nvme0",  "sda ", " sda", "sd-a",  "sda\n",  "sr0",  "dm-0",  "sda.",
        };
        static const char *const nvme[] = {
            "",         "nvme",     "nvmen1",   "nvme0n",   "nvme0n1p1", "nvme01",
            "nvme0n01", "nvme-0",   "nvme0/n1", "../nvme0", "nvme0c0n1", "ng0n1",
            "sda",      "nvme0n1 ", "NVME0",    "nvme0 ",   "nvmex",
        };
        struct devio_request r;

        for (size_t i = 0; i < sizeof ata / sizeof ata[0]; i++) {
                r = one(DEVIO_ATA, ata[i], DEVIO_ATA_IDENTIFY, 0);
                if (privsep_request_valid(&r) != -EINVAL)
                        fail_msg("ATA name \"%s\" accepted", ata[i]);
                r = one(DEVIO_SCSI, ata[i], DEVIO_SCSI_INQUIRY, 0);
                if (privsep_request_valid(&r) != -EINVAL)
                        fail_msg("SCSI name \"%s\" accepted", ata[i]);
        }
        for (size_t i = 0; i < sizeof nvme / sizeof nvme[0]; i++) {
                r = one(DEVIO_NVME, nvme[i], DEVIO_NVME_IDENTIFY_CTRL, 0);
                if (privsep_request_valid(&r) != -EINVAL)
                        fail_msg("NVMe name \"%s\" accepted", nvme[i]);
        }
        /* too long: no NUL in the whole field */
        r = one(DEVIO_ATA, "sda", DEVIO_ATA_IDENTIFY, 0);
        memset(r.name, 'a', sizeof r.name);
        r.name[0] = 's';
        r.name[1] = 'd';
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
        /* bytes after the NUL do not matter, but a NUL inside a name cuts it */
        r = one(DEVIO_ATA, "sda", DEVIO_ATA_IDENTIFY, 0);
        memcpy(r.name, "sd\0a/../x", 10);
        assert_int_equal(privsep_request_valid(&r), -EINVAL);
}

/* ---- privsep_devio_exec on a temporary dev_dir ---- */

struct devdir {
        char dir[64];
};

static int dd_setup(void **state)
{
        struct devdir *d = calloc(1, sizeof *d);

        snprintf(d->dir, sizeof d->dir, "/tmp/diskpulse-test-devio-XXXXXX");
        if (!mkdtemp(d->dir))
                return -1;
        *state = d;
        return 0;
}

static int dd_teardown(void **state)
{
        struct devdir *d = *state;

        if (test_remove_tree(d->dir) < 0)
                return -1;
        free(d);
        return 0;
}

static int exec_one(const char *dir, uint32_t kind, const char *name, uint32_t cmd,
                    struct devio_response *resp)
{
        struct devio_request r = one(kind, name, cmd, 0);
        int rc = privsep_devio_exec(dir, &r, resp);

        assert_int_equal(rc, 0);
        assert_int_equal(resp->n, 1);
        return resp->r[0].err;
}

static void path_in(const struct devdir *d, const char *name, char *buf, size_t size)
{
        snprintf(buf, size, "%s/%s", d->dir, name);
}

static void exec_refuses_invalid(void **state)
{
        struct devdir *d = *state;
        static struct devio_response resp;
        struct devio_request r = one(DEVIO_ATA, "../sda", DEVIO_ATA_IDENTIFY, 0);

        resp.n = 77;
        assert_int_equal(privsep_devio_exec(d->dir, &r, &resp), -EINVAL);
        assert_int_equal(resp.n, 77); /* untouched */
        r = one(DEVIO_ATA, "sda", DEVIO_NVME_SMART_LOG, 0);
        assert_int_equal(privsep_devio_exec(d->dir, &r, &resp), -EINVAL);
}

static void exec_missing(void **state)
{
        struct devdir *d = *state;
        static struct devio_response resp;
        const uint32_t cmds[] = {DEVIO_ATA_IDENTIFY, DEVIO_ATA_SMART_READ_DATA};
        struct devio_request r = mkreq(DEVIO_ATA, "sdq", 2, cmds, NULL);
        char missing[96];

        /* the open failure stops the request: one result */
        assert_int_equal(privsep_devio_exec(d->dir, &r, &resp), 0);
        assert_int_equal(resp.n, 1);
        assert_int_equal(resp.r[0].err, -ENOENT);
        assert_int_equal(resp.r[0].len, 0);
        path_in(d, "nonexistent", missing, sizeof missing);
        assert_int_equal(exec_one(missing, DEVIO_NVME, "nvme0", DEVIO_NVME_SMART_LOG, &resp),
                         -ENOENT);
}

static void exec_refuses_file_and_symlink(void **state)
{
        struct devdir *d = *state;
        static struct devio_response resp;
        char p[128];
        int fd;

        path_in(d, "sda", p, sizeof p);
        fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(exec_one(d->dir, DEVIO_ATA, "sda", DEVIO_ATA_IDENTIFY, &resp), -ENODEV);
        assert_int_equal(exec_one(d->dir, DEVIO_SCSI, "sda", DEVIO_SCSI_INQUIRY, &resp), -ENODEV);

        /* symlinks to a character device, a block device and a regular file */
        path_in(d, "nvme0", p, sizeof p);
        assert_int_equal(symlink("/dev/null", p), 0);
        assert_int_equal(exec_one(d->dir, DEVIO_NVME, "nvme0", DEVIO_NVME_IDENTIFY_CTRL, &resp),
                         -ENODEV);
        path_in(d, "sdb", p, sizeof p);
        assert_int_equal(symlink("/dev/loop0", p), 0);
        assert_int_equal(exec_one(d->dir, DEVIO_ATA, "sdb", DEVIO_ATA_IDENTIFY, &resp), -ENODEV);
        path_in(d, "sdc", p, sizeof p);
        assert_int_equal(symlink("sda", p), 0);
        assert_int_equal(exec_one(d->dir, DEVIO_SCSI, "sdc", DEVIO_SCSI_INQUIRY, &resp), -ENODEV);
        /* a directory and a FIFO (whose open would block) */
        path_in(d, "sdd", p, sizeof p);
        assert_int_equal(mkdir(p, 0755), 0);
        assert_int_equal(exec_one(d->dir, DEVIO_ATA, "sdd", DEVIO_ATA_IDENTIFY, &resp), -ENODEV);
        path_in(d, "sde", p, sizeof p);
        assert_int_equal(mkfifo(p, 0600), 0);
        assert_int_equal(exec_one(d->dir, DEVIO_ATA, "sde", DEVIO_ATA_IDENTIFY, &resp), -ENODEV);
        /* the dev_dir itself through a symlink is fine (it is configuration, not a name) */
}

/* mknod needs CAP_MKNOD and a filesystem that allows device nodes. */
static bool try_mknod(const char *path, mode_t mode, dev_t dev)
{
        if (mknod(path, mode, dev) == 0)
                return true;
        print_message("skipped: mknod %s: %s\n", path, strerror(errno));
        return false;
}

static void exec_refuses_wrong_node(void **state)
{
        struct devdir *d = *state;
        static struct devio_response resp;
        char p[128];

        /* a loop device node named like a SCSI disk: block, right name, wrong device */
        path_in(d, "sdf", p, sizeof p);
        if (!try_mknod(p, S_IFBLK | 0600, makedev(7, 0)))
                skip();
        assert_int_equal(exec_one(d->dir, DEVIO_ATA, "sdf", DEVIO_ATA_IDENTIFY, &resp), -ENODEV);
        assert_int_equal(exec_one(d->dir, DEVIO_SCSI, "sdf", DEVIO_SCSI_INQUIRY, &resp), -ENODEV);
        /* ... and named like an NVMe namespace */
        path_in(d, "nvme0n1", p, sizeof p);
        assert_true(try_mknod(p, S_IFBLK | 0600, makedev(7, 0)));
        assert_int_equal(exec_one(d->dir, DEVIO_NVME, "nvme0n1", DEVIO_NVME_SMART_LOG, &resp),
                         -ENODEV);
        /* /dev/null's numbers named like an NVMe controller (char, wrong device) */
        path_in(d, "nvme1", p, sizeof p);
        assert_true(try_mknod(p, S_IFCHR | 0600, makedev(1, 3)));
        assert_int_equal(exec_one(d->dir, DEVIO_NVME, "nvme1", DEVIO_NVME_IDENTIFY_CTRL, &resp),
                         -ENODEV);
        /* a block node where a character device is expected, and the reverse */
        path_in(d, "nvme2", p, sizeof p);
        assert_true(try_mknod(p, S_IFBLK | 0600, makedev(7, 0)));
        assert_int_equal(exec_one(d->dir, DEVIO_NVME, "nvme2", DEVIO_NVME_IDENTIFY_CTRL, &resp),
                         -ENODEV);
        path_in(d, "sdg", p, sizeof p);
        assert_true(try_mknod(p, S_IFCHR | 0600, makedev(1, 3)));
        assert_int_equal(exec_one(d->dir, DEVIO_SCSI, "sdg", DEVIO_SCSI_INQUIRY, &resp), -ENODEV);
}

/* The wire format: encode, decode, and the checks of the decoder. */
static void proto_roundtrip(void **state)
{
        (void)state;
        static uint8_t buf[PRIVSEP_PROTO_RESPONSE_MAX];
        static struct devio_response resp, back;
        struct devio_request req = one(DEVIO_SCSI, "sdb", DEVIO_SCSI_LOG_SENSE, 0x2f), req2;
        struct privsep_proto_hdr h;
        int len;

        len = privsep_proto_encode_request(42, &req, buf, sizeof buf);
        assert_int_equal(len, (int)PRIVSEP_PROTO_REQUEST_SIZE);
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)len, &h), 0);
        assert_int_equal(h.type, PRIVSEP_PROTO_REQUEST);
        assert_int_equal(h.id, 42);
        assert_int_equal(privsep_proto_decode_request(&h, buf, (size_t)len, &req2), 0);
        assert_memory_equal(&req, &req2, sizeof req);
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)len - 1, &h), -EBADMSG);
        assert_int_equal(privsep_proto_encode_request(0, &req, buf, sizeof buf), -EINVAL);

        /* an invalid request is framed fine but refused with -EINVAL (answerable) */
        req.cmds[0].param = 0x40;
        len = privsep_proto_encode_request(7, &req, buf, sizeof buf);
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)len, &h), 0);
        assert_int_equal(privsep_proto_decode_request(&h, buf, (size_t)len, &req2), -EINVAL);

        memset(&resp, 0, sizeof resp);
        resp.n = 2;
        resp.r[0].len = 4;
        memcpy(resp.r[0].data, "abcd", 4);
        resp.r[1].err = -EACCES;
        len = privsep_proto_encode_response(9, 0, &resp, buf, sizeof buf);
        assert_int_equal(len, (int)(PRIVSEP_PROTO_HDR_SIZE + 4 + 2 * sizeof(struct devio_result)));
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)len, &h), 0);
        assert_int_equal(privsep_proto_decode_response(&h, buf, (size_t)len, &back), 0);
        assert_memory_equal(&resp, &back, sizeof resp);
        /* a result claiming more data than fits */
        resp.r[1].len = DEVIO_DATA_MAX + 1;
        len = privsep_proto_encode_response(9, 0, &resp, buf, sizeof buf);
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)len, &h), 0);
        assert_int_equal(privsep_proto_decode_response(&h, buf, (size_t)len, &back), -EBADMSG);
        /* an error answer has no payload */
        len = privsep_proto_encode_response(9, -EAGAIN, NULL, buf, sizeof buf);
        assert_int_equal(len, (int)PRIVSEP_PROTO_HDR_SIZE);
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)len, &h), 0);
        assert_int_equal(h.status, -EAGAIN);
        assert_int_equal(privsep_proto_encode_response(9, 5, NULL, buf, sizeof buf), -EINVAL);
        /* wrong magic, version, type */
        len = privsep_proto_encode_response(9, -EIO, NULL, buf, sizeof buf);
        buf[0] ^= 1;
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)len, &h), -EBADMSG);
        buf[0] ^= 1;
        buf[4] = 2;
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)len, &h), -EBADMSG);
        buf[4] = 1;
        buf[6] = 3;
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)len, &h), -EBADMSG);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(valid_requests),
            cmocka_unit_test(bad_kind_and_commands),
            cmocka_unit_test(bad_params),
            cmocka_unit_test(bad_counts),
            cmocka_unit_test(bad_names),
            cmocka_unit_test_setup_teardown(exec_refuses_invalid, dd_setup, dd_teardown),
            cmocka_unit_test_setup_teardown(exec_missing, dd_setup, dd_teardown),
            cmocka_unit_test_setup_teardown(exec_refuses_file_and_symlink, dd_setup, dd_teardown),
            cmocka_unit_test_setup_teardown(exec_refuses_wrong_node, dd_setup, dd_teardown),
            cmocka_unit_test(proto_roundtrip),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
