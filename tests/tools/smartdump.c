/* smartdump: runs privsep_devio_exec() on one device and prints each command's status, sense and data
 * as hex (or writes them to files), to capture real SMART pages for fixtures. Not installed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devio.h"
#include "devio_linux.h"
#include "privsep.h"

static const struct {
        const char *name;
        uint32_t kind, cmd;
} cmds[] = {
    {"identify", DEVIO_NVME, DEVIO_NVME_IDENTIFY_CTRL},
    {"smart-log", DEVIO_NVME, DEVIO_NVME_SMART_LOG},
    {"check-power", DEVIO_ATA, DEVIO_ATA_CHECK_POWER_MODE},
    {"identify", DEVIO_ATA, DEVIO_ATA_IDENTIFY},
    {"smart-data", DEVIO_ATA, DEVIO_ATA_SMART_READ_DATA},
    {"smart-thresholds", DEVIO_ATA, DEVIO_ATA_SMART_READ_THRESHOLDS},
    {"smart-status", DEVIO_ATA, DEVIO_ATA_SMART_RETURN_STATUS},
    {"inquiry", DEVIO_SCSI, DEVIO_SCSI_INQUIRY},
    {"vpd", DEVIO_SCSI, DEVIO_SCSI_INQUIRY_VPD},
    {"log-sense", DEVIO_SCSI, DEVIO_SCSI_LOG_SENSE},
    {"defects", DEVIO_SCSI, DEVIO_SCSI_READ_DEFECT_GLIST},
};

static void usage(FILE *f)
{
        fprintf(f, "usage: smartdump [--dev DIR] [--out DIR] [--privsep] nvme|ata|scsi NAME "
                   "CMD[:PARAM]...\n"
                   "  nvme: identify smart-log\n"
                   "  ata:  identify smart-data smart-thresholds smart-status check-power\n"
                   "  scsi: inquiry vpd:PAGE log-sense:PAGE[+SUBPAGE<<8] defects:FORMAT\n"
                   "PARAM is decimal or 0x hex. --out writes DIR/NAME-CMD[-PARAM].{bin,sense}.\n"
                   "--privsep runs the commands through the privileged helper (privsep/)\n"
                   "after dropping every capability of this process, as the daemon does.\n");
}

static void hexdump(const uint8_t *p, size_t n)
{
        for (size_t i = 0; i < n; i += 16) {
                printf("  %04zx:", i);
                for (size_t k = i; k < i + 16 && k < n; k++)
                        printf(" %02x", p[k]);
                printf("\n");
        }
}

static int write_file(const char *dir, const char *base, const char *ext, const uint8_t *p,
                      size_t n)
{
        char path[4096];
        int fd;

        snprintf(path, sizeof path, "%s/%s.%s", dir, base, ext);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, p, n) != (ssize_t)n) {
                fprintf(stderr, "smartdump: %s: %s\n", path, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        close(fd);
        return 0;
}

int main(int argc, char **argv)
{
        const char *dev = "/dev", *out = NULL, *labels[DEVIO_MAX_CMDS];
        struct devio_request req = {0};
        static struct devio_response resp;
        bool use_privsep = false;
        int i = 1, r, rc = 0;

        while (i < argc && argv[i][0] == '-') {
                if (strcmp(argv[i], "--privsep") == 0) {
                        use_privsep = true;
                        i++;
                } else if (i + 1 < argc && strcmp(argv[i], "--dev") == 0) {
                        dev = argv[i + 1];
                        i += 2;
                } else if (i + 1 < argc && strcmp(argv[i], "--out") == 0) {
                        out = argv[i + 1];
                        i += 2;
                } else {
                        usage(stderr);
                        return 2;
                }
        }
        if (argc - i < 3 || argc - i - 2 > DEVIO_MAX_CMDS) {
                usage(stderr);
                return 2;
        }
        if (strcmp(argv[i], "nvme") == 0)
                req.kind = DEVIO_NVME;
        else if (strcmp(argv[i], "ata") == 0)
                req.kind = DEVIO_ATA;
        else if (strcmp(argv[i], "scsi") == 0)
                req.kind = DEVIO_SCSI;
        else {
                usage(stderr);
                return 2;
        }
        snprintf(req.name, sizeof req.name, "%s", argv[i + 1]);
        for (int a = i + 2; a < argc; a++) {
                char word[64], *colon;
                size_t k;

                snprintf(word, sizeof word, "%s", argv[a]);
                colon = strchr(word, ':');
                if (colon) {
                        *colon = '\0';
                        req.cmds[req.n].param = (uint32_t)strtoul(colon + 1, NULL, 0);
                }
                for (k = 0; k < sizeof cmds / sizeof cmds[0]; k++)
                        if (cmds[k].kind == req.kind && strcmp(cmds[k].name, word) == 0)
                                break;
                if (k == sizeof cmds / sizeof cmds[0]) {
                        fprintf(stderr, "smartdump: unknown command %s for %s\n", word, argv[i]);
                        return 2;
                }
                req.cmds[req.n].cmd = cmds[k].cmd;
                labels[req.n++] = argv[a];
        }

        if (use_privsep) {
                struct privsep_config cfg = {.dev_dir = dev};
                struct devio *io;

                r = privsep_start(&cfg, &io);
                if (r < 0) {
                        fprintf(stderr, "smartdump: privsep_start: %s\n", strerror(-r));
                        return 1;
                }
                r = io->ops->run(io, &req, 30 * USEC_PER_SEC, &resp);
                io->ops->free(io);
        } else
                r = privsep_devio_exec(dev, &req, &resp);
        if (r < 0) {
                fprintf(stderr, "smartdump: %s: %s\n", req.name, strerror(-r));
                return 1;
        }
        for (uint32_t k = 0; k < resp.n; k++) {
                const struct devio_result *res = &resp.r[k];
                char base[128];

                printf("%s %s: err=%d (%s) nvme_status=0x%x scsi_status=0x%02x host=0x%02x "
                       "driver=0x%02x sense_len=%u len=%u\n",
                       req.name, labels[k], res->err, res->err ? strerror(-res->err) : "ok",
                       res->nvme_status, res->scsi_status, res->host_status, res->driver_status,
                       res->sense_len, res->len);
                if (res->err || res->nvme_status)
                        rc = 1;
                if (res->sense_len) {
                        printf(" sense:\n");
                        hexdump(res->sense, res->sense_len);
                }
                if (res->len) {
                        printf(" data:\n");
                        hexdump(res->data, res->len);
                }
                if (out) {
                        snprintf(base, sizeof base, "%s-%s", req.name, labels[k]);
                        for (char *c = base; *c; c++)
                                if (*c == ':')
                                        *c = '-';
                        if (write_file(out, base, "bin", res->data, res->len) < 0 ||
                            (res->sense_len &&
                             write_file(out, base, "sense", res->sense, res->sense_len) < 0))
                                rc = 1;
                }
        }
        if (resp.n < req.n) {
                printf("stopped after %u of %u commands: the device did not open\n", resp.n, req.n);
                rc = 1;
        }
        return rc;
}
