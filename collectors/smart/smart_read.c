/* One SMART read of one device through a devio runner, and the export of what it found. The
 * sequence per protocol follows smartctl's: ATA CHECK POWER MODE before anything else, then
 * IDENTIFY, SMART READ DATA, READ THRESHOLDS and RETURN STATUS; NVMe Identify Controller and
 * the SMART / Health log; SCSI INQUIRY, VPD pages and the LOG SENSE pages the device lists. */
#include "smart_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

enum smart_reason smart_reason_from_errno(int err)
{
        switch (err < 0 ? -err : err) {
        case ETIMEDOUT:
                return SMART_REASON_TIMEOUT;
        case EACCES:
        case EPERM:
                return SMART_REASON_PERMISSION;
        case EIO:
        case EREMOTEIO:
                return SMART_REASON_IO;
        case ENODEV:
        case ENOENT:
        case ENXIO:
                return SMART_REASON_NODEV;
        case EBADMSG:
        case ENODATA:
                return SMART_REASON_BAD_DATA;
        case ECONNRESET:
        case EPIPE:
        case EAGAIN:
        case EBUSY:
                return SMART_REASON_HELPER;
        default:
                return SMART_REASON_OTHER;
        }
}

static void fail(struct smart_outcome *out, enum smart_reason reason, const char *fmt, ...)
    _printf_(3, 4);
static void fail(struct smart_outcome *out, enum smart_reason reason, const char *fmt, ...)
{
        va_list ap;

        out->reason = (int)reason;
        va_start(ap, fmt);
        vsnprintf(out->detail, sizeof out->detail, fmt, ap);
        va_end(ap);
}

static const char *const cmd_names[DEVIO_CMD_MAX] = {
    [DEVIO_NVME_IDENTIFY_CTRL] = "identify controller",
    [DEVIO_NVME_SMART_LOG] = "SMART log",
    [DEVIO_ATA_CHECK_POWER_MODE] = "CHECK POWER MODE",
    [DEVIO_ATA_IDENTIFY] = "IDENTIFY DEVICE",
    [DEVIO_ATA_SMART_READ_DATA] = "SMART READ DATA",
    [DEVIO_ATA_SMART_READ_THRESHOLDS] = "SMART READ THRESHOLDS",
    [DEVIO_ATA_SMART_RETURN_STATUS] = "SMART RETURN STATUS",
    [DEVIO_SCSI_INQUIRY] = "INQUIRY",
    [DEVIO_SCSI_INQUIRY_VPD] = "INQUIRY VPD",
    [DEVIO_SCSI_LOG_SENSE] = "LOG SENSE",
    [DEVIO_SCSI_READ_DEFECT_GLIST] = "READ DEFECT DATA",
};

/* Runs the request. Returns 0, or -1 with the outcome's reason set. */
static int run(struct devio *io, struct devio_request *req, usec_t timeout,
               struct devio_response *resp, struct smart_outcome *out)
{
        int r = io->ops->run(io, req, timeout, resp);

        if (r < 0) {
                fail(out, smart_reason_from_errno(r), "%s", strerror(-r));
                return -1;
        }
        /* An open() failure leaves one result: the device itself is unreachable. */
        if (resp->n < req->n && resp->n > 0 && resp->r[resp->n - 1].err < 0) {
                fail(out, smart_reason_from_errno(resp->r[resp->n - 1].err), "open: %s",
                     strerror(-resp->r[resp->n - 1].err));
                return -1;
        }
        return 0;
}

/* A command's result usable as data? Otherwise records why and returns false. */
static bool result_ok(const struct devio_request *req, const struct devio_response *resp, size_t i,
                      bool need_data, struct smart_outcome *out)
{
        const struct devio_result *res = &resp->r[i];
        const char *what = cmd_names[req->cmds[i].cmd];

        if (i >= resp->n) {
                fail(out, SMART_REASON_OTHER, "%s: no result", what);
                return false;
        }
        if (res->err < 0) {
                fail(out, smart_reason_from_errno(res->err), "%s: %s", what, strerror(-res->err));
                return false;
        }
        if (res->nvme_status) {
                fail(out, SMART_REASON_DEVICE_STATUS, "%s: NVMe status 0x%x", what,
                     res->nvme_status);
                return false;
        }
        /* CHECK CONDITION and friends: the command failed, whatever length SG_IO reports (it
         * may count a zero-filled buffer as transferred). */
        if (need_data && (res->scsi_status & 0x3e) != 0) {
                fail(out, SMART_REASON_DEVICE_STATUS, "%s: SCSI status 0x%x", what,
                     res->scsi_status);
                return false;
        }
        if (need_data && res->host_status != 0) {
                fail(out, SMART_REASON_IO, "%s: host status 0x%x", what, res->host_status);
                return false;
        }
        return true;
}

static void add_cmd(struct devio_request *req, enum devio_cmd cmd, uint32_t param)
{
        req->cmds[req->n].cmd = cmd;
        req->cmds[req->n].param = param;
        req->n++;
}

static void start_request(struct devio_request *req, const char *name, int kind)
{
        memset(req, 0, sizeof(*req));
        strscpy(req->name, name, sizeof req->name);
        req->kind = (uint32_t)kind;
}

static void set(struct smart_data *d, enum smart_value v, double x)
{
        d->has[v] = true;
        d->value[v] = x;
}

static void read_nvme(struct devio *io, const char *name, usec_t timeout, struct smart_outcome *out)
{
        struct devio_request req;
        struct devio_response *resp = xmalloc(sizeof(*resp));
        struct nvme_identity id;
        struct nvme_health *h = &out->data.nvme;
        struct smart_data *d = &out->data;
        int r;

        start_request(&req, name, DEVIO_NVME);
        add_cmd(&req, DEVIO_NVME_IDENTIFY_CTRL, 0);
        add_cmd(&req, DEVIO_NVME_SMART_LOG, 0);
        if (run(io, &req, timeout, resp, out) < 0 || !result_ok(&req, resp, 0, true, out) ||
            !result_ok(&req, resp, 1, true, out))
                goto done;
        if ((r = nvme_parse_identify_ctrl(resp->r[0].data, resp->r[0].len, &id)) < 0) {
                fail(out, SMART_REASON_BAD_DATA, "identify controller: %s", strerror(-r));
                goto done;
        }
        if ((r = nvme_parse_smart_log(resp->r[1].data, resp->r[1].len, h)) < 0) {
                fail(out, SMART_REASON_BAD_DATA, "SMART log: %s", strerror(-r));
                goto done;
        }
        strscpy(d->model, id.model, sizeof d->model);
        strscpy(d->serial, id.serial, sizeof d->serial);
        strscpy(d->firmware, id.firmware, sizeof d->firmware);
        d->has_nvme = true;
        d->healthy = h->critical_warning == 0;
        out->power_mode = 0;
        if (h->temperature_k)
                set(d, SMART_TEMPERATURE_C, nvme_kelvin_to_celsius(h->temperature_k));
        if (id.warning_temp_k)
                set(d, SMART_TEMPERATURE_WARNING_C, nvme_kelvin_to_celsius(id.warning_temp_k));
        if (id.critical_temp_k)
                set(d, SMART_TEMPERATURE_CRITICAL_C, nvme_kelvin_to_celsius(id.critical_temp_k));
        set(d, SMART_POWER_ON_SECONDS, nvme_u128_to_double(h->power_on_hours) * 3600.0);
        set(d, SMART_POWER_CYCLES, nvme_u128_to_double(h->power_cycles));
        set(d, SMART_UNSAFE_SHUTDOWNS, nvme_u128_to_double(h->unsafe_shutdowns));
        set(d, SMART_MEDIA_ERRORS, nvme_u128_to_double(h->media_errors));
        set(d, SMART_WEAR_USED, h->percentage_used / 100.0);
        set(d, SMART_SPARE, h->available_spare / 100.0);
        set(d, SMART_SPARE_THRESHOLD, h->available_spare_threshold / 100.0);
        set(d, SMART_READ_BYTES, nvme_data_units_to_bytes(h->data_units_read));
        set(d, SMART_WRITTEN_BYTES, nvme_data_units_to_bytes(h->data_units_written));
        set(d, SMART_ROTATION_RPM, 0);
done:
        free(resp);
}

/* CHECK POWER MODE. Returns the mode (0, 1, 2) or -1 when it could not be told. */
static int ata_power_mode(struct devio *io, const char *name, usec_t timeout,
                          struct devio_response *resp, struct smart_outcome *out)
{
        struct devio_request req;
        struct ata_return ret;
        int mode;

        start_request(&req, name, DEVIO_ATA);
        add_cmd(&req, DEVIO_ATA_CHECK_POWER_MODE, 0);
        if (run(io, &req, timeout, resp, out) < 0)
                return -2;
        if (resp->n < 1)
                return -1;
        if (resp->r[0].err < 0 && resp->r[0].err != -EIO) {
                /* Not allowed, or no such device: a read error, not a power mode. */
                fail(out, smart_reason_from_errno(resp->r[0].err), "CHECK POWER MODE: %s",
                     strerror(-resp->r[0].err));
                return -2;
        }
        if (resp->r[0].err < 0)
                return 2; /* a sleeping drive does not answer: do not insist */
        if (ata_parse_return_sense(resp->r[0].sense, resp->r[0].sense_len, &ret) < 0)
                return -1;
        if (ret.status & 0x21)
                return 2; /* ERR or DF: as above */
        mode = ata_power_mode_from_count(ret.count);
        return mode < 0 ? -1 : mode;
}

static void read_ata(struct devio *io, const char *name, usec_t timeout,
                     enum smart_powermode_check pm, struct smart_memory *mem,
                     struct smart_outcome *out)
{
        struct devio_request req;
        struct devio_response *resp = xmalloc(sizeof(*resp));
        struct ata_identity id;
        struct ata_derived der;
        struct ata_return ret;
        struct smart_data *d = &out->data;
        bool failing = false;
        int r, status = -1;

        if (pm != SMART_PM_NEVER) {
                int mode = ata_power_mode(io, name, timeout, resp, out);
                if (mode == -2)
                        goto done;
                out->power_mode = mode;
                if ((pm == SMART_PM_STANDBY && mode >= 1) || (pm == SMART_PM_SLEEP && mode == 2)) {
                        out->skipped = mode == 2 ? SMART_SKIP_SLEEP : SMART_SKIP_STANDBY;
                        goto done;
                }
        }

        /* IDENTIFY alone first: a SMART command to a drive whose SMART is off or missing is
         * aborted, and a drive logs every aborted command in its error log (smartctl -l error),
         * so polling must not send one. */
        start_request(&req, name, DEVIO_ATA);
        add_cmd(&req, DEVIO_ATA_IDENTIFY, 0);
        if (run(io, &req, timeout, resp, out) < 0 || !result_ok(&req, resp, 0, true, out))
                goto done;
        if ((r = ata_parse_identify(resp->r[0].data, resp->r[0].len, &id)) < 0) {
                fail(out, SMART_REASON_BAD_DATA, "IDENTIFY DEVICE: %s", strerror(-r));
                goto done;
        }
        strscpy(d->model, id.model, sizeof d->model);
        strscpy(d->serial, id.serial, sizeof d->serial);
        strscpy(d->firmware, id.firmware, sizeof d->firmware);
        strscpy(d->wwn, id.wwn, sizeof d->wwn);
        if (id.rotation_rate == 1)
                set(d, SMART_ROTATION_RPM, 0);
        else if (id.rotation_rate > 1)
                set(d, SMART_ROTATION_RPM, id.rotation_rate);
        d->ata_write_cache = id.write_cache_supported ? (id.write_cache_enabled ? 1 : 0) : -1;
        if (!id.smart_supported || !id.smart_enabled) {
                fail(out, SMART_REASON_DEVICE_STATUS, "SMART %s on this drive",
                     id.smart_supported ? "is disabled" : "is not supported");
                goto done;
        }
        if (mem->smart_aborts > SMART_ABORT_EAGER) {
                unsigned k = mem->smart_aborts - SMART_ABORT_EAGER;
                unsigned gap = 1u << (k < 20 ? k : 20);
                if (++mem->reads_since < gap &&
                    now_monotonic() - mem->smart_aborted < SMART_ABORT_RETRY) {
                        fail(out, SMART_REASON_DEVICE_STATUS,
                             "SMART commands aborted %u times in a row: not sent at this read "
                             "(every abort lands in the drive's error log)",
                             mem->smart_aborts);
                        goto done;
                }
        }
        start_request(&req, name, DEVIO_ATA);
        add_cmd(&req, DEVIO_ATA_SMART_READ_DATA, 0);
        add_cmd(&req, DEVIO_ATA_SMART_READ_THRESHOLDS, 0);
        add_cmd(&req, DEVIO_ATA_SMART_RETURN_STATUS, 0);
        if (run(io, &req, timeout, resp, out) < 0)
                goto done;
        /* A drive that aborts the command (SMART switched off behind IDENTIFY's back) may still
         * move 512 zero bytes: the returned status tells. */
        if (resp->n > 0 && resp->r[0].err == 0 && resp->r[0].scsi_status != 0 &&
            ata_parse_return_sense(resp->r[0].sense, resp->r[0].sense_len, &ret) == 0 &&
            ata_return_failed(&ret)) {
                fail(out, SMART_REASON_DEVICE_STATUS, "SMART READ DATA: aborted (error 0x%02x)",
                     ret.error);
                mem->smart_aborts++;
                mem->reads_since = 0;
                mem->smart_aborted = now_monotonic();
                goto done;
        }
        if (!result_ok(&req, resp, 0, true, out))
                goto done;
        if ((r = ata_parse_smart_data(resp->r[0].data, resp->r[0].len, &d->ata)) < 0) {
                fail(out, SMART_REASON_BAD_DATA, "SMART READ DATA: %s", strerror(-r));
                goto done;
        }
        /* Thresholds and the verdict are worth having but not worth failing the read for. */
        if (resp->n > 1 && resp->r[1].err == 0 && resp->r[1].scsi_status == 0)
                (void)ata_parse_smart_thresholds(resp->r[1].data, resp->r[1].len, &d->ata);
        if (resp->n > 2 && resp->r[2].err == 0 &&
            ata_parse_return_sense(resp->r[2].sense, resp->r[2].sense_len, &ret) == 0)
                status = ata_smart_status_from_return(&ret);
        d->has_ata = true;
        *mem = (struct smart_memory){0};
        for (size_t i = 0; i < d->ata.n; i++)
                failing |= ata_attribute_failing(&d->ata.attrs[i]);
        d->healthy = status == 0 || failing ? 0 : 1;
        d->ata_rotation_rate = id.rotation_rate;

        ata_derive(&d->ata, id.rotation_rate, &der);
        if (der.has_temperature)
                set(d, SMART_TEMPERATURE_C, der.temperature_c);
        if (der.has_power_on_hours)
                set(d, SMART_POWER_ON_SECONDS, (double)der.power_on_hours * 3600.0);
        if (der.has_power_cycles)
                set(d, SMART_POWER_CYCLES, (double)der.power_cycles);
        if (der.has_unsafe_shutdowns)
                set(d, SMART_UNSAFE_SHUTDOWNS, (double)der.unsafe_shutdowns);
        if (der.has_reported_uncorrect)
                set(d, SMART_MEDIA_ERRORS, (double)der.reported_uncorrect);
        else if (der.has_offline_uncorrectable)
                set(d, SMART_MEDIA_ERRORS, (double)der.offline_uncorrectable);
        if (der.has_wear)
                set(d, SMART_WEAR_USED, der.wear_used_ratio);
        if (der.has_lbas_read)
                set(d, SMART_READ_BYTES, (double)der.lbas_read * ATA_SECTOR_SIZE);
        if (der.has_lbas_written)
                set(d, SMART_WRITTEN_BYTES, (double)der.lbas_written * ATA_SECTOR_SIZE);
done:
        free(resp);
}

static bool page_listed(const uint8_t *pages, size_t n, uint8_t page)
{
        for (size_t i = 0; i < n; i++)
                if (pages[i] == page)
                        return true;
        return false;
}

static void read_scsi(struct devio *io, const char *name, usec_t timeout, struct smart_outcome *out)
{
        static const uint8_t wanted[] = {0x0D, 0x2F, 0x02, 0x03, 0x05, 0x0E, 0x11};
        struct devio_request req;
        struct devio_response *resp = xmalloc(sizeof(*resp));
        struct smart_data *d = &out->data;
        struct scsi_inquiry inq;
        uint8_t pages[64];
        size_t npages = 0;
        uint16_t rpm;
        int r;

        start_request(&req, name, DEVIO_SCSI);
        add_cmd(&req, DEVIO_SCSI_INQUIRY, 0);
        add_cmd(&req, DEVIO_SCSI_INQUIRY_VPD, 0x80);
        add_cmd(&req, DEVIO_SCSI_INQUIRY_VPD, 0x83);
        add_cmd(&req, DEVIO_SCSI_INQUIRY_VPD, 0xB1);
        add_cmd(&req, DEVIO_SCSI_LOG_SENSE, 0x00);
        if (run(io, &req, timeout, resp, out) < 0 || !result_ok(&req, resp, 0, true, out))
                goto done;
        if ((r = scsi_parse_inquiry(resp->r[0].data, resp->r[0].len, &inq)) < 0) {
                fail(out, SMART_REASON_BAD_DATA, "INQUIRY: %s", strerror(-r));
                goto done;
        }
        snprintf(d->model, sizeof d->model, "%s%s%s", inq.vendor, inq.vendor[0] ? " " : "",
                 inq.product);
        strscpy(d->firmware, inq.revision, sizeof d->firmware);
        if (resp->n > 1 && resp->r[1].err == 0 && resp->r[1].scsi_status == 0)
                (void)scsi_parse_vpd_serial(resp->r[1].data, resp->r[1].len, d->serial,
                                            sizeof d->serial);
        if (resp->n > 2 && resp->r[2].err == 0 && resp->r[2].scsi_status == 0)
                (void)scsi_parse_vpd_wwn(resp->r[2].data, resp->r[2].len, d->wwn, sizeof d->wwn);
        if (resp->n > 3 && resp->r[3].err == 0 && resp->r[3].scsi_status == 0 &&
            scsi_parse_vpd_rotation(resp->r[3].data, resp->r[3].len, &rpm) == 0 && rpm > 0)
                set(d, SMART_ROTATION_RPM, rpm == 1 ? 0 : rpm);
        if (resp->n > 4 && resp->r[4].err == 0 && resp->r[4].scsi_status == 0)
                (void)scsi_parse_supported_pages(resp->r[4].data, resp->r[4].len, pages,
                                                 sizeof pages, &npages);

        start_request(&req, name, DEVIO_SCSI);
        for (size_t i = 0; i < ARRAY_SIZE(wanted); i++)
                if (page_listed(pages, npages, wanted[i]))
                        add_cmd(&req, DEVIO_SCSI_LOG_SENSE, wanted[i]);
        if (inq.device_type == 0)
                add_cmd(&req, DEVIO_SCSI_READ_DEFECT_GLIST, 0);
        d->healthy = -1;
        if (req.n > 0) {
                if (run(io, &req, timeout, resp, out) < 0)
                        goto done;
                for (size_t i = 0; i < resp->n; i++) {
                        const struct devio_result *res = &resp->r[i];
                        uint32_t page = req.cmds[i].param;
                        struct scsi_temperature t;
                        struct scsi_start_stop ss;
                        uint8_t used;

                        /* A page the device refused (CHECK CONDITION) carries no data, whatever
                         * the transferred length says. */
                        if (res->err < 0 || res->len == 0 || res->scsi_status != 0)
                                continue;
                        if (req.cmds[i].cmd == DEVIO_SCSI_READ_DEFECT_GLIST) {
                                d->has_scsi_defects =
                                    scsi_parse_defect_count(res->data, res->len,
                                                            &d->scsi_grown_defects) == 0;
                                continue;
                        }
                        switch (page) {
                        case 0x0D:
                                if (scsi_parse_temperature(res->data, res->len, &t) < 0)
                                        break;
                                if (t.has_current)
                                        set(d, SMART_TEMPERATURE_C, t.current_c);
                                if (t.has_reference)
                                        set(d, SMART_TEMPERATURE_WARNING_C, t.reference_c);
                                break;
                        case 0x2F:
                                if (scsi_parse_ie(res->data, res->len, &d->scsi_ie) == 0) {
                                        d->has_scsi_ie = true;
                                        d->healthy = !d->scsi_ie.failure_predicted;
                                }
                                break;
                        case 0x02:
                        case 0x03:
                        case 0x05: {
                                size_t k = page == 0x03 ? 0 : page == 0x02 ? 1 : 2;
                                d->has_scsi_errors[k] =
                                    scsi_parse_error_counters(res->data, res->len, (uint8_t)page,
                                                              &d->scsi_errors[k]) == 0;
                                break;
                        }
                        case 0x0E:
                                if (scsi_parse_start_stop(res->data, res->len, &ss) == 0 &&
                                    ss.has_accumulated_cycles)
                                        set(d, SMART_POWER_CYCLES, ss.accumulated_cycles);
                                break;
                        case 0x11:
                                if (scsi_parse_ssd(res->data, res->len, &used) == 0)
                                        set(d, SMART_WEAR_USED, used / 100.0);
                                break;
                        }
                }
        }
        if (!d->has[SMART_TEMPERATURE_C] && d->has_scsi_ie && d->scsi_ie.has_temperature)
                set(d, SMART_TEMPERATURE_C, d->scsi_ie.temperature_c);
        {
                double uncorrected = 0;
                bool any = false;
                for (size_t k = 0; k < 3; k++)
                        if (d->has_scsi_errors[k] &&
                            (d->scsi_errors[k].present & (1u << SCSI_ERR_UNCORRECTED))) {
                                uncorrected += (double)d->scsi_errors[k].v[SCSI_ERR_UNCORRECTED];
                                any = true;
                        }
                if (any)
                        set(d, SMART_MEDIA_ERRORS, uncorrected);
                if (d->has_scsi_errors[0] &&
                    (d->scsi_errors[0].present & (1u << SCSI_ERR_BYTES_PROCESSED)))
                        set(d, SMART_READ_BYTES,
                            (double)d->scsi_errors[0].v[SCSI_ERR_BYTES_PROCESSED]);
                if (d->has_scsi_errors[1] &&
                    (d->scsi_errors[1].present & (1u << SCSI_ERR_BYTES_PROCESSED)))
                        set(d, SMART_WRITTEN_BYTES,
                            (double)d->scsi_errors[1].v[SCSI_ERR_BYTES_PROCESSED]);
        }
        out->reason = -1; /* a missing log page is not a failed read */
done:
        free(resp);
}

void smart_read_device(struct devio *io, const char *name, int kind, usec_t timeout,
                       enum smart_powermode_check powermode, struct smart_memory *mem,
                       struct smart_outcome *out)
{
        struct smart_memory none = {0};

        if (!mem)
                mem = &none;
        memset(out, 0, sizeof(*out));
        out->reason = -1;
        out->skipped = -1;
        out->power_mode = -1;
        out->data.kind = kind;
        out->data.healthy = -1;
        out->data.ata_write_cache = -1;
        switch (kind) {
        case DEVIO_NVME:
                read_nvme(io, name, timeout, out);
                break;
        case DEVIO_ATA:
                read_ata(io, name, timeout, powermode, mem, out);
                break;
        case DEVIO_SCSI:
                read_scsi(io, name, timeout, out);
                break;
        default:
                fail(out, SMART_REASON_OTHER, "unknown device kind %d", kind);
        }
}

/* Export. */

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

static void export_nvme(struct mset *out, const char *dev, const struct nvme_health *h)
{
        static const char *const flags[] = {"spare",     "temperature",     "reliability",
                                            "read_only", "volatile_backup", "pmr_read_only"};
        struct mfamily *f;
        char idx[8];

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
                if (d->has_scsi_errors[k] &&
                    (d->scsi_errors[k].present & (1u << SCSI_ERR_UNCORRECTED)))
                        mfamily_add_u64(out, f, "", d->scsi_errors[k].v[SCSI_ERR_UNCORRECTED],
                                        "device", dev, "operation", kinds[k], NULL);
        f = mset_family(out, "diskpulse_scsi_corrected_errors_total",
                        "Corrected errors from the error counter log pages.", MT_COUNTER);
        for (size_t k = 0; k < 3; k++)
                if (d->has_scsi_errors[k] &&
                    (d->scsi_errors[k].present & (1u << SCSI_ERR_CORRECTED_TOTAL)))
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
