/* SIGHUP: the flags and the config file read again, and what may change applied while running:
 * the options, the log, the HTTP limits, every collector (daemon_collectors_apply()), the web config;
 * whether it succeeded, as a metric. */
#include "daemon.h"
#include "http.h"
#include "log.h"
#include "websec.h"

bool daemon_helper_allows(const struct daemon *d, size_t id)
{
        return (!registry_def(id)->device_io || d->helper_devices) &&
               (!registry_def(id)->privileged || d->helper_function[id]);
}

/* A collector turned on by a reload whose privileged work the helper was not given at start
 * (its capabilities were dropped for good, bounding set included): stays off until a restart,
 * said on every reload that asks for it, like a listen address. */
static void refuse_unprivileged(struct daemon *d)
{
        for (size_t i = 0; i < registry_count(); i++) {
                if (!d->opts.collector[i] || daemon_helper_allows(d, i))
                        continue;
                d->opts.collector[i] = false;
                log_warn("a collector turned on by reload needs privileges diskpulse dropped at "
                         "start (it was off then); it stays off until diskpulse is restarted",
                         "collector", registry_def(i)->name, "needs",
                         registry_def(i)->device_io ? "CAP_SYS_ADMIN, CAP_SYS_RAWIO"
                                                    : "CAP_SYS_ADMIN",
                         NULL);
        }
}

/* SIGHUP: read flags and config again; apply what can change while running. */
void daemon_reload(struct daemon *d)
{
        struct dp_options n;
        char err[512];
        struct namefilter *filter = NULL;
        struct websec *web = NULL;

        if (options_parse_reload(d->argc, d->argv, &d->opts, &n, err, sizeof err) < 0) {
                log_error("reload failed, keeping the running configuration", "reason", err);
                d->reload_failed = true;
                return;
        }
        if (options_device_filter(&n, &filter, err, sizeof err) < 0) {
                log_error("reload failed: bad device filter, keeping the running configuration",
                          "reason", err);
                options_free(&n);
                d->reload_failed = true;
                return;
        }
        if (websec_load(n.web_config_file, &web, err, sizeof err) < 0) {
                log_error("reload failed, keeping the running configuration", "reason", err);
                namefilter_free(filter);
                options_free(&n);
                d->reload_failed = true;
                return;
        }
        /* the option table says what a reload applies */
        if (options_reload(&d->opts, &n, NULL) > 0)
                log_warn("listen addresses and paths change only on restart");
        refuse_unprivileged(d);

        namefilter_free(d->filter);
        d->filter = filter;
        log_setup(n.log_level, n.log_format);
        if (d->http) {
                struct connguard_config lim;
                _cleanup_free_ struct cidr *allow = daemon_http_limits(&n, &lim);
                http_server_reconfigure(d->http, &lim, daemon_health_stale(&n));
        }

        daemon_collectors_apply(d, true);
        d->web = websec_install(d->web, web);
        options_free(&n);
        d->reload_failed = false;
        d->config_loaded = now_realtime();
        log_info("configuration reloaded");
}

void daemon_reload_export(const struct daemon *d, struct mset *out)
{
        mset_gauge(
            out, "diskpulse_config_reload_success",
            "Whether the last configuration reload (SIGHUP) succeeded: 0 when it was refused "
            "and the daemon runs on with the configuration loaded before (the log says why); "
            "1 at start.",
            d->reload_failed ? 0.0 : 1.0, NULL);
        mset_gauge(out, "diskpulse_config_reload_success_timestamp_seconds",
                   "When the configuration running now was loaded (at start or by the last "
                   "successful reload), in seconds since the epoch.",
                   (double)d->config_loaded / (double)USEC_PER_SEC, NULL);
}
