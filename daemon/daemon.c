/* The daemon's lifecycle: the roots, the helper, the collectors and the HTTP server set up in
 * main()'s order, the sd-event loop (the tick that runs a round and publishes it, signals, the
 * udev monitor, the zygote's loss, the watchdog), and the shutdown. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "daemon.h"
#include "expo.h"
#include "fsroot.h"
#include "http.h"
#include "listen.h"
#include "log.h"
#include "privsep.h"
#include "privsep_metrics.h"
#include "process.h"
#include "statefile.h"
#include "watchdog.h"
#include "websec.h"

static const char *const sample_kind_names[_SAMPLE_KIND_MAX] = {
    [SAMPLE_SCRAPE] = "scrape", [SAMPLE_WINDOW] = "window", [SAMPLE_FLOOR] = "floor",
    [SAMPLE_DEMAND] = "demand", [SAMPLE_FIXED] = "fixed",   [SAMPLE_OTHER] = "other",
};

/* The daemon's own: rounds by why they ran. */
static void rounds_export(const struct daemon *d, struct mset *out)
{
        struct mfamily *f = mset_family(
            out, "diskpulse_collection_rounds_total",
            "Collection rounds run, by what asked for them (--diskstats.sampling): scrape (just "
            "before a scrape a steady scraper is expected to make), window (a window before one: "
            "the diskstats sampled, no page made), demand (a request found the page older than "
            "--diskstats.interval), floor (none for a "
            "minute), fixed (every --diskstats.interval), other (start, reload, hotplug).",
            MT_COUNTER);

        for (size_t i = 0; i < _SAMPLE_KIND_MAX; i++)
                mfamily_add_u64(out, f, "", d->rounds[i], "reason", sample_kind_names[i], NULL);
        f = mset_family(
            out, "diskpulse_collection_rounds_missed_total",
            "Times of the fixed cadence (--diskstats.sampling=fixed) that went by with no "
            "round: the main loop was busy or stopped past them. The cadence keeps its "
            "times and goes on at the next.",
            MT_COUNTER);
        mfamily_add_u64(out, f, "", d->rounds_missed, NULL);
}

/* The other parts' own metrics, after the round's: the process, the helper, HTTP, the web
 * config. */
static void parts_export(void *ud, struct mset *out)
{
        struct daemon *d = ud;

        if (d->event) {
                rounds_export(d, out);
                daemon_reload_export(d, out);
        }
        process_export(out, d->start_time);
        privsep_export(d->io, out);
        http_server_export(d->http, out);
        websec_export(d->web, out);
}

void daemon_init(struct daemon *d, int argc, char **argv)
{
        *d = (struct daemon){.argc = argc,
                             .argv = argv,
                             .procfs_fd = -1,
                             .sysfs_fd = -1,
                             .udev_fd = -1,
                             .state_fd = -1,
                             .diskid = {.sysfs_fd = -1, .udev_fd = -1},
                             .round = {.version = DISKPULSE_VERSION,
                                       .revision = DISKPULSE_REVISION,
                                       .self_export = parts_export}};
        d->round.ud = d;
}

void daemon_notify_status(struct daemon *d)
{
        char buf[160];
        size_t devs = 0;

        for (size_t i = 0; i < registry_count(); i++)
                if (d->round.c[i] && d->round.c[i]->ops->devices)
                        devs += d->round.c[i]->ops->devices(d->round.c[i]);

        snprintf(buf, sizeof buf, "STATUS=Monitoring %zu device%s", devs, devs == 1 ? "" : "s");
        sd_notify(0, buf);
}

static bool follows_scrapes(const struct daemon *d)
{
        return d->opts.round_sampling == ROUND_SAMPLING_SCRAPE && d->want;
}

/* A round, published; the heartbeat. A window's round only has the collectors take their
 * counters at the window's start (round_sample()): the scrape it is for reads the page of the round just before it, and a request between
 * the two finds the page older than --diskstats.interval and has a round of its own. */
static void run_round(struct daemon *d, enum sample_kind why)
{
        d->rounds[why]++; /* the page counts the round that made it */
        if (why == SAMPLE_WINDOW)
                (void)round_sample(&d->round);
        else
                publisher_publish(d->pub, round_run(&d->round, now_realtime()));
        d->last_round = now_monotonic();
        publisher_beat(d->pub, d->last_round);
        if (d->round.count % 60 == 1)
                daemon_notify_status(d);
}

/* Arms the tick for the next round: every --diskstats.interval (fixed), or when the scrapers
 * the sampler follows want one. */
static void schedule(struct daemon *d)
{
        usec_t now = now_monotonic(), next;

        if (follows_scrapes(d)) {
                usec_t t[PUBLISHER_ARRIVALS];
                size_t n = publisher_take_arrivals(d->pub, t, ARRAY_SIZE(t));

                for (size_t i = 0; i < n; i++)
                        sampler_arrival(&d->sampler, t[i]);
                next = sampler_next(&d->sampler, now, d->last_round, &d->next_kind);
                /* A page for a scraper expected before the next round is made now. */
                (void)publisher_prepare(
                    d->pub, now, next < now + 4 * SAMPLER_LEAD ? next : now + 4 * SAMPLER_LEAD);
                d->grid = 0;
        } else {
                /* Keep the cadence's times: a round in between (hotplug, a reload) does not move
                 * them, nor does a stall (the times that went by are skipped and counted). It
                 * starts at the round just run, and again when the interval changed. */
                uint64_t missed;

                if (!d->grid || d->grid_period != d->opts.round_interval) {
                        d->grid = d->last_round;
                        d->grid_period = d->opts.round_interval;
                }
                next = sampler_fixed_next(d->grid, d->grid_period, now, &missed);
                d->grid = next;
                d->rounds_missed += missed;
                d->next_kind = SAMPLE_FIXED;
                /* A scraper due before the next round finds its page made. */
                (void)publisher_prepare(d->pub, now, next);
        }
        d->next_tick = next;
        if (d->tick)
                sd_event_source_set_time(d->tick, next);
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct daemon *d = userdata;

        (void)s;
        (void)usec;
        run_round(d, d->next_kind);
        schedule(d);
        return 0;
}

/* A request waits: for a page newer than --diskstats.interval (a round now), or for a sign of
 * life (a heartbeat). */
static int on_want(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct daemon *d = userdata;
        unsigned w = publisher_take_wants(d->pub);

        (void)s;
        (void)fd;
        (void)revents;
        if (w & PUBLISHER_WANT_ROUND)
                run_round(d, SAMPLE_DEMAND);
        else if (w & PUBLISHER_WANT_BEAT)
                publisher_beat(d->pub, now_monotonic());
        if (w & PUBLISHER_WANT_ROUND)
                schedule(d);
        return 0;
}

/* Runs the next round soon (a device came or went, a reload, the zygote's loss). */
void daemon_tick_soon(struct daemon *d, usec_t delay)
{
        usec_t soon = now_monotonic() + delay;

        if (d->tick && d->next_tick > soon) {
                d->next_tick = soon;
                d->next_kind = SAMPLE_OTHER;
                sd_event_source_set_time(d->tick, soon);
        }
}

/* Sampling as the options say (at start and after SIGHUP): on demand or not, the window. */
void daemon_apply_sampling(struct daemon *d)
{
        bool scrape = d->opts.round_sampling == ROUND_SAMPLING_SCRAPE;
        int fd = publisher_on_demand(d->pub, scrape ? d->opts.round_interval : 0);
        usec_t window;

        if (registry_window(d->opts.collector_opts, &window))
                sampler_set(&d->sampler, window, d->opts.round_interval);
        if (scrape && fd < 0) {
                log_errno(LOG_LEVEL_WARN, fd, "cannot sample on demand; sampling at a fixed rate",
                          NULL);
                return;
        }
        if (scrape && !d->want && d->event &&
            sd_event_add_io(d->event, &d->want, fd, EPOLLIN, on_want, d) < 0) {
                log_warn("cannot sample on demand; sampling at a fixed rate");
                d->want = NULL;
        }
}

static int on_monitor(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct daemon *d = userdata;
        struct dev_event ev;
        int r;

        (void)s;
        (void)fd;
        (void)revents;
        bool came_or_went = false;

        while ((r = d->devsrc->ops->receive(d->devsrc, &ev)) > 0) {
                log_debug("device event", "action", ev.action, "device", ev.name);
                for (size_t i = 0; i < registry_count(); i++) {
                        struct collector *c = d->round.c[i];
                        if (c && c->ops->device_event)
                                c->ops->device_event(c, ev.name);
                }
                came_or_went |= strcmp(ev.action, "add") == 0 || strcmp(ev.action, "remove") == 0;
        }
        /* A "change" (udev sends one whenever a written disk is closed) only refreshes facts at
         * the next regular sample; a device that came or went is sampled right away. */
        if (came_or_went)
                daemon_tick_soon(d, 50 * USEC_PER_MSEC);
        return 0;
}

int daemon_open_roots(struct daemon *d, const struct dp_options *o)
{
        struct {
                const char *flag, *path;
                int *fd;
        } roots[] = {
            {"path.procfs", o->procfs, &d->procfs_fd},
            {"path.sysfs", o->sysfs, &d->sysfs_fd},
        };

        for (size_t i = 0; i < ARRAY_SIZE(roots); i++) {
                int fd = root_open(roots[i].path);
                if (fd < 0)
                        return log_errno(LOG_LEVEL_ERROR, fd, "cannot open root directory", "flag",
                                         roots[i].flag, "path", roots[i].path, NULL);
                *roots[i].fd = fd;
        }
        /* A host without udev has no database: identity then comes from sysfs alone. */
        d->udev_fd = root_open(o->udev_data);
        if (d->udev_fd < 0)
                log_debug("no udev database", "path", o->udev_data);
        return 0;
}

int daemon_setup_collectors(struct daemon *d)
{
        bool live = strcmp(d->opts.sysfs, "/sys") == 0 &&
                    strcmp(d->opts.udev_data, "/run/udev/data") == 0 && !d->opts.once;

        /* Two writers of one state directory would overwrite each other's records: the lock
         * first, so that a refused start sets up, attaches and starts nothing, and its last
         * line is the refusal. */
        for (size_t i = 0; i < registry_count() && !d->opts.once; i++)
                if (d->opts.collector[i] && registry_def(i)->uses_state_dir &&
                    daemon_lock_state_dir(d) < 0)
                        return -EBUSY;
        d->devsrc = live ? devsrc_udev_new(d->sysfs_fd) : NULL;
        if (!d->devsrc)
                d->devsrc = devsrc_files_new(d->sysfs_fd, d->udev_fd);
        daemon_collectors_apply(d, false);
        /* a collector that opened it without saying so (uses_state_dir) */
        return d->state_busy != 0 && !d->opts.once ? -EBUSY : 0;
}

/* A daemon that never select()s can use every descriptor the hard limit allows; the soft limit
 * (often 1024) is only there for old programs that do (systemd.exec(5), LimitNOFILE=). */
void daemon_raise_fd_limit(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        log_errno(LOG_LEVEL_DEBUG, -errno, "cannot raise the open-file limit",
                                  NULL);
        }
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        struct daemon *d = userdata;

        (void)s;
        if (si->ssi_signo == SIGHUP) {
                sd_notify(0, "RELOADING=1");
                daemon_reload(d);
                /* sampling as the options now say, and a round at once */
                daemon_apply_sampling(d);
                daemon_tick_soon(d, 0);
                sd_notify(0, "READY=1");
                daemon_notify_status(d);
                return 0;
        }
        log_info("shutting down", "signal", strsignal((int)si->ssi_signo));
        sd_notify(0, "STOPPING=1");
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int on_zygote_grace(sd_event_source *s, uint64_t usec, void *userdata)
{
        (void)usec;
        (void)userdata;
        log_error("exiting so that the service manager restarts diskpulse with a new zygote",
                  "status", "75");
        sd_notify(0, "STOPPING=1");
        return sd_event_exit(sd_event_source_get_event(s), EXIT_ZYGOTE_LOST);
}

/* The zygote is gone: no helper can ever be started again in this process, which holds no
 * capability to make a new zygote. The helper still running (if any) keeps serving until the
 * grace period ends; then the daemon exits with EXIT_ZYGOTE_LOST, its state saved as on
 * SIGTERM. */
static int on_zygote_lost(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct daemon *d = userdata;
        char grace[32];
        int r;

        (void)fd;
        (void)revents;
        sd_event_source_set_enabled(s, SD_EVENT_OFF);
        format_duration(d->opts.zygote_grace, grace, sizeof grace);
        log_error("the privileged zygote is lost: SMART stops when the helper dies; diskpulse "
                  "exits for a restart after the grace period",
                  "grace", grace);
        sd_notify(0, "STATUS=The privileged zygote is lost; exiting for a restart");
        /* a round now, so that the page says it (diskpulse_helper_zygote_up 0) at once */
        daemon_tick_soon(d, 0);
        r = sd_event_add_time_relative(sd_event_source_get_event(s), &d->zygote_grace,
                                       CLOCK_MONOTONIC, d->opts.zygote_grace, USEC_PER_MSEC,
                                       on_zygote_grace, d);
        if (r < 0)
                return sd_event_exit(sd_event_source_get_event(s), EXIT_ZYGOTE_LOST);
        return 0;
}

int daemon_listen_fds(struct daemon *d, int **fds, size_t *n)
{
        int k = sd_listen_fds(1);

        if (k < 0)
                return log_errno(LOG_LEVEL_ERROR, k, "cannot take systemd's sockets", NULL);
        if (k > 0 || d->opts.systemd_socket) {
                if (k == 0) {
                        log_error("--web.systemd-socket given but systemd passed no socket");
                        return -EBADF;
                }
                for (int i = 0; i < k; i++) {
                        int fd = SD_LISTEN_FDS_START + i;
                        if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
                                log_error("systemd passed a file that is not a listening stream "
                                          "socket");
                                return -EBADF;
                        }
                        *fds = xrealloc(*fds, (*n + 1) * sizeof(int));
                        (*fds)[(*n)++] = fd;
                }
                return 0;
        }
        for (size_t i = 0; i < d->opts.n_listen; i++) {
                const char *why;
                int r = listen_open(d->opts.listen[i], fds, n, &why);
                if (r < 0) {
                        log_error("cannot listen", "flag", "web.listen-address", "address",
                                  d->opts.listen[i], "reason", why);
                        return r;
                }
        }
        return 0;
}

int daemon_run_once(struct daemon *d)
{
        struct snapshot *snap;

        /* The probers start first and measure while SMART reads every device. */
        for (size_t i = 0; i < registry_count(); i++) {
                struct collector *c = d->round.c[i];
                int r = c && c->ops->begin_once ? c->ops->begin_once(c) : 0;
                if (r < 0)
                        log_errno(LOG_LEVEL_ERROR, r, "cannot start a collector's thread",
                                  "collector", registry_def(i)->name, NULL);
        }
        for (size_t i = 0; i < registry_count(); i++) {
                struct collector *c = d->round.c[i];
                int r = c && c->ops->settle ? c->ops->settle(c) : 0;
                if (r < 0)
                        log_errno(LOG_LEVEL_ERROR, r, "cannot measure once", "collector",
                                  registry_def(i)->name, NULL);
        }
        snap = round_run(&d->round, now_realtime());
        struct mset *const *sets;
        size_t n = snapshot_sets(snap, &sets);
        int r = expo_write_text(stdout, sets, n);

        if (fflush(stdout) != 0 && r == 0)
                r = -EIO;
        snapshot_unref(snap);
        if (r < 0)
                return log_errno(LOG_LEVEL_ERROR, r, "cannot write the metrics", NULL);
        return 0;
}

int daemon_run(struct daemon *d)
{
        int *fds = d->listen_fds;
        size_t nfds = d->n_listen_fds;
        int r, err = 0;
        _cleanup_free_ struct cidr *allow = NULL;
        struct http_config hc = {
            .health_stale = daemon_health_stale(&d->opts),
            .version = DISKPULSE_VERSION,
            .revision = DISKPULSE_REVISION,
            .web = d->web,
        };

        for (size_t i = 0; i < registry_count(); i++)
                daemon_collector_start(d, i);

        r = sd_event_default(&d->event);
        if (r < 0)
                return log_errno(LOG_LEVEL_ERROR, r, "cannot create the event loop", NULL);
        if ((r = sd_event_add_signal(d->event, NULL, SIGTERM, on_signal, d)) < 0 ||
            (r = sd_event_add_signal(d->event, NULL, SIGINT, on_signal, d)) < 0 ||
            (r = sd_event_add_signal(d->event, NULL, SIGHUP, on_signal, d)) < 0)
                return log_errno(LOG_LEVEL_ERROR, r, "cannot watch signals", NULL);
        if ((r = watchdog_start(d->event)) < 0)
                log_errno(LOG_LEVEL_WARN, r, "cannot arm the watchdog pings", NULL);
        if (d->io && privsep_zygote_lost_fd(d->io) >= 0) {
                r = sd_event_add_io(d->event, &d->zygote_lost, privsep_zygote_lost_fd(d->io),
                                    EPOLLIN, on_zygote_lost, d);
                if (r < 0)
                        log_errno(LOG_LEVEL_WARN, r, "cannot watch the zygote", NULL);
        }

        if (d->devsrc->ops->monitor_fd(d->devsrc) >= 0) {
                r = sd_event_add_io(d->event, &d->monitor, d->devsrc->ops->monitor_fd(d->devsrc),
                                    EPOLLIN, on_monitor, d);
                if (r < 0)
                        log_errno(LOG_LEVEL_WARN, r, "no hotplug events; rescanning each interval",
                                  NULL);
        }

        /* The first round runs before serving, so no scrape ever sees an empty page. */
        sampler_init(&d->sampler, 0, d->opts.round_interval);
        daemon_apply_sampling(d);
        run_round(d, SAMPLE_OTHER);
        d->next_tick = d->last_round;
        r = sd_event_add_time(d->event, &d->tick, CLOCK_MONOTONIC, d->next_tick, USEC_PER_MSEC,
                              on_tick, d);
        if (r < 0)
                return log_errno(LOG_LEVEL_ERROR, r, "cannot arm the sampling timer", NULL);
        sd_event_source_set_enabled(d->tick, SD_EVENT_ON);
        schedule(d);

        allow = daemon_http_limits(&d->opts, &hc.limits);
        d->http = http_server_new(fds, nfds, &hc, d->pub, &err);
        d->n_listen_fds = 0; /* the server owns them now, closed or not */
        if (!d->http)
                return log_errno(LOG_LEVEL_ERROR, err, "cannot start the HTTP server", NULL);
        for (size_t i = 0; i < nfds; i++) {
                char where[80];
                log_info("listening", "address", listen_describe(fds[i], where, sizeof where));
        }
        sd_notify(0, "READY=1");
        daemon_notify_status(d);
        log_info("diskpulse started", "version", DISKPULSE_VERSION);

        r = sd_event_loop(d->event);
        d->http = http_server_free(d->http);
        if (r < 0)
                return log_errno(LOG_LEVEL_ERROR, r, "event loop failed", NULL);
        return r; /* 0, or EXIT_ZYGOTE_LOST */
}

/* Forks the privileged helper, which keeps only the capabilities the collectors enabled now
 * need, and drops every capability of this process, the one that parses HTTP. Device commands
 * (a collector_def.device_io one enabled: SMART) keep CAP_SYS_ADMIN and CAP_SYS_RAWIO; the
 * table of privileged functions holds the enabled collectors' (collector_def.privileged:
 * a collector's BPF loader, CAP_SYS_ADMIN); with neither the zygote and its helpers hold no
 * capability at all. Fixed here, in the zygote's copy of this process, bounding set included:
 * a reload that enables a collector needing more is refused that collector
 * (daemon_helper_allows()). Before any thread. */
int daemon_start_helper(struct daemon *d)
{
        static struct privsep_function fns[REGISTRY_MAX];
        struct privsep_config pc = {.dev_dir = d->opts.dev, .functions = fns, .no_devices = true};
        int r;

        for (size_t i = 0; i < registry_count(); i++) {
                if (!d->opts.collector[i])
                        continue;
                if (registry_def(i)->device_io)
                        pc.no_devices = false;
                if (registry_def(i)->privileged) {
                        fns[pc.n_functions++] = (struct privsep_function){
                            .name = registry_def(i)->name, .fn = registry_def(i)->privileged};
                        d->helper_function[i] = true;
                }
        }
        d->helper_devices = !pc.no_devices;
        r = privsep_start(&pc, &d->io);

        if (r < 0) {
                /* Without a helper there is no SMART, but the rest still works, unprivileged. */
                log_errno(LOG_LEVEL_ERROR, r, "cannot start the privileged helper; no SMART data",
                          NULL);
                d->io = NULL;
                r = privsep_drop_all();
                if (r < 0)
                        return log_errno(LOG_LEVEL_ERROR, r, "cannot drop privileges", NULL);
        }
        return 0;
}

int daemon_load_web_config(struct daemon *d)
{
        struct websec *web = NULL;
        char err[512];
        int r = websec_load(d->opts.web_config_file, &web, err, sizeof err);

        if (r < 0) {
                /* as a bad flag or config line: on stderr, exit status 2 */
                fprintf(stderr, "diskpulse: %s\n", err);
                return r;
        }
        d->web = websec_install(d->web, web);
        return 0;
}

void daemon_done(struct daemon *d)
{
        d->http = http_server_free(d->http);
        d->web = websec_free(d->web); /* after the server that served with it */
        /* A SMART read may be waiting on a hung device: wake it, so shutdown takes no longer
         * than a second. */
        if (d->io && d->io->ops->cancel)
                d->io->ops->cancel(d->io);
        /* Every collector, its threads stopped (a canary probe blocked in the kernel is
         * abandoned after a few hundred ms). */
        round_free(&d->round);
        if (d->state_fd >= 0) {
                /* Nothing writes the state any more. The lock goes now, not when the last
                 * descriptor of the directory closes: a canary prober abandoned in a hung
                 * fdatasync() keeps one, and the process with it, until the kernel lets go, and
                 * the diskpulse started after this one must not wait for that. */
                (void)statefile_unlock(d->state_fd);
                close(d->state_fd);
        }
        /* the zygote's eventfd belongs to io */
        d->zygote_lost = sd_event_source_unref(d->zygote_lost);
        d->zygote_grace = sd_event_source_unref(d->zygote_grace);
        if (d->io)
                d->io->ops->free(d->io);
        d->io = NULL;
        for (size_t i = 0; i < d->n_listen_fds; i++)
                close(d->listen_fds[i]);
        free(d->listen_fds);
        d->tick = sd_event_source_unref(d->tick);
        d->want = sd_event_source_unref(d->want);
        d->monitor = sd_event_source_unref(d->monitor);
        d->event = sd_event_unref(d->event);
        d->devsrc = devsrc_free(d->devsrc);
        d->pub = publisher_free(d->pub);
        d->filter = namefilter_free(d->filter);
        if (d->procfs_fd >= 0)
                close(d->procfs_fd);
        if (d->sysfs_fd >= 0)
                close(d->sysfs_fd);
        if (d->udev_fd >= 0)
                close(d->udev_fd);
        options_free(&d->opts);
}
