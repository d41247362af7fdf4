/* The facts one SMART read of one device found: the plain struct that smart_read.c fills from
 * the device's pages and smart_export.c turns into metric families. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "devio.h"
#include "smart_ata.h"
#include "smart_nvme.h"
#include "smart_scsi.h"

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

/* Whether error counter page k (0 read 03h, 1 write 02h, 2 verify 05h) came back with
 * counter c. */
static inline bool smart_data_has_scsi_counter(const struct smart_data *d, size_t k,
                                               enum scsi_error_counter c)
{
        return d->has_scsi_errors[k] && (d->scsi_errors[k].present & (1u << c));
}
