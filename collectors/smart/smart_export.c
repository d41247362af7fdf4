/* The facts of one SMART read as metric families: the unified diskpulse_smart_* values and
 * each protocol's own (NVMe SMART / Health log, ATA attributes, SCSI log pages). */
#include "smart_export.h"

#include <stdio.h>

struct value_def {
        const char *name;
        const char *help;
        enum mtype type;
};

static const struct value_def value_defs[SMART_VALUE_MAX] = {
    [SMART_TEMPERATURE_C] = {"diskpulse_smart_temperature_celsius",
                             "Current drive temperature (NVMe composite, ATA 194/190, SCSI).",
                             MT_GAUGE},
    [SMART_POWER_ON_SECONDS] = {"diskpulse_smart_power_on_seconds_total",
                                "Power-on time the drive reports (hours x 3600).", MT_COUNTER},
    [SMART_POWER_CYCLES] = {"diskpulse_smart_power_cycles_total",
                            "Power cycles (NVMe, ATA 12, SCSI start-stop cycles).", MT_COUNTER},
    [SMART_UNSAFE_SHUTDOWNS] = {"diskpulse_smart_unsafe_shutdowns_total",
                                "Shutdowns without a flush (NVMe, ATA 174/192).", MT_COUNTER},
    [SMART_MEDIA_ERRORS] = {"diskpulse_smart_media_errors_total",
                            "Unrecovered media errors (NVMe media and data integrity errors, "
                            "ATA 187 or 198, SCSI uncorrected read+write+verify errors).",
                            MT_COUNTER},
    [SMART_WEAR_USED] = {"diskpulse_smart_wear_used_ratio",
                         "Endurance used: NVMe percentage used / 100 (may exceed 1), SCSI "
                         "page 11h, ATA wear attributes (233, 231, 202, 177).",
                         MT_GAUGE},
    [SMART_SPARE] = {"diskpulse_smart_available_spare_ratio",
                     "Remaining spare capacity (NVMe), 0..1.", MT_GAUGE},
    [SMART_SPARE_THRESHOLD] = {"diskpulse_smart_available_spare_threshold_ratio",
                               "Spare capacity below which the drive warns (NVMe), 0..1.",
                               MT_GAUGE},
    [SMART_READ_BYTES] = {"diskpulse_smart_read_bytes_total",
                          "Bytes read as the drive counts them (NVMe data units, ATA 242, "
                          "SCSI read error counter page).",
                          MT_COUNTER},
    [SMART_WRITTEN_BYTES] = {"diskpulse_smart_written_bytes_total",
                             "Bytes written as the drive counts them (NVMe data units, ATA "
                             "241, SCSI write error counter page).",
                             MT_COUNTER},
    [SMART_ROTATION_RPM] = {"diskpulse_disk_rotation_rate_rpm",
                            "Nominal rotation rate (ATA IDENTIFY word 217, SCSI VPD B1h); 0 "
                            "for solid state.",
                            MT_GAUGE},
    [SMART_TEMPERATURE_WARNING_C] = {"diskpulse_smart_temperature_warning_threshold_celsius",
                                     "The drive's own warning temperature (NVMe WCTEMP, SCSI "
                                     "reference temperature); absent when it reports none.",
                                     MT_GAUGE},
    [SMART_TEMPERATURE_CRITICAL_C] = {"diskpulse_smart_temperature_critical_threshold_celsius",
                                      "The drive's own critical temperature (NVMe CCTEMP); "
                                      "absent when it reports none.",
                                      MT_GAUGE},
};

static const char *const protocol_names[DEVIO_KIND_MAX] = {
    [DEVIO_NVME] = "nvme",
    [DEVIO_ATA] = "ata",
    [DEVIO_SCSI] = "scsi",
};

static void gauge(struct mset *out, const char *name, const char *help, const char *device,
                  double v)
{
        struct mfamily *f = mset_family(out, name, help, MT_GAUGE);
        mfamily_add(out, f, "", v, "device", device, NULL);
}

static void counter(struct mset *out, const char *name, const char *help, const char *device,
                    double v)
{
        struct mfamily *f = mset_family(out, name, help, MT_COUNTER);
        mfamily_add(out, f, "", v, "device", device, NULL);
}

/* The critical warning byte, and each of its bits as a flag. */
static void export_nvme_warning(struct mset *out, const char *dev, const struct nvme_health *h)
{
        static const char *const flags[] = {"spare",     "temperature",     "reliability",
                                            "read_only", "volatile_backup", "pmr_read_only"};
        struct mfamily *f;

        gauge(out, "diskpulse_nvme_critical_warning",
              "Critical warning byte of the SMART / Health log (0 = none).", dev,
              h->critical_warning);
        f = mset_family(out, "diskpulse_nvme_critical_warning_flag",
                        "Critical warning bits: spare below threshold, temperature, reliability "
                        "degraded, read-only, volatile memory backup failed, PMR read-only.",
                        MT_GAUGE);
        for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
                mfamily_add(out, f, "", (h->critical_warning >> i) & 1 ? 1.0 : 0.0, "device", dev,
                            "flag", flags[i], NULL);
}

/* The log's one-per-device values: temperature, spare, life used, counters. */
static void export_nvme_health(struct mset *out, const char *dev, const struct nvme_health *h)
{
        gauge(out, "diskpulse_nvme_temperature_celsius", "Composite temperature.", dev,
              nvme_kelvin_to_celsius(h->temperature_k));
        gauge(out, "diskpulse_nvme_available_spare_ratio", "Available spare, 0..1.", dev,
              h->available_spare / 100.0);
        gauge(out, "diskpulse_nvme_available_spare_threshold_ratio",
              "Available spare threshold, 0..1.", dev, h->available_spare_threshold / 100.0);
        gauge(out, "diskpulse_nvme_percentage_used_ratio",
              "Estimate of the life used, 0..2.55 (percentage used / 100).", dev,
              h->percentage_used / 100.0);
        gauge(out, "diskpulse_nvme_endurance_group_critical_warning",
              "Endurance group critical warning summary byte.", dev, h->endurance_group_warning);
        counter(out, "diskpulse_nvme_data_read_bytes_total", "Data units read x 512,000 bytes.",
                dev, nvme_data_units_to_bytes(h->data_units_read));
        counter(out, "diskpulse_nvme_data_written_bytes_total",
                "Data units written x 512,000 bytes.", dev,
                nvme_data_units_to_bytes(h->data_units_written));
        counter(out, "diskpulse_nvme_host_read_commands_total", "Read commands completed.", dev,
                nvme_u128_to_double(h->host_read_commands));
        counter(out, "diskpulse_nvme_host_write_commands_total", "Write commands completed.", dev,
                nvme_u128_to_double(h->host_write_commands));
        counter(out, "diskpulse_nvme_controller_busy_seconds_total",
                "Time the controller was busy with I/O (minutes x 60).", dev,
                nvme_u128_to_double(h->controller_busy_time) * 60.0);
        counter(out, "diskpulse_nvme_power_cycles_total", "Power cycles.", dev,
                nvme_u128_to_double(h->power_cycles));
        counter(out, "diskpulse_nvme_power_on_seconds_total", "Power-on hours x 3600.", dev,
                nvme_u128_to_double(h->power_on_hours) * 3600.0);
        counter(out, "diskpulse_nvme_unsafe_shutdowns_total", "Unsafe shutdowns.", dev,
                nvme_u128_to_double(h->unsafe_shutdowns));
        counter(out, "diskpulse_nvme_media_errors_total", "Unrecovered data integrity errors.", dev,
                nvme_u128_to_double(h->media_errors));
        counter(out, "diskpulse_nvme_error_log_entries_total",
                "Error information log entries over the controller's life.", dev,
                nvme_u128_to_double(h->error_log_entries));
        counter(out, "diskpulse_nvme_warning_temperature_seconds_total",
                "Time above the warning composite temperature threshold (minutes x 60).", dev,
                (double)h->warning_temp_time * 60.0);
        counter(out, "diskpulse_nvme_critical_temperature_seconds_total",
                "Time above the critical composite temperature threshold (minutes x 60).", dev,
                (double)h->critical_temp_time * 60.0);
}

/* The temperature sensors the controller implements, and its thermal management per level. */
static void export_nvme_thermal(struct mset *out, const char *dev, const struct nvme_health *h)
{
        struct mfamily *f;
        char idx[8];

        f = mset_family(out, "diskpulse_nvme_temperature_sensor_celsius",
                        "Temperature sensors 1-8 that the controller implements.", MT_GAUGE);
        for (size_t i = 0; i < 8; i++) {
                if (!h->temp_sensor_k[i])
                        continue;
                snprintf(idx, sizeof idx, "%zu", i + 1);
                mfamily_add(out, f, "", nvme_kelvin_to_celsius(h->temp_sensor_k[i]), "device", dev,
                            "sensor", idx, NULL);
        }
        f = mset_family(out, "diskpulse_nvme_thermal_transitions_total",
                        "Transitions to thermal management temperature 1 or 2 (throttling).",
                        MT_COUNTER);
        for (size_t i = 0; i < 2; i++) {
                snprintf(idx, sizeof idx, "%zu", i + 1);
                mfamily_add(out, f, "", h->thermal_transitions[i], "device", dev, "level", idx,
                            NULL);
        }
        f = mset_family(out, "diskpulse_nvme_thermal_management_seconds_total",
                        "Time spent in thermal management temperature 1 or 2.", MT_COUNTER);
        for (size_t i = 0; i < 2; i++) {
                snprintf(idx, sizeof idx, "%zu", i + 1);
                mfamily_add(out, f, "", h->thermal_time[i], "device", dev, "level", idx, NULL);
        }
}

static void export_nvme(struct mset *out, const char *dev, const struct nvme_health *h)
{
        export_nvme_warning(out, dev, h);
        export_nvme_health(out, dev, h);
        export_nvme_thermal(out, dev, h);
}

static void export_ata(struct mset *out, const char *dev, const struct smart_data *d)
{
        static const struct {
                const char *name, *help;
        } fams[] = {
            {"diskpulse_ata_attribute_value", "Normalized current value of an attribute."},
            {"diskpulse_ata_attribute_worst", "Worst normalized value seen."},
            {"diskpulse_ata_attribute_threshold",
             "Failure threshold of the normalized value (0: advisory only)."},
            {"diskpulse_ata_attribute_raw", "Raw value (48 bits, little endian)."},
            {"diskpulse_ata_attribute_failing",
             "1 while the normalized value is at or below a non-zero threshold."},
        };

        for (size_t k = 0; k < ARRAY_SIZE(fams); k++) {
                struct mfamily *f = mset_family(out, fams[k].name, fams[k].help, MT_GAUGE);
                for (size_t i = 0; i < d->ata.n; i++) {
                        const struct ata_attribute *a = &d->ata.attrs[i];
                        char id[8];
                        const char *name = ata_attribute_name_rpm(a->id, d->ata_rotation_rate);
                        snprintf(id, sizeof id, "%u", a->id);
                        if (k == 2 && !a->has_threshold)
                                continue;
                        if (k == 3)
                                mfamily_add_u64(out, f, "", a->raw, "device", dev, "id", id, "name",
                                                name, NULL);
                        else
                                mfamily_add(out, f, "",
                                            k == 0   ? a->value
                                            : k == 1 ? a->worst
                                            : k == 2 ? a->threshold
                                                     : (ata_attribute_failing(a) ? 1.0 : 0.0),
                                            "device", dev, "id", id, "name", name, NULL);
                }
        }
        if (d->ata_write_cache >= 0)
                gauge(out, "diskpulse_ata_write_cache_enabled",
                      "The drive's volatile write cache is on (IDENTIFY word 85 bit 5).", dev,
                      d->ata_write_cache);
}

static void export_scsi(struct mset *out, const char *dev, const struct smart_data *d)
{
        static const char *const kinds[3] = {"read", "write", "verify"};
        struct mfamily *f;

        if (d->has_scsi_defects)
                gauge(out, "diskpulse_scsi_grown_defects",
                      "Entries in the grown defect list (blocks reassigned since manufacture).",
                      dev, d->scsi_grown_defects);
        if (d->has_scsi_ie)
                gauge(out, "diskpulse_scsi_failure_predicted",
                      "1 when the informational exceptions page predicts failure (ASC 5Dh).", dev,
                      d->scsi_ie.failure_predicted);
        f = mset_family(out, "diskpulse_scsi_uncorrected_errors_total",
                        "Uncorrected errors from the error counter log pages.", MT_COUNTER);
        for (size_t k = 0; k < 3; k++)
                if (smart_data_has_scsi_counter(d, k, SCSI_ERR_UNCORRECTED))
                        mfamily_add_u64(out, f, "", d->scsi_errors[k].v[SCSI_ERR_UNCORRECTED],
                                        "device", dev, "operation", kinds[k], NULL);
        f = mset_family(out, "diskpulse_scsi_corrected_errors_total",
                        "Corrected errors from the error counter log pages.", MT_COUNTER);
        for (size_t k = 0; k < 3; k++)
                if (smart_data_has_scsi_counter(d, k, SCSI_ERR_CORRECTED_TOTAL))
                        mfamily_add_u64(out, f, "", d->scsi_errors[k].v[SCSI_ERR_CORRECTED_TOTAL],
                                        "device", dev, "operation", kinds[k], NULL);
}

void smart_export_data(struct mset *out, const char *device, const struct smart_data *d)
{
        struct mfamily *f;

        f = mset_family(out, "diskpulse_smart_info",
                        "Identity of the drive as its firmware reports it.", MT_GAUGE);
        mfamily_add(out, f, "", 1.0, "device", device, "protocol",
                    d->kind >= 0 && d->kind < DEVIO_KIND_MAX ? protocol_names[d->kind] : "",
                    "model", d->model, "serial", d->serial, "firmware", d->firmware, "wwn", d->wwn,
                    NULL);
        if (d->healthy >= 0)
                gauge(out, "diskpulse_smart_healthy",
                      "1 when the drive reports no failure: NVMe critical warning 0; ATA RETURN "
                      "STATUS good and no attribute at its threshold; SCSI no failure predicted.",
                      device, d->healthy);
        for (size_t v = 0; v < SMART_VALUE_MAX; v++) {
                if (!d->has[v])
                        continue;
                f = mset_family(out, value_defs[v].name, value_defs[v].help, value_defs[v].type);
                mfamily_add(out, f, "", d->value[v], "device", device, NULL);
        }
        if (d->has_nvme)
                export_nvme(out, device, &d->nvme);
        if (d->has_ata)
                export_ata(out, device, d);
        if (d->kind == DEVIO_SCSI)
                export_scsi(out, device, d);
}
