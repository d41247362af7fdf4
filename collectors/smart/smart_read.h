/* One SMART read of one device (NVMe, ATA or SCSI) through a devio runner, its pages decoded
 * into the facts of smart_data.h. Used by the SMART collector's thread. */
#pragma once

#include <stdbool.h>

#include "devio.h"
#include "smart.h"
#include "smart_data.h"

/* Why a read failed: the reason label of diskpulse_smart_read_errors_total. */
enum smart_reason {
        SMART_REASON_TIMEOUT,       /* the device did not answer within --smart.timeout */
        SMART_REASON_PERMISSION,    /* EACCES, EPERM: the helper lacks a capability */
        SMART_REASON_IO,            /* EIO and other transport errors */
        SMART_REASON_NODEV,         /* ENODEV, ENOENT, ENXIO: the device went away */
        SMART_REASON_DEVICE_STATUS, /* the device refused the command (NVMe status, sense) */
        SMART_REASON_BAD_DATA,      /* a page failed its checksum or did not parse */
        SMART_REASON_HELPER,        /* the privileged helper is gone or overloaded */
        SMART_REASON_OTHER,
        SMART_REASON_MAX
};

enum smart_skip { SMART_SKIP_STANDBY, SMART_SKIP_SLEEP, SMART_SKIP_MAX };

struct smart_outcome {
        int reason;     /* enum smart_reason, or -1 when the read succeeded or was skipped */
        int skipped;    /* enum smart_skip, or -1 */
        int power_mode; /* -1 unknown, 0 active/idle, 1 standby, 2 sleep */
        char detail[96];
        struct smart_data data;
};

/* What earlier reads of a device taught, kept by the caller from one read to the next.
 *
 * An ATA drive whose IDENTIFY says SMART is off is never sent a SMART command. One that aborts
 * SMART READ DATA although its IDENTIFY says SMART is on (firmware that does not report the
 * switch; QEMU) is backed off: a drive logs every aborted command in its error log, and polling
 * must not fill it. The next SMART_ABORT_EAGER reads still try (SMART switched on again is seen
 * at once), then the gaps double (2, 4, 8... reads), and at the latest a day after the last
 * abort it is tried again: about log2(reads) aborts, not one a read. */
struct smart_memory {
        unsigned smart_aborts; /* in a row; 0: the last attempt succeeded (or none yet) */
        unsigned reads_since;  /* reads since the last abort that sent no SMART command */
        usec_t smart_aborted;  /* monotonic time of the last abort */
};

#define SMART_ABORT_EAGER 3
#define SMART_ABORT_RETRY (24 * 3600 * USEC_PER_SEC)

/* Reads the device: for ATA a CHECK POWER MODE first (unless powermode is never), then the
 * identity, and the health pages only where the drive says it has them (SMART on for ATA, the
 * supported-pages list for SCSI; NVMe's are mandatory). mem (NULL: none) carries what earlier
 * reads taught and is updated. Fills *out; never fails otherwise. Any thread. */
void smart_read_device(struct devio *io, const char *name, int kind, usec_t timeout,
                       enum smart_powermode_check powermode, struct smart_memory *mem,
                       struct smart_outcome *out);

/* Maps -errno of a devio run or command to a reason. */
enum smart_reason smart_reason_from_errno(int err);
