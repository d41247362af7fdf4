/* Pure parsers of NVMe health data: Identify Controller and the SMART / Health log page 02h.
 *
 * Formats: NVM Express Base Specification 2.0 (same offsets since 1.2; 1.4 added the
 * endurance group byte and FGUID), section "Identify Controller data structure" (CNS 01h) and
 * section "SMART / Health Information (Log Identifier 02h)"; cross-checked with Linux
 * include/linux/nvme.h (struct nvme_id_ctrl, struct nvme_smart_log) and smartmontools nvme.h.
 * All multi-byte fields are little-endian.
 *
 * Bytes in, structs out: no I/O, no globals, no allocation; any thread. The buffers are the
 * data[] / len of a struct devio_result (lib/devio.h) for DEVIO_NVME_IDENTIFY_CTRL and
 * DEVIO_NVME_SMART_LOG. Every function leaves its ret_... output untouched on failure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NVME_IDENTIFY_CTRL_SIZE 4096
#define NVME_SMART_LOG_SIZE     512

/* An unsigned 128-bit counter as the log page stores it (lo = bytes 0-7, hi = bytes 8-15). */
struct u128 {
        uint64_t lo, hi;
};

/* The value as a double: exact below 2^53, correctly rounded magnitude above; never wraps (a
 * value of 2^64 or more comes out as 2^64 or more). */
double nvme_u128_to_double(struct u128 v);

/* The value clamped to UINT64_MAX. */
uint64_t nvme_u128_to_u64_saturated(struct u128 v);

/* Critical Warning bits (byte 0 of log page 02h). */
enum {
        NVME_CW_SPARE = 1u << 0,           /* available spare below threshold */
        NVME_CW_TEMPERATURE = 1u << 1,     /* a temperature above/below its threshold */
        NVME_CW_RELIABILITY = 1u << 2,     /* NVM subsystem reliability degraded */
        NVME_CW_READ_ONLY = 1u << 3,       /* media placed in read-only mode */
        NVME_CW_VOLATILE_BACKUP = 1u << 4, /* volatile memory backup device failed */
        NVME_CW_PMR_READ_ONLY = 1u << 5,   /* persistent memory region read-only (NVMe 1.4) */
};

/* Identify Controller, the fields diskpulse uses. Strings as smartctl prints them: leading and
 * trailing spaces removed, cut at a NUL, other bytes outside ' '..'~' replaced by '?'. */
struct nvme_identity {
        uint16_t vendor_id;           /* VID, bytes 0-1 (PCI vendor id) */
        uint16_t subsystem_vendor_id; /* SSVID, bytes 2-3 */
        char serial[21];              /* SN, bytes 4-23 */
        char model[41];               /* MN, bytes 24-63 */
        char firmware[9];             /* FR, bytes 64-71 */
        uint32_t ieee_oui;      /* IEEE, bytes 73-75, byte 73 least significant (as smartctl) */
        uint16_t controller_id; /* CNTLID, bytes 78-79 */
        /* VER, bytes 80-83: major << 16 | minor << 8 | tertiary; 0 when not reported (before
         * NVMe 1.2) */
        uint32_t version;
        /* FGUID, bytes 112-127 as 32 lowercase hex digits in byte order; "" when all zero (NVMe
         * 1.4, rarely set) */
        char fguid[33];
        uint16_t warning_temp_k;    /* WCTEMP, bytes 266-267, kelvin; 0 = not reported */
        uint16_t critical_temp_k;   /* CCTEMP, bytes 268-269, kelvin; 0 = not reported */
        struct u128 total_capacity; /* TNVMCAP, bytes 280-295, bytes; 0 = not reported */
        uint32_t namespaces;        /* NN, bytes 516-519 */
        bool volatile_write_cache;  /* VWC bit 0, byte 525: a volatile write cache is present */
        /* SUBNQN, bytes 768-1023: the NVM subsystem's qualified name, the closest thing to a WWN
         * a controller has (the namespace ids NGUID/EUI64 are in Identify Namespace) */
        char subnqn[257];
};

/* Parses an Identify Controller data structure (CNS 01h). len must be at least 4096 (more is
 * ignored). Returns 0, -EINVAL when buf is NULL or shorter, -ENODATA when the structure is
 * empty (all bytes zero: the command moved no data). */
int nvme_parse_identify_ctrl(const uint8_t *buf, size_t len, struct nvme_identity *ret);

/* Every field of the SMART / Health Information log page (02h). */
struct nvme_health {
        uint8_t critical_warning;          /* byte 0, NVME_CW_* bits */
        uint16_t temperature_k;            /* bytes 1-2, composite temperature, kelvin */
        uint8_t available_spare;           /* byte 3, percent (normalized 0..100) */
        uint8_t available_spare_threshold; /* byte 4, percent */
        uint8_t percentage_used;           /* byte 5, percent; may exceed 100 (up to 255) */
        uint8_t endurance_group_warning;   /* byte 6, endurance group critical warning summary */
        struct u128 data_units_read;       /* bytes 32-47, units of 1000 x 512 bytes, rounded up */
        struct u128 data_units_written;    /* bytes 48-63, same unit */
        struct u128 host_read_commands;    /* bytes 64-79 */
        struct u128 host_write_commands;   /* bytes 80-95 */
        struct u128 controller_busy_time;  /* bytes 96-111, minutes */
        struct u128 power_cycles;          /* bytes 112-127 */
        struct u128 power_on_hours;        /* bytes 128-143 */
        struct u128 unsafe_shutdowns;      /* bytes 144-159 */
        struct u128 media_errors;          /* bytes 160-175, media and data integrity errors */
        struct u128 error_log_entries;     /* bytes 176-191, error information log entries */
        uint32_t warning_temp_time;        /* bytes 192-195, minutes above WCTEMP */
        uint32_t critical_temp_time;       /* bytes 196-199, minutes above CCTEMP */
        uint16_t temp_sensor_k[8];         /* bytes 200-215, sensors 1-8, kelvin; 0 = absent */
        /* bytes 216-223, thermal management temperature 1/2 transition counts */
        uint32_t thermal_transitions[2];
        /* bytes 224-231, total seconds in thermal management 1/2 */
        uint32_t thermal_time[2];
};

/* Parses the SMART / Health Information log page. len must be at least 512 (more is ignored).
 * Returns 0, -EINVAL when buf is NULL or shorter, -ENODATA when the page is all zero (no data
 * moved: a composite temperature of 0 K is impossible). */
int nvme_parse_smart_log(const uint8_t *buf, size_t len, struct nvme_health *ret);

/* Degrees Celsius of an NVMe temperature in kelvin, as smartctl and nvme-cli print it (k - 273;
 * the kernel's hwmon subtracts 273.15). The caller checks for 0 = not reported first. */
int nvme_kelvin_to_celsius(uint16_t k);

/* Bytes of a data units counter (1 unit = 1000 * 512 bytes), as a double (never wraps). */
double nvme_data_units_to_bytes(struct u128 units);
