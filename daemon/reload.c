/* SIGHUP: the flags and the config file read again, and what may change applied while running:
 * the options, the log, the HTTP limits, every collector (daemon_collectors_apply()), the web config. */
#include <string.h>

#include "daemon.h"
#include "http.h"
#include "log.h"
#include "websec.h"

static void swap_str(char **a, char **b)
{
        char *t = *a;
        *a = *b;
        *b = t;
}

static bool str_differs(const char *a, const char *b)
{
        return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

/* SIGHUP: read flags and config again; apply what can change while running. */
void daemon_reload(struct daemon *d)
{
        struct dp_options n;
        char err[512];
        regex_t inc, exc;
        bool has_inc, has_exc, restart = false;
        struct websec *web = NULL;

        if (options_parse(d->argc, d->argv, &n, err, sizeof err) < 0) {
                log_error("reload failed, keeping the running configuration", "reason", err);
                return;
        }
        if (daemon_compile_filters(d, &n, &inc, &has_inc, &exc, &has_exc) < 0) {
                log_error("reload failed: bad device filter, keeping the running configuration");
                options_free(&n);
                return;
        }
        if (websec_load(n.web_config_file, &web, err, sizeof err) < 0) {
                log_error("reload failed, keeping the running configuration", "reason", err);
                if (has_inc)
                        regfree(&inc);
                if (has_exc)
                        regfree(&exc);
                options_free(&n);
                return;
        }
        restart = n.n_listen != d->opts.n_listen || str_differs(n.procfs, d->opts.procfs) ||
                  str_differs(n.sysfs, d->opts.sysfs) ||
                  str_differs(n.udev_data, d->opts.udev_data) ||
                  str_differs(n.state_dir, d->opts.state_dir) ||
                  n.systemd_socket != d->opts.systemd_socket;
        for (size_t i = 0; !restart && i < n.n_listen; i++)
                restart = strcmp(n.listen[i], d->opts.listen[i]) != 0;
        if (restart)
                log_warn("listen addresses and paths change only on restart");

        if (d->have_include)
                regfree(&d->include);
        if (d->have_exclude)
                regfree(&d->exclude);
        d->include = inc;
        d->exclude = exc;
        d->have_include = has_inc;
        d->have_exclude = has_exc;
        swap_str(&d->opts.device_include, &n.device_include);
        swap_str(&d->opts.device_exclude, &n.device_exclude);
        d->opts.ds_interval = n.ds_interval;
        d->opts.ds_window = n.ds_window;
        d->opts.zygote_grace = n.zygote_grace;
        {
                struct dp_canary_path *tmp = d->opts.canary;
                size_t k = d->opts.n_canary;
                d->opts.canary = n.canary;
                d->opts.n_canary = n.n_canary;
                n.canary = tmp;
                n.n_canary = k;
        }
        d->opts.canary_interval = n.canary_interval;
        d->opts.canary_burst = n.canary_burst;
        d->opts.canary_timeout = n.canary_timeout;
        d->opts.canary_size = n.canary_size;
        d->opts.log_level = n.log_level;
        d->opts.log_format = n.log_format;
        log_setup(n.log_level, n.log_format);
        if (d->http) {
                struct connguard_config lim;
                _cleanup_free_ struct cidr *allow = daemon_http_limits(&n, &lim);
                http_server_reconfigure(d->http, &lim);
        }
        d->opts.max_connections = n.max_connections;
        d->opts.max_per_address = n.max_per_address;
        d->opts.header_timeout = n.header_timeout;
        d->opts.request_timeout = n.request_timeout;
        d->opts.idle_timeout = n.idle_timeout;
        {
                char **tmp = d->opts.allow_from;
                size_t k = d->opts.n_allow_from;
                d->opts.allow_from = n.allow_from;
                d->opts.n_allow_from = n.n_allow_from;
                n.allow_from = tmp;
                n.n_allow_from = k;
        }

        for (size_t i = 0; i < COLLECTOR_MAX; i++)
                d->opts.collector[i] = n.collector[i];
        daemon_collectors_apply(d, true);
        swap_str(&d->opts.web_config_file, &n.web_config_file);
        websec_install(web);
        options_free(&n);
        d->next_tick = now_monotonic();
        if (d->tick)
                sd_event_source_set_time(d->tick, d->next_tick);
        log_info("configuration reloaded");
}
