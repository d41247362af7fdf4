/* Fuzz target of the ATA parsers: IDENTIFY, SMART data + thresholds, derived values, sense. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "smart_ata.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A 512-byte exact-size copy of data (zero-padded), with a valid checksum in byte 511 when
 * fix is set, so that mutated pages get past the checksum. */
static uint8_t *sector(const uint8_t *data, size_t size, bool fix)
{
        uint8_t *b = fuzz_copy(data, size, ATA_SECTOR_SIZE);

        if (fix) {
                uint8_t sum = 0;
                for (size_t i = 0; i < ATA_SECTOR_SIZE - 1; i++)
                        sum = (uint8_t)(sum + b[i]);
                b[ATA_SECTOR_SIZE - 1] = (uint8_t)(0x100 - sum);
        }
        return b;
}

static void check_identify(const uint8_t *buf, size_t len)
{
        struct ata_identity id;
        int r = ata_parse_identify(buf, len, &id);

        if (!fuzz_parsed(r, len, ATA_SECTOR_SIZE, true))
                return;
        fuzz_check_string(id.serial, sizeof(id.serial));
        fuzz_check_string(id.firmware, sizeof(id.firmware));
        fuzz_check_string(id.model, sizeof(id.model));
        if (id.wwn[0] &&
            (strlen(id.wwn) != 16 || id.wwn[0] != '5' || strspn(id.wwn, "0123456789abcdef") != 16))
                abort();
        if (id.rotation_rate != 0 && id.rotation_rate != 1 &&
            (id.rotation_rate < 0x401 || id.rotation_rate == 0xffff))
                abort();
        if (id.logical_sector_size < 512 || id.physical_sector_size < id.logical_sector_size)
                abort();
        if (id.write_cache_enabled && !(buf[2 * 85] & 0x20))
                abort();
}

static void check_attrs(const struct ata_smart *s, uint16_t rpm)
{
        struct ata_derived d;

        if (s->n > ATA_SMART_MAX_ATTRS)
                abort();
        for (size_t i = 0; i < s->n; i++) {
                const struct ata_attribute *a = &s->attrs[i];
                if (a->id == 0 || a->raw >> 48)
                        abort();
                if (!ata_attribute_name(a->id) || !ata_attribute_name_rpm(a->id, rpm))
                        abort();
                if (ata_attribute_failing(a) &&
                    !(a->has_threshold && a->threshold && a->value <= a->threshold))
                        abort();
                if (!a->has_threshold && (ata_attribute_failing(a) || ata_attribute_failed_past(a)))
                        abort();
        }
        ata_derive(s, rpm, &d);
        if (d.has_temperature && (d.temperature_c < 1 || d.temperature_c > 127))
                abort();
        if (d.has_wear && !(d.wear_used_ratio >= 0.0 && d.wear_used_ratio <= 1.0))
                abort();
        if (d.has_wear != (d.wear_id != 0) || (d.has_wear && rpm > 1))
                abort();
        if (d.power_on_hours >> 24 || d.reallocated >> 16 || d.pending >> 48)
                abort();
}

static void check_smart(const uint8_t *dbuf, size_t dlen, const uint8_t *tbuf, size_t tlen,
                        uint16_t rpm)
{
        struct ata_smart s, before;
        int r = ata_parse_smart_data(dbuf, dlen, &s);

        if (r != 0) {
                if (r != -EINVAL && r != -ENODATA && r != -EBADMSG)
                        abort();
                return;
        }
        check_attrs(&s, rpm);
        before = s;
        r = ata_parse_smart_thresholds(tbuf, tlen, &s);
        if (r != 0) {
                if (r != -EINVAL && r != -ENODATA && r != -EBADMSG)
                        abort();
                if (memcmp(&s, &before, sizeof(s)))
                        abort(); /* untouched on failure */
                return;
        }
        for (size_t i = 0; i < s.n; i++)
                if (s.attrs[i].id != before.attrs[i].id || s.attrs[i].raw != before.attrs[i].raw ||
                    (!s.attrs[i].has_threshold && s.attrs[i].threshold))
                        abort();
        check_attrs(&s, rpm);
}

static void check_sense(const uint8_t *buf, size_t len)
{
        struct ata_return r;
        int k, st;

        k = ata_parse_return_sense(buf, len, &r);
        if (k != 0) {
                if (k != -EINVAL && k != -ENODATA)
                        abort();
                return;
        }
        if (r.format > ATA_RETURN_FIXED_LINUX || r.sense_key > 15)
                abort();
        st = ata_smart_status_from_return(&r);
        if (st != 0 && st != 1 && st != -EIO && st != -ENODATA && st != -EBADMSG)
                abort();
        if (st == 1 && !(r.has_lba && r.lba_mid == 0x4f && r.lba_high == 0xc2))
                abort();
        if (ata_return_failed(&r) != (st == -EIO))
                abort();
        k = ata_power_mode_from_count(r.count);
        if (k != ATA_POWER_ACTIVE_IDLE && k != ATA_POWER_STANDBY && k != -EBADMSG)
                abort();
}

/* A copy of data with byte 0 replaced (exact size, for ASan). */
static void check_sense_as(const uint8_t *data, size_t size, uint8_t code)
{
        uint8_t *b;

        if (size == 0)
                return;
        b = fuzz_copy(data, size, size);
        b[0] = code;
        check_sense(b, size);
        free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        uint8_t *d, *t, *idf;
        uint16_t rpm = size > 1 ? (uint16_t)(data[0] | data[1] << 8) : 0;

        /* As given. */
        check_identify(data, size);
        check_sense(data, size);
        check_smart(data, size, data, size, rpm);
        /* Sense in each format. */
        check_sense_as(data, size, 0x70);
        check_sense_as(data, size, 0x72);
        /* Pages with valid checksums: the first 512 bytes as data and IDENTIFY, the next 512
         * (or the same) as thresholds. */
        d = sector(data, size, true);
        t = size > ATA_SECTOR_SIZE ? sector(data + ATA_SECTOR_SIZE, size - ATA_SECTOR_SIZE, true)
                                   : sector(data, size, true);
        idf = sector(data, size, false);
        check_identify(d, ATA_SECTOR_SIZE);
        check_identify(idf, ATA_SECTOR_SIZE);
        check_smart(d, ATA_SECTOR_SIZE, t, ATA_SECTOR_SIZE, rpm);
        check_smart(d, ATA_SECTOR_SIZE, t, ATA_SECTOR_SIZE, 1);
        check_smart(d, ATA_SECTOR_SIZE, t, ATA_SECTOR_SIZE, 0);
        free(d);
        free(t);
        free(idf);
        return 0;
}
