/* What runs before anything starts: the flags and the config file parsed and checked, and
 * what --help, --version, --check-config and a collector's one-shot command print and do. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "fsroot.h"
#include "log.h"
#include "prestart.h"
#include "privsep.h"
#include "websec.h"

/* The one-shot command of collector id (collector_def.command, the canary's state-file edits)
 * instead of the daemon: its exit status. It gets the roots a disk's identity is read from
 * (--path.sysfs, --path.udev.data). */
static int run_command(const struct dp_options *o, int id)
{
        struct diskid_src ids;
        struct collector_command_env env;
        int st, sysfs_fd = root_open(o->sysfs), udev_fd = root_open(o->udev_data);

        daemon_diskid_init(&ids, sysfs_fd, udev_fd);
        env = (struct collector_command_env){
            .state_dir = o->state_dir,
            .sysfs_fd = sysfs_fd < 0 ? -1 : sysfs_fd,
            .disk_ids = &ids.ids,
        };
        st = registry_def((size_t)id)->command(o->collector_opts[id], &env);
        if (sysfs_fd >= 0)
                close(sysfs_fd);
        if (udev_fd >= 0)
                close(udev_fd);
        return st;
}

/* Flags and config file into *o, checked; what --help, --version and --check-config print.
 * Returns -1 to go on, else the exit status. With capabilities, prestart_run() calls it in a
 * child that has none. */
int daemon_front(void *ud, struct dp_options *o)
{
        struct daemon *d = ud;
        char err[512];
        int id;

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
        /* a collector's one-shot command (a state file's edit) instead of the daemon */
        if ((id = registry_commanded(o->collector_opts)) >= 0)
                return run_command(o, id);
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
