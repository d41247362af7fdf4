/* diskpulse: flags, lifecycle and wiring. The sd-event main loop owns the timers, signals and
 * the hotplug monitor; collectors run on it and publish snapshots that HTTP threads serve. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "canary.h"
#include "canary_reset.h"
#include "canary_stats.h"
#include "cidr.h"
#include "devices.h"
#include "diskstats.h"
#include "expo.h"
#include "fsroot.h"
#include "http.h"
#include "listen.h"
#include "log.h"
#include "options.h"
#include "prestart.h"
#include "privsep.h"
#include "process.h"
#include "registry.h"
#include "smart.h"
#include "snapshot.h"
#include "watchdog.h"
#include "websec.h"

#ifndef DISKPULSE_VERSION
#define DISKPULSE_VERSION "0.0.0"
#endif
#ifndef DISKPULSE_REVISION
#define DISKPULSE_REVISION "unknown"
#endif

struct collector_stat {
        double duration;
        bool success;
        bool ran;
};

struct daemon {
        struct dp_options opts;
        int argc;
        char **argv;
        int procfs_fd, sysfs_fd, udev_fd;
        struct namefilter *filter; /* the device name filters */
        struct devsrc *devsrc;
        struct diskstats *diskstats;
        struct devio *io; /* the privileged helper */
        struct smart *smart;
        struct canary *canary;
        int state_fd; /* the state directory, -1 when it cannot be opened */
        int *listen_fds;
        size_t n_listen_fds;
        struct publisher *pub;
        struct http_server *http;
        sd_event *event;
        sd_event_source *tick, *monitor;
        sd_event_source *zygote_lost, *zygote_grace; /* the zygote's loss, the exit after it */
        usec_t start_time;
        usec_t next_tick;
        struct collector_stat stats[COLLECTOR_MAX];
        unsigned rounds;
};

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
        c->interval = d->opts.smart_interval;
        c->timeout = d->opts.smart_timeout;
        c->powermode = d->opts.smart_powermode;
}

/* The disk identity of the canary's baselines, asked from its prober threads: udev's record and
 * sysfs, read through duplicated descriptors and no other state, so it is thread-safe and
 * touches no device. It lives as long as the process: a prober thread abandoned in a hung
 * fdatasync() may still ask after canary_free(). */
struct diskid_src {
        int sysfs_fd, udev_fd;
};

static struct diskid_src diskid = {.sysfs_fd = -1, .udev_fd = -1};

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
        struct canary_target_config *t = xcalloc(o->n_canary + 1, sizeof(*t));

        for (size_t i = 0; i < o->n_canary; i++)
                t[i] = (struct canary_target_config){.path = o->canary[i].path,
                                                     .mode = o->canary[i].mode};
        if (diskid.sysfs_fd < 0) {
                diskid.sysfs_fd = fcntl(d->sysfs_fd, F_DUPFD_CLOEXEC, 3);
                diskid.udev_fd = d->udev_fd >= 0 ? fcntl(d->udev_fd, F_DUPFD_CLOEXEC, 3) : -1;
        }
        *c = (struct canary_config){
            .targets = t,
            .n_targets = o->n_canary,
            .interval = o->canary_interval,
            .burst = o->canary_burst,
            .size = (size_t)o->canary_size,
            .timeout = o->canary_timeout,
            .baseline_period = o->canary_baseline_period,
            .state_dir_fd = d->state_fd,
            .sysfs_fd = d->sysfs_fd,
            .disk_id = canary_disk_identity,
            .disk_id_ud = &diskid,
        };
        return t;
}

static void canary_setup(struct daemon *d)
{
        struct canary_config c;
        _cleanup_free_ struct canary_target_config *t = canary_config_from(d, &d->opts, &c);

        d->canary = canary_new(&c);
}

static void helper_export(struct daemon *d, struct mset *out)
{
        struct privsep_stats st;
        struct mfamily *f;

        if (!d->io || privsep_stats(d->io, &st) < 0)
                return;
        mset_gauge(out, "diskpulse_helper_up",
                   "Whether the privileged helper that runs device commands is alive.",
                   st.helper_up ? 1.0 : 0.0, NULL);
        mset_gauge(out, "diskpulse_helper_zygote_up",
                   "Whether the privileged zygote that starts helpers is alive; 0: diskpulse "
                   "exits for a restart after --helper.zygote-grace.",
                   st.zygote_up ? 1.0 : 0.0, NULL);
        f = mset_family(out, "diskpulse_helper_restarts_total",
                        "Privileged helpers started to replace one that died.", MT_COUNTER);
        mfamily_add_u64(out, f, "", st.helper_restarts, NULL);
        f = mset_family(out, "diskpulse_helper_requests_total",
                        "Requests sent to the privileged helper.", MT_COUNTER);
        mfamily_add_u64(out, f, "", st.requests, NULL);
        f = mset_family(out, "diskpulse_helper_timeouts_total",
                        "Requests the daemon stopped waiting for (--smart.timeout).", MT_COUNTER);
        mfamily_add_u64(out, f, "", st.timeouts, NULL);
        f = mset_family(out, "diskpulse_helper_worker_failures_total",
                        "Requests whose worker process died or was killed without answering.",
                        MT_COUNTER);
        mfamily_add_u64(out, f, "", st.worker_failures, NULL);
        mset_gauge(out, "diskpulse_helper_inflight_requests",
                   "Requests sent and not answered yet (hung devices included).",
                   (double)st.inflight, NULL);
}

/* The HTTP connection guard's counters (not in --once, which serves nothing). */
static void http_export(struct daemon *d, struct mset *out)
{
        struct connguard_stats st;
        struct mfamily *f;

        if (!d->http)
                return;
        http_server_stats(d->http, &st);
        mset_gauge(out, "diskpulse_http_connections", "HTTP connections open now.", (double)st.open,
                   NULL);
        f = mset_family(out, "diskpulse_http_connections_accepted_total",
                        "HTTP connections accepted and served.", MT_COUNTER);
        mfamily_add_u64(out, f, "", st.accepted, NULL);
        f = mset_family(out, "diskpulse_http_connections_refused_total",
                        "HTTP connections closed at once, unserved: source not allowed "
                        "(--web.allow-from), or over a connection limit.",
                        MT_COUNTER);
        mfamily_add_u64(out, f, "", st.refused_network, "reason", "network", NULL);
        mfamily_add_u64(out, f, "", st.refused_address, "reason", "address_limit", NULL);
        mfamily_add_u64(out, f, "", st.refused_limit, "reason", "total_limit", NULL);
        f = mset_family(out, "diskpulse_http_connections_closed_total",
                        "HTTP connections the daemon closed: evicted at the connection limit, past "
                        "a deadline, from a network no longer allowed, or after a 400 for a "
                        "request whose framing is unsound (RFC 9112: smuggling).",
                        MT_COUNTER);
        mfamily_add_u64(out, f, "", st.evicted, "reason", "evicted", NULL);
        mfamily_add_u64(out, f, "", st.timeout_header, "reason", "header_timeout", NULL);
        mfamily_add_u64(out, f, "", st.timeout_request, "reason", "request_timeout", NULL);
        mfamily_add_u64(out, f, "", st.timeout_idle, "reason", "idle_timeout", NULL);
        mfamily_add_u64(out, f, "", st.timeout_write, "reason", "write_timeout", NULL);
        mfamily_add_u64(out, f, "", st.closed_network, "reason", "network", NULL);
        mfamily_add_u64(out, f, "", st.closed_framing, "reason", "bad_framing", NULL);
}

static void self_export(struct daemon *d, struct mset *out)
{
        struct mfamily *f;

        mset_gauge(out, "diskpulse_build_info",
                   "A metric with a constant '1' value labeled by version and revision.", 1.0,
                   "version", DISKPULSE_VERSION, "revision", DISKPULSE_REVISION, NULL);
        f = mset_family(out, "diskpulse_collector_duration_seconds",
                        "How long the collector's last round took.", MT_GAUGE);
        for (size_t i = 0; i < COLLECTOR_MAX; i++)
                if (d->stats[i].ran)
                        mfamily_add(out, f, "", d->stats[i].duration, "collector",
                                    collector_defs[i].name, NULL);
        f = mset_family(out, "diskpulse_collector_success",
                        "Whether the collector's last round succeeded.", MT_GAUGE);
        for (size_t i = 0; i < COLLECTOR_MAX; i++)
                if (d->stats[i].ran)
                        mfamily_add(out, f, "", d->stats[i].success ? 1.0 : 0.0, "collector",
                                    collector_defs[i].name, NULL);
        process_export(out, d->start_time);
        helper_export(d, out);
        http_export(d, out);
        websec_export(out);
}

/* One round: every enabled collector, then the self metrics; returns the new snapshot. */
static struct snapshot *collect_round(struct daemon *d)
{
        struct mset *sets[COLLECTOR_MAX + 1];
        size_t n = 0;

        if (d->diskstats) {
                struct collector_stat *st = &d->stats[COLLECTOR_DISKSTATS];
                usec_t t0 = now_monotonic();
                int r = diskstats_sample(d->diskstats, t0);
                static struct ratelimit rl = {.interval = 600 * USEC_PER_SEC};

                if (r < 0 && ratelimit_ok(&rl, t0))
                        log_errno(LOG_LEVEL_ERROR, r, "cannot read diskstats", "procfs",
                                  d->opts.procfs, NULL);
                sets[n] = mset_new();
                diskstats_export(d->diskstats, sets[n++]);
                st->duration = (double)(now_monotonic() - t0) / (double)USEC_PER_SEC;
                st->success = r >= 0;
                st->ran = true;
        }
        if (d->smart) {
                struct collector_stat *st = &d->stats[COLLECTOR_SMART];
                usec_t t0 = now_monotonic();

                sets[n] = mset_new();
                smart_export(d->smart, sets[n++]);
                st->duration = (double)(now_monotonic() - t0) / (double)USEC_PER_SEC;
                st->success = d->io && privsep_helper_up(d->io);
                st->ran = true;
        }
        if (d->canary) {
                struct collector_stat *st = &d->stats[COLLECTOR_CANARY];
                usec_t t0 = now_monotonic();

                sets[n] = mset_new();
                canary_export(d->canary, sets[n]);
                st->duration = (double)(now_monotonic() - t0) / (double)USEC_PER_SEC;
                st->success = canary_targets_down(d->canary) == 0;
                st->ran = true;
                n++;
        }
        sets[n] = mset_new();
        self_export(d, sets[n++]);
        d->rounds++;
        return snapshot_new(sets, n, now_realtime());
}

static void notify_status(struct daemon *d)
{
        char buf[160];
        size_t devs = d->diskstats ? diskstats_device_count(d->diskstats) : 0;

        snprintf(buf, sizeof buf, "STATUS=Monitoring %zu device%s", devs, devs == 1 ? "" : "s");
        sd_notify(0, buf);
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct daemon *d = userdata;
        usec_t now = now_monotonic();

        (void)usec;
        publisher_publish(d->pub, collect_round(d));
        publisher_beat(d->pub, now);
        if (d->rounds % 60 == 1)
                notify_status(d);
        /* Keep the cadence (no drift); after a stall, start again from now. */
        d->next_tick += d->opts.ds_interval;
        if (d->next_tick <= now)
                d->next_tick = now + d->opts.ds_interval;
        sd_event_source_set_time(s, d->next_tick);
        /* A scraper due before the next round finds its page made. */
        (void)publisher_prepare(d->pub, now_monotonic(), d->next_tick);
        return 0;
}

/* Runs the next round soon (a device came or went). */
static void tick_soon(struct daemon *d)
{
        usec_t soon = now_monotonic() + 50 * USEC_PER_MSEC;

        if (d->tick && d->next_tick > soon) {
                d->next_tick = soon;
                sd_event_source_set_time(d->tick, soon);
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
                if (d->diskstats)
                        diskstats_invalidate(d->diskstats, ev.name);
                came_or_went |= strcmp(ev.action, "add") == 0 || strcmp(ev.action, "remove") == 0;
        }
        /* A "change" (udev sends one whenever a written disk is closed) only refreshes facts at
         * the next regular sample; a device that came or went is sampled right away. */
        if (came_or_went)
                tick_soon(d);
        return 0;
}

static int open_roots(struct daemon *d, const struct dp_options *o)
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

static void setup_collectors(struct daemon *d)
{
        bool live = strcmp(d->opts.sysfs, "/sys") == 0 &&
                    strcmp(d->opts.udev_data, "/run/udev/data") == 0 && !d->opts.once;

        if (d->opts.collector[COLLECTOR_CANARY])
                open_state_dir(d);
        d->devsrc = live ? devsrc_udev_new(d->sysfs_fd) : NULL;
        if (!d->devsrc)
                d->devsrc = devsrc_files_new(d->sysfs_fd, d->udev_fd);
        if (d->opts.collector[COLLECTOR_DISKSTATS]) {
                struct diskstats_config c;
                diskstats_config_from(d, &c);
                d->diskstats = diskstats_new(&c);
        }
        if (d->opts.collector[COLLECTOR_SMART] && d->io) {
                struct smart_config c;
                smart_config_from(d, &c);
                d->smart = smart_new(&c);
        }
        if (d->opts.collector[COLLECTOR_CANARY])
                canary_setup(d);
}

/* Descriptors the daemon needs besides its connections (roots, sockets, helper, canary files,
 * libmicrohttpd's own). */
#define FD_RESERVE 64

/* The HTTP limits of the options, the connection limit within what the open-file limit allows.
 * Returns the allow-list for lim->allow (the caller frees it). */
static struct cidr *http_limits_from(const struct dp_options *o, struct connguard_config *lim)
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

/* A daemon that never select()s can use every descriptor the hard limit allows; the soft limit
 * (often 1024) is only there for old programs that do (systemd.exec(5), LimitNOFILE=). */
static void raise_fd_limit(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        log_errno(LOG_LEVEL_DEBUG, -errno, "cannot raise the open-file limit",
                                  NULL);
        }
}

/* SIGHUP: read flags and config again; apply what can change while running. */
static void reload(struct daemon *d)
{
        struct dp_options n;
        char err[512];
        struct namefilter *filter = NULL;
        struct websec *web = NULL;

        if (options_parse(d->argc, d->argv, &n, err, sizeof err) < 0) {
                log_error("reload failed, keeping the running configuration", "reason", err);
                return;
        }
        if (options_device_filter(&n, &filter, err, sizeof err) < 0) {
                log_error("reload failed: bad device filter, keeping the running configuration",
                          "reason", err);
                options_free(&n);
                return;
        }
        if (websec_load(n.web_config_file, &web, err, sizeof err) < 0) {
                log_error("reload failed, keeping the running configuration", "reason", err);
                namefilter_free(filter);
                options_free(&n);
                return;
        }
        /* the option table says what a reload applies */
        if (options_reload(&d->opts, &n, NULL) > 0)
                log_warn("listen addresses and paths change only on restart");

        namefilter_free(d->filter);
        d->filter = filter;
        log_setup(n.log_level, n.log_format);
        if (d->http) {
                struct connguard_config lim;
                _cleanup_free_ struct cidr *allow = http_limits_from(&n, &lim);
                http_server_reconfigure(d->http, &lim);
        }

        if (d->opts.collector[COLLECTOR_DISKSTATS]) {
                struct diskstats_config c;
                diskstats_config_from(d, &c);
                if (d->diskstats)
                        diskstats_reconfigure(d->diskstats, &c);
                else
                        d->diskstats = diskstats_new(&c);
        } else {
                d->diskstats = diskstats_free(d->diskstats);
                d->stats[COLLECTOR_DISKSTATS].ran = false;
        }
        if (d->opts.collector[COLLECTOR_SMART] && d->io) {
                struct smart_config c;
                smart_config_from(d, &c);
                if (d->smart) {
                        smart_reconfigure(d->smart, &c);
                } else {
                        d->smart = smart_new(&c);
                        if (smart_start(d->smart) < 0)
                                d->smart = smart_free(d->smart);
                }
        } else {
                d->smart = smart_free(d->smart);
                d->stats[COLLECTOR_SMART].ran = false;
        }
        if (d->opts.collector[COLLECTOR_CANARY]) {
                struct canary_config c;
                _cleanup_free_ struct canary_target_config *t = canary_config_from(d, &d->opts, &c);
                int r;
                if (d->canary) {
                        r = canary_reconfigure(d->canary, &c);
                } else {
                        open_state_dir(d);
                        c.state_dir_fd = d->state_fd;
                        d->canary = canary_new(&c);
                        r = canary_start(d->canary);
                }
                if (r < 0)
                        log_errno(LOG_LEVEL_ERROR, r, "cannot start a canary thread", NULL);
        } else {
                d->canary = canary_free(d->canary);
                d->stats[COLLECTOR_CANARY].ran = false;
        }
        websec_install(web);
        options_free(&n);
        d->next_tick = now_monotonic();
        if (d->tick)
                sd_event_source_set_time(d->tick, d->next_tick);
        log_info("configuration reloaded");
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        struct daemon *d = userdata;

        (void)s;
        if (si->ssi_signo == SIGHUP) {
                sd_notify(0, "RELOADING=1");
                reload(d);
                sd_notify(0, "READY=1");
                notify_status(d);
                return 0;
        }
        log_info("shutting down", "signal", strsignal((int)si->ssi_signo));
        sd_notify(0, "STOPPING=1");
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

/* Exit status when the zygote is lost (EX_TEMPFAIL): the unit's Restart=on-failure starts a new
 * daemon, with a new zygote; diskpulse.socket keeps the listening socket meanwhile. */
#define EXIT_ZYGOTE_LOST 75

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
        d->next_tick = now_monotonic();
        if (d->tick)
                sd_event_source_set_time(d->tick, d->next_tick);
        r = sd_event_add_time_relative(sd_event_source_get_event(s), &d->zygote_grace,
                                       CLOCK_MONOTONIC, d->opts.zygote_grace, USEC_PER_MSEC,
                                       on_zygote_grace, d);
        if (r < 0)
                return sd_event_exit(sd_event_source_get_event(s), EXIT_ZYGOTE_LOST);
        return 0;
}

static int get_listen_fds(struct daemon *d, int **fds, size_t *n)
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

static int run_once(struct daemon *d)
{
        struct snapshot *snap;

        if (d->canary) {
                int r = canary_start(d->canary);
                if (r < 0)
                        log_errno(LOG_LEVEL_ERROR, r, "cannot start a canary thread", NULL);
        }
        if (d->smart)
                smart_read_all_now(d->smart);
        /* One cycle per target (the spaced probe and its burst); a hung probe shows as stuck
         * after --canary.timeout and ends its cycle. */
        if (d->canary)
                (void)canary_wait_first(d->canary,
                                        (1 + d->opts.canary_burst) * d->opts.canary_timeout +
                                            100 * USEC_PER_MSEC);
        snap = collect_round(d);
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

static int run_daemon(struct daemon *d)
{
        int *fds = d->listen_fds;
        size_t nfds = d->n_listen_fds;
        int r, err = 0;
        _cleanup_free_ struct cidr *allow = NULL;
        struct http_config hc = {
            .health_stale = 2 * d->opts.ds_interval + 10 * USEC_PER_SEC,
            .version = DISKPULSE_VERSION,
            .revision = DISKPULSE_REVISION,
        };

        if (d->smart && (r = smart_start(d->smart)) < 0)
                log_errno(LOG_LEVEL_ERROR, r, "cannot start the SMART thread", NULL);
        if (d->canary && (r = canary_start(d->canary)) < 0)
                log_errno(LOG_LEVEL_ERROR, r, "cannot start a canary thread", NULL);

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
        publisher_publish(d->pub, collect_round(d));
        publisher_beat(d->pub, now_monotonic());
        d->next_tick = now_monotonic() + d->opts.ds_interval;
        r = sd_event_add_time(d->event, &d->tick, CLOCK_MONOTONIC, d->next_tick, USEC_PER_MSEC,
                              on_tick, d);
        if (r < 0)
                return log_errno(LOG_LEVEL_ERROR, r, "cannot arm the sampling timer", NULL);
        sd_event_source_set_enabled(d->tick, SD_EVENT_ON);

        allow = http_limits_from(&d->opts, &hc.limits);
        d->http = http_server_new(fds, nfds, &hc, d->pub, &err);
        d->n_listen_fds = 0; /* the server owns them now, closed or not */
        if (!d->http)
                return log_errno(LOG_LEVEL_ERROR, err, "cannot start the HTTP server", NULL);
        for (size_t i = 0; i < nfds; i++) {
                char where[80];
                log_info("listening", "address", listen_describe(fds[i], where, sizeof where));
        }
        sd_notify(0, "READY=1");
        notify_status(d);
        log_info("diskpulse started", "version", DISKPULSE_VERSION);

        r = sd_event_loop(d->event);
        d->http = http_server_free(d->http);
        if (r < 0)
                return log_errno(LOG_LEVEL_ERROR, r, "event loop failed", NULL);
        return r; /* 0, or EXIT_ZYGOTE_LOST */
}

/* Forks the privileged helper, which keeps only the capabilities device commands need, and
 * drops every capability of this process, the one that parses HTTP. Before any thread. */
static int start_helper(struct daemon *d)
{
        struct privsep_config pc = {.dev_dir = d->opts.dev};
        int r = privsep_start(&pc, &d->io);

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

static int load_web_config(struct daemon *d)
{
        struct websec *web = NULL;
        char err[512];
        int r = websec_load(d->opts.web_config_file, &web, err, sizeof err);

        if (r < 0) {
                /* as a bad flag or config line: on stderr, exit status 2 */
                fprintf(stderr, "diskpulse: %s\n", err);
                return r;
        }
        websec_install(web);
        return 0;
}

static void daemon_done(struct daemon *d)
{
        d->http = http_server_free(d->http);
        /* A SMART read may be waiting on a hung device: wake it, so shutdown takes no longer
         * than a second. */
        if (d->io && d->io->ops->cancel)
                d->io->ops->cancel(d->io);
        d->smart = smart_free(d->smart);
        /* Waits at most a few hundred ms: a probe blocked in the kernel is abandoned. */
        d->canary = canary_free(d->canary);
        if (d->state_fd >= 0)
                close(d->state_fd);
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
        d->monitor = sd_event_source_unref(d->monitor);
        d->event = sd_event_unref(d->event);
        d->diskstats = diskstats_free(d->diskstats);
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

/* --canary.reset-reference=PATH: the state file edited for one target, then exit. */
static int reset_reference(const struct dp_options *o)
{
        char err[512];
        int fd = open(o->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

        if (fd < 0) {
                fprintf(stderr, "diskpulse: cannot open the state directory %s: %s\n", o->state_dir,
                        strerror(errno));
                return 1;
        }
        r = canary_reset_reference(fd, o->canary_reset_reference, stdout, err, sizeof err);
        close(fd);
        if (r <= 0) {
                fprintf(stderr, "diskpulse: %s\n", err);
                return 1;
        }
        return 0;
}

/* Flags and config file into *o, checked; what --help, --version and --check-config print.
 * Returns -1 to go on, else the exit status. With capabilities, prestart_run() calls it in a
 * child that has none. */
static int front(void *ud, struct dp_options *o)
{
        struct daemon *d = ud;
        char err[512];

        if (options_parse(d->argc, d->argv, o, err, sizeof err) < 0) {
                fprintf(stderr, "diskpulse: %s\n", err);
                return 2;
        }
        if (o->help) {
                options_help(stdout);
                return 0;
        }
        if (o->version) {
                printf("diskpulse version %s (revision %s)\n", DISKPULSE_VERSION,
                       DISKPULSE_REVISION);
                return 0;
        }
        if (options_device_filter(o, &d->filter, err, sizeof err) < 0) {
                fprintf(stderr, "diskpulse: invalid device filter: %s\n", err);
                return 2;
        }
        if (o->canary_reset_reference)
                return reset_reference(o);
        if (o->check_config) {
                struct websec *web = NULL;

                /* The web config is read as the daemon reads it: without capabilities (the
                 * child of prestart_run() has none already). */
                (void)privsep_drop_all();
                if (websec_load(o->web_config_file, &web, err, sizeof err) < 0) {
                        fprintf(stderr, "diskpulse: %s\n", err);
                        return 2;
                }
                options_dump(o, stdout);
                websec_describe(web, stdout);
                websec_free(web);
                printf("# configuration OK\n");
                return 0;
        }
        return -1;
}

/* After a start with capabilities (which are gone now): flags and file read by this process
 * itself, for everything; they must still ask for what was set up from the child's facts. */
static int reparse(struct daemon *d)
{
        struct dp_options facts = d->opts;
        int st;

        memset(&d->opts, 0, sizeof d->opts);
        st = front(d, &d->opts);
        if (st < 0 && prestart_same(&facts, &d->opts) < 0)
                st = 1;
        options_free(&facts);
        if (st >= 0)
                log_error("the flags or the config file changed while diskpulse started; start "
                          "it again");
        return st >= 0 ? -ESTALE : 0;
}

int main(int argc, char **argv)
{
        struct daemon d = {.argc = argc,
                           .argv = argv,
                           .procfs_fd = -1,
                           .sysfs_fd = -1,
                           .udev_fd = -1,
                           .state_fd = -1};
        bool privileged = prestart_needed();
        sigset_t mask;
        int r, st;

        malloc_setup();
        d.start_time = now_realtime();
        log_setup(LOG_LEVEL_INFO, LOG_FORMAT_LOGFMT);
        /* With capabilities, no parser here until they are dropped (prestart.h). */
        st = privileged ? prestart_run(front, &d, &d.opts) : front(&d, &d.opts);
        if (st >= 0) {
                daemon_done(&d);
                return st;
        }
        log_setup(d.opts.log_level, d.opts.log_format);

        /* Signals are handled by the event loop: block them before any thread starts. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        raise_fd_limit();

        d.pub = publisher_new();
        /* Bind before giving up privileges (a port below 1024 needs them). */
        r = d.opts.once ? 0 : get_listen_fds(&d, &d.listen_fds, &d.n_listen_fds);
        if (r >= 0)
                r = start_helper(&d);
        if (r >= 0 && privileged)
                r = reparse(&d);
        if (r >= 0)
                r = open_roots(&d, &d.opts);
        /* The web config and its keys are read without capabilities, at start as on SIGHUP,
         * and never by the helper, which was forked before. */
        if (r >= 0 && !d.opts.once && load_web_config(&d) < 0) {
                daemon_done(&d);
                return 2;
        }
        if (r >= 0) {
                setup_collectors(&d);
                r = d.opts.once ? run_once(&d) : run_daemon(&d);
        }
        daemon_done(&d);
        return r < 0 ? 1 : r;
}
