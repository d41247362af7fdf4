/* Runs a devio request with Linux ioctls: NVMe admin commands and SG_IO (ATA PASS-THROUGH(16),
 * SCSI INQUIRY / LOG SENSE / READ DEFECT DATA), each command a fixed CDB chosen by enum. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <linux/nvme_ioctl.h>
#include <scsi/sg.h>

#include "devio_linux.h"

/* Every ioctl gets this limit: the NVMe driver and the SCSI midlayer abort the command after it
 * (the caller's own timeout is enforced by the privsep client, not here). */
#define DEVIO_IOCTL_TIMEOUT_MS 10000u

/* SAM-5 status, for the two-step LOG SENSE. */
#define SCSI_STATUS_GOOD 0x00

/* Where the kernel names a device number: /sys/dev/{block,char}/MAJ:MIN is a symlink whose last
 * component is the kernel name (Documentation/ABI/stable/sysfs-dev). */
#define SYSFS_DEV "/sys/dev"

_Static_assert(sizeof(struct devio_request) == DEVIO_NAME_MAX + 8 + DEVIO_MAX_CMDS * 8,
               "struct devio_request has no padding (it is sent as bytes)");
_Static_assert(sizeof(struct devio_result) == 80 + DEVIO_DATA_MAX,
               "struct devio_result has no padding (it is sent as bytes)");

/* Consumes [0-9]+ without a leading zero (kernel instance numbers never have one). */
static bool eat_number(const char **p)
{
        const char *s = *p;

        if (*s < '0' || *s > '9')
                return false;
        if (*s == '0' && s[1] >= '0' && s[1] <= '9')
                return false;
        while (*s >= '0' && *s <= '9')
                s++;
        *p = s;
        return true;
}

/* "nvme<N>" (controller, *ret_char = true) or "nvme<N>n<M>" (namespace block device). */
static bool nvme_name(const char *name, bool *ret_char)
{
        const char *p = name;

        if (strncmp(p, "nvme", 4) != 0)
                return false;
        p += 4;
        if (!eat_number(&p))
                return false;
        if (*p == '\0') {
                *ret_char = true;
                return true;
        }
        if (*p++ != 'n' || !eat_number(&p) || *p != '\0')
                return false;
        *ret_char = false;
        return true;
}

/* "sd[a-z]+": a whole SCSI disk (partitions end in a digit). */
static bool sd_name(const char *name)
{
        if (strncmp(name, "sd", 2) != 0 || name[2] == '\0')
                return false;
        for (const char *p = name + 2; *p; p++)
                if (*p < 'a' || *p > 'z')
                        return false;
        return true;
}

/* The name's shape for the kind; *ret_char says which node type it must be. */
static bool name_valid(uint32_t kind, const char *name, bool *ret_char)
{
        switch (kind) {
        case DEVIO_NVME:
                return nvme_name(name, ret_char);
        case DEVIO_ATA:
        case DEVIO_SCSI:
                *ret_char = false;
                return sd_name(name);
        default:
                return false;
        }
}

/* The kind a command belongs to, and whether param is in range for it. */
static bool cmd_valid(uint32_t kind, uint32_t cmd, uint32_t param)
{
        switch (cmd) {
        case DEVIO_NVME_IDENTIFY_CTRL:
        case DEVIO_NVME_SMART_LOG:
                return kind == DEVIO_NVME && param == 0;
        case DEVIO_ATA_CHECK_POWER_MODE:
        case DEVIO_ATA_IDENTIFY:
        case DEVIO_ATA_SMART_READ_DATA:
        case DEVIO_ATA_SMART_READ_THRESHOLDS:
        case DEVIO_ATA_SMART_RETURN_STATUS:
                return kind == DEVIO_ATA && param == 0;
        case DEVIO_SCSI_INQUIRY:
                return kind == DEVIO_SCSI && param == 0;
        case DEVIO_SCSI_INQUIRY_VPD:
                return kind == DEVIO_SCSI && param <= 0xff;
        case DEVIO_SCSI_LOG_SENSE:
                /* page in bits 0-5, subpage in bits 8-15 (SPC-4 LOG SENSE bytes 2 and 3) */
                return kind == DEVIO_SCSI && (param & ~(uint32_t)0xff3f) == 0;
        case DEVIO_SCSI_READ_DEFECT_GLIST:
                /* defect list format, 3 bits (SBC-3 READ DEFECT DATA(10) byte 2) */
                return kind == DEVIO_SCSI && param <= 7;
        default:
                return false;
        }
}

int privsep_request_valid(const struct devio_request *req)
{
        bool is_char;

        if (!req)
                return -EINVAL;
        if (req->kind >= DEVIO_KIND_MAX)
                return -EINVAL;
        if (!memchr(req->name, '\0', sizeof req->name))
                return -EINVAL;
        if (!name_valid(req->kind, req->name, &is_char))
                return -EINVAL;
        if (req->n == 0 || req->n > DEVIO_MAX_CMDS)
                return -EINVAL;
        for (uint32_t i = 0; i < req->n; i++)
                if (!cmd_valid(req->kind, req->cmds[i].cmd, req->cmds[i].param))
                        return -EINVAL;
        return 0;
}

/* Checks that the node st is the kernel's device called name: /sys/dev/TYPE/MAJ:MIN must point
 * at a directory of that name. This refuses a loop (or any other) device node that merely
 * carries a disk's name. Returns 0 or -ENODEV. */
static int sysfs_names(const struct stat *st, bool is_char, const char *name)
{
        char path[64], target[PATH_MAX];
        const char *base;
        ssize_t n;

        snprintf(path, sizeof path, SYSFS_DEV "/%s/%u:%u", is_char ? "char" : "block",
                 major(st->st_rdev), minor(st->st_rdev));
        n = readlink(path, target, sizeof target - 1);
        if (n <= 0)
                return -ENODEV;
        target[n] = '\0';
        base = strrchr(target, '/');
        base = base ? base + 1 : target;
        return strcmp(base, name) == 0 ? 0 : -ENODEV;
}

/* Opens dev_dir/name read-only without following a symlink and checks that it is the kernel's
 * block (or, for an NVMe controller, character) device of that name. Returns an fd or
 * -errno: -ENOENT and the like from the open, -ENODEV for a node of the wrong type. */
static int open_device(const char *dev_dir, uint32_t kind, const char *name)
{
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF;
        struct stat before, st;
        bool is_char = false;
        int r;

        if (!name_valid(kind, name, &is_char))
                return -EINVAL;
        dfd = open(dev_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        /* Look before opening: opening a FIFO, a tty or a tape has effects of its own. */
        if (fstatat(dfd, name, &before, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (is_char ? !S_ISCHR(before.st_mode) : !S_ISBLK(before.st_mode))
                return -ENODEV;
        r = sysfs_names(&before, is_char, name);
        if (r < 0)
                return r;
        /* O_NONBLOCK: sd_open() then does not insist on a medium; no controlling tty ever. */
        fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ELOOP ? -ENODEV : -errno;
        /* ... and check again what was opened, in case the entry was swapped meanwhile. */
        if (fstat(fd, &st) < 0)
                return -errno;
        if ((st.st_mode & S_IFMT) != (before.st_mode & S_IFMT) || st.st_rdev != before.st_rdev)
                return -ENODEV;
        r = fd;
        fd = -EBADF;
        return r;
}

/* NVMe admin command (NVMe Base Specification 2.0, 5.17 Identify, 5.16 Get Log Page). */
static void nvme_admin(int fd, uint32_t cmd, uint8_t *buf, struct devio_result *res)
{
        struct nvme_admin_cmd c = {0};
        int r;

        if (cmd == DEVIO_NVME_IDENTIFY_CTRL) {
                c.opcode = 0x06;
                c.nsid = 0;
                c.cdw10 = 0x01; /* CNS 01h: Identify Controller data structure */
                c.data_len = 4096;
        } else {
                c.opcode = 0x02;
                c.nsid = 0xffffffffu;
                /* LID 02h SMART / Health, RAE (bit 15) so no asynchronous event is cleared,
                 * NUMDL (bits 31:16) = dwords - 1 */
                c.cdw10 = 0x02u | (1u << 15) | ((512u / 4 - 1) << 16);
                c.data_len = 512;
        }
        c.addr = (uint64_t)(uintptr_t)buf;
        c.timeout_ms = DEVIO_IOCTL_TIMEOUT_MS;
        memset(buf, 0, c.data_len);
        r = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &c);
        if (r < 0) {
                res->err = -errno;
                return;
        }
        if (r > 0) {
                res->nvme_status = (uint32_t)r;
                return;
        }
        res->len = c.data_len;
        memcpy(res->data, buf, c.data_len);
}

/* One SG_IO with a CDB and an optional data-in buffer of len bytes; fills the result's status
 * fields, sense and data. */
static void sg_io(int fd, const uint8_t *cdb, uint8_t cdb_len, uint8_t *buf, uint32_t len,
                  struct devio_result *res)
{
        struct sg_io_hdr h = {0};
        uint8_t cmd[16];
        int resid;

        memcpy(cmd, cdb, cdb_len);
        if (len)
                memset(buf, 0, len);
        h.interface_id = 'S';
        h.dxfer_direction = len ? SG_DXFER_FROM_DEV : SG_DXFER_NONE;
        h.cmd_len = cdb_len;
        h.cmdp = cmd;
        h.dxfer_len = len;
        h.dxferp = len ? buf : NULL;
        h.mx_sb_len = DEVIO_SENSE_MAX;
        h.sbp = res->sense;
        h.timeout = DEVIO_IOCTL_TIMEOUT_MS;
        memset(res->sense, 0, sizeof res->sense);
        if (ioctl(fd, SG_IO, &h) < 0) {
                res->err = -errno;
                return;
        }
        res->scsi_status = h.status;
        res->host_status = (uint8_t)h.host_status;
        res->driver_status = (uint8_t)h.driver_status;
        res->sense_len = h.sb_len_wr <= DEVIO_SENSE_MAX ? h.sb_len_wr : DEVIO_SENSE_MAX;
        resid = h.resid;
        if (resid < 0 || (uint32_t)resid > len)
                resid = 0;
        res->len = len - (uint32_t)resid;
        if (res->len)
                memcpy(res->data, buf, res->len);
}

/* ATA PASS-THROUGH(16) (SAT-4 12.2.2; T13 ACS-3 7.12 IDENTIFY DEVICE, 7.48 SMART, 7.4 CHECK
 * POWER MODE). Data-in commands transfer one 512-byte block, PIO; the two non-data commands set
 * CK_COND so the ATA registers come back in the sense data. */
static void ata_pass_through(int fd, uint32_t cmd, uint8_t *buf, struct devio_result *res)
{
        uint8_t cdb[16] = {0};
        bool data_in = true;

        cdb[0] = 0x85;
        switch (cmd) {
        case DEVIO_ATA_IDENTIFY:
                cdb[14] = 0xec;
                break;
        case DEVIO_ATA_SMART_READ_DATA:
        case DEVIO_ATA_SMART_READ_THRESHOLDS:
                cdb[4] = cmd == DEVIO_ATA_SMART_READ_DATA ? 0xd0 : 0xd1;
                cdb[8] = 0x01; /* LBA low 1: the (obsolete) sector number of the page */
                cdb[10] = 0x4f;
                cdb[12] = 0xc2;
                cdb[14] = 0xb0;
                break;
        case DEVIO_ATA_SMART_RETURN_STATUS:
                data_in = false;
                cdb[4] = 0xda;
                cdb[10] = 0x4f;
                cdb[12] = 0xc2;
                cdb[14] = 0xb0;
                break;
        case DEVIO_ATA_CHECK_POWER_MODE:
        default:
                data_in = false;
                cdb[14] = 0xe5;
                break;
        }
        if (data_in) {
                cdb[1] = 4 << 1; /* PIO data-in */
                cdb[2] = 0x0e;   /* T_DIR in, BYT_BLOK blocks, T_LENGTH in the count field */
                cdb[6] = 1;      /* one block */
        } else {
                cdb[1] = 3 << 1; /* non-data */
                cdb[2] = 0x20;   /* CK_COND: return the registers as sense data */
        }
        sg_io(fd, cdb, sizeof cdb, buf, data_in ? 512 : 0, res);
}

/* LOG SENSE (SPC-4 6.8): PC 01b cumulative values. First the 4-byte header, then the page with
 * the length it announces, as smartmontools does, since some devices reject a long allocation
 * length or return garbage past the page. A failed header read is the result. */
static void scsi_log_sense(int fd, uint32_t param, uint8_t *buf, struct devio_result *res)
{
        uint8_t cdb[10] = {0};
        uint32_t want;

        cdb[0] = 0x4d;
        cdb[2] = (uint8_t)(0x40 | (param & 0x3f));
        cdb[3] = (uint8_t)(param >> 8);
        cdb[8] = 4;
        sg_io(fd, cdb, sizeof cdb, buf, 4, res);
        if (res->err < 0 || res->scsi_status != SCSI_STATUS_GOOD || res->host_status ||
            res->len < 4)
                return;
        want = 4 + ((uint32_t)res->data[2] << 8 | res->data[3]);
        if (want <= 4)
                return;
        if (want > DEVIO_DATA_MAX)
                want = DEVIO_DATA_MAX;
        memset(res, 0, sizeof *res);
        cdb[7] = (uint8_t)(want >> 8);
        cdb[8] = (uint8_t)want;
        sg_io(fd, cdb, sizeof cdb, buf, want, res);
}

static void scsi_cmd(int fd, uint32_t cmd, uint32_t param, uint8_t *buf, struct devio_result *res)
{
        uint8_t cdb[10] = {0};

        switch (cmd) {
        case DEVIO_SCSI_INQUIRY: /* SPC-4 6.6: standard data */
                cdb[0] = 0x12;
                cdb[4] = 96;
                sg_io(fd, cdb, 6, buf, 96, res);
                break;
        case DEVIO_SCSI_INQUIRY_VPD: /* EVPD=1, page code in byte 2 */
                cdb[0] = 0x12;
                cdb[1] = 0x01;
                cdb[2] = (uint8_t)param;
                cdb[4] = 252;
                sg_io(fd, cdb, 6, buf, 252, res);
                break;
        case DEVIO_SCSI_LOG_SENSE:
                scsi_log_sense(fd, param, buf, res);
                break;
        case DEVIO_SCSI_READ_DEFECT_GLIST: /* SBC-3 5.12: REQ_GLIST, header only */
        default:
                cdb[0] = 0x37;
                cdb[2] = (uint8_t)(0x08 | (param & 7));
                cdb[8] = 4;
                sg_io(fd, cdb, 10, buf, 4, res);
                break;
        }
}

int privsep_devio_exec(const char *dev_dir, const struct devio_request *req,
                       struct devio_response *resp)
{
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ uint8_t *buf = NULL;
        int r;

        r = privsep_request_valid(req);
        if (r < 0)
                return r;
        if (!dev_dir || !resp)
                return -EINVAL;
        /* Page-aligned, so the block layer maps it for DMA without a bounce copy. */
        if (posix_memalign((void **)&buf, 4096, DEVIO_DATA_MAX) != 0)
                return -ENOMEM;
        memset(resp, 0, sizeof *resp);
        fd = open_device(dev_dir, req->kind, req->name);
        if (fd < 0) {
                resp->n = 1;
                resp->r[0].err = fd;
                return 0;
        }
        for (uint32_t i = 0; i < req->n; i++) {
                struct devio_result *res = &resp->r[i];

                switch (req->kind) {
                case DEVIO_NVME:
                        nvme_admin(fd, req->cmds[i].cmd, buf, res);
                        break;
                case DEVIO_ATA:
                        ata_pass_through(fd, req->cmds[i].cmd, buf, res);
                        break;
                default:
                        scsi_cmd(fd, req->cmds[i].cmd, req->cmds[i].param, buf, res);
                        break;
                }
                resp->n = i + 1;
        }
        return 0;
}
