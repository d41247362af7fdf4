/* One SMART read of one device (NVMe, ATA or SCSI) through a devio runner, turned into parsed
 * values, and their export. Used by the SMART collector's thread. */
#pragma once

#include <stdbool.h>

#include "devio.h"
#include "metrics.h"
#include "smart.h"
#include "smart_ata.h"
#include "smart_nvme.h"
#include "smart_scsi.h"

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

/* Protocol-independent values (SPEC's diskpulse_smart_*), each with a has-flag. */
enum smart_value {
        SMART_TEMPERATURE_C,
        SMART_POWER_ON_SECONDS,
        SMART_POWER_CYCLES,
        SMART_UNSAFE_SHUTDOWNS,
        SMART_MEDIA_ERRORS,
        SMART_WEAR_USED,
        SMART_SPARE,
        SMART_SPARE_THRESHOLD,
        SMART_READ_BYTES,
        SMART_WRITTEN_BYTES,
        SMART_ROTATION_RPM,
        SMART_TEMPERATURE_WARNING_C,  /* NVMe WCTEMP, SCSI reference temperature */
        SMART_TEMPERATURE_CRITICAL_C, /* NVMe CCTEMP */
        SMART_VALUE_MAX
};

struct smart_data {
        int kind; /* enum devio_kind */
        char model[64], serial[64], firmware[32], wwn[40];
        int healthy; /* 1, 0, or -1 unknown */
        bool has[SMART_VALUE_MAX];
        double value[SMART_VALUE_MAX];
        /* protocol pages, for the protocol's own metrics */
        bool has_nvme;
        struct nvme_health nvme;
        bool has_ata;
        struct ata_smart ata;
        int ata_write_cache;        /* IDENTIFY word 85 bit 5: 1, 0, or -1 not supported */
        uint16_t ata_rotation_rate; /* word 217, for attribute names that depend on it */
        bool has_scsi_errors[3];    /* read, write, verify */
        struct scsi_error_counters scsi_errors[3];
        bool has_scsi_defects;
        uint32_t scsi_grown_defects;
        bool has_scsi_ie;
        struct scsi_ie scsi_ie;
};

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

/* Writes the device's health metrics (info, healthy, unified values, protocol metrics). */
void smart_export_data(struct mset *out, const char *device, const struct smart_data *d);
