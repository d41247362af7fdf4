/* Pure parsers of SCSI health data: sense data, INQUIRY and its VPD pages, LOG SENSE pages and
 * the READ DEFECT DATA(10) header.
 *
 * Formats: T10 SPC-5 (INCITS 502; same layouts in SPC-4): 4.4 "Sense data" (fixed format
 * 70h/71h, descriptor format 72h/73h, the Information descriptor 00h), 6.6 "INQUIRY" (standard
 * data), 7.7 "Vital product data" (80h Unit Serial Number, 83h Device Identification with NAA
 * designators), 6.8 "LOG SENSE" and 7.3 "Log parameters" (page header, parameter header;
 * pages 00h Supported Log Pages, 02h/03h/05h Write/Read/Verify Error Counter, 06h Non-Medium
 * Error, 0Dh Temperature, 0Eh Start-Stop Cycle Counter, 2Fh Informational Exceptions); T10
 * SBC-4 (INCITS 506): "Block Device Characteristics VPD page" (B1h), "Solid State Media log
 * page" (11h), "Background Scan Results log page" (15h), "READ DEFECT DATA (10)" parameter
 * data header and the defect list formats.
 * Cross-checked with smartmontools scsicmds.cpp / scsiprint.cpp. Multi-byte fields are
 * big-endian.
 *
 * Bytes in, structs out: no I/O, no globals, no allocation; any thread. The buffers are the
 * data[] / len (or sense[] / sense_len) of a struct devio_result (lib/devio.h) for the
 * DEVIO_SCSI_* commands. Every function leaves its ret_... outputs untouched on failure.
 * Errors: -EINVAL for a NULL argument or truncated or malformed data (a LOG SENSE page cut
 * by the allocation length is not malformed, see scsi_log_page_open()), -EBADMSG for the wrong
 * page, -ENODATA for a page without the value asked. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sense keys used by callers. */
enum {
        SCSI_SK_NO_SENSE = 0x0,
        SCSI_SK_RECOVERED_ERROR = 0x1,
        SCSI_SK_NOT_READY = 0x2,
        SCSI_SK_MEDIUM_ERROR = 0x3,
        SCSI_SK_HARDWARE_ERROR = 0x4,
        SCSI_SK_ILLEGAL_REQUEST = 0x5,
        SCSI_SK_UNIT_ATTENTION = 0x6,
        SCSI_SK_ABORTED_COMMAND = 0xb,
};

struct scsi_sense {
        uint8_t response_code; /* 70h, 71h (fixed), 72h, 73h (descriptor) */
        uint8_t key, asc, ascq;
        bool descriptor; /* 72h/73h */
        bool deferred;   /* 71h/73h: an earlier command's error */
        /* the INFORMATION field is valid (fixed: VALID bit 7 of byte 0; descriptor: an
         * Information descriptor 00h with VALID) */
        bool valid;
        uint64_t information;
};

/* Parses sense data of either format. Fields the (short) data does not reach are 0. Returns
 * 0, -EINVAL for NULL, len 0, fixed data shorter than 3 bytes or descriptor data shorter than
 * 4, or a response code other than 70h-73h. */
int scsi_parse_sense(const uint8_t *sense, size_t len, struct scsi_sense *ret);

/* True when the sense says the device lacks the command or page asked for: ILLEGAL REQUEST with
 * ASC 20h (INVALID COMMAND OPERATION CODE) or 24h (INVALID FIELD IN CDB), as scsi_debug answers
 * LOG SENSE of a page it does not have and READ DEFECT DATA. False for NULL. */
bool scsi_sense_unsupported(const struct scsi_sense *s);

struct scsi_inquiry {
        uint8_t qualifier;   /* peripheral qualifier, byte 0 bits 7:5 */
        uint8_t device_type; /* peripheral device type, byte 0 bits 4:0 (0 = disk) */
        bool removable;      /* RMB, byte 1 bit 7 */
        uint8_t version;     /* byte 2: 5 SPC-3, 6 SPC-4, 7 SPC-5 */
        char vendor[9];      /* bytes 8-15 */
        char product[17];    /* bytes 16-31 */
        char revision[5];    /* bytes 32-35 */
};

/* Parses standard INQUIRY data (at least 36 bytes). Strings trimmed of leading and trailing
 * spaces, bytes outside ' '..'~' replaced by '?'. Returns 0, -EINVAL when shorter, -ENODATA
 * when the peripheral qualifier is 3 (no logical unit). */
int scsi_parse_inquiry(const uint8_t *buf, size_t len, struct scsi_inquiry *ret);

/* Copies the Unit Serial Number (VPD 80h, bytes 4..) into out, trimmed as above. Returns 0,
 * -EINVAL when buf is shorter than its page length says, -EBADMSG for another page, -ENODATA
 * for an empty serial, -ENOBUFS when it does not fit in size (out untouched). */
int scsi_parse_vpd_serial(const uint8_t *buf, size_t len, char *out, size_t size);

/* The medium rotation rate of VPD B1h (Block Device Characteristics, bytes 4-5): 1 = non-rotating
 * (solid state), 0401h-FFFEh rpm; 0 = not reported, also for the reserved values. Returns 0,
 * -EINVAL when shorter than 6 bytes or its page length, -EBADMSG for another page. */
int scsi_parse_vpd_rotation(const uint8_t *buf, size_t len, uint16_t *rpm);

/* The logical unit's NAA designator from VPD 83h (association 0, designator type 3, binary) as
 * lowercase hex digits without "0x" (16 for NAA 2/3/5, 32 for NAA 6), as smartctl's
 * logical_unit_id. Returns 0, -EINVAL when truncated, -EBADMSG for another page, -ENODATA
 * without such a designator, -ENOBUFS when it does not fit in size. */
int scsi_parse_vpd_wwn(const uint8_t *buf, size_t len, char *out, size_t size);

/* One log parameter: code, control byte, value bytes (pointing into the page). */
struct scsi_log_param {
        uint16_t code;
        uint8_t control;
        uint8_t len;
        const uint8_t *value;
};

/* A cursor over the parameters of one LOG SENSE page. */
struct scsi_log_iter {
        const uint8_t *p;
        size_t left;
        bool truncated; /* the page is longer than the buffer (cut by the allocation length) */
};

/* Checks a LOG SENSE page header (byte 0 bits 5:0 page code, byte 1 subpage, bytes 2-3 page length)
 * and starts a walk over its parameters. A page longer than the buffer is taken as cut by the
 * allocation length (SPC-5 4.2.5.6: privsep/devio_linux.c reads at most DEVIO_DATA_MAX bytes, and
 * page 15h can be far longer): the walk covers the bytes that are there. Returns 0, -EINVAL when
 * NULL or shorter than the 4-byte header, -EBADMSG when the page or subpage is not the one asked
 * for. */
int scsi_log_page_open(const uint8_t *buf, size_t len, uint8_t page, uint8_t subpage,
                       struct scsi_log_iter *ret);

/* Moves to the next parameter (4-byte header: code, control, length; then the value). Returns
 * 1 with *ret set; 0 at the end of the page, or at a parameter the buffer cuts in a truncated
 * page; -EINVAL when a parameter runs past the page length (a malformed page). */
int scsi_log_next(struct scsi_log_iter *it, struct scsi_log_param *ret);

/* A parameter value as a big-endian unsigned number; values longer than 8 bytes saturate to
 * UINT64_MAX when their extra high bytes are not zero. */
uint64_t scsi_log_param_u64(const struct scsi_log_param *p);

/* The page codes listed by the Supported Log Pages page (00h). With subpage 00h the list is one
 * byte per page; with the subpage list (subpage FFh, pairs of page and subpage) the pages with
 * subpage 00h are returned. At most max are stored (a max of 64 never truncates); *n is the
 * number stored. Returns 0 or the errors of scsi_log_page_open(). */
int scsi_parse_supported_pages(const uint8_t *buf, size_t len, uint8_t *pages, size_t max,
                               size_t *n);

/* Temperature page (0Dh), parameter 0000h (current) and 0001h (reference), value byte 1 in
 * degrees Celsius, FFh = not available. */
struct scsi_temperature {
        bool has_current;
        int current_c;
        bool has_reference;
        int reference_c; /* the maximum for continuous operation ("drive trip" in smartctl) */
};

/* Parses page 0Dh subpage 0. Returns 0 when at least one value is there, -ENODATA when neither
 * is, or the walk's errors. */
int scsi_parse_temperature(const uint8_t *buf, size_t len, struct scsi_temperature *ret);

/* Background Scan Results page (15h, SBC-4), Background Scan Status parameter 0000h (at least
 * 12 value bytes): smartctl's "Accumulated power on time". */
struct scsi_background_scan {
        uint32_t power_on_minutes; /* value bytes 0-3: accumulated power on minutes */
        uint8_t status;            /* value byte 5: background scan status */
        uint16_t scans;            /* value bytes 6-7: background scans performed */
        uint16_t progress;         /* value bytes 8-9: scan progress, 65536ths */
        uint16_t medium_scans;     /* value bytes 10-11: background medium scans performed */
};

/* Parses page 15h. Returns 0, -ENODATA without parameter 0000h of at least 12 bytes, or the
 * walk's errors. */
int scsi_parse_background_scan(const uint8_t *buf, size_t len, struct scsi_background_scan *ret);

/* Informational Exceptions page (2Fh), parameter 0000h. */
struct scsi_ie {
        uint8_t asc, ascq; /* the most recent informational exception */
        /* ASC 5Dh (FAILURE PREDICTION THRESHOLD EXCEEDED, incl. the 5Dh/FFh a TEST=1 mode page
         * produces) */
        bool failure_predicted;
        bool has_temperature; /* value byte 2 present and not FFh */
        int temperature_c;
};

/* Parses page 2Fh. Returns 0, -ENODATA without parameter 0000h of at least 2 bytes, or the
 * walk's errors. */
int scsi_parse_ie(const uint8_t *buf, size_t len, struct scsi_ie *ret);

/* Parameters 0000h-0006h of the Write (02h), Read (03h) and Verify (05h) Error Counter pages. */
enum scsi_error_counter {
        SCSI_ERR_CORRECTED_FAST = 0,        /* errors corrected without substantial delay */
        SCSI_ERR_CORRECTED_DELAYED = 1,     /* errors corrected with possible delays */
        SCSI_ERR_REREADS = 2,               /* total rewrites or rereads */
        SCSI_ERR_CORRECTED_TOTAL = 3,       /* total errors corrected */
        SCSI_ERR_ALGORITHM_INVOCATIONS = 4, /* total times the correction algorithm ran */
        SCSI_ERR_BYTES_PROCESSED = 5,       /* total bytes processed */
        SCSI_ERR_UNCORRECTED = 6,           /* total uncorrected errors */
        SCSI_ERR_COUNTERS = 7,
};

struct scsi_error_counters {
        uint32_t present; /* bit (1u << enum scsi_error_counter) for each parameter found */
        uint64_t v[SCSI_ERR_COUNTERS];
};

/* Parses error counter page `page` (02h, 03h or 05h); vendor parameters are ignored. Returns
 * 0, -EINVAL for another page argument, -ENODATA when no parameter 0000h-0006h is there, or
 * the walk's errors. */
int scsi_parse_error_counters(const uint8_t *buf, size_t len, uint8_t page,
                              struct scsi_error_counters *ret);

/* The Non-Medium Error count (page 06h, parameter 0000h). Returns 0, -ENODATA without it, or
 * the walk's errors. */
int scsi_parse_nonmedium_errors(const uint8_t *buf, size_t len, uint64_t *count);

/* Start-Stop Cycle Counter page (0Eh). */
struct scsi_start_stop {
        bool has_specified_cycles;
        uint32_t specified_cycles; /* 0003h: start-stop cycles specified over the lifetime */
        bool has_accumulated_cycles;
        uint32_t accumulated_cycles; /* 0004h: accumulated start-stop cycles (power cycles) */
        bool has_specified_load_unload;
        uint32_t specified_load_unload; /* 0005h */
        bool has_accumulated_load_unload;
        uint32_t accumulated_load_unload; /* 0006h */
};

/* Parses page 0Eh (4-byte counters; other lengths are skipped). Returns 0, -ENODATA when none
 * of the four counters is there, or the walk's errors. */
int scsi_parse_start_stop(const uint8_t *buf, size_t len, struct scsi_start_stop *ret);

/* Percentage Used Endurance Indicator of the Solid State Media page (11h, parameter 0001h,
 * value byte 3 = parameter byte 7); may exceed 100. Returns 0, -ENODATA without it, or the
 * walk's errors. */
int scsi_parse_ssd(const uint8_t *buf, size_t len, uint8_t *percent_used);

/* Grown defects from a READ DEFECT DATA(10) header (byte 1: PLISTV bit 4, GLISTV bit 3, list
 * format bits 2:0; bytes 2-3: defect list length in bytes): the length divided by the
 * descriptor size of the format the device returned (4 for short block, 8 for the others, as
 * smartctl). Returns 0, -EINVAL when shorter than 4 bytes, -ENODATA when GLISTV is not set (the
 * grown list is not there), -EBADMSG for a vendor-specific or reserved format. */
int scsi_parse_defect_count(const uint8_t *buf, size_t len, uint32_t *grown);
