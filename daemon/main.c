/* diskpulse: main(), the start-up order (ARCHITECTURE.md); the work is in daemon.c (lifecycle
 * and event loop), round.c (the collection round), settings.c, reload.c and cli.c. */
#include <pthread.h>
#include <signal.h>

#include "daemon.h"
#include "log.h"
#include "prestart.h"

int main(int argc, char **argv)
{
        /* static: it lives as long as the process (the canary's disk identity, struct
         * diskid_src) */
        static struct daemon d;
        bool privileged = prestart_needed();
        sigset_t mask;
        int r, st;

        daemon_init(&d, argc, argv);
        malloc_setup();
        d.start_time = now_realtime();
        log_setup(LOG_LEVEL_INFO, LOG_FORMAT_LOGFMT);
        /* With capabilities, no parser here until they are dropped (prestart.h). */
        st = privileged ? prestart_run(daemon_front, &d, &d.opts) : daemon_front(&d, &d.opts);
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
        daemon_raise_fd_limit();

        d.pub = publisher_new();
        /* Bind before giving up privileges (a port below 1024 needs them). */
        r = d.opts.once ? 0 : daemon_listen_fds(&d, &d.listen_fds, &d.n_listen_fds);
        if (r >= 0)
                r = daemon_start_helper(&d);
        if (r >= 0 && privileged)
                r = daemon_reparse(&d);
        if (r >= 0)
                r = daemon_open_roots(&d, &d.opts);
        /* The web config and its keys are read without capabilities, at start as on SIGHUP,
         * and never by the helper, which was forked before. */
        if (r >= 0 && !d.opts.once && daemon_load_web_config(&d) < 0) {
                daemon_done(&d);
                return 2;
        }
        d.config_loaded = now_realtime(); /* diskpulse_config_reload_success_timestamp_seconds */
        if (r >= 0)
                r = daemon_setup_collectors(&d);
        if (r >= 0)
                r = d.opts.once ? daemon_run_once(&d) : daemon_run(&d);
        daemon_done(&d);
        return r < 0 ? 1 : r;
}
