/* What runs before anything starts: the flags and the config file parsed and checked, and
 * what --help, --version, --check-config and --canary.reset-reference print and do. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "canary_reset.h"
#include "daemon.h"
#include "log.h"
#include "prestart.h"
#include "privsep.h"
#include "websec.h"

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
int daemon_front(void *ud, struct dp_options *o)
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
int daemon_reparse(struct daemon *d)
{
        struct dp_options facts = d->opts;
        int st;

        memset(&d->opts, 0, sizeof d->opts);
        st = daemon_front(d, &d->opts);
        if (st < 0 && prestart_same(&facts, &d->opts) < 0)
                st = 1;
        options_free(&facts);
        if (st >= 0)
                log_error("the flags or the config file changed while diskpulse started; start "
                          "it again");
        return st >= 0 ? -ESTALE : 0;
}
