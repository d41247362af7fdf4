/* Device I/O for health data: a fixed set of read-only commands (NVMe admin, ATA PASS-THROUGH,
 * SCSI INQUIRY / LOG SENSE) named by enum, never raw CDBs, and their raw results. In the daemon
 * a small privileged helper process runs them (privsep/, where devio_linux.h declares the Linux
 * implementation, privsep_devio_exec()); tests plug in fakes. The results are parsed by the
 * unprivileged caller (collectors/smart/smart_*.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* How a device is spoken to. */
enum devio_kind {
        DEVIO_NVME, /* /dev/nvmeN (controller) or /dev/nvmeNnM: NVME_IOCTL_ADMIN_CMD */
        DEVIO_ATA,  /* SATA behind libata's SCSI translation: SG_IO + ATA PASS-THROUGH(16) */
        DEVIO_SCSI, /* SCSI/SAS: SG_IO + INQUIRY / LOG SENSE */
        DEVIO_KIND_MAX
};

/* The commands. param is 0 unless a command names it (privsep_request_valid() checks its range). */
enum devio_cmd {
        DEVIO_NVME_IDENTIFY_CTRL,   /* Identify, CNS 01h: 4096 bytes */
        DEVIO_NVME_SMART_LOG,       /* Get Log Page 02h, nsid FFFFFFFFh, RAE set: 512 bytes */
        DEVIO_ATA_CHECK_POWER_MODE, /* E5h, non-data, CK_COND=1: the count field in the sense */
        DEVIO_ATA_IDENTIFY,         /* ECh, PIO data-in: 512 bytes */
        DEVIO_ATA_SMART_READ_DATA,  /* B0h/D0h: 512 bytes */
        DEVIO_ATA_SMART_READ_THRESHOLDS, /* B0h/D1h: 512 bytes */
        DEVIO_ATA_SMART_RETURN_STATUS,   /* B0h/DAh, non-data, CK_COND=1: LBA mid/high in sense */
        DEVIO_SCSI_INQUIRY,              /* 12h standard data: up to 96 bytes */
        DEVIO_SCSI_INQUIRY_VPD,          /* 12h EVPD=1, page param (0-FFh): up to 252 bytes */
        DEVIO_SCSI_LOG_SENSE,            /* 4Dh PC=01b (cumulative), page param bits 0-5, subpage
                                          * bits 8-15: up to 4096 (4-byte header read first) */
        DEVIO_SCSI_READ_DEFECT_GLIST,    /* 37h READ DEFECT DATA(10), GLIST, list format param
                                          * (0-7), header only: 4 */
        DEVIO_CMD_MAX
};

#define DEVIO_MAX_CMDS     8
#define DEVIO_DATA_MAX     4096
#define DEVIO_SENSE_MAX    64
#define DEVIO_NAME_MAX     32
#define DEVIO_MAX_FDS      4   /* descriptors a privileged function returns */
#define DEVIO_PRIV_ARG_MAX 256 /* bytes of a privileged function's argument */

struct devio_request {
        char name[DEVIO_NAME_MAX]; /* kernel name: "sda", "nvme0" or "nvme0n1" */
        uint32_t kind;             /* enum devio_kind */
        uint32_t n;                /* commands, run in order; at most DEVIO_MAX_CMDS */
        struct {
                uint32_t cmd; /* enum devio_cmd */
                uint32_t param;
        } cmds[DEVIO_MAX_CMDS];
};

struct devio_result {
        int32_t err;          /* 0, or -errno from open() or ioctl() (EACCES, EPERM, EIO, ...) */
        uint32_t nvme_status; /* NVMe completion status when the ioctl returned > 0 */
        uint8_t scsi_status;  /* SG_IO: SCSI status, host and driver status */
        uint8_t host_status;
        uint8_t driver_status;
        uint8_t sense_len;
        uint8_t sense[DEVIO_SENSE_MAX];
        uint32_t len; /* bytes of data received (SG_IO: dxfer_len - resid). A device that fails a
                       * command with CHECK CONDITION may leave resid 0, so len can then count a
                       * buffer it never wrote (zero-filled): check scsi_status and sense first */
        uint8_t data[DEVIO_DATA_MAX];
};

struct devio_response {
        uint32_t n; /* results for the first n commands (a fatal error stops the rest) */
        struct devio_result r[DEVIO_MAX_CMDS];
};

struct devio;

struct devio_ops {
        /* Runs req and fills *resp. Waits at most timeout: -ETIMEDOUT then (the request goes on
         * in the background and busy() stays true for that device until it returns). Returns 0
         * when the commands ran (each result carries its own error), -EBUSY when the device
         * still has a request in flight, -ECONNRESET/-EPIPE when the runner is gone, -EINVAL
         * for a malformed request, -EAGAIN when the runner has too many requests in flight,
         * -EIO when the runner's process for this request died without answering (the helper's
         * worker crashed). *resp is meaningful only after 0. Any thread; one request per
         * device at a time. */
        int (*run)(struct devio *io, const struct devio_request *req, usec_t timeout,
                   struct devio_response *resp);
        /* True while an earlier request to this device has not returned. */
        bool (*busy)(struct devio *io, const char *name);
        /* Shutting down: wakes every caller waiting in run() (they return at once with an
         * error) and makes later calls fail; io stays valid until free(). Any thread. May be
         * NULL when run() never blocks. */
        void (*cancel)(struct devio *io);
        void (*free)(struct devio *io);
        /* Runs the privileged function of the collector named name (its collector_def's
         * privileged(), from a table fixed when the helper's processes were made) in a worker of
         * the helper, with arg (at most DEVIO_PRIV_ARG_MAX bytes). Returns its result (0 or
         * -errno; its message in err when not 0) and the descriptors it gave (*nfds of them in
         * fds, at most DEVIO_MAX_FDS, close-on-exec, the caller's to close); or, as run() does,
         * -ETIMEDOUT, -ECONNRESET/-EPIPE, -EAGAIN, -EIO (err says which), -ENOENT when no such
         * function. Waits at most timeout. Any thread. May be NULL: no privileged part. */
        int (*privileged)(struct devio *io, const char *name, const void *arg, size_t len,
                          usec_t timeout, int fds[], size_t *nfds, char *err, size_t errsz);
};

struct devio {
        const struct devio_ops *ops;
};
