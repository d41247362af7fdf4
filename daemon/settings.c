/* The options as each part's settings: what the daemon gives the collectors' setup functions
 * (struct collector_host: roots, device sources, helper, filters, the canary's disk identity
 * and state directory), every registered collector made or reconfigured, the HTTP limits. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cidr.h"
#include "daemon.h"
#include "fsroot.h"
#include "log.h"
#include "privsep.h"
#include "statefile.h"

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

/* The state directory (persisted state), created if missing and locked: one writer at a time
 * (statefile_lock()). Once opened it stays open, and locked, until the daemon exits. Another
 * process's lock is noted in d->state_busy (main() refuses to start over it; --once and a
 * collector enabled by a reload go on without the state directory). */
static void open_state_dir(struct daemon *d)
{
        int fd, r;

        if (d->state_fd >= 0)
                return;
        ensure_state_dir(d->opts.state_dir);
        fd = open(d->opts.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                log_errno(LOG_LEVEL_WARN, errno,
                          "cannot open the state directory; persisted state is not kept", "path",
                          d->opts.state_dir, NULL);
                return;
        }
        r = statefile_lock(fd);
        if (r == -EBUSY) {
                d->state_busy = statefile_lock_holder(fd);
                if (d->state_busy <= 0)
                        d->state_busy = -1;
                close(fd);
                daemon_log_state_busy(d, d->opts.once ? LOG_LEVEL_WARN : LOG_LEVEL_ERROR);
                return;
        }
        if (r < 0)
                /* no lock to be had here (a filesystem without flock): the directory is used */
                log_errno(LOG_LEVEL_WARN, r,
                          "cannot lock the state directory; another diskpulse using it would "
                          "not be refused",
                          "path", d->opts.state_dir, NULL);
        d->state_busy = 0;
        d->state_fd = fd;
}

int daemon_lock_state_dir(struct daemon *d)
{
        open_state_dir(d);
        return d->state_busy != 0 ? -EBUSY : 0;
}

void daemon_log_state_busy(const struct daemon *d, enum log_level level)
{
        char pid[16] = "unknown";

        if (d->state_busy > 0)
                snprintf(pid, sizeof pid, "%d", d->state_busy);
        log_msg(level,
                d->opts.once ? "the state directory is in use by another process (a running "
                               "diskpulse, or a reset); --once measures without its state and "
                               "writes nothing there"
                             : "the state directory is in use by another process (a running "
                               "diskpulse, a diskpulse --once or a reset): two writers would "
                               "overwrite each other's records; give each diskpulse its own "
                               "--state.directory",
                "path", d->opts.state_dir, "pid", pid, NULL);
}

/* host->disk_ids: udev's record and sysfs, read through the duplicated descriptors. */
static int disk_ids_lookup(const struct collector_disk_ids *self, const char *device, char *wwn,
                           size_t wwnsz, char *serial, size_t serialsz)
{
        const struct diskid_src *s = (const struct diskid_src *)self;

        return daemon_disk_facts(s->sysfs_fd, s->udev_fd, device, wwn, wwnsz, serial, serialsz);
}

void daemon_diskid_init(struct diskid_src *s, int sysfs_fd, int udev_fd)
{
        *s = (struct diskid_src){
            .ids.lookup = disk_ids_lookup, .sysfs_fd = sysfs_fd, .udev_fd = udev_fd};
}

int daemon_disk_facts(int sysfs_fd, int udev_fd, const char *device, char *wwn, size_t wwnsz,
                      char *serial, size_t serialsz)
{
        struct device_info info;
        struct devsrc *src;
        char path[96], dev[32];
        unsigned maj, min;

        snprintf(path, sizeof path, "block/%s/dev", device);
        if (read_attr_at(sysfs_fd, path, dev, sizeof dev) <= 0 ||
            sscanf(dev, "%u:%u", &maj, &min) != 2)
                return -ENOENT;
        src = devsrc_files_new(sysfs_fd, udev_fd);
        (void)src->ops->lookup(src, device, maj, min, &info);
        devsrc_free(src);
        (void)strscpy(wwn, info.wwn, wwnsz);
        (void)strscpy(serial, info.serial, serialsz);
        return 0;
}

/* host->state_dir: the state directory, opened once, and the disks' identity ready. */
static int host_state_dir(const struct collector_host *h)
{
        struct daemon *d = h->ud;

        open_state_dir(d);
        if (d->diskid.sysfs_fd < 0)
                daemon_diskid_init(&d->diskid, fcntl(d->sysfs_fd, F_DUPFD_CLOEXEC, 3),
                                   d->udev_fd >= 0 ? fcntl(d->udev_fd, F_DUPFD_CLOEXEC, 3) : -1);
        return d->state_fd;
}

static void host_of(struct daemon *d, struct collector_host *h)
{
        *h = (struct collector_host){
            .procfs_fd = d->procfs_fd,
            .sysfs_fd = d->sysfs_fd,
            .udev_fd = d->udev_fd,
            .procfs = d->opts.procfs,
            .devsrc = d->devsrc,
            .io = d->io,
            .io_up = privsep_helper_up,
            .filter = d->filter,
            .interval = d->opts.round_interval,
            .state_dir = host_state_dir,
            .state_dir_path = d->opts.state_dir,
            .disk_ids = &d->diskid.ids,
            .ud = d,
        };
}

void daemon_collector_start(struct daemon *d, size_t id)
{
        struct collector *c = d->round.c[id];
        int r;

        if (!c || !c->ops->start || (r = c->ops->start(c)) >= 0)
                return;
        log_errno(LOG_LEVEL_ERROR, r, "cannot start a collector's thread", "collector",
                  registry_def(id)->name, NULL);
}

void daemon_collectors_apply(struct daemon *d, bool start_new)
{
        struct collector_host host;

        host_of(d, &host);
        for (size_t i = 0; i < registry_count(); i++) {
                struct collector *was = d->round.c[i];

                if (!d->opts.collector[i]) {
                        round_drop(&d->round, i);
                        continue;
                }
                d->round.c[i] = registry_def(i)->setup(&host, d->opts.collector_opts[i], was);
                if (!d->round.c[i])
                        d->round.stats[i].ran = false;
                else if (!was && start_new)
                        daemon_collector_start(d, i);
        }
}

/* Descriptors the daemon needs besides its connections (roots, sockets, helper, canary files,
 * libmicrohttpd's own). */
#define FD_RESERVE 64

usec_t daemon_health_stale(const struct dp_options *o)
{
        return 2 * o->round_interval + 10 * USEC_PER_SEC;
}

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
