/* Fuzz target of the NVMe Identify Controller and SMART / Health log parsers, with invariants. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smart_nvme.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A NUL-terminated string within size with only ' '..'~' and no space at either end. */
static void check_string(const char *s, size_t size)
{
        size_t n = strnlen(s, size);

        if (n >= size)
                abort();
        for (size_t i = 0; i < n; i++)
                if (s[i] < ' ' || s[i] > '~')
                        abort();
        if (n && (s[0] == ' ' || s[n - 1] == ' '))
                abort();
}

static void check_u128(struct u128 v)
{
        double d = nvme_u128_to_double(v);

        if (!isfinite(d) || d < 0 || d < (double)v.lo)
                abort();
        if (v.hi && d < 18446744073709551616.0)
                abort(); /* wrapped */
        if (!v.hi && v.lo < (1ULL << 53) && d != (double)v.lo)
                abort(); /* not exact */
        if (nvme_u128_to_u64_saturated(v) != (v.hi ? UINT64_MAX : v.lo))
                abort();
}

static void check_identify(const uint8_t *buf, size_t len)
{
        struct nvme_identity id;
        int r;

        memset(&id, 0x5a, sizeof(id));
        r = nvme_parse_identify_ctrl(buf, len, &id);
        if (r == -EINVAL || r == -ENODATA) {
                if (r == -EINVAL && len >= NVME_IDENTIFY_CTRL_SIZE)
                        abort();
                return;
        }
        if (r != 0)
                abort();
        check_string(id.serial, sizeof(id.serial));
        check_string(id.model, sizeof(id.model));
        check_string(id.firmware, sizeof(id.firmware));
        check_string(id.subnqn, sizeof(id.subnqn));
        if (strlen(id.fguid) != 0 && strlen(id.fguid) != 32)
                abort();
        if (strspn(id.fguid, "0123456789abcdef") != strlen(id.fguid))
                abort();
        if (id.ieee_oui > 0xffffff)
                abort();
        check_u128(id.total_capacity);
}

static void check_smart_log(const uint8_t *buf, size_t len)
{
        struct nvme_health h;
        int r;

        r = nvme_parse_smart_log(buf, len, &h);
        if (r == -EINVAL || r == -ENODATA) {
                if (r == -EINVAL && len >= NVME_SMART_LOG_SIZE)
                        abort();
                return;
        }
        if (r != 0)
                abort();
        if (h.critical_warning != buf[0] || h.temperature_k != (buf[1] | buf[2] << 8))
                abort();
        check_u128(h.data_units_read);
        check_u128(h.data_units_written);
        check_u128(h.host_read_commands);
        check_u128(h.host_write_commands);
        check_u128(h.controller_busy_time);
        check_u128(h.power_cycles);
        check_u128(h.power_on_hours);
        check_u128(h.unsafe_shutdowns);
        check_u128(h.media_errors);
        check_u128(h.error_log_entries);
        if (!(nvme_data_units_to_bytes(h.data_units_read) >= 0))
                abort();
        for (int i = 0; i < 8; i++)
                if (nvme_kelvin_to_celsius(h.temp_sensor_k[i]) != h.temp_sensor_k[i] - 273)
                        abort();
}

/* An exact-size copy (ASan catches reads past it) of data, zero-padded or cut to n bytes. */
static uint8_t *copy(const uint8_t *data, size_t size, size_t n)
{
        uint8_t *b = calloc(1, n ? n : 1);

        if (!b)
                abort();
        memcpy(b, data, size < n ? size : n);
        return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        uint8_t *b;

        /* As given: short inputs are rejected, long ones read only as far as the page goes. */
        check_identify(data, size);
        check_smart_log(data, size);
        /* Padded to the page sizes, so that every input reaches the field decoding. */
        b = copy(data, size, NVME_IDENTIFY_CTRL_SIZE);
        check_identify(b, NVME_IDENTIFY_CTRL_SIZE);
        free(b);
        b = copy(data, size, NVME_SMART_LOG_SIZE);
        check_smart_log(b, NVME_SMART_LOG_SIZE);
        free(b);
        return 0;
}
