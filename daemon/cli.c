/* What runs before anything starts: the flags and the config file parsed and checked, and
 * what --help, --version, --check-config and --canary.reset-reference print and do. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "canary_records.h"
#include "canary_reset.h"
#include "daemon.h"
#include "fsroot.h"
#include "log.h"
#include "prestart.h"
#include "privsep.h"
#include "websec.h"

/* Opens the state directory for an edit or an export: 1 (the sentence printed) when it
 * cannot. */
static int state_dir_open(const struct dp_options *o, int *ret)
{
        int fd = open(o->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0) {
                fprintf(stderr, "diskpulse: cannot open the state directory %s: %s\n", o->state_dir,
                        strerror(errno));
                return 1;
        }
        *ret = fd;
        return 0;
}

/* The roots a disk's identity is read from (--path.sysfs, --path.udev.data). */
struct id_roots {
        int sysfs_fd, udev_fd;
};

/* A disk's identity as the state file keys it: "wwn:..." or "serial:...". */
static int disk_identity(const struct id_roots *roots, const char *device, char *buf, size_t size)
{
        char wwn[128], serial[128];
        int r = daemon_disk_facts(roots->sysfs_fd, roots->udev_fd, device, wwn, sizeof wwn, serial,
                                  sizeof serial);

        return r < 0 ? r : canary_disk_id(buf, size, wwn, serial);
}

/* Whether a whole disk of this identity is on this host (a block device of sysfs). */
static bool disk_present(void *ud, const char *disk)
{
        const struct id_roots *roots = ud;
        struct dirent *e;
        bool found = false;
        DIR *dir;
        int fd = openat(roots->sysfs_fd, "block", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0 || !(dir = fdopendir(fd))) {
                if (fd >= 0)
                        close(fd);
                return false;
        }
        while (!found && (e = readdir(dir))) {
                char id[CANARY_DISK_ID_MAX];
                if (e->d_name[0] != '.' && disk_identity(roots, e->d_name, id, sizeof id) == 0)
                        found = strcmp(id, disk) == 0;
        }
        closedir(dir);
        return found;
}

static void roots_open(const struct dp_options *o, struct id_roots *roots)
{
        roots->sysfs_fd = root_open(o->sysfs);
        roots->udev_fd = root_open(o->udev_data);
}

static void roots_close(struct id_roots *roots)
{
        if (roots->sysfs_fd >= 0)
                close(roots->sysfs_fd);
        if (roots->udev_fd >= 0)
                close(roots->udev_fd);
}

/* The state directory's edits and export (collectors/canary/canary_reset.h), then exit:
 * --canary.reset-reference, --canary.export-records, --canary.import-records. */
static int state_edit(const struct dp_options *o)
{
        _cleanup_free_ char *text = NULL;
        struct id_roots roots = {-1, -1};
        char err[1024] = "", disk[CANARY_DISK_ID_MAX];
        size_t len = 0;
        int fd, r;

        if (state_dir_open(o, &fd) != 0)
                return 1;
        if (o->canary_reset_reference) {
                r = canary_reset_reference(fd, o->canary_reset_reference, stdout, err, sizeof err);
        } else if (o->canary_export) {
                /* a device name (sdb, nvme0n1) or an identity as the file has it */
                if (strchr(o->canary_export, ':')) {
                        (void)strscpy(disk, o->canary_export, sizeof disk);
                        r = 0;
                } else {
                        roots_open(o, &roots);
                        r = roots.sysfs_fd < 0
                                ? -ENOENT
                                : disk_identity(&roots, o->canary_export, disk, sizeof disk);
                        if (r < 0)
                                snprintf(err, sizeof err,
                                         "no identity (WWN or serial) known for the device %s: "
                                         "%s",
                                         o->canary_export, strerror(-r));
                }
                if (r == 0)
                        r = canary_export_records(fd, disk, stdout, err, sizeof err);
        } else {
                r = strcmp(o->canary_import, "-") == 0
                        ? read_fd_all(STDIN_FILENO, CANARY_STATE_MAX_BYTES, &text, &len)
                        : read_file_at(AT_FDCWD, o->canary_import, CANARY_STATE_MAX_BYTES, &text,
                                       &len);
                if (r < 0) {
                        snprintf(err, sizeof err, "cannot read %s: %s", o->canary_import,
                                 strerror(-r));
                } else {
                        roots_open(o, &roots);
                        r = canary_import_records(fd, text, len, o->canary_import_path,
                                                  disk_present, &roots, stdout, err, sizeof err);
                }
        }
        roots_close(&roots);
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
        if (o->canary_import_path && !o->canary_import) {
                fprintf(stderr, "diskpulse: --canary.import-path needs --canary.import-records\n");
                return 2;
        }
        if (!!o->canary_reset_reference + !!o->canary_export + !!o->canary_import > 1) {
                fprintf(stderr, "diskpulse: --canary.reset-reference, --canary.export-records "
                                "and --canary.import-records are used one at a time\n");
                return 2;
        }
        if (o->canary_reset_reference || o->canary_export || o->canary_import)
                return state_edit(o);
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
