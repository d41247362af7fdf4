/* One SMART read of one device through a devio runner, its pages decoded into the facts of
 * smart_data.h (their export is smart_export.c). The sequence per protocol follows smartctl's:
 * ATA CHECK POWER MODE before anything else, then IDENTIFY, SMART READ DATA, READ THRESHOLDS and
 * RETURN STATUS; NVMe Identify Controller and the SMART / Health log; SCSI INQUIRY, VPD pages and
 * the LOG SENSE pages the device lists. Each step is one function: it builds one request (or
 * decodes one page) and records a failure in the outcome. */
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

/* One read in progress: where the commands go, the request being built, the last response
 * and the outcome being filled. */
struct reader {
        struct devio *io;
        const char *name;
        int kind; /* enum devio_kind */
        usec_t timeout;
        struct devio_request req;
        struct devio_response *resp;
        struct smart_outcome *out;
};

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

/* Runs the request built in rd. Returns 0, or -1 with the outcome's reason set. */
static int run(struct reader *rd)
{
        const struct devio_response *resp = rd->resp;
        int r = rd->io->ops->run(rd->io, &rd->req, rd->timeout, rd->resp);

        if (r < 0) {
                fail(rd->out, smart_reason_from_errno(r), "%s", strerror(-r));
                return -1;
        }
        /* An open() failure leaves one result: the device itself is unreachable. */
        if (resp->n < rd->req.n && resp->n > 0 && resp->r[resp->n - 1].err < 0) {
                fail(rd->out, smart_reason_from_errno(resp->r[resp->n - 1].err), "open: %s",
                     strerror(-resp->r[resp->n - 1].err));
                return -1;
        }
        return 0;
}

/* Command i's result usable as data? Otherwise records why and returns false. */
static bool result_ok(struct reader *rd, size_t i, bool need_data)
{
        const struct devio_result *res = &rd->resp->r[i];
        const char *what = cmd_names[rd->req.cmds[i].cmd];
        struct smart_outcome *out = rd->out;

        if (i >= rd->resp->n) {
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

/* Command i came back without error and with good status (its data may still be short). */
static bool answered(const struct devio_response *resp, size_t i)
{
        return resp->n > i && resp->r[i].err == 0 && resp->r[i].scsi_status == 0;
}

static void start_request(struct reader *rd)
{
        memset(&rd->req, 0, sizeof(rd->req));
        strscpy(rd->req.name, rd->name, sizeof rd->req.name);
        rd->req.kind = (uint32_t)rd->kind;
}

static void add_cmd(struct reader *rd, enum devio_cmd cmd, uint32_t param)
{
        rd->req.cmds[rd->req.n].cmd = cmd;
        rd->req.cmds[rd->req.n].param = param;
        rd->req.n++;
}

static void set(struct smart_data *d, enum smart_value v, double x)
{
        d->has[v] = true;
        d->value[v] = x;
}

/* NVMe */

/* The controller's identity and the unified values of its SMART / Health log (d->nvme). */
static void take_nvme(struct smart_data *d, const struct nvme_identity *id)
{
        const struct nvme_health *h = &d->nvme;

        strscpy(d->model, id->model, sizeof d->model);
        strscpy(d->serial, id->serial, sizeof d->serial);
        strscpy(d->firmware, id->firmware, sizeof d->firmware);
        d->has_nvme = true;
        d->healthy = h->critical_warning == 0;
        if (h->temperature_k)
                set(d, SMART_TEMPERATURE_C, nvme_kelvin_to_celsius(h->temperature_k));
        if (id->warning_temp_k)
                set(d, SMART_TEMPERATURE_WARNING_C, nvme_kelvin_to_celsius(id->warning_temp_k));
        if (id->critical_temp_k)
                set(d, SMART_TEMPERATURE_CRITICAL_C, nvme_kelvin_to_celsius(id->critical_temp_k));
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
}

/* Identify Controller and the SMART / Health log, in one request (both are mandatory). */
static void read_nvme(struct reader *rd)
{
        const struct devio_result *r = rd->resp->r;
        struct smart_outcome *out = rd->out;
        struct nvme_identity id;
        int e;

        start_request(rd);
        add_cmd(rd, DEVIO_NVME_IDENTIFY_CTRL, 0);
        add_cmd(rd, DEVIO_NVME_SMART_LOG, 0);
        if (run(rd) < 0 || !result_ok(rd, 0, true) || !result_ok(rd, 1, true))
                return;
        if ((e = nvme_parse_identify_ctrl(r[0].data, r[0].len, &id)) < 0) {
                fail(out, SMART_REASON_BAD_DATA, "identify controller: %s", strerror(-e));
                return;
        }
        if ((e = nvme_parse_smart_log(r[1].data, r[1].len, &out->data.nvme)) < 0) {
                fail(out, SMART_REASON_BAD_DATA, "SMART log: %s", strerror(-e));
                return;
        }
        out->power_mode = 0;
        take_nvme(&out->data, &id);
}

/* ATA */

/* CHECK POWER MODE. Returns the mode (0, 1, 2), -1 when it could not be told, -2 when the read
 * stops here (the outcome's reason set). */
static int read_power_mode(struct reader *rd)
{
        const struct devio_result *r = &rd->resp->r[0];
        struct ata_return ret;
        int mode;

        start_request(rd);
        add_cmd(rd, DEVIO_ATA_CHECK_POWER_MODE, 0);
        if (run(rd) < 0)
                return -2;
        if (rd->resp->n < 1)
                return -1;
        if (r->err < 0 && r->err != -EIO) {
                /* Not allowed, or no such device: a read error, not a power mode. */
                fail(rd->out, smart_reason_from_errno(r->err), "CHECK POWER MODE: %s",
                     strerror(-r->err));
                return -2;
        }
        if (r->err < 0)
                return 2; /* a sleeping drive does not answer: do not insist */
        if (ata_parse_return_sense(r->sense, r->sense_len, &ret) < 0)
                return -1;
        if (ret.status & 0x21)
                return 2; /* ERR or DF: as above */
        mode = ata_power_mode_from_count(ret.count);
        return mode < 0 ? -1 : mode;
}

/* The power mode check before anything else (none when pm is never). Returns true when the
 * read goes on; false when it failed or the drive sleeps at least as deep as pm (a skip). */
static bool ata_awake(struct reader *rd, enum smart_powermode_check pm)
{
        int mode;

        if (pm == SMART_PM_NEVER)
                return true;
        mode = read_power_mode(rd);
        if (mode == -2)
                return false;
        rd->out->power_mode = mode;
        if ((pm == SMART_PM_STANDBY && mode >= 1) || (pm == SMART_PM_SLEEP && mode == 2)) {
                rd->out->skipped = mode == 2 ? SMART_SKIP_SLEEP : SMART_SKIP_STANDBY;
                return false;
        }
        return true;
}

static void take_ata_identity(struct smart_data *d, const struct ata_identity *id)
{
        strscpy(d->model, id->model, sizeof d->model);
        strscpy(d->serial, id->serial, sizeof d->serial);
        strscpy(d->firmware, id->firmware, sizeof d->firmware);
        strscpy(d->wwn, id->wwn, sizeof d->wwn);
        if (id->rotation_rate == 1)
                set(d, SMART_ROTATION_RPM, 0);
        else if (id->rotation_rate > 1)
                set(d, SMART_ROTATION_RPM, id->rotation_rate);
        d->ata_write_cache = id->write_cache_supported ? (id->write_cache_enabled ? 1 : 0) : -1;
}

/* IDENTIFY alone first: a SMART command to a drive whose SMART is off or missing is aborted,
 * and a drive logs every aborted command in its error log (smartctl -l error), so polling must
 * not send one. Returns 0 with *id filled and taken, or -1 (the outcome's reason set). */
static int read_ata_identify(struct reader *rd, struct ata_identity *id)
{
        const struct devio_result *r = &rd->resp->r[0];
        int e;

        start_request(rd);
        add_cmd(rd, DEVIO_ATA_IDENTIFY, 0);
        if (run(rd) < 0 || !result_ok(rd, 0, true))
                return -1;
        if ((e = ata_parse_identify(r->data, r->len, id)) < 0) {
                fail(rd->out, SMART_REASON_BAD_DATA, "IDENTIFY DEVICE: %s", strerror(-e));
                return -1;
        }
        take_ata_identity(&rd->out->data, id);
        return 0;
}

/* SMART supported and on, as IDENTIFY says? Otherwise a device status failure. */
static bool ata_smart_on(struct reader *rd, const struct ata_identity *id)
{
        if (id->smart_supported && id->smart_enabled)
                return true;
        fail(rd->out, SMART_REASON_DEVICE_STATUS, "SMART %s on this drive",
             id->smart_supported ? "is disabled" : "is not supported");
        return false;
}

/* True while SMART commands are backed off after aborts (struct smart_memory): this read sends
 * none and fails with a device status. */
static bool ata_backing_off(struct reader *rd, struct smart_memory *mem)
{
        unsigned k, gap;

        if (mem->smart_aborts <= SMART_ABORT_EAGER)
                return false;
        k = mem->smart_aborts - SMART_ABORT_EAGER;
        gap = 1u << (k < 20 ? k : 20);
        if (++mem->reads_since >= gap || now_monotonic() - mem->smart_aborted >= SMART_ABORT_RETRY)
                return false;
        fail(rd->out, SMART_REASON_DEVICE_STATUS,
             "SMART commands aborted %u times in a row: not sent at this read "
             "(every abort lands in the drive's error log)",
             mem->smart_aborts);
        return true;
}

/* A drive that aborts SMART READ DATA (SMART switched off behind IDENTIFY's back) may still
 * move 512 zero bytes: the returned status tells. An abort is counted in mem and fails the
 * read; returns true then. */
static bool ata_smart_aborted(struct reader *rd, struct smart_memory *mem)
{
        const struct devio_result *r = &rd->resp->r[0];
        struct ata_return ret;

        if (rd->resp->n == 0 || r->err != 0 || r->scsi_status == 0 ||
            ata_parse_return_sense(r->sense, r->sense_len, &ret) != 0 || !ata_return_failed(&ret))
                return false;
        fail(rd->out, SMART_REASON_DEVICE_STATUS, "SMART READ DATA: aborted (error 0x%02x)",
             ret.error);
        mem->smart_aborts++;
        mem->reads_since = 0;
        mem->smart_aborted = now_monotonic();
        return true;
}

/* SMART READ DATA, READ THRESHOLDS and RETURN STATUS in one request: the attributes into the
 * outcome, RETURN STATUS's verdict into *status (ata_smart_status_from_return(), -1 without
 * one). Returns 0, or -1 (the outcome's reason set). */
static int read_ata_smart(struct reader *rd, struct smart_memory *mem, int *status)
{
        const struct devio_response *resp = rd->resp;
        struct ata_smart *a = &rd->out->data.ata;
        struct ata_return ret;
        int e;

        *status = -1;
        start_request(rd);
        add_cmd(rd, DEVIO_ATA_SMART_READ_DATA, 0);
        add_cmd(rd, DEVIO_ATA_SMART_READ_THRESHOLDS, 0);
        add_cmd(rd, DEVIO_ATA_SMART_RETURN_STATUS, 0);
        if (run(rd) < 0 || ata_smart_aborted(rd, mem) || !result_ok(rd, 0, true))
                return -1;
        if ((e = ata_parse_smart_data(resp->r[0].data, resp->r[0].len, a)) < 0) {
                fail(rd->out, SMART_REASON_BAD_DATA, "SMART READ DATA: %s", strerror(-e));
                return -1;
        }
        /* Thresholds and the verdict are worth having but not worth failing the read for. */
        if (answered(resp, 1))
                (void)ata_parse_smart_thresholds(resp->r[1].data, resp->r[1].len, a);
        if (resp->n > 2 && resp->r[2].err == 0 &&
            ata_parse_return_sense(resp->r[2].sense, resp->r[2].sense_len, &ret) == 0)
                *status = ata_smart_status_from_return(&ret);
        return 0;
}

/* The unified values from the attributes (ata_derive()). */
static void take_ata_derived(struct smart_data *d, uint16_t rotation_rate)
{
        struct ata_derived der;

        ata_derive(&d->ata, rotation_rate, &der);
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
}

/* The verdict (RETURN STATUS and the attributes' thresholds) and the derived values. */
static void take_ata_smart(struct smart_data *d, int status, uint16_t rotation_rate)
{
        bool failing = false;

        d->has_ata = true;
        for (size_t i = 0; i < d->ata.n; i++)
                failing |= ata_attribute_failing(&d->ata.attrs[i]);
        d->healthy = status == 0 || failing ? 0 : 1;
        d->ata_rotation_rate = rotation_rate;
        take_ata_derived(d, rotation_rate);
}

static void read_ata(struct reader *rd, enum smart_powermode_check pm, struct smart_memory *mem)
{
        struct ata_identity id;
        int status;

        if (!ata_awake(rd, pm) || read_ata_identify(rd, &id) < 0 || !ata_smart_on(rd, &id) ||
            ata_backing_off(rd, mem) || read_ata_smart(rd, mem, &status) < 0)
                return;
        *mem = (struct smart_memory){0};
        take_ata_smart(&rd->out->data, status, id.rotation_rate);
}

/* SCSI */

/* The LOG SENSE pages read when the device lists them, in this order. */
static const uint8_t scsi_wanted[] = {0x0D, 0x2F, 0x02, 0x03, 0x05, 0x0E, 0x11};

static bool page_listed(const uint8_t *pages, size_t n, uint8_t page)
{
        for (size_t i = 0; i < n; i++)
                if (pages[i] == page)
                        return true;
        return false;
}

/* The identity from INQUIRY and the VPD pages that came back: serial number (80h), device
 * identification (83h), rotation rate (B1h). */
static void take_scsi_identity(struct smart_data *d, const struct scsi_inquiry *inq,
                               const struct devio_response *resp)
{
        const struct devio_result *r = resp->r;
        uint16_t rpm;

        snprintf(d->model, sizeof d->model, "%s%s%s", inq->vendor, inq->vendor[0] ? " " : "",
                 inq->product);
        strscpy(d->firmware, inq->revision, sizeof d->firmware);
        if (answered(resp, 1))
                (void)scsi_parse_vpd_serial(r[1].data, r[1].len, d->serial, sizeof d->serial);
        if (answered(resp, 2))
                (void)scsi_parse_vpd_wwn(r[2].data, r[2].len, d->wwn, sizeof d->wwn);
        if (answered(resp, 3) && scsi_parse_vpd_rotation(r[3].data, r[3].len, &rpm) == 0 && rpm > 0)
                set(d, SMART_ROTATION_RPM, rpm == 1 ? 0 : rpm);
}

/* INQUIRY, the VPD pages 80h, 83h and B1h, and the supported log pages (LOG SENSE 00h) in one
 * request. Returns 0 with *inq and the listed pages (at most max into pages, *npages of them),
 * or -1 (the outcome's reason set) when INQUIRY failed. */
static int read_scsi_identity(struct reader *rd, struct scsi_inquiry *inq, uint8_t *pages,
                              size_t max, size_t *npages)
{
        const struct devio_result *r = rd->resp->r;
        int e;

        start_request(rd);
        add_cmd(rd, DEVIO_SCSI_INQUIRY, 0);
        add_cmd(rd, DEVIO_SCSI_INQUIRY_VPD, 0x80);
        add_cmd(rd, DEVIO_SCSI_INQUIRY_VPD, 0x83);
        add_cmd(rd, DEVIO_SCSI_INQUIRY_VPD, 0xB1);
        add_cmd(rd, DEVIO_SCSI_LOG_SENSE, 0x00);
        if (run(rd) < 0 || !result_ok(rd, 0, true))
                return -1;
        if ((e = scsi_parse_inquiry(r[0].data, r[0].len, inq)) < 0) {
                fail(rd->out, SMART_REASON_BAD_DATA, "INQUIRY: %s", strerror(-e));
                return -1;
        }
        take_scsi_identity(&rd->out->data, inq, rd->resp);
        if (answered(rd->resp, 4))
                (void)scsi_parse_supported_pages(r[4].data, r[4].len, pages, max, npages);
        return 0;
}

/* Temperature page 0Dh: current and reference temperature. */
static void take_scsi_temperature(struct smart_data *d, const struct devio_result *res)
{
        struct scsi_temperature t;

        if (scsi_parse_temperature(res->data, res->len, &t) < 0)
                return;
        if (t.has_current)
                set(d, SMART_TEMPERATURE_C, t.current_c);
        if (t.has_reference)
                set(d, SMART_TEMPERATURE_WARNING_C, t.reference_c);
}

/* Informational exceptions page 2Fh: the failure prediction decides health. */
static void take_scsi_ie(struct smart_data *d, const struct devio_result *res)
{
        if (scsi_parse_ie(res->data, res->len, &d->scsi_ie) == 0) {
                d->has_scsi_ie = true;
                d->healthy = !d->scsi_ie.failure_predicted;
        }
}

/* Error counter pages: 03h read, 02h write, 05h verify. */
static void take_scsi_errors(struct smart_data *d, uint8_t page, const struct devio_result *res)
{
        size_t k = page == 0x03 ? 0 : page == 0x02 ? 1 : 2;

        d->has_scsi_errors[k] =
            scsi_parse_error_counters(res->data, res->len, page, &d->scsi_errors[k]) == 0;
}

/* Start-stop cycle counter page 0Eh: the power cycles. */
static void take_scsi_start_stop(struct smart_data *d, const struct devio_result *res)
{
        struct scsi_start_stop ss;

        if (scsi_parse_start_stop(res->data, res->len, &ss) == 0 && ss.has_accumulated_cycles)
                set(d, SMART_POWER_CYCLES, ss.accumulated_cycles);
}

/* Solid state media page 11h: the endurance used. */
static void take_scsi_ssd(struct smart_data *d, const struct devio_result *res)
{
        uint8_t used;

        if (scsi_parse_ssd(res->data, res->len, &used) == 0)
                set(d, SMART_WEAR_USED, used / 100.0);
}

static void take_scsi_page(struct smart_data *d, uint32_t page, const struct devio_result *res)
{
        switch (page) {
        case 0x0D:
                take_scsi_temperature(d, res);
                break;
        case 0x2F:
                take_scsi_ie(d, res);
                break;
        case 0x02:
        case 0x03:
        case 0x05:
                take_scsi_errors(d, (uint8_t)page, res);
                break;
        case 0x0E:
                take_scsi_start_stop(d, res);
                break;
        case 0x11:
                take_scsi_ssd(d, res);
                break;
        }
}

/* The wanted log pages the device listed and, for a disk (peripheral type 0), the grown defect
 * list, in one request; each result with data is taken. Nothing is sent when nothing is
 * wanted. Returns 0, or -1 (the outcome's reason set) when the request failed. */
static int read_scsi_health(struct reader *rd, const struct scsi_inquiry *inq, const uint8_t *pages,
                            size_t npages)
{
        struct smart_data *d = &rd->out->data;

        start_request(rd);
        for (size_t i = 0; i < ARRAY_SIZE(scsi_wanted); i++)
                if (page_listed(pages, npages, scsi_wanted[i]))
                        add_cmd(rd, DEVIO_SCSI_LOG_SENSE, scsi_wanted[i]);
        if (inq->device_type == 0)
                add_cmd(rd, DEVIO_SCSI_READ_DEFECT_GLIST, 0);
        if (rd->req.n == 0)
                return 0;
        if (run(rd) < 0)
                return -1;
        for (size_t i = 0; i < rd->resp->n; i++) {
                const struct devio_result *res = &rd->resp->r[i];

                /* A page the device refused (CHECK CONDITION) carries no data, whatever the
                 * transferred length says. */
                if (res->err < 0 || res->len == 0 || res->scsi_status != 0)
                        continue;
                if (rd->req.cmds[i].cmd == DEVIO_SCSI_READ_DEFECT_GLIST)
                        d->has_scsi_defects = scsi_parse_defect_count(res->data, res->len,
                                                                      &d->scsi_grown_defects) == 0;
                else
                        take_scsi_page(d, rd->req.cmds[i].param, res);
        }
        return 0;
}

/* The unified values several pages give together: the temperature of page 2Fh when 0Dh gave
 * none, the media errors of the three error counter pages summed, the bytes processed. */
static void take_scsi_totals(struct smart_data *d)
{
        double uncorrected = 0;
        bool any = false;

        if (!d->has[SMART_TEMPERATURE_C] && d->has_scsi_ie && d->scsi_ie.has_temperature)
                set(d, SMART_TEMPERATURE_C, d->scsi_ie.temperature_c);
        for (size_t k = 0; k < 3; k++)
                if (smart_data_has_scsi_counter(d, k, SCSI_ERR_UNCORRECTED)) {
                        uncorrected += (double)d->scsi_errors[k].v[SCSI_ERR_UNCORRECTED];
                        any = true;
                }
        if (any)
                set(d, SMART_MEDIA_ERRORS, uncorrected);
        if (smart_data_has_scsi_counter(d, 0, SCSI_ERR_BYTES_PROCESSED))
                set(d, SMART_READ_BYTES, (double)d->scsi_errors[0].v[SCSI_ERR_BYTES_PROCESSED]);
        if (smart_data_has_scsi_counter(d, 1, SCSI_ERR_BYTES_PROCESSED))
                set(d, SMART_WRITTEN_BYTES, (double)d->scsi_errors[1].v[SCSI_ERR_BYTES_PROCESSED]);
}

static void read_scsi(struct reader *rd)
{
        struct scsi_inquiry inq;
        uint8_t pages[64];
        size_t npages = 0;

        if (read_scsi_identity(rd, &inq, pages, sizeof pages, &npages) < 0)
                return;
        rd->out->data.healthy = -1;
        if (read_scsi_health(rd, &inq, pages, npages) < 0)
                return;
        take_scsi_totals(&rd->out->data);
        rd->out->reason = -1; /* a missing log page is not a failed read */
}

void smart_read_device(struct devio *io, const char *name, int kind, usec_t timeout,
                       enum smart_powermode_check powermode, struct smart_memory *mem,
                       struct smart_outcome *out)
{
        struct smart_memory none = {0};
        struct reader rd = {.io = io, .name = name, .kind = kind, .timeout = timeout, .out = out};

        if (!mem)
                mem = &none;
        memset(out, 0, sizeof(*out));
        out->reason = -1;
        out->skipped = -1;
        out->power_mode = -1;
        out->data.kind = kind;
        out->data.healthy = -1;
        out->data.ata_write_cache = -1;
        rd.resp = xmalloc(sizeof(*rd.resp));
        switch (kind) {
        case DEVIO_NVME:
                read_nvme(&rd);
                break;
        case DEVIO_ATA:
                read_ata(&rd, powermode, mem);
                break;
        case DEVIO_SCSI:
                read_scsi(&rd);
                break;
        default:
                fail(out, SMART_REASON_OTHER, "unknown device kind %d", kind);
        }
        free(rd.resp);
}
