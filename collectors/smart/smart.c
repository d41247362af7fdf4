/* The SMART collector: scheduling, timeouts, power mode, error accounting and export. The
 * protocol parts (NVMe, ATA, SCSI) are in smart_read.c, the export of what a read found in
 * smart_export.c; the page parsers in smart_{nvme,ata,scsi}.c. */
#include "smart.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fsroot.h"
#include "log.h"
#include "smart_export.h"
#include "smart_read.h"

struct smart_dev {
        char name[DEVIO_NAME_MAX];
        int kind;
        bool seen;
        usec_t next_read; /* monotonic */
        /* results, under smart.lock */
        bool have_data, up;
        uint64_t errors[SMART_REASON_MAX];
        uint64_t skipped[SMART_SKIP_MAX];
        int power_mode;   /* -1 unknown, 0 active/idle, 1 standby, 2 sleep */
        usec_t last_read; /* realtime of the last successful read, 0 never */
        struct smart_data data;
        struct ratelimit rl[SMART_REASON_MAX];
        struct smart_memory mem; /* the reading thread's */
};

struct smart {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        pthread_t thread;
        bool running, stop;
        bool rescan;             /* a device came or went: enumerate again now */
        struct smart_config cfg; /* under lock */
        struct smart_dev **devs; /* under lock; sorted by name */
        size_t n, cap;
};

static const char *const reason_names[SMART_REASON_MAX] = {
    [SMART_REASON_TIMEOUT] = "timeout",
    [SMART_REASON_PERMISSION] = "permission",
    [SMART_REASON_IO] = "io",
    [SMART_REASON_NODEV] = "nodev",
    [SMART_REASON_DEVICE_STATUS] = "device_status",
    [SMART_REASON_BAD_DATA] = "bad_data",
    [SMART_REASON_HELPER] = "helper",
    [SMART_REASON_OTHER] = "other",
};

static const char *const skip_names[SMART_SKIP_MAX] = {
    [SMART_SKIP_STANDBY] = "standby",
    [SMART_SKIP_SLEEP] = "sleep",
};

int smart_powermode_from_string(const char *str, enum smart_powermode_check *ret)
{
        if (strcmp(str, "never") == 0)
                *ret = SMART_PM_NEVER;
        else if (strcmp(str, "standby") == 0)
                *ret = SMART_PM_STANDBY;
        else if (strcmp(str, "sleep") == 0)
                *ret = SMART_PM_SLEEP;
        else
                return -EINVAL;
        return 0;
}

static bool all_of(const char *s, const char *set)
{
        return *s && strspn(s, set) == strlen(s);
}

int smart_classify(const char *name, bool has_vpd_pg89, const char *vendor)
{
        const char *p;

        if (strncmp(name, "nvme", 4) == 0) {
                /* nvmeXnY: a namespace (admin commands reach its controller) */
                p = name + 4;
                size_t a = strspn(p, "0123456789");
                if (a == 0 || p[a] != 'n' || !all_of(p + a + 1, "0123456789"))
                        return -ENODEV;
                return DEVIO_NVME;
        }
        if (strncmp(name, "sd", 2) == 0 && all_of(name + 2, "abcdefghijklmnopqrstuvwxyz")) {
                /* libata reports the SCSI vendor "ATA" (SAT); smartctl goes by that too. The
                 * ATA Information VPD page alone is not enough: scsi_debug and some SAS
                 * targets emulate it. It decides only when the vendor is unknown. */
                if (vendor && *vendor)
                        return strncmp(vendor, "ATA", 3) == 0 &&
                                       (vendor[3] == 0 || vendor[3] == ' ')
                                   ? DEVIO_ATA
                                   : DEVIO_SCSI;
                return has_vpd_pg89 ? DEVIO_ATA : DEVIO_SCSI;
        }
        return -ENODEV;
}

struct smart *smart_new(const struct smart_config *cfg)
{
        struct smart *s = xcalloc(1, sizeof(*s));

        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->wake, NULL);
        s->cfg = *cfg;
        return s;
}

void smart_rescan(struct smart *s)
{
        pthread_mutex_lock(&s->lock);
        s->rescan = true;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
}

void smart_reconfigure(struct smart *s, const struct smart_config *cfg)
{
        pthread_mutex_lock(&s->lock);
        s->cfg = *cfg;
        for (size_t i = 0; i < s->n; i++)
                s->devs[i]->next_read = 0; /* read again under the new settings */
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
}

static bool included(const struct smart_config *cfg, const char *name)
{
        return namefilter_match(cfg->filter, name);
}

static int classify_sysfs(int sysfs_fd, const char *name)
{
        char path[128], vendor[32];
        bool pg89;

        snprintf(path, sizeof path, "block/%s/device/vpd_pg89", name);
        pg89 = faccessat(sysfs_fd, path, F_OK, 0) == 0;
        snprintf(path, sizeof path, "block/%s/device/vendor", name);
        if (read_attr_at(sysfs_fd, path, vendor, sizeof vendor) < 0)
                vendor[0] = 0;
        return smart_classify(name, pg89, vendor);
}

static int cmp_dev(const void *a, const void *b)
{
        return strcmp((*(struct smart_dev *const *)a)->name, (*(struct smart_dev *const *)b)->name);
}

/* Lists /sys/block; adds new devices, drops vanished ones. Reading thread (or --once). */
static void enumerate(struct smart *s)
{
        struct smart_config cfg;
        DIR *dir;
        int fd;
        struct dirent *e;
        char found[1024][DEVIO_NAME_MAX];
        int kinds[1024];
        size_t nf = 0;

        pthread_mutex_lock(&s->lock);
        cfg = s->cfg;
        pthread_mutex_unlock(&s->lock);

        fd = openat(cfg.sysfs_fd, "block", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return;
        dir = fdopendir(fd);
        if (!dir) {
                close(fd);
                return;
        }
        while ((e = readdir(dir)) && nf < ARRAY_SIZE(found)) {
                int kind;
                if (e->d_name[0] == '.' || strlen(e->d_name) >= DEVIO_NAME_MAX ||
                    !included(&cfg, e->d_name))
                        continue;
                kind = classify_sysfs(cfg.sysfs_fd, e->d_name);
                if (kind < 0)
                        continue;
                strscpy(found[nf], e->d_name, DEVIO_NAME_MAX);
                kinds[nf++] = kind;
        }
        closedir(dir);

        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < s->n; i++)
                s->devs[i]->seen = false;
        for (size_t k = 0; k < nf; k++) {
                struct smart_dev *d = NULL;
                for (size_t i = 0; i < s->n && !d; i++)
                        if (strcmp(s->devs[i]->name, found[k]) == 0)
                                d = s->devs[i];
                if (d && d->kind != kinds[k]) {
                        d->kind = kinds[k];
                        d->have_data = false;
                }
                if (!d) {
                        d = xcalloc(1, sizeof(*d));
                        strscpy(d->name, found[k], sizeof d->name);
                        d->kind = kinds[k];
                        d->power_mode = -1;
                        for (size_t r = 0; r < SMART_REASON_MAX; r++)
                                d->rl[r].interval = 3600 * USEC_PER_SEC;
                        GROW(s->devs, s->cap, s->n + 1);
                        s->devs[s->n++] = d;
                }
                d->seen = true;
        }
        {
                size_t kept = 0;
                for (size_t i = 0; i < s->n; i++) {
                        if (s->devs[i]->seen)
                                s->devs[kept++] = s->devs[i];
                        else
                                free(s->devs[i]);
                }
                s->n = kept;
        }
        if (s->n > 1)
                qsort(s->devs, s->n, sizeof(*s->devs), cmp_dev);
        pthread_mutex_unlock(&s->lock);
}

/* Reads one device and commits the outcome. Reading thread (or --once). */
static void read_device(struct smart *s, const char *name, int kind)
{
        struct smart_config cfg;
        struct smart_outcome out;
        struct smart_memory mem = {0};

        memset(&out, 0, sizeof out);
        pthread_mutex_lock(&s->lock);
        cfg = s->cfg;
        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->devs[i]->name, name) == 0)
                        mem = s->devs[i]->mem;
        pthread_mutex_unlock(&s->lock);
        smart_read_device(cfg.io, name, kind, cfg.timeout, cfg.powermode, &mem, &out);

        pthread_mutex_lock(&s->lock);
        if (s->stop) {
                /* Shutting down: the read was cut short on purpose, nothing to record. */
                pthread_mutex_unlock(&s->lock);
                return;
        }
        for (size_t i = 0; i < s->n; i++) {
                struct smart_dev *d = s->devs[i];
                usec_t now = now_monotonic();
                if (strcmp(d->name, name) != 0)
                        continue;
                d->mem = mem;
                if (out.power_mode >= 0)
                        d->power_mode = out.power_mode;
                if (out.skipped >= 0) {
                        d->skipped[out.skipped]++;
                } else if (out.reason >= 0) {
                        d->errors[out.reason]++;
                        d->up = false;
                        if (ratelimit_ok(&d->rl[out.reason], now))
                                log_warn("SMART read failed", "device", name, "reason",
                                         reason_names[out.reason], "detail", out.detail);
                } else {
                        d->data = out.data;
                        d->have_data = true;
                        d->up = true;
                        d->last_read = now_realtime();
                }
                break;
        }
        pthread_mutex_unlock(&s->lock);
}

void smart_read_all_now(struct smart *s)
{
        enumerate(s);
        for (size_t i = 0;; i++) {
                char name[DEVIO_NAME_MAX];
                int kind;
                pthread_mutex_lock(&s->lock);
                if (i >= s->n) {
                        pthread_mutex_unlock(&s->lock);
                        break;
                }
                strscpy(name, s->devs[i]->name, sizeof name);
                kind = s->devs[i]->kind;
                pthread_mutex_unlock(&s->lock);
                read_device(s, name, kind);
        }
}

static void *smart_thread(void *arg)
{
        struct smart *s = arg;
        usec_t last_enum = 0;

        (void)pthread_setname_np(pthread_self(), "dp-smart"); /* top -H */

        for (;;) {
                usec_t now = now_monotonic(), next = now + 60 * USEC_PER_SEC;
                char name[DEVIO_NAME_MAX] = "";
                int kind = -1;

                bool rescan;

                pthread_mutex_lock(&s->lock);
                rescan = s->rescan;
                s->rescan = false;
                pthread_mutex_unlock(&s->lock);
                if (rescan || last_enum == 0 || now - last_enum >= SMART_ENUM_INTERVAL) {
                        enumerate(s);
                        last_enum = now;
                }
                pthread_mutex_lock(&s->lock);
                if (s->stop) {
                        pthread_mutex_unlock(&s->lock);
                        break;
                }
                /* The first device that is due and not still hung in an earlier request. */
                for (size_t i = 0; i < s->n; i++) {
                        struct smart_dev *d = s->devs[i];
                        if (d->next_read > now) {
                                if (d->next_read < next)
                                        next = d->next_read;
                                continue;
                        }
                        if (s->cfg.io->ops->busy(s->cfg.io, d->name)) {
                                /* No second read while the first has not returned. */
                                d->next_read = now + USEC_PER_SEC;
                                if (d->next_read < next)
                                        next = d->next_read;
                                continue;
                        }
                        strscpy(name, d->name, sizeof name);
                        kind = d->kind;
                        d->next_read = now + s->cfg.interval;
                        break;
                }
                if (kind < 0) {
                        usec_t until = next < last_enum + SMART_ENUM_INTERVAL
                                           ? next
                                           : last_enum + SMART_ENUM_INTERVAL;
                        struct timespec ts;
                        usec_t wait = until > now ? until - now : 0;
                        usec_t deadline = now_realtime() + wait;
                        ts.tv_sec = (time_t)(deadline / USEC_PER_SEC);
                        ts.tv_nsec = (long)(deadline % USEC_PER_SEC) * 1000;
                        if (wait > 0 && !s->stop && !s->rescan)
                                pthread_cond_timedwait(&s->wake, &s->lock, &ts);
                        pthread_mutex_unlock(&s->lock);
                        continue;
                }
                pthread_mutex_unlock(&s->lock);
                read_device(s, name, kind);
        }
        return NULL;
}

int smart_start(struct smart *s)
{
        int r;

        s->running = true;
        r = pthread_create(&s->thread, NULL, smart_thread, s);
        if (r != 0) {
                s->running = false;
                return -r;
        }
        return 0;
}

struct smart *smart_free(struct smart *s)
{
        if (!s)
                return NULL;
        if (s->running) {
                pthread_mutex_lock(&s->lock);
                s->stop = true;
                pthread_cond_signal(&s->wake);
                pthread_mutex_unlock(&s->lock);
                pthread_join(s->thread, NULL);
        }
        for (size_t i = 0; i < s->n; i++)
                free(s->devs[i]);
        free(s->devs);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->wake);
        free(s);
        return NULL;
}

/* Drops devices whose sysfs entry is gone (unplugged since the last enumeration), so their
 * series vanish with the next scrape rather than at the next rescan. Under the lock. */
static void drop_vanished(struct smart *s)
{
        size_t kept = 0;
        char path[64];

        for (size_t i = 0; i < s->n; i++) {
                snprintf(path, sizeof path, "block/%s", s->devs[i]->name);
                if (faccessat(s->cfg.sysfs_fd, path, F_OK, 0) == 0)
                        s->devs[kept++] = s->devs[i];
                else
                        free(s->devs[i]);
        }
        s->n = kept;
}

void smart_export(struct smart *s, struct mset *out)
{
        struct mfamily *f;

        pthread_mutex_lock(&s->lock);
        drop_vanished(s);
        f = mset_family(out, "diskpulse_smart_up",
                        "Whether the last SMART read of the device succeeded.", MT_GAUGE);
        for (size_t i = 0; i < s->n; i++)
                mfamily_add(out, f, "", s->devs[i]->up ? 1.0 : 0.0, "device", s->devs[i]->name,
                            NULL);
        f = mset_family(out, "diskpulse_smart_read_errors_total",
                        "SMART reads that failed, by reason.", MT_COUNTER);
        for (size_t i = 0; i < s->n; i++)
                for (size_t r = 0; r < SMART_REASON_MAX; r++)
                        if (s->devs[i]->errors[r])
                                mfamily_add_u64(out, f, "", s->devs[i]->errors[r], "device",
                                                s->devs[i]->name, "reason", reason_names[r], NULL);
        f = mset_family(out, "diskpulse_smart_skipped_total",
                        "SMART reads skipped so as not to wake a sleeping disk.", MT_COUNTER);
        for (size_t i = 0; i < s->n; i++)
                for (size_t k = 0; k < SMART_SKIP_MAX; k++)
                        if (s->devs[i]->kind == DEVIO_ATA || s->devs[i]->skipped[k])
                                mfamily_add_u64(out, f, "", s->devs[i]->skipped[k], "device",
                                                s->devs[i]->name, "reason", skip_names[k], NULL);
        f = mset_family(out, "diskpulse_smart_power_mode",
                        "Power mode at the last check: 0 active or idle, 1 standby, 2 sleep.",
                        MT_GAUGE);
        for (size_t i = 0; i < s->n; i++)
                if (s->devs[i]->power_mode >= 0)
                        mfamily_add(out, f, "", (double)s->devs[i]->power_mode, "device",
                                    s->devs[i]->name, NULL);
        f = mset_family(out, "diskpulse_smart_last_read_timestamp_seconds",
                        "When the device's SMART data was last read successfully.", MT_GAUGE);
        for (size_t i = 0; i < s->n; i++)
                if (s->devs[i]->last_read)
                        mfamily_add(out, f, "",
                                    (double)(s->devs[i]->last_read / USEC_PER_MSEC) / 1000.0,
                                    "device", s->devs[i]->name, NULL);
        for (size_t i = 0; i < s->n; i++)
                if (s->devs[i]->have_data)
                        smart_export_data(out, s->devs[i]->name, &s->devs[i]->data);
        pthread_mutex_unlock(&s->lock);
}
