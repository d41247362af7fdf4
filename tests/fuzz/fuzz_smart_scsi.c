/* Fuzz target of the SCSI parsers: sense, INQUIRY, VPD pages, every LOG SENSE page, defects. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "smart_scsi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rc(int r)
{
        if (r != 0 && r != -EINVAL && r != -EBADMSG && r != -ENODATA && r != -ENOBUFS)
                abort();
}

/* Walks a page by hand with the iterator and checks that parameters stay inside it. */
static void check_walk(const uint8_t *buf, size_t len)
{
        struct scsi_log_iter it;
        struct scsi_log_param p;
        int r;

        if (len < 2 || scsi_log_page_open(buf, len, buf[0] & 0x3f, buf[1], &it) < 0)
                return;
        while ((r = scsi_log_next(&it, &p)) > 0) {
                if (p.value < buf + 4 || p.value + p.len > buf + len)
                        abort();
                (void)scsi_log_param_u64(&p);
        }
        if (r < 0 && r != -EINVAL)
                abort();
}

static void check_all(const uint8_t *buf, size_t len)
{
        struct scsi_sense s;
        struct scsi_inquiry q;
        struct scsi_temperature t;
        struct scsi_ie ie;
        struct scsi_error_counters ec;
        struct scsi_start_stop ss;
        struct scsi_background_scan bs;
        uint8_t pages[64], used;
        char out[300];
        uint64_t count;
        uint32_t grown;
        uint16_t rpm;
        size_t n;
        int r;

        r = scsi_parse_sense(buf, len, &s);
        check_rc(r);
        if (r == 0 && (s.key > 15 || s.response_code < 0x70 || s.response_code > 0x73))
                abort();
        if (r == 0 && scsi_sense_unsupported(&s) && s.key != SCSI_SK_ILLEGAL_REQUEST)
                abort();
        r = scsi_parse_inquiry(buf, len, &q);
        check_rc(r);
        if (r == 0) {
                fuzz_check_string(q.vendor, sizeof(q.vendor));
                fuzz_check_string(q.product, sizeof(q.product));
                fuzz_check_string(q.revision, sizeof(q.revision));
        }
        r = scsi_parse_vpd_serial(buf, len, out, sizeof(out));
        check_rc(r);
        if (r == 0)
                fuzz_check_string(out, sizeof(out));
        (void)scsi_parse_vpd_serial(buf, len, out, 4);
        check_rc(scsi_parse_vpd_rotation(buf, len, &rpm));
        r = scsi_parse_vpd_wwn(buf, len, out, sizeof(out));
        check_rc(r);
        if (r == 0 && strlen(out) != 16 && strlen(out) != 32)
                abort();
        (void)scsi_parse_vpd_wwn(buf, len, out, 17);
        r = scsi_parse_supported_pages(buf, len, pages, sizeof(pages), &n);
        check_rc(r);
        if (r == 0) {
                if (n > sizeof(pages))
                        abort();
                for (size_t i = 0; i < n; i++)
                        if (pages[i] > 0x3f)
                                abort();
        }
        r = scsi_parse_supported_pages(buf, len, pages, 2, &n);
        if (r == 0 && n > 2)
                abort();
        r = scsi_parse_temperature(buf, len, &t);
        check_rc(r);
        if (r == 0 &&
            ((!t.has_current && !t.has_reference) || t.current_c > 254 || t.reference_c > 254))
                abort();
        r = scsi_parse_ie(buf, len, &ie);
        check_rc(r);
        if (r == 0 && ie.failure_predicted != (ie.asc == 0x5d))
                abort();
        for (uint8_t page = 2; page <= 5; page++) {
                r = scsi_parse_error_counters(buf, len, page, &ec);
                check_rc(r);
                if (r == 0 && (ec.present == 0 || ec.present >> SCSI_ERR_COUNTERS))
                        abort();
        }
        check_rc(scsi_parse_nonmedium_errors(buf, len, &count));
        check_rc(scsi_parse_start_stop(buf, len, &ss));
        check_rc(scsi_parse_ssd(buf, len, &used));
        check_rc(scsi_parse_background_scan(buf, len, &bs));
        r = scsi_parse_defect_count(buf, len, &grown);
        check_rc(r);
        if (r == 0 && grown > 0xffff / 4)
                abort();
        check_walk(buf, len);
}

/* Exact-size copy of data with byte at position pos set to v (when it exists). */
static void check_patched(const uint8_t *data, size_t size, size_t pos, uint8_t v, size_t pos2,
                          uint8_t v2)
{
        uint8_t *b;

        if (size <= pos || size <= pos2)
                return;
        b = fuzz_copy(data, size, size);
        b[pos] = v;
        b[pos2] = v2;
        check_all(b, size);
        free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const uint8_t log_pages[] = {0x00, 0x02, 0x03, 0x05, 0x06,
                                            0x0d, 0x0e, 0x11, 0x15, 0x2f};
        static const uint8_t vpd_pages[] = {0x80, 0x83, 0xb1};

        check_all(data, size);
        /* The same bytes as each page the parsers take, so mutations reach the page bodies. */
        for (size_t i = 0; i < sizeof(log_pages); i++)
                check_patched(data, size, 0, log_pages[i], 1, 0);
        check_patched(data, size, 0, 0x40, 1, 0xff);
        for (size_t i = 0; i < sizeof(vpd_pages); i++)
                check_patched(data, size, 1, vpd_pages[i], 0, 0);
        check_patched(data, size, 0, 0x70, 0, 0x70);
        check_patched(data, size, 0, 0x72, 0, 0x72);
        return 0;
}
