/* Pure parsers of ATA health data: IDENTIFY DEVICE, SMART READ DATA / THRESHOLDS, the ATA
 * registers returned in SCSI sense by ATA PASS-THROUGH, and the unified values derived from them.
 *
 * Formats: T13 ACS-3 (INCITS 522) / ACS-4 (INCITS 529): "IDENTIFY DEVICE data" (words 10-19,
 * 23-46, 60-61, 82-87, 100-103, 106, 108-111, 117-118, 217, 255), "SMART" feature set (READ
 * DATA, READ ATTRIBUTE THRESHOLDS as in ATA/ATAPI-7 vol. 1 and SFF-8035i, RETURN STATUS),
 * "CHECK POWER MODE" (count field values); T10 SAT-3 (INCITS 517) 12.2.2.6 "ATA Status Return
 * sense data descriptor" and 12.2.2.7 "Fixed format sense data" for ATA PASS-THROUGH with
 * CK_COND=1; T10 SPC-4 4.5 "Sense data" (response codes 70h-73h). Attribute names and raw value
 * widths: smartmontools drivedb.h entry "DEFAULT" and atacmds.cpp. Multi-byte fields are
 * little-endian; ATA strings hold two characters per word, the first in the high byte.
 *
 * Bytes in, structs out: no I/O, no globals, no allocation; any thread. The buffers are the
 * data[] / len (or sense[] / sense_len) of a struct devio_result (lib/devio.h) for the
 * DEVIO_ATA_* commands. Every function leaves its ret_... output untouched on failure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ATA_SECTOR_SIZE     512
#define ATA_SMART_MAX_ATTRS 30

/* IDENTIFY DEVICE, the fields diskpulse uses. Strings as smartctl prints them: leading and
 * trailing spaces removed, cut at a NUL, bytes outside ' '..'~' replaced by '?'. */
struct ata_identity {
        char serial[21];  /* words 10-19 */
        char firmware[9]; /* words 23-26 */
        char model[41];   /* words 27-46 */
        /* words 108-111 as 16 lowercase hex digits (udev's ID_WWN without "0x"), "" unless word
         * 84 or 87 says valid and the NAA is 5 */
        char wwn[17];
        /* word 217: 0 not reported (also for reserved values 0002h-0400h and FFFFh), 1
         * non-rotating (solid state), else rpm */
        uint16_t rotation_rate;
        bool smart_supported;       /* word 82 bit 0, when word 83 bits 15:14 = 01b */
        bool smart_enabled;         /* word 85 bit 0, when word 87 bits 15:14 = 01b */
        bool write_cache_supported; /* word 82 bit 5, same validity */
        bool write_cache_enabled;   /* word 85 bit 5, same validity */
        bool lba48;                 /* word 83 bit 10: 48-bit addressing */
        /* user addressable logical sectors: words 100-103 with lba48, else words 60-61 */
        uint64_t sectors;
        /* bytes: words 117-118 (in words) when word 106 says so, else 512 */
        uint32_t logical_sector_size;
        uint32_t physical_sector_size; /* bytes: logical << word 106 bits 3:0 when valid */
        bool checksum_present;         /* word 255 low byte A5h (and the checksum held) */
};

/* Parses IDENTIFY DEVICE data. len must be at least 512 (more is ignored). Returns 0, -EINVAL
 * when buf is NULL or shorter, -ENODATA when all 512 bytes are zero, -EBADMSG when word 255
 * carries the A5h signature and the 512 bytes do not sum to 0 mod 256. */
int ata_parse_identify(const uint8_t *buf, size_t len, struct ata_identity *ret);

/* One SMART attribute (a 12-byte entry of READ DATA, its threshold from READ THRESHOLDS). */
struct ata_attribute {
        uint8_t id;
        /* bits: 0 pre-failure, 1 online, 2 performance, 3 error rate, 4 event count,
         * 5 self-preserving */
        uint16_t flags;
        uint8_t value, worst, threshold; /* normalized current, worst, threshold */
        bool has_threshold;              /* threshold was read and has an entry with this id */
        /* the 6 raw bytes as a little-endian 48-bit number, smartctl's JSON raw.value */
        uint64_t raw;
};

struct ata_smart {
        uint16_t revision; /* bytes 0-1 */
        size_t n;          /* attributes in attrs, in table order; entries with id 0 skipped */
        struct ata_attribute attrs[ATA_SMART_MAX_ATTRS];
        uint8_t offline_status; /* byte 362: offline data collection status */
        /* byte 363: self-test execution status (bits 7:4 result, 3:0 percent remaining / 10) */
        uint8_t selftest_status;
        uint16_t offline_seconds;       /* bytes 364-365: time to complete offline collection */
        uint8_t offline_capabilities;   /* byte 367 */
        uint16_t smart_capabilities;    /* bytes 368-369 */
        uint8_t selftest_short_min;     /* byte 372: short self-test polling time, minutes */
        uint16_t selftest_extended_min; /* byte 373, or bytes 375-376 when byte 373 is FFh */
};

/* Parses SMART READ DATA (512 bytes; more is ignored). Thresholds are left unset
 * (has_threshold false); see ata_parse_smart_thresholds(). Returns 0, -EINVAL when buf is NULL
 * or shorter, -ENODATA when all 512 bytes are zero, -EBADMSG when the bytes do not sum to 0
 * mod 256 (byte 511 is the checksum). */
int ata_parse_smart_data(const uint8_t *buf, size_t len, struct ata_smart *ret);

/* Parses SMART READ ATTRIBUTE THRESHOLDS (512 bytes: revision, thirty 12-byte entries {id,
 * threshold, reserved}, checksum in byte 511) and fills threshold / has_threshold of the
 * attributes in *inout by id (the entry at the same index first, as smartctl). Attributes
 * without an entry get has_threshold false. Returns 0, -EINVAL when an argument is NULL or
 * len < 512, -ENODATA when all bytes are zero, -EBADMSG on a bad checksum; *inout is unchanged
 * on error. */
int ata_parse_smart_thresholds(const uint8_t *buf, size_t len, struct ata_smart *inout);

/* True when the attribute fails now: it has a threshold, the threshold is not 0 ("always
 * passing") and value <= threshold. smartctl's "FAILING_NOW". */
bool ata_attribute_failing(const struct ata_attribute *a);

/* True when worst <= threshold under the same conditions (smartctl's "In_the_past"). */
bool ata_attribute_failed_past(const struct ata_attribute *a);

/* The name smartctl gives the id without a drive database entry (drivedb.h "DEFAULT"), e.g.
 * "Raw_Read_Error_Rate", "Airflow_Temperature_Cel"; "Unknown_Attribute" for ids without one.
 * A static string. */
const char *ata_attribute_name(uint8_t id);

/* As ata_attribute_name() for a drive of the given IDENTIFY word 217 rotation rate: on a solid
 * state drive (1) a hard-disk-only default name becomes "Unknown_SSD_Attribute", except 202
 * "Percent_Lifetime_Remain" and 231 "SSD_Life_Left" (their meaning on the SSDs that have them);
 * on a spinning drive (> 1) an SSD-only name becomes "Unknown_HDD_Attribute"; with 0 (not
 * reported) the default names stand. A static string. */
const char *ata_attribute_name_rpm(uint8_t id, uint16_t rotation_rate);

/* The unified health values, each with a has_ flag (false: the drive has no such attribute). */
struct ata_derived {
        bool has_temperature;
        /* 194, else 190: raw byte 0 (bytes 2-5 hold min/max); a value outside 1..127 is skipped,
         * as smartctl */
        int temperature_c;
        bool has_power_on_hours;
        /* 9: raw bits 0-23 (smartctl's default raw24 display; bytes 3-5 hold minutes or
         * milliseconds on some drives) */
        uint64_t power_on_hours;
        bool has_power_cycles;
        uint64_t power_cycles; /* 12 */
        bool has_unsafe_shutdowns;
        /* 174 Unexpected power loss count where present (SSDs that count it explicitly), else
         * 192 Power-Off_Retract_Count */
        uint64_t unsafe_shutdowns;
        bool has_reallocated;
        uint64_t reallocated; /* 5: raw bits 0-15 (smartctl's raw16) */
        bool has_pending;
        uint64_t pending; /* 197 */
        bool has_offline_uncorrectable;
        uint64_t offline_uncorrectable; /* 198 */
        bool has_reported_uncorrect;
        uint64_t reported_uncorrect; /* 187: errors ECC could not recover */
        bool has_crc_errors;
        uint64_t crc_errors; /* 199: interface CRC errors */
        bool has_lbas_written;
        uint64_t lbas_written; /* 241, in the drive's unit (usually 512-byte sectors) */
        bool has_lbas_read;
        uint64_t lbas_read; /* 242 */
        bool has_wear;
        /* (100 - normalized value) / 100 clamped to 0..1, from the first present of 233
         * Media_Wearout_Indicator, 231 SSD_Life_Left, 202 Percent_Lifetime_Remain, 177
         * Wear_Leveling_Count: the dedicated attributes win over 177, which some drives use for
         * other things; 231 and 202 only on a solid state drive (rotation rate 1), where they
         * are not HDD counters */
        double wear_used_ratio;
        uint8_t wear_id; /* the attribute it came from, 0 without */
};

/* Derives the unified values from parsed SMART data (raw counts are raw48 unless noted).
 * rotation_rate is IDENTIFY word 217 as in struct ata_identity. Fills all of *ret. */
void ata_derive(const struct ata_smart *s, uint16_t rotation_rate, struct ata_derived *ret);

/* Where the registers of an ata_return came from. */
enum ata_return_format {
        ATA_RETURN_DESCRIPTOR,  /* 72h/73h with the ATA Status Return descriptor (09h) */
        ATA_RETURN_FIXED,       /* 70h/71h as SAT-3: ERROR, STATUS, DEVICE, COUNT in bytes 3-6,
                                    LBA 7:0, 15:8, 23:16 in bytes 9-11 */
        ATA_RETURN_FIXED_LINUX, /* 70h/71h as libata wrote it before Linux 6.11 (commit
                                    38dab832c3f4 fixed the offsets): ERROR, STATUS, DEVICE,
                                    COUNT in bytes 8-11, LBA in bytes 17-19, which an 18-byte
                                    sense cuts after LBA 7:0. Seen on Debian 12's 6.1 kernel for
                                    data-in commands with CK_COND=1 */
};

/* ATA output registers from ATA PASS-THROUGH sense data (the low bytes; 48-bit high bytes are
 * not kept). */
struct ata_return {
        uint8_t error, count, lba_low, lba_mid, lba_high, device, status;
        bool has_lba;   /* lba_low/mid/high were in the sense data */
        bool extend;    /* the EXTEND bit (a 48-bit command's result) */
        uint8_t format; /* enum ata_return_format */
        /* of the sense data (01h/00h/1Dh: ATA PASS-THROUGH INFORMATION AVAILABLE) */
        uint8_t sense_key, asc, ascq;
};

/* Parses ATA PASS-THROUGH sense data in either format: descriptor (72h/73h, searching the
 * descriptor list for type 09h with additional length 0Ch) or fixed (70h/71h, the SAT layout,
 * or the old libata layout, recognized by a clear VALID bit with zero INFORMATION bytes 3-6
 * and a non-zero status in byte 9). Works for the sense of a failed command too (no CK_COND
 * needed): Debian 12's kernel then sends the old fixed layout even for non-data commands. Returns 0, -EINVAL when sense is NULL, too short for its
 * format or not sense data (response code not 70h-73h), -ENODATA when it carries no ATA
 * registers (no 09h descriptor; a fixed-format status of 0). */
int ata_parse_return_sense(const uint8_t *sense, size_t len, struct ata_return *ret);

/* True when the returned status register says the command failed (ERR or DF set; the error
 * register then says why, e.g. 04h ABRT for a SMART command with SMART disabled). */
bool ata_return_failed(const struct ata_return *r);

/* The SMART RETURN STATUS verdict from its returned registers. Returns 1 healthy (LBA mid/high
 * 4Fh/C2h), 0 threshold exceeded (F4h/2Ch), -EIO when the status register says the command
 * failed (ERR or DF set), -ENODATA when the sense held no LBA registers, -EBADMSG for any other
 * LBA value. */
int ata_smart_status_from_return(const struct ata_return *r);

/* Power modes of diskpulse_smart_power_mode. */
enum ata_power_mode {
        ATA_POWER_ACTIVE_IDLE = 0,
        ATA_POWER_STANDBY = 1,
        ATA_POWER_SLEEP = 2,
};

/* The power mode from the count register CHECK POWER MODE returned (ACS-4 table "CHECK POWER
 * MODE normal output"): FFh active or idle, 80h-83h idle (EPC idle_a/b/c), 40h/41h active with
 * the NV cache (ACS-2, obsolete) -> ATA_POWER_ACTIVE_IDLE; 00h standby (standby_z), 01h
 * standby_y -> ATA_POWER_STANDBY. Returns the mode, or -EBADMSG for a reserved value (smartctl
 * then ignores the check and reads; the caller may do the same). SLEEP is never returned: a
 * drive in sleep does not answer, so CHECK POWER MODE fails (ioctl error, or ERR in the
 * returned status); the caller reports ATA_POWER_SLEEP in that case, as smartctl -n does,
 * and sends nothing more to the drive. */
int ata_power_mode_from_count(uint8_t count);
