/* The SMART collector's logic with a fake device runner: captured QEMU pages in, metrics out;
 * standby, errors, timeouts and a hung device that blocks neither other devices nor export. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmptree.h"
#include "fixture_json.h"

#include "expo.h"
#include "fsroot.h"
#include "metrics.h"
#include "render.h"
#include "privsep.h"
#include "smart.h"
#include "smart_read.h"

/* A fake runner: answers from captured pages, or with a scripted error, or hangs. */
struct fake {
        struct devio base;
        pthread_mutex_t lock;
        int mode[4];            /* per device index: 0 pages, else -errno of run(), 1 hang */
        int standby;            /* CHECK POWER MODE count: 0xFF active, 0x00 standby */
        bool exceeded;          /* SMART RETURN STATUS says a threshold was exceeded */
        bool smart_off;         /* the drive aborts SMART commands (captured with SMART off) */
        bool id_smart_off;      /* IDENTIFY says SMART is supported but disabled (word 85 bit 0) */
        unsigned smart_cmds[4]; /* SMART commands (feature B0h) seen per device */
        int cmd_err[4];         /* per device: every command's result fails with this -errno */
        unsigned requests[4];   /* requests seen per device */
        usec_t busy_until[4];   /* a hung request comes back at this monotonic time */
        usec_t hang;            /* how long a hanging request takes to come back */
        char asked[4][512];     /* per device: one line per request, "command:param" each */
};

static const char *const cmd_short[DEVIO_CMD_MAX] = {
    [DEVIO_NVME_IDENTIFY_CTRL] = "identify-ctrl",
    [DEVIO_NVME_SMART_LOG] = "smart-log",
    [DEVIO_ATA_CHECK_POWER_MODE] = "check-power-mode",
    [DEVIO_ATA_IDENTIFY] = "identify",
    [DEVIO_ATA_SMART_READ_DATA] = "smart-read-data",
    [DEVIO_ATA_SMART_READ_THRESHOLDS] = "smart-read-thresholds",
    [DEVIO_ATA_SMART_RETURN_STATUS] = "smart-return-status",
    [DEVIO_SCSI_INQUIRY] = "inquiry",
    [DEVIO_SCSI_INQUIRY_VPD] = "vpd",
    [DEVIO_SCSI_LOG_SENSE] = "log-sense",
    [DEVIO_SCSI_READ_DEFECT_GLIST] = "read-defect",
};

static const char *const names[4] = {"nvme0n1", "sda", "sdb", "nvme1n1"};

static int dev_index(const char *name)
{
        for (int i = 0; i < 4; i++)
                if (strcmp(names[i], name) == 0)
                        return i;
        return -1;
}

static void page(struct devio_result *r, const char *file)
{
        memset(r, 0, sizeof(*r));
        r->len = (uint32_t)fixture_load(file, r->data, sizeof r->data);
}

static void sense(struct devio_result *r, const char *file)
{
        memset(r, 0, sizeof(*r));
        r->scsi_status = 2; /* CHECK CONDITION, as with CK_COND */
        r->sense_len = (uint8_t)fixture_load(file, r->sense, sizeof r->sense);
}

/* Appends the request to the device's log, one line of its commands; a log that would
 * overflow starts over (long tests read many times; the order tests read once). Under f->lock. */
static void log_request(struct fake *f, int i, const struct devio_request *req)
{
        char line[160];
        size_t len = 0;

        for (uint32_t k = 0; k < req->n && len < sizeof line; k++)
                len += (size_t)snprintf(line + len, sizeof line - len, "%s%s:%02x", k ? " " : "",
                                        cmd_short[req->cmds[k].cmd], req->cmds[k].param);
        assert_true(len + 1 < sizeof line);
        if (strlen(f->asked[i]) + len + 2 > sizeof f->asked[i])
                f->asked[i][0] = 0;
        strcat(f->asked[i], line);
        strcat(f->asked[i], "\n");
}

/* scsi_debug's answer (tests/fixtures/smart): a page, or for what it does not support
 * (LOG SENSE 02h, READ DEFECT DATA) CHECK CONDITION with its sense. */
static void scsi_answer(struct devio_result *r, enum devio_cmd c, uint32_t param)
{
        char file[64];

        if (c == DEVIO_SCSI_INQUIRY) {
                page(r, "scsi-debug-inquiry.bin");
                return;
        }
        if (c == DEVIO_SCSI_READ_DEFECT_GLIST) {
                sense(r, "scsi-debug-read-defect.sense");
                return;
        }
        if (c == DEVIO_SCSI_LOG_SENSE && param != 0x00 && param != 0x0D && param != 0x2F) {
                sense(r, "scsi-debug-log-02.sense");
                return;
        }
        snprintf(file, sizeof file, "scsi-debug-%s-%02x.bin",
                 c == DEVIO_SCSI_LOG_SENSE ? "log" : "vpd", param);
        page(r, file);
}

static int fake_run(struct devio *io, const struct devio_request *req, usec_t timeout,
                    struct devio_response *resp)
{
        struct fake *f = (struct fake *)io;
        int i = dev_index(req->name), mode;

        assert_true(i >= 0);
        pthread_mutex_lock(&f->lock);
        f->requests[i]++;
        log_request(f, i, req);
        mode = f->mode[i];
        if (now_monotonic() < f->busy_until[i]) {
                pthread_mutex_unlock(&f->lock);
                return -EBUSY;
        }
        if (mode == 1)
                f->busy_until[i] = now_monotonic() + f->hang;
        pthread_mutex_unlock(&f->lock);

        if (mode == 1) {
                /* Hangs past the caller's timeout; the device stays busy until it returns. */
                usleep((useconds_t)(timeout < f->hang ? timeout : f->hang));
                if (timeout < f->hang)
                        return -ETIMEDOUT;
        } else if (mode < 0) {
                return mode;
        }
        memset(resp, 0, sizeof(*resp));
        resp->n = req->n;
        if (f->cmd_err[i]) {
                /* as privsep_devio_exec reports a failed open: one result carrying the error */
                resp->n = 1;
                resp->r[0].err = f->cmd_err[i];
                return 0;
        }
        for (uint32_t k = 0; k < req->n; k++) {
                struct devio_result *r = &resp->r[k];
                enum devio_cmd c = req->cmds[k].cmd;
                if (c == DEVIO_ATA_SMART_READ_DATA || c == DEVIO_ATA_SMART_READ_THRESHOLDS ||
                    c == DEVIO_ATA_SMART_RETURN_STATUS) {
                        pthread_mutex_lock(&f->lock);
                        f->smart_cmds[i]++;
                        pthread_mutex_unlock(&f->lock);
                }
                switch (c) {
                case DEVIO_NVME_IDENTIFY_CTRL:
                        page(r, "qemu-nvme-identify.bin");
                        break;
                case DEVIO_NVME_SMART_LOG:
                        page(r, "qemu-nvme-smart.bin");
                        break;
                case DEVIO_ATA_CHECK_POWER_MODE:
                        sense(r, "qemu-ahci-check-power.sense");
                        /* the count register: descriptor byte 8+5 (count 7:0) */
                        if (r->sense[0] == 0x72)
                                r->sense[8 + 5] = (uint8_t)f->standby;
                        break;
                case DEVIO_ATA_IDENTIFY:
                        page(r, "qemu-ahci-identify.bin");
                        if (f->id_smart_off) {
                                uint8_t sum = 0;
                                r->data[85 * 2] &= (uint8_t)~1u;
                                /* word 255: signature A5h, then the checksum of bytes 0-510 */
                                for (int b = 0; b < 511; b++)
                                        sum = (uint8_t)(sum + r->data[b]);
                                if (r->data[510] == 0xa5)
                                        r->data[511] = (uint8_t)-sum;
                        }
                        break;
                case DEVIO_ATA_SMART_READ_DATA:
                        if (f->smart_off) {
                                /* QEMU still moves 512 zero bytes, with the abort in the sense */
                                sense(r, "qemu-ahci-smart-off-smart-data.sense");
                                r->len = (uint32_t)fixture_load(
                                    "qemu-ahci-smart-off-smart-data.bin", r->data, sizeof r->data);
                                break;
                        }
                        page(r, "qemu-ahci-smart-data.bin");
                        break;
                case DEVIO_ATA_SMART_READ_THRESHOLDS:
                        page(r, "qemu-ahci-smart-thresholds.bin");
                        break;
                case DEVIO_ATA_SMART_RETURN_STATUS:
                        sense(r, "qemu-ahci-return-status.sense");
                        /* ATA Status Return descriptor at byte 8: LBA mid 9, LBA high 11 */
                        if (f->exceeded && r->sense[0] == 0x72) {
                                r->sense[8 + 9] = 0xF4;
                                r->sense[8 + 11] = 0x2C;
                        }
                        break;
                case DEVIO_SCSI_INQUIRY:
                case DEVIO_SCSI_INQUIRY_VPD:
                case DEVIO_SCSI_LOG_SENSE:
                case DEVIO_SCSI_READ_DEFECT_GLIST:
                        scsi_answer(r, c, req->cmds[k].param);
                        break;
                default:
                        memset(r, 0, sizeof(*r));
                        r->err = -EINVAL;
                }
        }
        return 0;
}

static bool fake_busy(struct devio *io, const char *name)
{
        struct fake *f = (struct fake *)io;
        int i = dev_index(name);
        bool b;

        pthread_mutex_lock(&f->lock);
        b = i >= 0 && now_monotonic() < f->busy_until[i];
        pthread_mutex_unlock(&f->lock);
        return b;
}

static void fake_free(struct devio *io)
{
        (void)io;
}

static const struct devio_ops fake_ops = {.run = fake_run, .busy = fake_busy, .free = fake_free};

static void fake_init(struct fake *f)
{
        memset(f, 0, sizeof(*f));
        f->base.ops = &fake_ops;
        pthread_mutex_init(&f->lock, NULL);
        f->standby = 0xFF;
        f->hang = 300 * USEC_PER_MSEC;
}

/* A sysfs tree with an NVMe namespace and an ATA disk (VPD page 89h present). */
static char root[64];

static void mkfile(const char *rel, const char *text)
{
        char path[256], cmd[320];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", root, rel);
        snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
        assert_int_equal(system(cmd), 0);
        f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static int sysfs_setup(void)
{
        strcpy(root, "/tmp/diskpulse-smart-XXXXXX");
        assert_non_null(mkdtemp(root));
        mkfile("block/nvme0n1/size", "131072\n");
        mkfile("block/sda/device/vpd_pg89", "x");
        mkfile("block/sda/device/vendor", "ATA     \n");
        mkfile("block/vda/size", "1\n");
        return root_open(root);
}

static void sysfs_teardown(int fd)
{
        close(fd);
        assert_int_equal(test_remove_tree(root), 0);
}

static char *render(struct smart *s)
{
        struct mset *m = mset_new();

        smart_export(s, m);
        return test_render_set(m);
}

static void assert_has(const char *text, const char *line)
{
        if (!strstr(text, line)) {
                fprintf(stderr, "missing: %s\nin:\n%s\n", line, text);
                fail();
        }
}

static void assert_hasf(const char *text, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void assert_hasf(const char *text, const char *fmt, ...)
{
        char line[256];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        assert_has(text, line);
}

static struct smart *collector(struct fake *f, int sysfs_fd, enum smart_powermode_check pm,
                               usec_t timeout)
{
        struct smart_config c = {
            .io = &f->base,
            .sysfs_fd = sysfs_fd,
            .interval = 3600 * USEC_PER_SEC,
            .timeout = timeout,
            .powermode = pm,
        };
        return smart_new(&c);
}

/* One read of every device of the fixture tree with the fake as it is set up; returns the
 * rendered page (the caller frees it). */
static char *read_round(struct fake *f, enum smart_powermode_check pm)
{
        int fd = sysfs_setup();
        struct smart *s = collector(f, fd, pm, USEC_PER_SEC);
        char *text;

        smart_read_all_now(s);
        text = render(s);
        smart_free(s);
        sysfs_teardown(fd);
        return text;
}

static void test_classify(void **state)
{
        (void)state;
        assert_int_equal(smart_classify("nvme0n1", false, NULL), DEVIO_NVME);
        assert_int_equal(smart_classify("nvme12n3", false, NULL), DEVIO_NVME);
        assert_int_equal(smart_classify("nvme0", false, NULL), -ENODEV);
        assert_int_equal(smart_classify("nvme0n1p1", false, NULL), -ENODEV);
        assert_int_equal(smart_classify("sda", true, NULL), DEVIO_ATA);
        assert_int_equal(smart_classify("sda", true, ""), DEVIO_ATA);
        /* scsi_debug emulates VPD page 89h but is no ATA disk: the vendor decides */
        assert_int_equal(smart_classify("sdd", true, "Linux   "), DEVIO_SCSI);
        assert_int_equal(smart_classify("sde", true, "ATA     "), DEVIO_ATA);
        assert_int_equal(smart_classify("sdb", false, "ATA     "), DEVIO_ATA);
        assert_int_equal(smart_classify("sdc", false, "SEAGATE "), DEVIO_SCSI);
        assert_int_equal(smart_classify("sdaa", false, NULL), DEVIO_SCSI);
        assert_int_equal(smart_classify("sda1", true, NULL), -ENODEV);
        assert_int_equal(smart_classify("vda", false, NULL), -ENODEV);
        assert_int_equal(smart_classify("dm-0", false, NULL), -ENODEV);
}

static void test_read_qemu_devices(void **state)
{
        struct fake f;
        int fd = sysfs_setup();
        struct smart *s;
        char *text;
        (void)state;

        fake_init(&f);
        s = collector(&f, fd, SMART_PM_STANDBY, USEC_PER_SEC);
        smart_read_all_now(s);
        text = render(s);
        /* QEMU's NVMe controller, as smartctl reports it (tests/fixtures/smart, JSON) */
        assert_has(text, "diskpulse_smart_info{device=\"nvme0n1\",protocol=\"nvme\",model=\"QEMU "
                         "NVMe Ctrl\",");
        assert_has(text, "diskpulse_smart_up{device=\"nvme0n1\"} 1\n");
        assert_has(text, "diskpulse_smart_healthy{device=\"nvme0n1\"} 1\n");
        assert_has(text, "diskpulse_smart_temperature_celsius{device=\"nvme0n1\"} 50\n");
        /* WCTEMP 343 K and CCTEMP 373 K of QEMU's Identify Controller */
        assert_has(text,
                   "diskpulse_smart_temperature_warning_threshold_celsius{device=\"nvme0n1\"} "
                   "70\n");
        assert_has(text,
                   "diskpulse_smart_temperature_critical_threshold_celsius{device=\"nvme0n1\"} "
                   "100\n");
        /* an ATA disk reports no temperature threshold of its own */
        assert_null(strstr(text, "temperature_warning_threshold_celsius{device=\"sda\"}"));
        assert_has(text, "diskpulse_nvme_critical_warning{device=\"nvme0n1\"} 0\n");
        assert_has(text, "diskpulse_disk_rotation_rate_rpm{device=\"nvme0n1\"} 0\n");
        /* QEMU's AHCI disk */
        assert_has(text, "diskpulse_smart_info{device=\"sda\",protocol=\"ata\",model=\"QEMU "
                         "HARDDISK\",");
        assert_has(text, "diskpulse_smart_up{device=\"sda\"} 1\n");
        assert_has(text, "diskpulse_smart_healthy{device=\"sda\"} 1\n");
        assert_has(text, "diskpulse_smart_power_mode{device=\"sda\"} 0\n");
        assert_has(text, "diskpulse_smart_temperature_celsius{device=\"sda\"} 31\n");
        assert_has(text, "diskpulse_smart_power_on_seconds_total{device=\"sda\"} 3600\n");
        assert_has(text, "diskpulse_ata_attribute_value{device=\"sda\",id=\"190\",name=\"Airflow_"
                         "Temperature_Cel\"} 69\n");
        assert_has(text,
                   "diskpulse_ata_attribute_failing{device=\"sda\",id=\"5\",name=\"Reallocated_"
                   "Sector_Ct\"} 0\n");
        assert_has(text, "diskpulse_smart_skipped_total{device=\"sda\",reason=\"standby\"} 0\n");
        /* vda has no health data: not listed */
        assert_null(strstr(text, "device=\"vda\""));
        assert_null(strstr(text, "diskpulse_smart_read_errors_total"));
        free(text);
        smart_free(s);
        sysfs_teardown(fd);
}

/* What each protocol asks, in which requests and in which order: NVMe's two pages at once;
 * ATA's CHECK POWER MODE alone, IDENTIFY alone, then the SMART commands; SCSI's identity pages
 * with the list of log pages, then the listed pages it wants and the grown defect list. */
static void test_command_order(void **state)
{
        struct fake f;
        int fd = sysfs_setup();
        struct smart *s;
        (void)state;

        mkfile("block/sdb/device/vendor", "Linux   \n");
        fake_init(&f);
        s = collector(&f, fd, SMART_PM_STANDBY, USEC_PER_SEC);
        smart_read_all_now(s);
        assert_string_equal(f.asked[0], "identify-ctrl:00 smart-log:00\n");
        assert_string_equal(f.asked[1], "check-power-mode:00\n"
                                        "identify:00\n"
                                        "smart-read-data:00 smart-read-thresholds:00 "
                                        "smart-return-status:00\n");
        /* scsi-debug-log-00.bin lists pages 00h, 0Dh and 2Fh; scsi_debug is a disk (type 0) */
        assert_string_equal(f.asked[2], "inquiry:00 vpd:80 vpd:83 vpd:b1 log-sense:00\n"
                                        "log-sense:0d log-sense:2f read-defect:00\n");
        smart_free(s);

        /* powermode never: no CHECK POWER MODE */
        memset(f.asked, 0, sizeof f.asked);
        s = collector(&f, fd, SMART_PM_NEVER, USEC_PER_SEC);
        smart_read_all_now(s);
        assert_string_equal(f.asked[1], "identify:00\n"
                                        "smart-read-data:00 smart-read-thresholds:00 "
                                        "smart-return-status:00\n");
        smart_free(s);
        sysfs_teardown(fd);
}

/* scsi_debug's pages through the collector: the values smartctl showed for the same device. */
static void test_read_scsi_debug(void **state)
{
        static char json[1 << 16];
        char s[64];
        struct fake f;
        int fd = sysfs_setup();
        struct smart *sm;
        char *text;
        (void)state;

        fixture_load("scsi-debug-smartctl.json", json, sizeof(json) - 1);
        mkfile("block/sdb/device/vendor", "Linux   \n");
        fake_init(&f);
        sm = collector(&f, fd, SMART_PM_STANDBY, USEC_PER_SEC);
        smart_read_all_now(sm);
        text = render(sm);
        assert_hasf(text, "diskpulse_smart_info{device=\"sdb\",protocol=\"scsi\",model=\"%s\",",
                    js_str(json, "scsi_model_name", s, sizeof s));
        assert_hasf(text, "serial=\"%s\",", js_str(json, "serial_number", s, sizeof s));
        assert_hasf(text, "firmware=\"%s\",", js_str(json, "scsi_revision", s, sizeof s));
        assert_hasf(text, "wwn=\"%s\"}", js_str(json, "logical_unit_id", s, sizeof s) + 2);
        assert_has(text, "diskpulse_smart_up{device=\"sdb\"} 1\n");
        assert_true(js_bool(json, "smart_status.passed"));
        assert_has(text, "diskpulse_smart_healthy{device=\"sdb\"} 1\n");
        assert_has(text, "diskpulse_scsi_failure_predicted{device=\"sdb\"} 0\n");
        assert_hasf(text, "diskpulse_smart_temperature_celsius{device=\"sdb\"} %llu\n",
                    (unsigned long long)js_u64(json, "temperature.current"));
        assert_hasf(text,
                    "diskpulse_smart_temperature_warning_threshold_celsius{device=\"sdb\"} %llu\n",
                    (unsigned long long)js_u64(json, "temperature.drive_trip"));
        assert_hasf(text, "diskpulse_disk_rotation_rate_rpm{device=\"sdb\"} %llu\n",
                    (unsigned long long)js_u64(json, "rotation_rate"));
        /* refused: the defect list and the error counter pages (not listed) give nothing */
        assert_null(strstr(text, "diskpulse_scsi_grown_defects{device=\"sdb\"}"));
        assert_null(strstr(text, "errors_total{device=\"sdb\""));
        assert_null(strstr(text, "diskpulse_smart_read_errors_total{device=\"sdb\""));
        assert_null(strstr(text, "diskpulse_smart_skipped_total{device=\"sdb\""));
        free(text);
        smart_free(sm);
        sysfs_teardown(fd);
}

static void test_standby_not_woken(void **state)
{
        struct fake f;
        int fd = sysfs_setup();
        struct smart *s;
        char *text;
        (void)state;

        fake_init(&f);
        f.standby = 0x00;
        s = collector(&f, fd, SMART_PM_STANDBY, USEC_PER_SEC);
        smart_read_all_now(s);
        text = render(s);
        assert_has(text, "diskpulse_smart_power_mode{device=\"sda\"} 1\n");
        assert_has(text, "diskpulse_smart_skipped_total{device=\"sda\",reason=\"standby\"} 1\n");
        /* nothing but CHECK POWER MODE was sent: one request, no data */
        assert_int_equal(f.requests[1], 1);
        assert_null(strstr(text, "diskpulse_smart_info{device=\"sda\""));
        free(text);

        /* the last values stay, with their timestamp, while the disk sleeps */
        f.standby = 0xFF;
        smart_read_all_now(s);
        f.standby = 0x00;
        smart_read_all_now(s);
        text = render(s);
        assert_has(text, "diskpulse_smart_skipped_total{device=\"sda\",reason=\"standby\"} 2\n");
        assert_has(text, "diskpulse_smart_info{device=\"sda\"");
        assert_has(text, "diskpulse_smart_last_read_timestamp_seconds{device=\"sda\"}");
        free(text);
        smart_free(s);

        /* --smart.powermode-check=never reads regardless */
        f.requests[1] = 0;
        f.smart_cmds[1] = 0;
        s = collector(&f, fd, SMART_PM_NEVER, USEC_PER_SEC);
        smart_read_all_now(s);
        text = render(s);
        assert_has(text, "diskpulse_smart_up{device=\"sda\"} 1\n");
        /* IDENTIFY, then the SMART commands SMART's state allows */
        assert_int_equal(f.requests[1], 2);
        assert_int_equal(f.smart_cmds[1], 3);
        free(text);
        smart_free(s);
        sysfs_teardown(fd);
}

/* SMART RETURN STATUS "threshold exceeded" makes the disk unhealthy even when no attribute of
 * the table is at its threshold. */
static void test_return_status_failing(void **state)
{
        struct fake f;
        char *text;
        (void)state;

        fake_init(&f);
        f.exceeded = true;
        text = read_round(&f, SMART_PM_STANDBY);
        assert_has(text, "diskpulse_smart_up{device=\"sda\"} 1\n");
        assert_has(text, "diskpulse_smart_healthy{device=\"sda\"} 0\n");
        assert_has(text, "diskpulse_smart_healthy{device=\"nvme0n1\"} 1\n");
        free(text);
}

static void test_smart_disabled_is_device_status(void **state)
{
        struct fake f;
        char *text;
        (void)state;

        fake_init(&f);
        f.smart_off = true;
        text = read_round(&f, SMART_PM_STANDBY);
        assert_has(text, "diskpulse_smart_up{device=\"sda\"} 0\n");
        assert_has(text, "diskpulse_smart_read_errors_total{device=\"sda\",reason=\"device_"
                         "status\"} 1\n");
        free(text);
}

/* A drive that aborts SMART READ DATA although its IDENTIFY says SMART is on is not sent SMART
 * commands at every read (each abort lands in its error log): after 3 eager retries, at doubling
 * gaps, IDENTIFY only in between, device_status all along; once it answers, every read again. */
static void test_aborted_smart_not_retried_at_every_read(void **state)
{
        struct fake f;
        int fd = sysfs_setup();
        struct smart *s;
        char *text;
        (void)state;

        fake_init(&f);
        f.smart_off = true;
        s = collector(&f, fd, SMART_PM_NEVER, USEC_PER_SEC);
        for (int i = 0; i < 100; i++)
                smart_read_all_now(s);
        text = render(s);
        assert_has(text, "diskpulse_smart_read_errors_total{device=\"sda\",reason=\"device_"
                         "status\"} 100\n");
        /* attempts at reads 1, 2, 3, 4, then 6, 10, 18, 34, 66: 9 of 100, 3 commands each */
        assert_int_equal(f.smart_cmds[1], 9 * 3);
        assert_int_equal(f.requests[1], 100 + 9);
        free(text);
        /* switched on: the next attempt succeeds, and from then on every read is one */
        f.smart_off = false;
        for (int i = 0; i < 40; i++)
                smart_read_all_now(s);
        text = render(s);
        assert_has(text, "diskpulse_smart_up{device=\"sda\"} 1\n");
        f.smart_cmds[1] = 0;
        for (int i = 0; i < 10; i++)
                smart_read_all_now(s);
        assert_int_equal(f.smart_cmds[1], 10 * 3);
        free(text);
        smart_free(s);
        sysfs_teardown(fd);
}

/* A drive whose IDENTIFY says SMART is off is sent no SMART command (each would be aborted and
 * logged in the drive's error log at every poll): only IDENTIFY, and the reason is device_status. */
static void test_smart_off_in_identify_sends_no_smart_command(void **state)
{
        struct fake f;
        char *text;
        (void)state;

        fake_init(&f);
        f.id_smart_off = true;
        text = read_round(&f, SMART_PM_NEVER);
        assert_has(text, "diskpulse_smart_up{device=\"sda\"} 0\n");
        assert_has(text, "diskpulse_smart_read_errors_total{device=\"sda\",reason=\"device_"
                         "status\"} 1\n");
        assert_int_equal(f.requests[1], 1);
        assert_int_equal(f.smart_cmds[1], 0);
        free(text);
        /* and with SMART on, the three of them */
        fake_init(&f);
        text = read_round(&f, SMART_PM_NEVER);
        assert_has(text, "diskpulse_smart_up{device=\"sda\"} 1\n");
        assert_int_equal(f.smart_cmds[1], 3);
        free(text);
}

/* Without CAP_SYS_RAWIO CHECK POWER MODE fails with EPERM: that is a permission error, not a
 * sleeping disk. */
static void test_check_power_mode_not_permitted(void **state)
{
        struct fake f;
        char *text;
        (void)state;

        fake_init(&f);
        f.cmd_err[1] = -EPERM;
        text = read_round(&f, SMART_PM_STANDBY);
        assert_has(text, "diskpulse_smart_read_errors_total{device=\"sda\",reason=\"permission\"} "
                         "1\n");
        assert_has(text, "diskpulse_smart_skipped_total{device=\"sda\",reason=\"sleep\"} 0\n");
        assert_null(strstr(text, "diskpulse_smart_power_mode{device=\"sda\"}"));
        free(text);
}

/* An unplugged device's series go with the next export, not at the next rescan. */
static void test_vanished_device_dropped(void **state)
{
        struct fake f;
        int fd = sysfs_setup();
        struct smart *s;
        char *text, path[160];
        (void)state;

        fake_init(&f);
        s = collector(&f, fd, SMART_PM_STANDBY, USEC_PER_SEC);
        smart_read_all_now(s);
        text = render(s);
        assert_has(text, "diskpulse_smart_up{device=\"nvme0n1\"} 1\n");
        free(text);
        snprintf(path, sizeof path, "%s/block/nvme0n1", root);
        assert_int_equal(test_remove_tree(path), 0);
        text = render(s);
        assert_null(strstr(text, "device=\"nvme0n1\""));
        assert_has(text, "diskpulse_smart_up{device=\"sda\"} 1\n");
        free(text);
        smart_free(s);
        sysfs_teardown(fd);
}

static void test_errors_become_metrics(void **state)
{
        struct fake f;
        int fd = sysfs_setup();
        struct smart *s;
        char *text;
        (void)state;

        fake_init(&f);
        f.mode[0] = -EACCES;
        f.mode[1] = -EIO;
        s = collector(&f, fd, SMART_PM_STANDBY, USEC_PER_SEC);
        smart_read_all_now(s);
        smart_read_all_now(s);
        text = render(s);
        assert_has(text, "diskpulse_smart_up{device=\"nvme0n1\"} 0\n");
        assert_has(text, "diskpulse_smart_read_errors_total{device=\"nvme0n1\",reason="
                         "\"permission\"} 2\n");
        assert_has(text, "diskpulse_smart_read_errors_total{device=\"sda\",reason=\"io\"} 2\n");
        free(text);
        /* recovery */
        f.mode[0] = 0;
        smart_read_all_now(s);
        text = render(s);
        assert_has(text, "diskpulse_smart_up{device=\"nvme0n1\"} 1\n");
        assert_has(text, "diskpulse_smart_read_errors_total{device=\"nvme0n1\",reason="
                         "\"permission\"} 2\n");
        free(text);
        smart_free(s);
        sysfs_teardown(fd);
}

static void test_reason_mapping(void **state)
{
        (void)state;
        assert_int_equal(smart_reason_from_errno(-ETIMEDOUT), SMART_REASON_TIMEOUT);
        assert_int_equal(smart_reason_from_errno(-EPERM), SMART_REASON_PERMISSION);
        assert_int_equal(smart_reason_from_errno(-EACCES), SMART_REASON_PERMISSION);
        assert_int_equal(smart_reason_from_errno(-ENODEV), SMART_REASON_NODEV);
        assert_int_equal(smart_reason_from_errno(-ENOENT), SMART_REASON_NODEV);
        assert_int_equal(smart_reason_from_errno(-EBADMSG), SMART_REASON_BAD_DATA);
        assert_int_equal(smart_reason_from_errno(-ECONNRESET), SMART_REASON_HELPER);
        assert_int_equal(smart_reason_from_errno(-E2BIG), SMART_REASON_OTHER);
}

/* A hung device: one timeout counted, no second request while it hangs, the other device read
 * on schedule, and export never waits for the device. */
static void test_hung_device_isolated(void **state)
{
        struct fake f;
        int fd = sysfs_setup();
        struct smart *s;
        char *text;
        struct smart_config c;
        usec_t t0, worst = 0;
        (void)state;

        fake_init(&f);
        f.mode[0] = 1;             /* nvme0n1 hangs */
        f.hang = 3 * USEC_PER_SEC; /* for 3 s */
        c = (struct smart_config){.io = &f.base,
                                  .sysfs_fd = fd,
                                  .interval = 1 * USEC_PER_SEC,
                                  .timeout = 200 * USEC_PER_MSEC,
                                  .powermode = SMART_PM_STANDBY};
        s = smart_new(&c);
        assert_int_equal(smart_start(s), 0);
        t0 = now_monotonic();
        while (now_monotonic() - t0 < 2500 * USEC_PER_MSEC) {
                usec_t a = now_monotonic();
                struct mset *m = mset_new();
                smart_export(s, m);
                mset_free(m);
                if (now_monotonic() - a > worst)
                        worst = now_monotonic() - a;
                usleep(20000);
        }
        text = render(s);
        assert_has(text, "diskpulse_smart_up{device=\"nvme0n1\"} 0\n");
        assert_has(text, "diskpulse_smart_read_errors_total{device=\"nvme0n1\",reason=\"timeout\"} "
                         "1\n");
        assert_has(text, "diskpulse_smart_up{device=\"sda\"} 1\n");
        /* sda was read again on its 1 s schedule while nvme0n1 hung */
        assert_true(f.requests[1] >= 2 * 2);
        /* one request to the hung device, no second one piled on */
        assert_int_equal(f.requests[0], 1);
        /* export took the lock only briefly */
        assert_true(worst < 50 * USEC_PER_MSEC);
        free(text);
        smart_free(s);
        sysfs_teardown(fd);
}

/* The helper's worker hangs in a device command for 30 s (the test seam of privsep). */
static int hanging_exec(const char *dev_dir, const struct devio_request *req,
                        struct devio_response *resp)
{
        (void)dev_dir;
        (void)req;
        (void)resp;
        sleep(30);
        return -EIO;
}

/* Shutdown while a SMART read waits on a hung device takes well under a second. */
static void test_shutdown_with_hung_device(void **state)
{
        struct privsep_config pc = {
            .dev_dir = "/nonexistent", .keep_privileges = true, .exec = hanging_exec};
        struct devio *io = NULL;
        int fd = sysfs_setup();
        struct smart *s;
        struct smart_config c;
        usec_t t0;
        (void)state;

        assert_int_equal(privsep_start(&pc, &io), 0);
        c = (struct smart_config){.io = io,
                                  .sysfs_fd = fd,
                                  .interval = 3600 * USEC_PER_SEC,
                                  .timeout = 60 * USEC_PER_SEC,
                                  .powermode = SMART_PM_NEVER};
        s = smart_new(&c);
        assert_int_equal(smart_start(s), 0);
        t0 = now_monotonic();
        while (!io->ops->busy(io, "nvme0n1") && !io->ops->busy(io, "sda") &&
               now_monotonic() - t0 < 5 * USEC_PER_SEC)
                usleep(10000);
        assert_true(io->ops->busy(io, "nvme0n1") || io->ops->busy(io, "sda"));
        t0 = now_monotonic();
        io->ops->cancel(io);
        smart_free(s);
        io->ops->free(io);
        assert_true(now_monotonic() - t0 < 1500 * USEC_PER_MSEC);
        sysfs_teardown(fd);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_classify),
            cmocka_unit_test(test_read_qemu_devices),
            cmocka_unit_test(test_command_order),
            cmocka_unit_test(test_read_scsi_debug),
            cmocka_unit_test(test_standby_not_woken),
            cmocka_unit_test(test_return_status_failing),
            cmocka_unit_test(test_smart_disabled_is_device_status),
            cmocka_unit_test(test_smart_off_in_identify_sends_no_smart_command),
            cmocka_unit_test(test_aborted_smart_not_retried_at_every_read),
            cmocka_unit_test(test_check_power_mode_not_permitted),
            cmocka_unit_test(test_vanished_device_dropped),
            cmocka_unit_test(test_errors_become_metrics),
            cmocka_unit_test(test_reason_mapping),
            cmocka_unit_test(test_hung_device_isolated),
            cmocka_unit_test(test_shutdown_with_hung_device),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
