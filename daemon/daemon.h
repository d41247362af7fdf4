/* The daemon's state and the functions of its files (daemon.c: lifecycle and the event loop;
 * settings.c: the options as each collector's settings; reload.c: SIGHUP; cli.c: what runs
 * before anything starts). Only daemon/ includes it. */
#pragma once

#include <stdbool.h>
#include <stdio.h>
#include <systemd/sd-event.h>

#include "connguard.h"
#include "devices.h"
#include "devio.h"
#include "options.h"
#include "publisher.h"
#include "round.h"
#include "sampler.h"

#ifndef DISKPULSE_VERSION
#define DISKPULSE_VERSION "0.0.0"
#endif
#ifndef DISKPULSE_REVISION
#define DISKPULSE_REVISION "unknown"
#endif

/* Exit status when the zygote is lost (EX_TEMPFAIL): the unit's Restart=on-failure starts a new
 * daemon, with a new zygote; diskpulse.socket keeps the listening socket meanwhile. */
#define EXIT_ZYGOTE_LOST 75

/* Disks' identity facts (host->disk_ids, for the canary's baselines), asked from its prober
 * threads: udev's record and sysfs, read through duplicated descriptors and no other state, so
 * it is thread-safe and touches no device. It lives as long as the daemon object, which lives as
 * long as the process (main()'s is static): a prober thread abandoned in a hung fdatasync() may
 * still ask after the canary is freed. */
struct diskid_src {
        struct collector_disk_ids ids; /* first: what the collectors get */
        int sysfs_fd, udev_fd;
};

struct daemon {
        struct dp_options opts;
        int argc;
        char **argv;
        int procfs_fd, sysfs_fd, udev_fd;
        struct namefilter *filter; /* the device name filters */
        struct devsrc *devsrc;
        struct devio *io;   /* the privileged helper */
        struct round round; /* every collector, by registry id */
        struct diskid_src diskid;
        int state_fd;   /* the state directory, locked; -1 when it cannot be opened or locked */
        int state_busy; /* the pid (-1: unknown) of another process that holds it, else 0 */
        int *listen_fds;
        size_t n_listen_fds;
        struct publisher *pub;
        struct http_server *http;
        struct websec *web; /* the web config, served by http */
        sd_event *event;
        sd_event_source *tick, *monitor;
        sd_event_source *zygote_lost, *zygote_grace; /* the zygote's loss, the exit after it */
        usec_t start_time;
        usec_t next_tick;
        enum sample_kind next_kind; /* why the tick at next_tick runs */
        /* --diskstats.sampling=fixed: the time of the next round on the cadence (0: none yet, or
         * sampling follows the scrapers), of period grid_period; the rounds the cadence missed */
        usec_t grid, grid_period;
        uint64_t rounds_missed;
        struct sampler sampler; /* --diskstats.sampling=scrape: when rounds are wanted */
        sd_event_source *want;  /* a request waits for a new page or a heartbeat */
        usec_t last_round;      /* monotonic */
        uint64_t rounds[_SAMPLE_KIND_MAX];
        /* what the helper was given at start: device commands, collector i's privileged
         * function; nothing can add to it later */
        bool helper_devices, helper_function[COLLECTOR_MAX];
        bool reload_failed; /* the last SIGHUP's configuration was refused (kept the running one) */
        usec_t config_loaded; /* realtime of the last configuration loaded, at start or by SIGHUP */
};

/* daemon.c */
/* A daemon object before anything is open. */
void daemon_init(struct daemon *d, int argc, char **argv);
/* The systemd status line (devices monitored). */
void daemon_notify_status(struct daemon *d);
/* A daemon that never select()s can use every descriptor the hard limit allows. */
void daemon_raise_fd_limit(void);
/* The steps of main(): each returns 0 or -errno (logged), run_* the exit status. */
int daemon_listen_fds(struct daemon *d, int **fds, size_t *n);
int daemon_start_helper(struct daemon *d);
int daemon_open_roots(struct daemon *d, const struct dp_options *o);
int daemon_load_web_config(struct daemon *d);
/* -EBUSY (logged) when another process holds the state directory (not for --once, which goes
 * on without it). */
int daemon_setup_collectors(struct daemon *d);
int daemon_run_once(struct daemon *d);
int daemon_run(struct daemon *d);
void daemon_done(struct daemon *d);
/* Runs the next round after delay at the latest (a device came or went, a reload). */
void daemon_tick_soon(struct daemon *d, usec_t delay);
/* Sampling as the options say (--diskstats.sampling, --diskstats.interval, the window): at
 * start, after SIGHUP. */
void daemon_apply_sampling(struct daemon *d);

/* settings.c */
/* A device's identity facts, udev's WWN and serial ("" when unknown), read below the roots
 * sysfs_fd and udev_fd (-1: none). 0, or -ENOENT for a device sysfs does not know. Any thread. */
int daemon_disk_facts(int sysfs_fd, int udev_fd, const char *device, char *wwn, size_t wwnsz,
                      char *serial, size_t serialsz);
/* Disks' identity facts read below the roots sysfs_fd and udev_fd (the caller's, kept open
 * while s is used). */
void daemon_diskid_init(struct diskid_src *s, int sysfs_fd, int udev_fd);
/* Logs that another process holds the state directory (d->state_busy). */
void daemon_log_state_busy(const struct daemon *d, enum log_level level);
/* Opens and locks the state directory now (once; logs a failure). 0, or -EBUSY when another
 * process holds its lock (logged as an error). Main loop. */
int daemon_lock_state_dir(struct daemon *d);
/* The HTTP limits of the options, the connection limit within what the open-file limit allows.
 * Returns the allow-list for lim->allow (the caller frees it). */
struct cidr *daemon_http_limits(const struct dp_options *o, struct connguard_config *lim);
/* How long the main loop may be silent before /-/healthy fails: two sampling intervals and 10 s. */
usec_t daemon_health_stale(const struct dp_options *o);
/* Each registered collector as the options say: made (and started when start_new), given its
 * new settings, or freed when turned off. */
void daemon_collectors_apply(struct daemon *d, bool start_new);
/* Starts collector id's threads; a failure is logged. */
void daemon_collector_start(struct daemon *d, size_t id);
/* reload.c: SIGHUP: read flags and config again; apply what can change while running. A refused
 * configuration sets reload_failed and keeps the running one; a loaded one clears it and sets
 * config_loaded. */
void daemon_reload(struct daemon *d);
/* Whether the helper started with what collector id needs (device commands, its privileged
 * function); a collector that needs none is always allowed. */
bool daemon_helper_allows(const struct daemon *d, size_t id);
/* diskpulse_config_reload_success and its timestamp. */
void daemon_reload_export(const struct daemon *d, struct mset *out);

/* cli.c */
/* Flags and config file into *o, checked; what --help, --version and --check-config print.
 * Returns -1 to go on, else the exit status. */
int daemon_front(void *ud, struct dp_options *o);
/* After a start with capabilities: flags and file read again by this process. 0 or -ESTALE. */
int daemon_reparse(struct daemon *d);
