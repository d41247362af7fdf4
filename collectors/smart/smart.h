/* The SMART collector: reads NVMe, ATA and SCSI health through a devio runner on its own
 * thread, every --smart.interval, never on the scrape path; the main loop exports the latest
 * results. A device that hangs, fails or sleeps shows as metrics, never as a missing page. */
#pragma once

#include "devio.h"
#include "metrics.h"
#include "namefilter.h"
#include "util.h"

enum smart_powermode_check {
        SMART_PM_NEVER,   /* read regardless (may spin a disk up) */
        SMART_PM_STANDBY, /* skip a disk in standby or sleep (the default) */
        SMART_PM_SLEEP,   /* skip only a disk in sleep */
};

struct smart_config {
        struct devio *io;                /* borrowed: runs the commands (the privileged helper) */
        int sysfs_fd;                    /* borrowed: block devices and their kind */
        const struct namefilter *filter; /* borrowed, may be NULL: the diskstats device filters */
        usec_t interval, timeout;
        enum smart_powermode_check powermode;
};

struct smart;

/* Creates the collector; no thread yet. Never fails. */
struct smart *smart_new(const struct smart_config *cfg);
/* Starts the reading thread. Returns 0 or -errno. Main thread. */
int smart_start(struct smart *s);
/* Stops the thread (it returns within the current command's timeout at most) and frees. */
struct smart *smart_free(struct smart *s);
/* Applies a new configuration (SIGHUP); the thread picks it up at its next wake-up. */
void smart_reconfigure(struct smart *s, const struct smart_config *cfg);
/* The disks are enumerated again at once (a device came or went); without such news, every
 * SMART_ENUM_INTERVAL (a host without udev events). */
void smart_rescan(struct smart *s);
#define SMART_ENUM_INTERVAL (60 * USEC_PER_SEC)
/* Reads every device once, on the calling thread (--once). */
void smart_read_all_now(struct smart *s);
/* Writes the latest results. Main thread; takes the collector's lock briefly. */
void smart_export(struct smart *s, struct mset *out);

/* Pure: which protocol a block device speaks, from its name and sysfs facts. Returns the
 * devio_kind, or -ENODEV for devices without health data (virtio, loop, dm, md, ...).
 * vpd_pg89 tells an ATA disk behind SAT; vendor is the SCSI vendor string (may be NULL). */
int smart_classify(const char *name, bool has_vpd_pg89, const char *vendor);

/* Parses "never|standby|sleep". Returns 0 or -EINVAL. */
int smart_powermode_from_string(const char *s, enum smart_powermode_check *ret);
