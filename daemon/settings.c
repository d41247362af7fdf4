/* The options as each part's settings: the device filters, every collector's config (and the
 * registry's setup functions that make or reconfigure it), the canary's disk identity and state
 * directory, the HTTP limits. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "canary_collector.h"
#include "canary_reset.h"
#include "canary_stats.h"
#include "cidr.h"
#include "daemon.h"
#include "diskstats_collector.h"
#include "fsroot.h"
#include "log.h"
#include "privsep.h"
#include "smart_collector.h"

static void ensure_state_dir(const char *dir)
{
        char path[4096];

        if (!strscpy(path, dir, sizeof path))
                return;
        for (char *p = path + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                (void)mkdir(path, 0755);
                *p = '/';
        }
        if (mkdir(path, 0750) < 0 && errno != EEXIST)
                log_errno(LOG_LEVEL_WARN, errno, "cannot create the state directory", "path", dir,
                          NULL);
}

/* The state directory (baselines), created if missing; once. */
static void open_state_dir(struct daemon *d)
{
        if (d->state_fd >= 0)
                return;
        ensure_state_dir(d->opts.state_dir);
        d->state_fd = open(d->opts.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d->state_fd < 0)
                log_errno(LOG_LEVEL_WARN, errno,
                          "cannot open the state directory; canary baselines are not kept", "path",
                          d->opts.state_dir, NULL);
        /* Held while the daemon runs: --canary.reset-reference refuses to edit under it. */
        else if (canary_state_dir_lock(d->state_fd) < 0)
                log_errno(LOG_LEVEL_WARN, errno,
                          "cannot lock the state directory; a reset of a reference while "
                          "diskpulse runs would not be refused",
                          "path", d->opts.state_dir, NULL);
}

static void diskstats_config_from(struct daemon *d, struct diskstats_config *c)
{
        memset(c, 0, sizeof(*c));
        c->procfs_fd = d->procfs_fd;
        c->devsrc = d->devsrc;
        c->filter = d->filter;
        c->interval = d->opts.ds_interval;
        c->window = d->opts.ds_window;
        /* A safety net for what changes without an event (a write cache mode switched by
         * hand): cheap (a stamp per device), and five minutes apart so that 1,000 devices cost
         * little. */
        c->identity_refresh = 300 * USEC_PER_SEC;
}

static void smart_config_from(struct daemon *d, struct smart_config *c)
{
        memset(c, 0, sizeof(*c));
        c->io = d->io;
        c->sysfs_fd = d->sysfs_fd;
        c->filter = d->filter;
        c->interval = d->opts.smart.interval;
        c->timeout = d->opts.smart.timeout;
        c->powermode = d->opts.smart.powermode;
}

static int canary_disk_identity(void *ud, const char *device, char *buf, size_t size)
{
        struct diskid_src *s = ud;
        struct device_info info;
        struct devsrc *src;
        char path[96], dev[32];
        unsigned maj, min;

        snprintf(path, sizeof path, "block/%s/dev", device);
        if (read_attr_at(s->sysfs_fd, path, dev, sizeof dev) <= 0 ||
            sscanf(dev, "%u:%u", &maj, &min) != 2)
                return -ENOENT;
        src = devsrc_files_new(s->sysfs_fd, s->udev_fd);
        (void)src->ops->lookup(src, device, maj, min, &info);
        devsrc_free(src);
        return canary_disk_id(buf, size, info.wwn, info.serial);
}

/* The targets of the options, as the canary takes them; the array is the caller's to free. */
static struct canary_target_config *canary_config_from(struct daemon *d, const struct dp_options *o,
                                                       struct canary_config *c)
{
        struct canary_target_config *t = xcalloc(o->canary.n_paths + 1, sizeof(*t));

        for (size_t i = 0; i < o->canary.n_paths; i++)
                t[i] = (struct canary_target_config){.path = o->canary.paths[i].path,
                                                     .mode = o->canary.paths[i].mode};
        if (d->diskid.sysfs_fd < 0) {
                d->diskid.sysfs_fd = fcntl(d->sysfs_fd, F_DUPFD_CLOEXEC, 3);
                d->diskid.udev_fd = d->udev_fd >= 0 ? fcntl(d->udev_fd, F_DUPFD_CLOEXEC, 3) : -1;
        }
        *c = (struct canary_config){
            .targets = t,
            .n_targets = o->canary.n_paths,
            .interval = o->canary.interval,
            .burst = o->canary.burst,
            .size = (size_t)o->canary.size,
            .timeout = o->canary.timeout,
            .baseline_period = o->canary.baseline_period,
            .state_dir_fd = d->state_fd,
            .sysfs_fd = d->sysfs_fd,
            .disk_id = canary_disk_identity,
            .disk_id_ud = &d->diskid,
        };
        return t;
}

/* cur given its new settings, for a collector whose reconfigure cannot fail (returns 0). */
static struct collector *reconfigured(struct collector *cur, const void *settings)
{
        (void)cur->ops->reconfigure(cur, settings);
        return cur;
}

struct collector *daemon_setup_diskstats(struct daemon *d, struct collector *cur)
{
        struct diskstats_settings s = {.procfs = d->opts.procfs};

        diskstats_config_from(d, &s.cfg);
        return cur ? reconfigured(cur, &s) : diskstats_collector_new(&s);
}

/* SMART runs only with the helper. */
struct collector *daemon_setup_smart(struct daemon *d, struct collector *cur)
{
        struct smart_settings s = {.io_up = privsep_helper_up};

        if (!d->io)
                return collector_free(cur);
        smart_config_from(d, &s.cfg);
        return cur ? reconfigured(cur, &s) : smart_collector_new(&s);
}

struct collector *daemon_setup_canary(struct daemon *d, struct collector *cur)
{
        struct canary_config c;
        _cleanup_free_ struct canary_target_config *t = NULL;
        int r;

        if (!cur)
                open_state_dir(d);
        t = canary_config_from(d, &d->opts, &c);
        if (!cur)
                return canary_collector_new(&c);
        r = cur->ops->reconfigure(cur, &c);
        if (r < 0)
                log_errno(LOG_LEVEL_ERROR, r, "cannot start a canary thread", NULL);
        return cur;
}

void daemon_collector_start(struct daemon *d, size_t id)
{
        struct collector *c = d->round.c[id];
        int r;

        if (!c || !c->ops->start || (r = c->ops->start(c)) >= 0)
                return;
        log_errno(LOG_LEVEL_ERROR, r, "cannot start a collector's thread", "collector",
                  collector_defs[id].name, NULL);
}

void daemon_collectors_apply(struct daemon *d, bool start_new)
{
        for (size_t i = 0; i < COLLECTOR_MAX; i++) {
                struct collector *was = d->round.c[i];

                if (!d->opts.collector[i]) {
                        round_drop(&d->round, i);
                        continue;
                }
                d->round.c[i] = collector_defs[i].setup(d, was);
                if (!d->round.c[i])
                        d->round.stats[i].ran = false;
                else if (!was && start_new)
                        daemon_collector_start(d, i);
        }
}

/* Descriptors the daemon needs besides its connections (roots, sockets, helper, canary files,
 * libmicrohttpd's own). */
#define FD_RESERVE 64

struct cidr *daemon_http_limits(const struct dp_options *o, struct connguard_config *lim)
{
        struct cidr *allow = xcalloc(o->n_allow_from ? o->n_allow_from : 1, sizeof(*allow));
        struct rlimit rl;

        for (size_t i = 0; i < o->n_allow_from; i++) {
                const char *why;
                (void)cidr_parse(o->allow_from[i], &allow[i], &why); /* checked by options */
        }
        *lim = (struct connguard_config){
            .max_connections = o->max_connections,
            .max_per_address = o->max_per_address,
            .header_timeout = o->header_timeout,
            .request_timeout = o->request_timeout,
            .idle_timeout = o->idle_timeout,
            .allow = allow,
            .n_allow = o->n_allow_from,
        };
        /* Every connection is a descriptor, and evicted ones linger a moment (1/8 more). */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
                rlim_t room = rl.rlim_cur > 2 * FD_RESERVE ? rl.rlim_cur - FD_RESERVE : FD_RESERVE;
                rlim_t fit = room * 8 / 9;
                if (lim->max_connections > fit) {
                        char want[16], got[16], nofile[24];
                        snprintf(want, sizeof want, "%u", lim->max_connections);
                        snprintf(got, sizeof got, "%u", (unsigned)fit);
                        snprintf(nofile, sizeof nofile, "%llu", (unsigned long long)rl.rlim_cur);
                        log_warn("the open-file limit allows fewer connections", "flag",
                                 "web.max-connections", "value", want, "using", got,
                                 "RLIMIT_NOFILE", nofile);
                        lim->max_connections = (unsigned)fit;
                }
        }
        return allow;
}
