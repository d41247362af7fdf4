/* The collector interface: what the daemon's round, reload and shutdown need from a collector,
 * as a table of function pointers each collector's adapter (collectors/NAME/NAME_collector.c)
 * fills, and the collector's definition (struct collector_def) by which the daemon's registry
 * (daemon/registry.c) knows it: its name, help, default, options and setup. The daemon keeps
 * one object per registered collector and loops over them; it never calls a collector's own
 * functions. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "metrics.h"
#include "option.h"
#include "summary.h"
#include "util.h"

struct collector;
struct devio;
struct devsrc;
struct namefilter;

struct collector_ops {
        const char *name; /* as in the registry and the collector="..." label */
        /* Starts the collector's own threads, if any (NULL: none). 0 or -errno. */
        int (*start)(struct collector *c);
        /* The work of a round before its export (reading a file); NULL: none. Returns 0, or
         * -errno when the round failed (diskpulse_collector_success 0); the collector logs. */
        int (*collect)(struct collector *c, usec_t now);
        /* Takes its counters at the start of a window without exporting (the sampler's round a
         * window before an expected scrape, whose page the next round makes, over that window);
         * NULL: nothing to take. 0 or -errno (logged by the collector). */
        int (*sample)(struct collector *c, usec_t now);
        /* Fills out with the collector's metrics. */
        void (*export)(struct collector *c, struct mset *out);
        /* After export: whether the round succeeded (NULL: as collect returned). */
        bool (*healthy)(struct collector *c);
        /* What the landing page shows of it (NULL: nothing): a pure function of the set export
         * filled, called later on an HTTP thread (lib/summary.h). */
        summarize_fn summarize;
        /* New settings (SIGHUP): settings points to the collector's own config struct. 0 or
         * -errno (the collector keeps running as before). */
        int (*reconfigure)(struct collector *c, const void *settings);
        /* --once, instead of start: begin_once starts what measures beside the others (every
         * collector's first, NULL: nothing), then settle measures once or waits until there is
         * something to export (NULL: nothing to wait for). 0 or -errno. */
        int (*begin_once)(struct collector *c);
        int (*settle)(struct collector *c);
        /* A device came, went or changed (hotplug); NULL: not interested. */
        void (*device_event)(struct collector *c, const char *device);
        /* The devices it follows now, for the service's status line (NULL: none). */
        size_t (*devices)(const struct collector *c);
        /* Stops its threads and frees it. */
        void (*free)(struct collector *c);
};

/* A disk's identity facts (udev's WWN and serial) by kernel device name: thread-safe, no device
 * I/O; it lives as long as the process (a thread abandoned in a hung probe may still ask). */
struct collector_disk_ids {
        /* 0 with wwn and serial ("" when unknown), or -ENOENT for an unknown device. */
        int (*lookup)(const struct collector_disk_ids *self, const char *device, char *wwn,
                      size_t wwnsz, char *serial, size_t serialsz);
};

/* What the daemon gives a collector's setup: its roots, device sources, helper and filters,
 * borrowed (they outlive the collector or its next setup). */
struct collector_host {
        int procfs_fd, sysfs_fd, udev_fd;
        const char *procfs;              /* --path.procfs, for messages */
        struct devsrc *devsrc;           /* device identity (collectors/devices) */
        struct devio *io;                /* the privileged helper; NULL: none */
        bool (*io_up)(struct devio *io); /* whether io can run commands now */
        const struct namefilter *filter; /* the device name filters (may be NULL) */
        usec_t interval;                 /* --diskstats.interval: the round's period */
        /* The state directory (persisted state), opened and locked at the first call, and the
         * disk identity below made ready; -1 when it cannot be opened (logged). */
        int (*state_dir)(const struct collector_host *h);
        const char *state_dir_path; /* --state.directory, for messages */
        /* Disks' identity facts, for persisted baselines; NULL: none. */
        const struct collector_disk_ids *disk_ids;
        void *ud; /* the daemon's */
};

/* What a collector's one-shot command (collector_def.command) gets from the daemon, borrowed. */
struct collector_command_env {
        const char *state_dir; /* --state.directory */
        int sysfs_fd;          /* --path.sysfs; -1 when it cannot be opened */
        /* Disks' identity facts (below --path.sysfs and --path.udev.data). */
        const struct collector_disk_ids *disk_ids;
};

/* A collector as the daemon's registry lists it: name, help and default make the
 * --[no-]collector.NAME flag; options (n_options entries, offsets into a struct of
 * options_size bytes) are its own flags; setup makes it. */
struct collector_def {
        const char *name;
        const char *help;
        bool default_enabled;
        const struct opt_def *options; /* NULL: none (not yet read by the daemon) */
        size_t n_options, options_size;
        /* The flags of its one-shot commands (command), command-line only, offsets into the
         * same options struct: apart from options, so that --help lists them where the daemon's
         * table has an OPT_CLI_ONLY OPT_FRAGMENT entry of its name. NULL: none. */
        const struct opt_def *command_options;
        size_t n_command_options;
        /* After flags and file are read: checks opts and completes them from the daemon's
         * options (the state directory, --diskstats.interval). 0, or -EINVAL with the message
         * in err (NULL: nothing to do). */
        int (*complete)(void *opts, const char *state_dir, usec_t interval, char *err,
                        size_t errsz);
        /* The window its gauges are derived over, from its options (the sampler plans a round
         * that long before an expected scrape: collector_ops.sample); NULL: none. */
        usec_t (*window)(const void *opts);
        /* One-shot actions its options ask for, run instead of the daemon once flags and file are
         * read (the canary's state-file edits): commanded says whether opts ask for one (NULL:
         * it has none); command checks them, does it and prints what it did or why not, and
         * returns the process's exit status. */
        bool (*commanded)(const void *opts);
        int (*command)(const void *opts, const struct collector_command_env *env);
        /* Makes the collector from its options (cur NULL) or gives cur its new settings; NULL
         * when it cannot run now (cur freed). */
        struct collector *(*setup)(const struct collector_host *host, const void *opts,
                                   struct collector *cur);
        /* What the collector needs done with the helper's privileges (loading a BPF program):
         * runs in a short-lived worker of the privileged helper (CAP_SYS_ADMIN, CAP_SYS_RAWIO),
         * asked by the collector with host->io->ops->privileged(io, its name, ...); arg as sent.
         * Puts at most DEVIO_MAX_FDS descriptors in fds (*nfds), which the daemon receives. 0, or
         * -errno with the message in err. NULL: none. The table of these is fixed in the
         * helper's memory when it is made; nothing the daemon sends can change it. */
        int (*privileged)(const void *arg, size_t len, int fds[], size_t *nfds, char *err,
                          size_t errsz);
        /* Sends device commands through host->io->ops->run (SMART): the helper keeps the
         * capabilities they need (CAP_SYS_ADMIN, CAP_SYS_RAWIO) only when such a collector is
         * enabled at start. */
        bool device_io;
        /* Keeps state in the state directory (host->state_dir): the daemon opens and locks the
         * directory before it sets up any collector when one such is enabled, so that a start
         * refused on another holder's lock sets up, attaches and starts nothing. */
        bool uses_state_dir;
};

/* Embedded first in each adapter's own struct. */
struct collector {
        const struct collector_ops *ops;
};

static inline const char *collector_name(const struct collector *c)
{
        return c->ops->name;
}

/* Frees c (NULL accepted); returns NULL. */
static inline struct collector *collector_free(struct collector *c)
{
        if (c)
                c->ops->free(c);
        return NULL;
}
