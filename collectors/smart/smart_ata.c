/* Pure parsers of ATA IDENTIFY, SMART data and thresholds, SAT pass-through sense (ACS, SAT). */
#include "smart_ata.h"

#include <errno.h>
#include <string.h>

#define ATA_STATUS_ERR 0x01
#define ATA_STATUS_DF  0x20

static uint16_t le16(const uint8_t *p)
{
        return (uint16_t)(p[0] | p[1] << 8);
}

static uint16_t word(const uint8_t *buf, unsigned w)
{
        return le16(buf + 2 * w);
}

static bool all_zero(const uint8_t *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (p[i])
                        return false;
        return true;
}

static bool checksum_ok(const uint8_t *buf)
{
        uint8_t sum = 0;

        for (size_t i = 0; i < ATA_SECTOR_SIZE; i++)
                sum = (uint8_t)(sum + buf[i]);
        return sum == 0;
}

/* Words 82-84 / 85-87 are valid when bits 15:14 of word 83 / 87 are 01b. */
static bool word_valid(uint16_t w)
{
        return (w >> 14) == 1;
}

/* Copies an ATA string of nwords words starting at word first (two characters per word, the
 * first in the high byte) into dst (size > 2 * nwords) as smartctl shows it: leading spaces
 * skipped, cut at a NUL, trailing spaces dropped, bytes outside ' '..'~' replaced by '?'. */
static void copy_ata_string(char *dst, const uint8_t *buf, unsigned first, unsigned nwords)
{
        uint8_t s[40] = {0};
        size_t n = 2 * (size_t)nwords, b = 0, e;

        for (unsigned i = 0; i < nwords; i++) {
                s[2 * i] = buf[2 * (first + i) + 1];
                s[2 * i + 1] = buf[2 * (first + i)];
        }
        while (b < n && s[b] == ' ')
                b++;
        e = b;
        while (e < n && s[e] != 0)
                e++;
        while (e > b && s[e - 1] == ' ')
                e--;
        for (size_t i = b; i < e; i++)
                *dst++ = (s[i] >= ' ' && s[i] <= '~') ? (char)s[i] : '?';
        *dst = 0;
}

/* Words 82-87: SMART and the volatile write cache supported (82, when 83 is valid) and enabled
 * (85, when 87 is valid); 48-bit addressing (83 bit 10). */
static void identify_features(const uint8_t *buf, struct ata_identity *id)
{
        uint16_t w83 = word(buf, 83), w87 = word(buf, 87);

        if (word_valid(w83)) {
                uint16_t w82 = word(buf, 82);
                if (w82 != 0xffff) {
                        id->smart_supported = w82 & 1;
                        id->write_cache_supported = w82 & (1 << 5);
                }
                id->lba48 = w83 & (1 << 10);
        }
        if (word_valid(w87)) {
                uint16_t w85 = word(buf, 85);
                if (w85 != 0xffff) {
                        id->smart_enabled = w85 & 1;
                        id->write_cache_enabled = w85 & (1 << 5);
                }
        }
}

/* World wide name: words 108-111 when word 84 or 87 bit 8 says so, NAA 5 in bits 15:12 of word
 * 108; as 16 hex digits. */
static void identify_wwn(const uint8_t *buf, struct ata_identity *id)
{
        static const char hex[] = "0123456789abcdef";
        uint16_t w84 = word(buf, 84), w87 = word(buf, 87);

        if (!(word_valid(w84) && (w84 & (1 << 8))) && !(word_valid(w87) && (w87 & (1 << 8))))
                return;
        if ((word(buf, 108) >> 12) != 5)
                return;
        for (unsigned w = 0; w < 4; w++) {
                uint16_t v = word(buf, 108 + w);
                for (unsigned k = 0; k < 4; k++)
                        id->wwn[4 * w + k] = hex[(v >> (12 - 4 * k)) & 0xf];
        }
}

/* Capacity in sectors: words 100-103 with 48-bit addressing, else (or when they are 0) words
 * 60-61. */
static void identify_capacity(const uint8_t *buf, struct ata_identity *id)
{
        if (id->lba48) {
                id->sectors = (uint64_t)word(buf, 100) | (uint64_t)word(buf, 101) << 16 |
                              (uint64_t)word(buf, 102) << 32 | (uint64_t)word(buf, 103) << 48;
        }
        if (id->sectors == 0)
                id->sectors = (uint64_t)word(buf, 60) | (uint64_t)word(buf, 61) << 16;
}

/* Word 106 bits 15:14 = 01b valid; bit 12: words 117-118 hold the logical sector size in words;
 * bit 13: 2^(bits 3:0) logical sectors per physical sector. */
static void identify_sector_sizes(const uint8_t *buf, struct ata_identity *id)
{
        uint16_t w106 = word(buf, 106);

        id->logical_sector_size = ATA_SECTOR_SIZE;
        if (word_valid(w106) && (w106 & (1 << 12))) {
                uint32_t words = (uint32_t)word(buf, 117) | (uint32_t)word(buf, 118) << 16;
                if (words >= 256 && words <= (1u << 20))
                        id->logical_sector_size = 2 * words;
        }
        id->physical_sector_size = id->logical_sector_size;
        if (word_valid(w106) && (w106 & (1 << 13))) {
                uint64_t phys = (uint64_t)id->logical_sector_size << (w106 & 0xf);
                /* Up to 2^15 logical sectors of up to 2 MiB: a size past 32 bits is bogus. */
                if (phys <= UINT32_MAX)
                        id->physical_sector_size = (uint32_t)phys;
        }
}

int ata_parse_identify(const uint8_t *buf, size_t len, struct ata_identity *ret)
{
        struct ata_identity id;
        uint16_t w217;

        if (!buf || !ret || len < ATA_SECTOR_SIZE)
                return -EINVAL;
        if (all_zero(buf, ATA_SECTOR_SIZE))
                return -ENODATA;
        /* Word 255: checksum in bits 15:8 when bits 7:0 hold the signature A5h. */
        if ((word(buf, 255) & 0xff) == 0xa5 && !checksum_ok(buf))
                return -EBADMSG;

        memset(&id, 0, sizeof(id));
        id.checksum_present = (word(buf, 255) & 0xff) == 0xa5;
        copy_ata_string(id.serial, buf, 10, 10);
        copy_ata_string(id.firmware, buf, 23, 4);
        copy_ata_string(id.model, buf, 27, 20);
        identify_features(buf, &id);
        identify_wwn(buf, &id);
        identify_capacity(buf, &id);
        identify_sector_sizes(buf, &id);

        /* Word 217: 0000h not reported, 0001h non-rotating, 0401h-FFFEh rpm, others reserved. */
        w217 = word(buf, 217);
        if (w217 == 1 || (w217 >= 0x0401 && w217 != 0xffff))
                id.rotation_rate = w217;

        *ret = id;
        return 0;
}

int ata_parse_smart_data(const uint8_t *buf, size_t len, struct ata_smart *ret)
{
        struct ata_smart s;

        if (!buf || !ret || len < ATA_SECTOR_SIZE)
                return -EINVAL;
        if (all_zero(buf, ATA_SECTOR_SIZE))
                return -ENODATA;
        if (!checksum_ok(buf))
                return -EBADMSG;

        memset(&s, 0, sizeof(s));
        s.revision = le16(buf);
        for (size_t i = 0; i < ATA_SMART_MAX_ATTRS; i++) {
                const uint8_t *e = buf + 2 + 12 * i;
                struct ata_attribute *a;

                if (e[0] == 0)
                        continue;
                a = &s.attrs[s.n++];
                a->id = e[0];
                a->flags = le16(e + 1);
                a->value = e[3];
                a->worst = e[4];
                a->raw = 0;
                for (int k = 5; k >= 0; k--)
                        a->raw = a->raw << 8 | e[5 + k];
        }
        s.offline_status = buf[362];
        s.selftest_status = buf[363];
        s.offline_seconds = le16(buf + 364);
        s.offline_capabilities = buf[367];
        s.smart_capabilities = le16(buf + 368);
        s.selftest_short_min = buf[372];
        s.selftest_extended_min = buf[373] == 0xff ? le16(buf + 375) : buf[373];

        *ret = s;
        return 0;
}

int ata_parse_smart_thresholds(const uint8_t *buf, size_t len, struct ata_smart *inout)
{
        if (!buf || !inout || len < ATA_SECTOR_SIZE || inout->n > ATA_SMART_MAX_ATTRS)
                return -EINVAL;
        if (all_zero(buf, ATA_SECTOR_SIZE))
                return -ENODATA;
        if (!checksum_ok(buf))
                return -EBADMSG;

        for (size_t i = 0; i < inout->n; i++) {
                struct ata_attribute *a = &inout->attrs[i];
                const uint8_t *found = NULL;

                a->has_threshold = false;
                a->threshold = 0;
                for (size_t k = 0; k < ATA_SMART_MAX_ATTRS && !found; k++) {
                        /* The same table index first (as smartctl), then by id. Attributes
                         * were compacted when ids 0 were skipped, so the index is only a
                         * guess; the id decides. */
                        size_t idx = (i + k) % ATA_SMART_MAX_ATTRS;
                        const uint8_t *e = buf + 2 + 12 * idx;
                        if (e[0] == a->id)
                                found = e;
                }
                if (found) {
                        a->has_threshold = true;
                        a->threshold = found[1];
                }
        }
        return 0;
}

bool ata_attribute_failing(const struct ata_attribute *a)
{
        return a && a->has_threshold && a->threshold != 0 && a->value <= a->threshold;
}

bool ata_attribute_failed_past(const struct ata_attribute *a)
{
        return a && a->has_threshold && a->threshold != 0 && a->worst <= a->threshold;
}

enum { ANY = 0, HDD = 1, SSD = 2 };

struct attr_name {
        uint8_t id, only;
        const char *name;
};

/* smartmontools drivedb.h "DEFAULT": every id it names, with its HDD/SSD restriction. */
static const struct attr_name default_names[] = {
    {1, ANY, "Raw_Read_Error_Rate"},
    {2, ANY, "Throughput_Performance"},
    {3, ANY, "Spin_Up_Time"},
    {4, ANY, "Start_Stop_Count"},
    {5, ANY, "Reallocated_Sector_Ct"},
    {6, HDD, "Read_Channel_Margin"},
    {7, HDD, "Seek_Error_Rate"},
    {8, HDD, "Seek_Time_Performance"},
    {9, ANY, "Power_On_Hours"},
    {10, HDD, "Spin_Retry_Count"},
    {11, HDD, "Calibration_Retry_Count"},
    {12, ANY, "Power_Cycle_Count"},
    {13, ANY, "Read_Soft_Error_Rate"},
    {22, HDD, "Helium_Level"},
    {23, HDD, "Helium_Condition_Lower"},
    {24, HDD, "Helium_Condition_Upper"},
    {175, SSD, "Program_Fail_Count_Chip"},
    {176, SSD, "Erase_Fail_Count_Chip"},
    {177, SSD, "Wear_Leveling_Count"},
    {178, SSD, "Used_Rsvd_Blk_Cnt_Chip"},
    {179, SSD, "Used_Rsvd_Blk_Cnt_Tot"},
    {180, SSD, "Unused_Rsvd_Blk_Cnt_Tot"},
    {181, ANY, "Program_Fail_Cnt_Total"},
    {182, SSD, "Erase_Fail_Count_Total"},
    {183, ANY, "Runtime_Bad_Block"},
    {184, ANY, "End-to-End_Error"},
    {187, ANY, "Reported_Uncorrect"},
    {188, ANY, "Command_Timeout"},
    {189, HDD, "High_Fly_Writes"},
    {190, ANY, "Airflow_Temperature_Cel"},
    {191, HDD, "G-Sense_Error_Rate"},
    {192, ANY, "Power-Off_Retract_Count"},
    {193, HDD, "Load_Cycle_Count"},
    {194, ANY, "Temperature_Celsius"},
    {195, ANY, "Hardware_ECC_Recovered"},
    {196, ANY, "Reallocated_Event_Count"},
    {197, ANY, "Current_Pending_Sector"},
    {198, ANY, "Offline_Uncorrectable"},
    {199, ANY, "UDMA_CRC_Error_Count"},
    {200, HDD, "Multi_Zone_Error_Rate"},
    {201, HDD, "Soft_Read_Error_Rate"},
    {202, HDD, "Data_Address_Mark_Errs"},
    {203, ANY, "Run_Out_Cancel"},
    {204, ANY, "Soft_ECC_Correction"},
    {205, ANY, "Thermal_Asperity_Rate"},
    {206, HDD, "Flying_Height"},
    {207, HDD, "Spin_High_Current"},
    {208, HDD, "Spin_Buzz"},
    {209, HDD, "Offline_Seek_Performnce"},
    {220, HDD, "Disk_Shift"},
    {221, HDD, "G-Sense_Error_Rate"},
    {222, HDD, "Loaded_Hours"},
    {223, HDD, "Load_Retry_Count"},
    {224, HDD, "Load_Friction"},
    {225, HDD, "Load_Cycle_Count"},
    {226, HDD, "Load-in_Time"},
    {227, HDD, "Torq-amp_Count"},
    {228, ANY, "Power-off_Retract_Count"},
    {230, HDD, "Head_Amplitude"},
    {231, HDD, "Temperature_Celsius"},
    {232, ANY, "Available_Reservd_Space"},
    {233, SSD, "Media_Wearout_Indicator"},
    {240, HDD, "Head_Flying_Hours"},
    {241, ANY, "Total_LBAs_Written"},
    {242, ANY, "Total_LBAs_Read"},
    {250, ANY, "Read_Error_Retry_Rate"},
    {254, HDD, "Free_Fall_Sensor"},
};

static const struct attr_name *find_name(uint8_t id)
{
        for (size_t i = 0; i < sizeof(default_names) / sizeof(default_names[0]); i++)
                if (default_names[i].id == id)
                        return &default_names[i];
        return NULL;
}

const char *ata_attribute_name(uint8_t id)
{
        const struct attr_name *n = find_name(id);

        return n ? n->name : "Unknown_Attribute";
}

const char *ata_attribute_name_rpm(uint8_t id, uint16_t rotation_rate)
{
        const struct attr_name *n = find_name(id);

        if (!n)
                return "Unknown_Attribute";
        if (rotation_rate == 1 && n->only == HDD) {
                if (id == 202)
                        return "Percent_Lifetime_Remain";
                if (id == 231)
                        return "SSD_Life_Left";
                return "Unknown_SSD_Attribute";
        }
        if (rotation_rate > 1 && n->only == SSD)
                return "Unknown_HDD_Attribute";
        return n->name;
}

static const struct ata_attribute *find_attr(const struct ata_smart *s, uint8_t id)
{
        for (size_t i = 0; i < s->n && i < ATA_SMART_MAX_ATTRS; i++)
                if (s->attrs[i].id == id)
                        return &s->attrs[i];
        return NULL;
}

/* Sets *has and *v from attribute id's raw value masked to bits low bits. */
static void raw_count(const struct ata_smart *s, uint8_t id, unsigned bits, bool *has, uint64_t *v)
{
        const struct ata_attribute *a = find_attr(s, id);

        *has = a != NULL;
        *v = a ? a->raw & ((UINT64_C(1) << bits) - 1) : 0;
}

void ata_derive(const struct ata_smart *s, uint16_t rotation_rate, struct ata_derived *ret)
{
        static const uint8_t temp_ids[] = {194, 190};
        static const uint8_t wear_ids[] = {233, 231, 202, 177};
        struct ata_derived d;
        bool hdd = rotation_rate > 1, ssd = rotation_rate == 1;
        const struct ata_attribute *a;

        memset(&d, 0, sizeof(d));
        if (!s) {
                *ret = d;
                return;
        }

        for (size_t i = 0; i < sizeof(temp_ids) && !d.has_temperature; i++) {
                a = find_attr(s, temp_ids[i]);
                if (a && (a->raw & 0xff) > 0 && (a->raw & 0xff) < 128) {
                        d.has_temperature = true;
                        d.temperature_c = (int)(a->raw & 0xff);
                }
        }
        raw_count(s, 9, 24, &d.has_power_on_hours, &d.power_on_hours);
        raw_count(s, 12, 48, &d.has_power_cycles, &d.power_cycles);
        raw_count(s, 174, 48, &d.has_unsafe_shutdowns, &d.unsafe_shutdowns);
        if (!d.has_unsafe_shutdowns)
                raw_count(s, 192, 48, &d.has_unsafe_shutdowns, &d.unsafe_shutdowns);
        raw_count(s, 5, 16, &d.has_reallocated, &d.reallocated);
        raw_count(s, 197, 48, &d.has_pending, &d.pending);
        raw_count(s, 198, 48, &d.has_offline_uncorrectable, &d.offline_uncorrectable);
        raw_count(s, 187, 48, &d.has_reported_uncorrect, &d.reported_uncorrect);
        raw_count(s, 199, 48, &d.has_crc_errors, &d.crc_errors);
        raw_count(s, 241, 48, &d.has_lbas_written, &d.lbas_written);
        raw_count(s, 242, 48, &d.has_lbas_read, &d.lbas_read);

        if (!hdd)
                for (size_t i = 0; i < sizeof(wear_ids) && !d.has_wear; i++) {
                        uint8_t id = wear_ids[i];
                        if ((id == 231 || id == 202) && !ssd)
                                continue;
                        a = find_attr(s, id);
                        if (!a)
                                continue;
                        d.has_wear = true;
                        d.wear_id = id;
                        d.wear_used_ratio = a->value >= 100 ? 0.0 : (100.0 - a->value) / 100.0;
                }

        *ret = d;
}

/* The part of the sense buffer its additional length covers (at most len). */
static size_t sense_extent(const uint8_t *sense, size_t len)
{
        size_t n = len >= 8 ? 8 + (size_t)sense[7] : len;

        return n < len ? n : len;
}

/* The ATA Status Return descriptor (type 09h, additional length at least 0Ch) among the
 * descriptors of descriptor-format sense (n: the part its additional length covers), or NULL. */
static const uint8_t *find_return_descriptor(const uint8_t *sense, size_t n)
{
        for (size_t off = 8; off + 2 <= n;) {
                size_t dlen = 2 + (size_t)sense[off + 1];
                if (off + dlen > n)
                        return NULL; /* truncated descriptor: not used */
                if (sense[off] == 0x09 && sense[off + 1] >= 0x0c)
                        return sense + off;
                off += dlen;
        }
        return NULL;
}

/* Descriptor format (72h/73h): the registers of the ATA Status Return descriptor (SAT). */
static int return_from_descriptor(const uint8_t *sense, size_t len, struct ata_return *r)
{
        const uint8_t *d;

        if (len < 8)
                return -EINVAL;
        r->sense_key = sense[1] & 0xf;
        r->asc = sense[2];
        r->ascq = sense[3];
        d = find_return_descriptor(sense, sense_extent(sense, len));
        if (!d)
                return -ENODATA;
        r->format = ATA_RETURN_DESCRIPTOR;
        r->extend = d[2] & 1;
        r->error = d[3];
        r->count = d[5];
        r->lba_low = d[7];
        r->lba_mid = d[9];
        r->lba_high = d[11];
        r->device = d[12];
        r->status = d[13];
        r->has_lba = true;
        return 0;
}

/* The old libata fixed layout: error, status, device and count in bytes 8-11, the EXTEND bit and
 * LBA 7:0 in bytes 16-19 when the sense reaches them (n: the part its additional length
 * covers). */
static void return_from_fixed_linux(const uint8_t *sense, size_t n, struct ata_return *r)
{
        r->format = ATA_RETURN_FIXED_LINUX;
        r->error = sense[8];
        r->status = sense[9];
        r->device = sense[10];
        r->count = sense[11];
        r->extend = n > 16 && (sense[16] & 0x80);
        if (n > 19) {
                r->lba_low = sense[17];
                r->lba_mid = sense[18];
                r->lba_high = sense[19];
                r->has_lba = true;
        }
}

/* SAT's fixed layout: the registers in the INFORMATION and COMMAND-SPECIFIC INFORMATION
 * fields. */
static int return_from_fixed_sat(const uint8_t *sense, struct ata_return *r)
{
        if (sense[4] == 0)
                return -ENODATA; /* no STATUS: no registers */
        r->format = ATA_RETURN_FIXED;
        r->error = sense[3];
        r->status = sense[4];
        r->device = sense[5];
        r->count = sense[6];
        r->extend = sense[8] & 0x80;
        r->lba_low = sense[9];
        r->lba_mid = sense[10];
        r->lba_high = sense[11];
        r->has_lba = true;
        return 0;
}

/* Fixed format (70h/71h): the old libata layout when VALID is clear, INFORMATION bytes 3-6 are
 * zero and byte 9 (its status) is not; SAT's otherwise. */
static int return_from_fixed(const uint8_t *sense, size_t len, struct ata_return *r)
{
        bool valid = sense[0] & 0x80;
        size_t n;

        if (len < 12)
                return -EINVAL;
        n = sense_extent(sense, len);
        if (n < 12)
                return -EINVAL;
        r->sense_key = sense[2] & 0xf;
        r->asc = n > 12 ? sense[12] : 0;
        r->ascq = n > 13 ? sense[13] : 0;
        if (!valid && sense[3] == 0 && sense[4] == 0 && sense[5] == 0 && sense[6] == 0 &&
            sense[9] != 0) {
                return_from_fixed_linux(sense, n, r);
                return 0;
        }
        return return_from_fixed_sat(sense, r);
}

int ata_parse_return_sense(const uint8_t *sense, size_t len, struct ata_return *ret)
{
        struct ata_return r;
        uint8_t code;
        int e;

        if (!sense || !ret || len < 1)
                return -EINVAL;
        code = sense[0] & 0x7f;
        memset(&r, 0, sizeof(r));
        if (code == 0x72 || code == 0x73)
                e = return_from_descriptor(sense, len, &r);
        else if (code == 0x70 || code == 0x71)
                e = return_from_fixed(sense, len, &r);
        else
                e = -EINVAL;
        if (e < 0)
                return e;
        *ret = r;
        return 0;
}

bool ata_return_failed(const struct ata_return *r)
{
        return r && (r->status & (ATA_STATUS_ERR | ATA_STATUS_DF));
}

int ata_smart_status_from_return(const struct ata_return *r)
{
        if (!r)
                return -EINVAL;
        if (ata_return_failed(r))
                return -EIO;
        if (!r->has_lba)
                return -ENODATA;
        if (r->lba_mid == 0x4f && r->lba_high == 0xc2)
                return 1;
        if (r->lba_mid == 0xf4 && r->lba_high == 0x2c)
                return 0;
        return -EBADMSG;
}

int ata_power_mode_from_count(uint8_t count)
{
        switch (count) {
        case 0xff:
        case 0x80:
        case 0x81:
        case 0x82:
        case 0x83:
        case 0x40:
        case 0x41:
                return ATA_POWER_ACTIVE_IDLE;
        case 0x00:
        case 0x01:
                return ATA_POWER_STANDBY;
        default:
                return -EBADMSG;
        }
}
