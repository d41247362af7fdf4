/* Pure parsers of NVMe Identify Controller and SMART / Health log page 02h (NVMe Base Spec). */
#include "smart_nvme.h"
#include "smart_text.h"

#include <errno.h>
#include <string.h>

static uint16_t le16(const uint8_t *p)
{
        return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
        return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static struct u128 le128(const uint8_t *p)
{
        return (struct u128){.lo = le64(p), .hi = le64(p + 8)};
}

static bool all_zero(const uint8_t *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (p[i])
                        return false;
        return true;
}

double nvme_u128_to_double(struct u128 v)
{
        /* 2^64 is exact in a double; hi * 2^64 only rounds, never wraps. */
        return (double)v.hi * 18446744073709551616.0 + (double)v.lo;
}

uint64_t nvme_u128_to_u64_saturated(struct u128 v)
{
        return v.hi ? UINT64_MAX : v.lo;
}

int nvme_kelvin_to_celsius(uint16_t k)
{
        return (int)k - 273;
}

/* Whether buf (len bytes) holds a page of size bytes to parse into ret: -EINVAL without buf or
 * ret or when short, -ENODATA when the page is all zeros (nothing reported), otherwise 0. */
static int check_page(const uint8_t *buf, size_t len, const void *ret, size_t size)
{
        if (!buf || !ret || len < size)
                return -EINVAL;
        if (all_zero(buf, size))
                return -ENODATA;
        return 0;
}

double nvme_data_units_to_bytes(struct u128 units)
{
        return nvme_u128_to_double(units) * 512000.0;
}

int nvme_parse_identify_ctrl(const uint8_t *buf, size_t len, struct nvme_identity *ret)
{
        static const char hex[] = "0123456789abcdef";
        struct nvme_identity id;
        int r = check_page(buf, len, ret, NVME_IDENTIFY_CTRL_SIZE);

        if (r < 0)
                return r;

        memset(&id, 0, sizeof(id));
        id.vendor_id = le16(buf + 0);
        id.subsystem_vendor_id = le16(buf + 2);
        smart_text_copy(id.serial, buf + 4, 20);
        smart_text_copy(id.model, buf + 24, 40);
        smart_text_copy(id.firmware, buf + 64, 8);
        id.ieee_oui = (uint32_t)buf[73] | (uint32_t)buf[74] << 8 | (uint32_t)buf[75] << 16;
        id.controller_id = le16(buf + 78);
        id.version = le32(buf + 80);
        if (!all_zero(buf + 112, 16))
                for (size_t i = 0; i < 16; i++) {
                        id.fguid[2 * i] = hex[buf[112 + i] >> 4];
                        id.fguid[2 * i + 1] = hex[buf[112 + i] & 0xf];
                }
        id.warning_temp_k = le16(buf + 266);
        id.critical_temp_k = le16(buf + 268);
        id.total_capacity = le128(buf + 280);
        id.namespaces = le32(buf + 516);
        id.volatile_write_cache = buf[525] & 1;
        smart_text_copy(id.subnqn, buf + 768, 256);

        *ret = id;
        return 0;
}

int nvme_parse_smart_log(const uint8_t *buf, size_t len, struct nvme_health *ret)
{
        struct nvme_health h;
        int r = check_page(buf, len, ret, NVME_SMART_LOG_SIZE);

        if (r < 0)
                return r;

        memset(&h, 0, sizeof(h));
        h.critical_warning = buf[0];
        h.temperature_k = le16(buf + 1);
        h.available_spare = buf[3];
        h.available_spare_threshold = buf[4];
        h.percentage_used = buf[5];
        h.endurance_group_warning = buf[6];
        h.data_units_read = le128(buf + 32);
        h.data_units_written = le128(buf + 48);
        h.host_read_commands = le128(buf + 64);
        h.host_write_commands = le128(buf + 80);
        h.controller_busy_time = le128(buf + 96);
        h.power_cycles = le128(buf + 112);
        h.power_on_hours = le128(buf + 128);
        h.unsafe_shutdowns = le128(buf + 144);
        h.media_errors = le128(buf + 160);
        h.error_log_entries = le128(buf + 176);
        h.warning_temp_time = le32(buf + 192);
        h.critical_temp_time = le32(buf + 196);
        for (size_t i = 0; i < 8; i++)
                h.temp_sensor_k[i] = le16(buf + 200 + 2 * i);
        for (size_t i = 0; i < 2; i++) {
                h.thermal_transitions[i] = le32(buf + 216 + 4 * i);
                h.thermal_time[i] = le32(buf + 224 + 4 * i);
        }

        *ret = h;
        return 0;
}
