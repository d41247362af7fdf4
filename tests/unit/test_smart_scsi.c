/* Unit tests of the SCSI parsers (sense, INQUIRY, VPD, the LOG SENSE walker and every page, READ
 * DEFECT DATA) on hand-built pages and on scsi_debug captures checked against smartctl's JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture_json.h"

#include "smart_scsi.h"

/* ---- hand-built pages */

/* A LOG SENSE page under construction. */
struct page {
        uint8_t b[512];
        size_t len;
};

static void page_start(struct page *p, uint8_t code, uint8_t subpage)
{
        memset(p, 0, sizeof(*p));
        p->b[0] = (uint8_t)(code | (subpage ? 0x40 : 0));
        p->b[1] = subpage;
        p->len = 4;
}

/* Appends a parameter with n value bytes; updates the page length. */
static void page_param(struct page *p, uint16_t code, const uint8_t *v, uint8_t n)
{
        p->b[p->len] = (uint8_t)(code >> 8);
        p->b[p->len + 1] = (uint8_t)code;
        p->b[p->len + 2] = 0x03; /* control: binary, as scsi_debug sends */
        p->b[p->len + 3] = n;
        if (n)
                memcpy(p->b + p->len + 4, v, n);
        p->len += 4 + (size_t)n;
        p->b[2] = (uint8_t)((p->len - 4) >> 8);
        p->b[3] = (uint8_t)(p->len - 4);
}

/* Appends a big-endian counter parameter of n bytes. */
static void page_counter(struct page *p, uint16_t code, uint64_t v, uint8_t n)
{
        uint8_t b[32] = {0};

        for (uint8_t i = 0; i < n && i < 8; i++)
                b[n - 1 - i] = (uint8_t)(v >> (8 * i));
        page_param(p, code, b, n);
}

static void test_sense_fixed(void **state)
{
        uint8_t s[32];
        struct scsi_sense r, keep;
        (void)state;

        /* MEDIUM ERROR, unrecovered read error, INFORMATION = failing LBA */
        memset(s, 0, sizeof(s));
        s[0] = 0xf0;
        s[2] = 0x03;
        s[3] = 0x00, s[4] = 0x12, s[5] = 0x34, s[6] = 0x56;
        s[7] = 10;
        s[12] = 0x11;
        s[13] = 0x00;
        assert_int_equal(scsi_parse_sense(s, 18, &r), 0);
        assert_int_equal(r.response_code, 0x70);
        assert_int_equal(r.key, SCSI_SK_MEDIUM_ERROR);
        assert_int_equal(r.asc, 0x11);
        assert_int_equal(r.ascq, 0x00);
        assert_false(r.descriptor);
        assert_false(r.deferred);
        assert_true(r.valid);
        assert_int_equal(r.information, 0x123456);
        /* deferred, VALID clear */
        s[0] = 0x71;
        assert_int_equal(scsi_parse_sense(s, 18, &r), 0);
        assert_true(r.deferred);
        assert_false(r.valid);
        /* short buffers: what is there */
        s[0] = 0x70;
        assert_int_equal(scsi_parse_sense(s, 13, &r), 0);
        assert_int_equal(r.asc, 0x11);
        assert_int_equal(r.ascq, 0);
        assert_int_equal(scsi_parse_sense(s, 3, &r), 0);
        assert_int_equal(r.key, SCSI_SK_MEDIUM_ERROR);
        assert_int_equal(r.asc, 0);
        /* the additional length ends the data before ASC */
        s[7] = 2;
        assert_int_equal(scsi_parse_sense(s, 18, &r), 0);
        assert_int_equal(r.asc, 0);
        /* errors leave *ret alone */
        memset(&keep, 0x5a, sizeof(keep));
        r = keep;
        assert_int_equal(scsi_parse_sense(s, 2, &r), -EINVAL);
        assert_int_equal(scsi_parse_sense(s, 0, &r), -EINVAL);
        assert_int_equal(scsi_parse_sense(NULL, 18, &r), -EINVAL);
        s[0] = 0x7f; /* vendor specific */
        assert_int_equal(scsi_parse_sense(s, 18, &r), -EINVAL);
        s[0] = 0x00;
        assert_int_equal(scsi_parse_sense(s, 18, &r), -EINVAL);
        assert_memory_equal(&r, &keep, sizeof(r));
        s[0] = 0x70;
        assert_int_equal(scsi_parse_sense(s, 18, NULL), -EINVAL);
}

static void test_sense_descriptor(void **state)
{
        uint8_t s[40];
        struct scsi_sense r;
        (void)state;

        /* NOT READY, 04h/02h, with an ATA descriptor then an Information descriptor */
        memset(s, 0, sizeof(s));
        s[0] = 0x72;
        s[1] = 0x02;
        s[2] = 0x04;
        s[3] = 0x02;
        s[7] = 14 + 12;
        s[8] = 0x09;
        s[9] = 0x0c;
        s[22] = 0x00;
        s[23] = 0x0a;
        s[24] = 0x80;
        s[32] = 0xde, s[33] = 0xad;
        assert_int_equal(scsi_parse_sense(s, 34, &r), 0);
        assert_int_equal(r.response_code, 0x72);
        assert_true(r.descriptor);
        assert_false(r.deferred);
        assert_int_equal(r.key, SCSI_SK_NOT_READY);
        assert_int_equal(r.asc, 0x04);
        assert_int_equal(r.ascq, 0x02);
        assert_true(r.valid);
        assert_int_equal(r.information, 0xdead);
        /* the Information descriptor cut off: not valid */
        assert_int_equal(scsi_parse_sense(s, 33, &r), 0);
        assert_false(r.valid);
        assert_int_equal(r.asc, 0x04);
        /* deferred; header only; too short */
        s[0] = 0x73;
        assert_int_equal(scsi_parse_sense(s, 4, &r), 0);
        assert_true(r.deferred);
        assert_int_equal(r.ascq, 0x02);
        assert_int_equal(scsi_parse_sense(s, 3, &r), -EINVAL);
        /* the QEMU AHCI disk's RETURN STATUS sense, read as plain sense */
        uint8_t q[64];
        size_t n = fixture_load("qemu-ahci-return-status.sense", q, sizeof(q));
        assert_int_equal(scsi_parse_sense(q, n, &r), 0);
        assert_int_equal(r.key, SCSI_SK_RECOVERED_ERROR);
        assert_int_equal(r.asc, 0x00);
        assert_int_equal(r.ascq, 0x1d); /* ATA PASS-THROUGH INFORMATION AVAILABLE */
}

static void test_sense_captured(void **state)
{
        uint8_t s[64];
        struct scsi_sense r;
        size_t n;
        (void)state;

        /* LOG SENSE of a page scsi_debug lacks: INVALID FIELD IN CDB */
        n = fixture_load("scsi-debug-log-02.sense", s, sizeof(s));
        assert_int_equal(scsi_parse_sense(s, n, &r), 0);
        assert_int_equal(r.response_code, 0x70);
        assert_int_equal(r.key, SCSI_SK_ILLEGAL_REQUEST);
        assert_int_equal(r.asc, 0x24);
        assert_int_equal(r.ascq, 0x00);
        assert_false(r.valid);
        /* READ DEFECT DATA: INVALID COMMAND OPERATION CODE */
        n = fixture_load("scsi-debug-read-defect.sense", s, sizeof(s));
        assert_int_equal(scsi_parse_sense(s, n, &r), 0);
        assert_int_equal(r.key, SCSI_SK_ILLEGAL_REQUEST);
        assert_int_equal(r.asc, 0x20);
        assert_int_equal(r.ascq, 0x00);
        assert_true(scsi_sense_unsupported(&r));
        n = fixture_load("scsi-debug-log-02.sense", s, sizeof(s));
        assert_int_equal(scsi_parse_sense(s, n, &r), 0);
        assert_true(scsi_sense_unsupported(&r));
        r.key = SCSI_SK_MEDIUM_ERROR;
        assert_false(scsi_sense_unsupported(&r));
        r = (struct scsi_sense){.key = SCSI_SK_ILLEGAL_REQUEST, .asc = 0x21};
        assert_false(scsi_sense_unsupported(&r)); /* LBA out of range */
        assert_false(scsi_sense_unsupported(NULL));
}

static void test_inquiry(void **state)
{
        uint8_t b[96];
        struct scsi_inquiry q, keep;
        (void)state;

        memset(b, 0, sizeof(b));
        b[0] = 0x00;
        b[1] = 0x80;
        b[2] = 0x06;
        memcpy(b + 8, "SEAGATE ST4000NM0023    0004", 28);
        assert_int_equal(scsi_parse_inquiry(b, 36, &q), 0);
        assert_int_equal(q.device_type, 0);
        assert_int_equal(q.qualifier, 0);
        assert_true(q.removable);
        assert_int_equal(q.version, 6);
        assert_string_equal(q.vendor, "SEAGATE");
        assert_string_equal(q.product, "ST4000NM0023");
        assert_string_equal(q.revision, "0004");
        /* non-printables, another device type */
        b[0] = 0x05;
        b[9] = 0x01;
        assert_int_equal(scsi_parse_inquiry(b, sizeof(b), &q), 0);
        assert_int_equal(q.device_type, 5);
        assert_string_equal(q.vendor, "S?AGATE");
        memset(&keep, 0x5a, sizeof(keep));
        q = keep;
        assert_int_equal(scsi_parse_inquiry(b, 35, &q), -EINVAL);
        assert_int_equal(scsi_parse_inquiry(NULL, 36, &q), -EINVAL);
        b[0] = 0x7f; /* qualifier 3: no logical unit */
        assert_int_equal(scsi_parse_inquiry(b, 36, &q), -ENODATA);
        assert_memory_equal(&q, &keep, sizeof(q));
}

static void test_vpd_serial(void **state)
{
        uint8_t b[32] = {0x00, 0x80, 0x00, 12};
        char out[16], keep[16];
        (void)state;

        memcpy(b + 4, "  ZC12AB34  ", 12);
        assert_int_equal(scsi_parse_vpd_serial(b, 16, out, sizeof(out)), 0);
        assert_string_equal(out, "ZC12AB34");
        assert_int_equal(scsi_parse_vpd_serial(b, 32, out, 9), 0); /* exactly fits */
        memcpy(keep, out, sizeof(out));
        assert_int_equal(scsi_parse_vpd_serial(b, 32, out, 8), -ENOBUFS);
        assert_int_equal(scsi_parse_vpd_serial(b, 15, out, sizeof(out)), -EINVAL); /* truncated */
        assert_int_equal(scsi_parse_vpd_serial(b, 3, out, sizeof(out)), -EINVAL);
        assert_int_equal(scsi_parse_vpd_serial(NULL, 16, out, sizeof(out)), -EINVAL);
        assert_int_equal(scsi_parse_vpd_serial(b, 16, NULL, sizeof(out)), -EINVAL);
        b[1] = 0x83;
        assert_int_equal(scsi_parse_vpd_serial(b, 16, out, sizeof(out)), -EBADMSG);
        b[1] = 0x80;
        memset(b + 4, ' ', 12);
        assert_int_equal(scsi_parse_vpd_serial(b, 16, out, sizeof(out)), -ENODATA);
        b[3] = 0;
        assert_int_equal(scsi_parse_vpd_serial(b, 4, out, sizeof(out)), -ENODATA);
        assert_memory_equal(out, keep, sizeof(out));
}

static void test_vpd_rotation(void **state)
{
        uint8_t b[64] = {0x00, 0xb1, 0x00, 0x3c, 0x1c, 0x20};
        uint16_t rpm = 0xabcd;
        (void)state;

        assert_int_equal(scsi_parse_vpd_rotation(b, 64, &rpm), 0);
        assert_int_equal(rpm, 7200);
        b[4] = 0, b[5] = 1;
        assert_int_equal(scsi_parse_vpd_rotation(b, 64, &rpm), 0);
        assert_int_equal(rpm, 1);
        b[4] = 0, b[5] = 0;
        assert_int_equal(scsi_parse_vpd_rotation(b, 64, &rpm), 0);
        assert_int_equal(rpm, 0);
        b[4] = 0x04, b[5] = 0x00; /* reserved */
        assert_int_equal(scsi_parse_vpd_rotation(b, 64, &rpm), 0);
        assert_int_equal(rpm, 0);
        b[4] = 0xff, b[5] = 0xff; /* reserved */
        assert_int_equal(scsi_parse_vpd_rotation(b, 64, &rpm), 0);
        assert_int_equal(rpm, 0);
        rpm = 0xabcd;
        assert_int_equal(scsi_parse_vpd_rotation(b, 63, &rpm), -EINVAL);
        b[3] = 1; /* page too short for the field */
        assert_int_equal(scsi_parse_vpd_rotation(b, 64, &rpm), -EINVAL);
        b[3] = 0x3c;
        b[1] = 0xb0;
        assert_int_equal(scsi_parse_vpd_rotation(b, 64, &rpm), -EBADMSG);
        assert_int_equal(scsi_parse_vpd_rotation(b, 64, NULL), -EINVAL);
        assert_int_equal(rpm, 0xabcd);
}

static void test_vpd_wwn(void **state)
{
        uint8_t b[128];
        char out[40];
        size_t n = 4;
        (void)state;

        memset(b, 0, sizeof(b));
        b[1] = 0x83;
        /* T10 vendor id (ASCII), a target port NAA (association 1), then the LU's NAA 6 */
        memcpy(b + n, "\x02\x01\x00\x08SEAGATE ", 12);
        n += 12;
        memcpy(b + n, "\x61\x93\x00\x08\x50\x00\xc5\x00\x11\x22\x33\x44", 12);
        n += 12;
        memcpy(b + n,
               "\x01\x03\x00\x10\x60\x00\xc5\x00\xaa\xbb\xcc\xdd\x01\x02\x03\x04\x05\x06\x07\x08",
               20);
        n += 20;
        b[3] = (uint8_t)(n - 4);
        assert_int_equal(scsi_parse_vpd_wwn(b, n, out, sizeof(out)), 0);
        assert_string_equal(out, "6000c500aabbccdd0102030405060708");
        assert_int_equal(scsi_parse_vpd_wwn(b, n, out, 32), -ENOBUFS);
        /* NAA 5 of 8 bytes */
        memcpy(b + 28, "\x01\x03\x00\x08\x50\x00\xc5\x00\xaa\xbb\xcc\xdd", 12);
        b[3] = 36;
        assert_int_equal(scsi_parse_vpd_wwn(b, 40, out, sizeof(out)), 0);
        assert_string_equal(out, "5000c500aabbccdd");
        /* a descriptor running past the page */
        b[31] = 0x09;
        assert_int_equal(scsi_parse_vpd_wwn(b, 40, out, sizeof(out)), -EINVAL);
        /* only the target port's NAA: none for the logical unit */
        b[3] = 24;
        assert_int_equal(scsi_parse_vpd_wwn(b, 28, out, sizeof(out)), -ENODATA);
        b[1] = 0x80;
        assert_int_equal(scsi_parse_vpd_wwn(b, 28, out, sizeof(out)), -EBADMSG);
}

static void test_log_walker(void **state)
{
        struct page p;
        struct scsi_log_iter it;
        struct scsi_log_param prm;
        (void)state;

        page_start(&p, 0x0d, 0);
        page_counter(&p, 0x0000, 0x26, 2);
        page_counter(&p, 0x8001, 0x1234, 4);
        page_param(&p, 0x0002, NULL, 0);
        assert_int_equal(scsi_log_page_open(p.b, p.len, 0x0d, 0, &it), 0);
        assert_int_equal(scsi_log_next(&it, &prm), 1);
        assert_int_equal(prm.code, 0);
        assert_int_equal(prm.control, 3);
        assert_int_equal(prm.len, 2);
        assert_int_equal(scsi_log_param_u64(&prm), 0x26);
        assert_int_equal(scsi_log_next(&it, &prm), 1);
        assert_int_equal(prm.code, 0x8001);
        assert_int_equal(scsi_log_param_u64(&prm), 0x1234);
        assert_int_equal(scsi_log_next(&it, &prm), 1);
        assert_int_equal(prm.len, 0);
        assert_int_equal(scsi_log_param_u64(&prm), 0);
        assert_int_equal(scsi_log_next(&it, &prm), 0);
        assert_int_equal(scsi_log_next(&it, &prm), 0);

        /* the page asked for, and its subpage */
        assert_int_equal(scsi_log_page_open(p.b, p.len, 0x2f, 0, &it), -EBADMSG);
        assert_int_equal(scsi_log_page_open(p.b, p.len, 0x0d, 1, &it), -EBADMSG);
        p.b[0] |= 0x80; /* DS bit does not matter */
        assert_int_equal(scsi_log_page_open(p.b, p.len, 0x0d, 0, &it), 0);
        /* a page longer than the buffer (the allocation length cut it): read up to the cut */
        assert_int_equal(scsi_log_page_open(p.b, p.len - 1, 0x0d, 0, &it), 0);
        assert_true(it.truncated);
        assert_int_equal(scsi_log_next(&it, &prm), 1);
        assert_int_equal(scsi_log_next(&it, &prm), 1);
        assert_int_equal(prm.code, 0x8001);
        assert_int_equal(scsi_log_next(&it, &prm), 0); /* the cut 0-byte parameter */
        assert_int_equal(scsi_log_page_open(p.b, 12, 0x0d, 0, &it), 0);
        assert_int_equal(scsi_log_next(&it, &prm), 1);
        assert_int_equal(scsi_log_next(&it, &prm), 0); /* cut inside the second header */
        assert_int_equal(scsi_log_page_open(p.b, 4, 0x0d, 0, &it), 0);
        assert_int_equal(scsi_log_next(&it, &prm), 0);
        /* a header cut short */
        assert_int_equal(scsi_log_page_open(p.b, 3, 0x0d, 0, &it), -EINVAL);
        assert_int_equal(scsi_log_page_open(NULL, 16, 0x0d, 0, &it), -EINVAL);
        /* a parameter whose length runs past the page */
        p.b[4 + 3] = 200;
        assert_int_equal(scsi_log_page_open(p.b, p.len, 0x0d, 0, &it), 0);
        assert_false(it.truncated);
        assert_int_equal(scsi_log_next(&it, &prm), -EINVAL);
        assert_int_equal(scsi_log_next(&it, &prm), 0); /* the walk is over */
        p.b[4 + 3] = 2;
        /* a page that ends inside a parameter header */
        p.b[3] = (uint8_t)(p.b[3] + 2);
        assert_int_equal(scsi_log_page_open(p.b, sizeof(p.b), 0x0d, 0, &it), 0);
        assert_int_equal(scsi_log_next(&it, &prm), 1);
        assert_int_equal(scsi_log_next(&it, &prm), 1);
        assert_int_equal(scsi_log_next(&it, &prm), 1);
        assert_int_equal(scsi_log_next(&it, &prm), -EINVAL);
        assert_int_equal(scsi_log_next(NULL, &prm), -EINVAL);

        /* counters longer than 8 bytes saturate unless their extra bytes are zero */
        const uint8_t v[10] = {0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
        prm = (struct scsi_log_param){.len = 10, .value = v};
        assert_true(scsi_log_param_u64(&prm) == 0x0102030405060708ULL);
        const uint8_t big[10] = {0, 1, 1, 2, 3, 4, 5, 6, 7, 8};
        prm.value = big;
        assert_true(scsi_log_param_u64(&prm) == UINT64_MAX);
        assert_int_equal(scsi_log_param_u64(NULL), 0);
}

static void test_supported_pages(void **state)
{
        uint8_t pages[64];
        size_t n = 99;
        uint8_t b[] = {0x00, 0x00, 0x00, 0x08, 0x00, 0x02, 0x03, 0x05, 0x06, 0x0d, 0x0e, 0x2f};
        (void)state;

        assert_int_equal(scsi_parse_supported_pages(b, sizeof(b), pages, 64, &n), 0);
        assert_int_equal(n, 8);
        assert_memory_equal(pages, b + 4, 8);
        assert_int_equal(scsi_parse_supported_pages(b, sizeof(b), pages, 3, &n), 0);
        assert_int_equal(n, 3);
        assert_int_equal(scsi_parse_supported_pages(b, sizeof(b), NULL, 0, &n), 0);
        assert_int_equal(n, 0);
        /* cut by the buffer: the pages that are there */
        assert_int_equal(scsi_parse_supported_pages(b, sizeof(b) - 1, pages, 64, &n), 0);
        assert_int_equal(n, 7);
        n = 99;
        assert_int_equal(scsi_parse_supported_pages(b, 3, pages, 64, &n), -EINVAL);
        b[0] = 0x0d;
        assert_int_equal(scsi_parse_supported_pages(b, sizeof(b), pages, 64, &n), -EBADMSG);
        assert_int_equal(n, 99);
        assert_int_equal(scsi_parse_supported_pages(b, sizeof(b), pages, 64, NULL), -EINVAL);
}

static void test_temperature(void **state)
{
        struct page p;
        struct scsi_temperature t, keep;
        (void)state;

        page_start(&p, 0x0d, 0);
        page_param(&p, 0x0000, (const uint8_t[]){0, 41}, 2);
        page_param(&p, 0x0001, (const uint8_t[]){0, 70}, 2);
        assert_int_equal(scsi_parse_temperature(p.b, p.len, &t), 0);
        assert_true(t.has_current && t.has_reference);
        assert_int_equal(t.current_c, 41);
        assert_int_equal(t.reference_c, 70);
        /* FFh: not available */
        p.b[9] = 0xff;
        assert_int_equal(scsi_parse_temperature(p.b, p.len, &t), 0);
        assert_false(t.has_current);
        assert_true(t.has_reference);
        p.b[15] = 0xff;
        memset(&keep, 0x5a, sizeof(keep));
        t = keep;
        assert_int_equal(scsi_parse_temperature(p.b, p.len, &t), -ENODATA);
        /* truncated parameter, wrong page, empty page */
        p.b[9] = 41;
        p.b[7] = 3;
        assert_int_equal(scsi_parse_temperature(p.b, p.len, &t), -EINVAL);
        p.b[7] = 2;
        p.b[0] = 0x2f;
        assert_int_equal(scsi_parse_temperature(p.b, p.len, &t), -EBADMSG);
        page_start(&p, 0x0d, 0);
        assert_int_equal(scsi_parse_temperature(p.b, p.len, &t), -ENODATA);
        assert_memory_equal(&t, &keep, sizeof(t));
        /* a 1-byte parameter has no temperature byte; vendor parameters are skipped */
        page_param(&p, 0x0000, (const uint8_t[]){0}, 1);
        page_param(&p, 0x8000, (const uint8_t[]){0, 99}, 2);
        assert_int_equal(scsi_parse_temperature(p.b, p.len, &t), -ENODATA);
        assert_int_equal(scsi_parse_temperature(p.b, p.len, NULL), -EINVAL);
}

static void test_ie(void **state)
{
        struct page p;
        struct scsi_ie ie;
        (void)state;

        page_start(&p, 0x2f, 0);
        page_param(&p, 0x0000, (const uint8_t[]){0x5d, 0x10, 47, 0xaa}, 4);
        assert_int_equal(scsi_parse_ie(p.b, p.len, &ie), 0);
        assert_int_equal(ie.asc, 0x5d);
        assert_int_equal(ie.ascq, 0x10);
        assert_true(ie.failure_predicted);
        assert_true(ie.has_temperature);
        assert_int_equal(ie.temperature_c, 47);
        /* no temperature: FFh, or a 2-byte parameter */
        p.b[10] = 0xff;
        p.b[8] = 0x00;
        assert_int_equal(scsi_parse_ie(p.b, p.len, &ie), 0);
        assert_false(ie.failure_predicted);
        assert_false(ie.has_temperature);
        page_start(&p, 0x2f, 0);
        page_param(&p, 0x0000, (const uint8_t[]){0x0b, 0x01}, 2);
        assert_int_equal(scsi_parse_ie(p.b, p.len, &ie), 0);
        assert_int_equal(ie.asc, 0x0b);
        assert_false(ie.has_temperature);
        /* missing, too short, truncated, wrong page */
        page_start(&p, 0x2f, 0);
        page_param(&p, 0x0001, (const uint8_t[]){0x5d, 0x00}, 2);
        page_param(&p, 0x0000, (const uint8_t[]){0x5d}, 1);
        assert_int_equal(scsi_parse_ie(p.b, p.len, &ie), -ENODATA);
        p.len--; /* cut by the buffer inside parameter 0000h */
        assert_int_equal(scsi_parse_ie(p.b, p.len, &ie), -ENODATA);
        p.len++;
        p.b[10 + 3] = 2; /* 0000h's length runs past the page: malformed */
        assert_int_equal(scsi_parse_ie(p.b, p.len, &ie), -EINVAL);
        p.b[0] = 0x0d;
        assert_int_equal(scsi_parse_ie(p.b, p.len, &ie), -EBADMSG);
}

static void test_error_counters(void **state)
{
        struct page p;
        struct scsi_error_counters c;
        (void)state;

        for (uint8_t page = 2; page <= 5; page++) {
                if (page == 4)
                        continue;
                page_start(&p, page, 0);
                for (uint16_t k = 0; k < 7; k++) /* lengths 1..7 */
                        page_counter(&p, k, 0x10u * page + k, (uint8_t)(k + 1));
                page_counter(&p, 0x8000, 12345, 8); /* vendor: ignored */
                page_counter(&p, 0x0006, 999, 2);   /* a repeated parameter: the first wins */
                assert_int_equal(scsi_parse_error_counters(p.b, p.len, page, &c), 0);
                assert_int_equal(c.present, 0x7f);
                for (unsigned k = 0; k < 7; k++)
                        assert_int_equal(c.v[k], 0x10u * page + k);
        }
        /* 8-byte and longer counters; only some present */
        page_start(&p, 0x03, 0);
        page_counter(&p, SCSI_ERR_BYTES_PROCESSED, 0x0123456789abcdefULL, 8);
        page_param(&p, SCSI_ERR_UNCORRECTED,
                   (const uint8_t[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}, 16);
        assert_int_equal(scsi_parse_error_counters(p.b, p.len, 0x03, &c), 0);
        assert_int_equal(c.present, (1u << 5) | (1u << 6));
        assert_true(c.v[SCSI_ERR_BYTES_PROCESSED] == 0x0123456789abcdefULL);
        assert_int_equal(c.v[SCSI_ERR_UNCORRECTED], 9);
        assert_int_equal(c.v[0], 0);
        /* wrong page in the data or as argument; nothing known; truncated */
        assert_int_equal(scsi_parse_error_counters(p.b, p.len, 0x02, &c), -EBADMSG);
        assert_int_equal(scsi_parse_error_counters(p.b, p.len, 0x06, &c), -EINVAL);
        assert_int_equal(scsi_parse_error_counters(p.b, p.len, 0x03, NULL), -EINVAL);
        /* cut by the buffer: the counters before the cut */
        assert_int_equal(scsi_parse_error_counters(p.b, p.len - 1, 0x03, &c), 0);
        assert_int_equal(c.present, 1u << SCSI_ERR_BYTES_PROCESSED);
        page_start(&p, 0x05, 0);
        page_counter(&p, 0x8000, 1, 4);
        assert_int_equal(scsi_parse_error_counters(p.b, p.len, 0x05, &c), -ENODATA);
        p.b[4 + 3] = 5;
        assert_int_equal(scsi_parse_error_counters(p.b, p.len, 0x05, &c), -EINVAL);
}

static void test_nonmedium_start_stop_ssd(void **state)
{
        struct page p;
        struct scsi_start_stop ss;
        uint64_t count = 7;
        uint8_t used = 7;
        (void)state;

        page_start(&p, 0x06, 0);
        page_counter(&p, 0x0000, 0x10203, 3);
        assert_int_equal(scsi_parse_nonmedium_errors(p.b, p.len, &count), 0);
        assert_int_equal(count, 0x10203);
        page_start(&p, 0x06, 0);
        page_counter(&p, 0x8000, 5, 4);
        assert_int_equal(scsi_parse_nonmedium_errors(p.b, p.len, &count), -ENODATA);
        p.b[0] = 0x0e;
        assert_int_equal(scsi_parse_nonmedium_errors(p.b, p.len, &count), -EBADMSG);
        p.b[0] = 0x06;
        assert_int_equal(scsi_parse_nonmedium_errors(p.b, p.len - 1, &count), -ENODATA);
        p.b[4 + 3] = 5;
        assert_int_equal(scsi_parse_nonmedium_errors(p.b, p.len, &count), -EINVAL);
        assert_int_equal(count, 0x10203);

        page_start(&p, 0x0e, 0);
        page_param(&p, 0x0001, (const uint8_t *)"2019  ", 6); /* date of manufacture */
        page_param(&p, 0x0002, (const uint8_t *)"      ", 6); /* accounting date */
        page_counter(&p, 0x0003, 50000, 4);
        page_counter(&p, 0x0004, 1234, 4);
        page_counter(&p, 0x0005, 600000, 4);
        page_counter(&p, 0x0006, 4321, 4);
        assert_int_equal(scsi_parse_start_stop(p.b, p.len, &ss), 0);
        assert_true(ss.has_specified_cycles && ss.has_accumulated_cycles &&
                    ss.has_specified_load_unload && ss.has_accumulated_load_unload);
        assert_int_equal(ss.specified_cycles, 50000);
        assert_int_equal(ss.accumulated_cycles, 1234);
        assert_int_equal(ss.specified_load_unload, 600000);
        assert_int_equal(ss.accumulated_load_unload, 4321);
        page_start(&p, 0x0e, 0);
        page_counter(&p, 0x0004, 77, 4);
        page_counter(&p, 0x0003, 1, 2); /* not 4 bytes: skipped */
        assert_int_equal(scsi_parse_start_stop(p.b, p.len, &ss), 0);
        assert_true(ss.has_accumulated_cycles);
        assert_false(ss.has_specified_cycles);
        assert_int_equal(ss.accumulated_cycles, 77);
        page_start(&p, 0x0e, 0);
        page_param(&p, 0x0001, (const uint8_t *)"201901", 6);
        assert_int_equal(scsi_parse_start_stop(p.b, p.len, &ss), -ENODATA);
        p.b[4 + 3] = 7; /* the parameter runs past the page */
        assert_int_equal(scsi_parse_start_stop(p.b, p.len, &ss), -EINVAL);

        page_start(&p, 0x11, 0);
        page_param(&p, 0x0001, (const uint8_t[]){0, 0, 0, 3}, 4);
        assert_int_equal(scsi_parse_ssd(p.b, p.len, &used), 0);
        assert_int_equal(used, 3);
        page_start(&p, 0x11, 0);
        page_param(&p, 0x0001, (const uint8_t[]){0, 0, 0, 130, 0}, 5);
        assert_int_equal(scsi_parse_ssd(p.b, p.len, &used), 0);
        assert_int_equal(used, 130);
        page_start(&p, 0x11, 0);
        page_param(&p, 0x0001, (const uint8_t[]){0, 0, 9}, 3);
        assert_int_equal(scsi_parse_ssd(p.b, p.len, &used), -ENODATA);
        p.b[0] = 0x2f;
        assert_int_equal(scsi_parse_ssd(p.b, p.len, &used), -EBADMSG);
        assert_int_equal(scsi_parse_ssd(p.b, p.len, NULL), -EINVAL);
        assert_int_equal(used, 130);
}

static void test_background_scan(void **state)
{
        struct page p;
        struct scsi_background_scan bs, keep;
        uint8_t status[12] = {0x00, 0x01, 0x86, 0xa0, 0, 0x02, 0x00, 0x05, 0x80, 0x00, 0x01, 0x02};
        (void)state;

        page_start(&p, 0x15, 0);
        page_param(&p, 0x0000, status, 12);
        for (uint16_t k = 1; k <= 20; k++) /* medium scan results, 20 bytes each */
                page_counter(&p, k, k, 20);
        assert_int_equal(scsi_parse_background_scan(p.b, p.len, &bs), 0);
        assert_int_equal(bs.power_on_minutes, 100000);
        assert_int_equal(bs.status, 2);
        assert_int_equal(bs.scans, 5);
        assert_int_equal(bs.progress, 0x8000);
        assert_int_equal(bs.medium_scans, 0x0102);
        /* a page far longer than the buffer: parameter 0000h still comes first */
        p.b[2] = 0x7f;
        assert_int_equal(scsi_parse_background_scan(p.b, 40, &bs), 0);
        assert_int_equal(bs.power_on_minutes, 100000);
        memset(&keep, 0x5a, sizeof(keep));
        bs = keep;
        assert_int_equal(scsi_parse_background_scan(p.b, 19, &bs), -ENODATA);
        page_start(&p, 0x15, 0);
        page_param(&p, 0x0000, status, 11);
        assert_int_equal(scsi_parse_background_scan(p.b, p.len, &bs), -ENODATA);
        p.b[0] = 0x2f;
        assert_int_equal(scsi_parse_background_scan(p.b, p.len, &bs), -EBADMSG);
        assert_int_equal(scsi_parse_background_scan(p.b, p.len, NULL), -EINVAL);
        assert_memory_equal(&bs, &keep, sizeof(bs));
}

static void test_defect_count(void **state)
{
        uint8_t b[4] = {0x00, 0x0c, 0x00, 0x50};
        uint32_t grown = 7;
        (void)state;

        assert_int_equal(scsi_parse_defect_count(b, 4, &grown), 0); /* bytes from index */
        assert_int_equal(grown, 10);
        b[1] = 0x0d; /* physical sector */
        assert_int_equal(scsi_parse_defect_count(b, 4, &grown), 0);
        assert_int_equal(grown, 10);
        b[1] = 0x08; /* short block: 4 bytes each */
        assert_int_equal(scsi_parse_defect_count(b, 4, &grown), 0);
        assert_int_equal(grown, 20);
        b[1] = 0x1b; /* PLISTV and GLISTV, long block */
        b[2] = 0xff, b[3] = 0xf8;
        assert_int_equal(scsi_parse_defect_count(b, 4, &grown), 0);
        assert_int_equal(grown, 0xfff8 / 8);
        b[1] = 0x0e; /* vendor specific */
        grown = 7;
        assert_int_equal(scsi_parse_defect_count(b, 4, &grown), -EBADMSG);
        b[1] = 0x0f;
        assert_int_equal(scsi_parse_defect_count(b, 4, &grown), -EBADMSG);
        b[1] = 0x14; /* only PLISTV: no grown list */
        assert_int_equal(scsi_parse_defect_count(b, 4, &grown), -ENODATA);
        assert_int_equal(scsi_parse_defect_count(b, 3, &grown), -EINVAL);
        assert_int_equal(scsi_parse_defect_count(NULL, 4, &grown), -EINVAL);
        assert_int_equal(grown, 7);
}

/* ---- pages captured from the guest's scsi_debug, checked against smartctl 7.3 -j -a */

static void test_scsi_debug_identity(void **state)
{
        static char json[1 << 16];
        uint8_t b[256];
        struct scsi_inquiry q;
        char s[128], out[64];
        uint16_t rpm;
        size_t n;
        (void)state;

        fixture_load("scsi-debug-smartctl.json", json, sizeof(json) - 1);
        n = fixture_load("scsi-debug-inquiry.bin", b, sizeof(b));
        assert_int_equal(scsi_parse_inquiry(b, n, &q), 0);
        assert_string_equal(q.vendor, js_str(json, "scsi_vendor", s, sizeof(s)));
        assert_string_equal(q.product, js_str(json, "scsi_product", s, sizeof(s)));
        assert_string_equal(q.revision, js_str(json, "scsi_revision", s, sizeof(s)));
        assert_int_equal(q.device_type, js_u64(json, "device_type.scsi_value"));
        assert_int_equal(q.version, 7); /* smartctl: "scsi_version": "SPC-5" */
        assert_string_equal(js_str(json, "scsi_version", s, sizeof(s)), "SPC-5");

        n = fixture_load("scsi-debug-vpd-80.bin", b, sizeof(b));
        assert_int_equal(scsi_parse_vpd_serial(b, n, out, sizeof(out)), 0);
        assert_string_equal(out, js_str(json, "serial_number", s, sizeof(s)));

        n = fixture_load("scsi-debug-vpd-83.bin", b, sizeof(b));
        assert_int_equal(scsi_parse_vpd_wwn(b, n, out, sizeof(out)), 0);
        js_str(json, "logical_unit_id", s, sizeof(s));
        assert_memory_equal(s, "0x", 2);
        assert_string_equal(out, s + 2);

        /* B1h says 1 (non-rotating); smartctl shows that as "rotation_rate": 0 */
        n = fixture_load("scsi-debug-vpd-b1.bin", b, sizeof(b));
        assert_int_equal(scsi_parse_vpd_rotation(b, n, &rpm), 0);
        assert_int_equal(rpm, 1);
        assert_int_equal(js_u64(json, "rotation_rate"), 0);

        /* other pages are not what these parsers take */
        n = fixture_load("scsi-debug-vpd-00.bin", b, sizeof(b));
        assert_int_equal(scsi_parse_vpd_serial(b, n, out, sizeof(out)), -EBADMSG);
        assert_int_equal(scsi_parse_vpd_rotation(b, n, &rpm), -EBADMSG);
        assert_int_equal(scsi_parse_vpd_wwn(b, n, out, sizeof(out)), -EBADMSG);
}

static void test_scsi_debug_log_pages(void **state)
{
        static char json[1 << 16];
        uint8_t b[256], pages[64];
        struct scsi_temperature t;
        struct scsi_ie ie;
        size_t n, np;
        (void)state;

        fixture_load("scsi-debug-smartctl.json", json, sizeof(json) - 1);
        n = fixture_load("scsi-debug-log-00.bin", b, sizeof(b));
        assert_int_equal(scsi_parse_supported_pages(b, n, pages, 64, &np), 0);
        assert_int_equal(np, 3);
        assert_memory_equal(pages, "\x00\x0d\x2f", 3);
        n = fixture_load("scsi-debug-log-00-ff.bin", b, sizeof(b));
        assert_int_equal(scsi_parse_supported_pages(b, n, pages, 64, &np), 0);
        assert_int_equal(np, 3);
        assert_memory_equal(pages, "\x00\x0d\x2f", 3);
        assert_int_equal(scsi_parse_temperature(b, n, &t), -EBADMSG);

        n = fixture_load("scsi-debug-log-0d.bin", b, sizeof(b));
        assert_int_equal(scsi_parse_temperature(b, n, &t), 0);
        assert_true(t.has_current && t.has_reference);
        assert_int_equal(t.current_c, js_u64(json, "temperature.current"));
        assert_int_equal(t.reference_c, js_u64(json, "temperature.drive_trip"));
        assert_int_equal(scsi_parse_ie(b, n, &ie), -EBADMSG);

        n = fixture_load("scsi-debug-log-2f.bin", b, sizeof(b));
        assert_int_equal(scsi_parse_ie(b, n, &ie), 0);
        assert_int_equal(ie.asc, 0);
        assert_int_equal(ie.ascq, 0);
        assert_false(ie.failure_predicted);
        assert_true(ie.has_temperature);
        assert_int_equal(ie.temperature_c, js_u64(json, "temperature.current"));
        assert_int_equal(!ie.failure_predicted, js_bool(json, "smart_status.passed"));

        /* TEST=1 in the IE mode page: a false failure prediction, 5Dh/FFh */
        fixture_load("scsi-debug-ie-test-smartctl.json", json, sizeof(json) - 1);
        n = fixture_load("scsi-debug-log-2f-test.bin", b, sizeof(b));
        assert_int_equal(scsi_parse_ie(b, n, &ie), 0);
        assert_true(ie.failure_predicted);
        assert_int_equal(ie.asc, js_u64(json, "smart_status.scsi.asc"));
        assert_int_equal(ie.ascq, js_u64(json, "smart_status.scsi.ascq"));
        assert_int_equal(!ie.failure_predicted, js_bool(json, "smart_status.passed"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sense_fixed),
            cmocka_unit_test(test_sense_descriptor),
            cmocka_unit_test(test_sense_captured),
            cmocka_unit_test(test_inquiry),
            cmocka_unit_test(test_vpd_serial),
            cmocka_unit_test(test_vpd_rotation),
            cmocka_unit_test(test_vpd_wwn),
            cmocka_unit_test(test_log_walker),
            cmocka_unit_test(test_supported_pages),
            cmocka_unit_test(test_temperature),
            cmocka_unit_test(test_ie),
            cmocka_unit_test(test_error_counters),
            cmocka_unit_test(test_nonmedium_start_stop_ssd),
            cmocka_unit_test(test_background_scan),
            cmocka_unit_test(test_defect_count),
            cmocka_unit_test(test_scsi_debug_identity),
            cmocka_unit_test(test_scsi_debug_log_pages),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
