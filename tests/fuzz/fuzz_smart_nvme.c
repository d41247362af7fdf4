/* Fuzz target of the NVMe Identify Controller and SMART / Health log parsers, with invariants. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "smart_nvme.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
        if (!fuzz_parsed(r, len, NVME_IDENTIFY_CTRL_SIZE, false))
                return;
        fuzz_check_string(id.serial, sizeof(id.serial));
        fuzz_check_string(id.model, sizeof(id.model));
        fuzz_check_string(id.firmware, sizeof(id.firmware));
        fuzz_check_string(id.subnqn, sizeof(id.subnqn));
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
        if (!fuzz_parsed(r, len, NVME_SMART_LOG_SIZE, false))
                return;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        uint8_t *b;

        /* As given: short inputs are rejected, long ones read only as far as the page goes. */
        check_identify(data, size);
        check_smart_log(data, size);
        /* Padded to the page sizes, so that every input reaches the field decoding. */
        b = fuzz_copy(data, size, NVME_IDENTIFY_CTRL_SIZE);
        check_identify(b, NVME_IDENTIFY_CTRL_SIZE);
        free(b);
        b = fuzz_copy(data, size, NVME_SMART_LOG_SIZE);
        check_smart_log(b, NVME_SMART_LOG_SIZE);
        free(b);
        return 0;
}
