/* The canary's one-shot commands (collector_def.command), run instead of the daemon: the state
 * file's edits and export (canary_reset.h) with their checks and messages, the disk named by a
 * device or its identity, the disks on this host from sysfs and the daemon's identity facts. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "canary_collector.h"
#include "canary_records.h"
#include "canary_reset.h"
#include "canary_target.h"
#include "fsroot.h"

bool canary_commanded(const void *opts)
{
        const struct canary_options *o = opts;

        return o->reset_reference || o->export_disk || o->import_file || o->import_path;
}

/* Whether a whole disk of this identity is on this host (a block device of sysfs). */
static bool disk_present(void *ud, const char *disk)
{
        const struct collector_command_env *env = ud;
        struct dirent *e;
        bool found = false;
        DIR *dir;
        int fd = openat(env->sysfs_fd, "block", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0 || !(dir = fdopendir(fd))) {
                if (fd >= 0)
                        close(fd);
                return false;
        }
        while (!found && (e = readdir(dir))) {
                char id[CANARY_DISK_ID_MAX];
                if (e->d_name[0] != '.' &&
                    canary_collector_disk_id((void *)env->disk_ids, e->d_name, id, sizeof id) == 0)
                        found = strcmp(id, disk) == 0;
        }
        closedir(dir);
        return found;
}

/* The disk whose records the canary would use at the directory path, as a prober finds it
 * (canary_host.c's resolve, then canary_update_key()): the filesystem's device in sysfs, its
 * one disk (a dm/md device over several: itself), that disk's identity. */
static int path_disk(void *ud, const char *path, char *disk, size_t disksz, char *dev, size_t devsz,
                     char *why, size_t whysz)
{
        const struct collector_command_env *env = ud;
        struct canary_backing b;
        struct stat st;
        const char *name;
        int r;

        if (stat(path, &st) < 0) {
                r = -errno;
                if (r == -ENOENT)
                        snprintf(why, whysz,
                                 "it does not exist here (mount the disk's filesystem first; "
                                 "--canary.import-path=DIR names the directory the canary "
                                 "probes there)");
                else
                        snprintf(why, whysz, "cannot look at it: %s", strerror(-r));
                return r;
        }
        if (!S_ISDIR(st.st_mode)) {
                snprintf(why, whysz, "it is not a directory (a canary target is one)");
                return -ENOTDIR;
        }
        if (env->sysfs_fd < 0) {
                snprintf(why, whysz,
                         "its disk cannot be told: sysfs cannot be opened at --path.sysfs");
                return -ENOENT;
        }
        r = canary_resolve(env->sysfs_fd, st.st_dev, &b);
        if (r == -ENODEV) {
                snprintf(why, whysz,
                         "its filesystem has no block device of its own (tmpfs, overlayfs, "
                         "btrfs over several disks, NFS...), so the canary keeps no records "
                         "there");
                return r;
        }
        if (r < 0) {
                snprintf(why, whysz, "its disk cannot be told: %s", canary_resolve_reason(r));
                return r;
        }
        name = canary_backing_key_device(&b);
        (void)strscpy(dev, name, devsz);
        r = canary_collector_disk_id((void *)env->disk_ids, name, disk, disksz);
        if (r < 0) {
                snprintf(why, whysz,
                         "it is on %s, which has no identity (WWN or serial), so the canary "
                         "keeps no records for it",
                         name);
                return r;
        }
        return 0;
}

/* --canary.export-records: a device name (sdb, nvme0n1) or an identity as the file has it. */
static int export_records(int fd, const char *what, const struct collector_command_env *env,
                          char *err, size_t errsz)
{
        char disk[CANARY_DISK_ID_MAX];
        int r = 0;

        if (strchr(what, ':')) {
                (void)strscpy(disk, what, sizeof disk);
        } else {
                r = env->sysfs_fd < 0
                        ? -ENOENT
                        : canary_collector_disk_id((void *)env->disk_ids, what, disk, sizeof disk);
                if (r < 0) {
                        snprintf(err, errsz,
                                 "no identity (WWN or serial) known for the device %s: %s", what,
                                 strerror(-r));
                        return r;
                }
        }
        return canary_export_records(fd, disk, stdout, err, errsz);
}

/* --canary.import-records: a file, "-" for standard input; the disk must be on this host. */
static int import_records(int fd, const struct canary_options *o,
                          const struct collector_command_env *env, char *err, size_t errsz)
{
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = strcmp(o->import_file, "-") == 0
                    ? read_fd_all(STDIN_FILENO, CANARY_STATE_MAX_BYTES, &text, &len)
                    : read_file_at(AT_FDCWD, o->import_file, CANARY_STATE_MAX_BYTES, &text, &len);

        if (r < 0) {
                snprintf(err, errsz, "cannot read %s: %s", o->import_file, strerror(-r));
                return r;
        }
        return canary_import_records(fd, text, len, o->import_path,
                                     &(struct canary_import_host){.present = disk_present,
                                                                  .path_disk = path_disk,
                                                                  .ud = (void *)env},
                                     stdout, err, errsz);
}

int canary_command(const void *opts, const struct collector_command_env *env)
{
        const struct canary_options *o = opts;
        char err[1024] = "";
        int fd, r;

        if (o->import_path && !o->import_file) {
                fprintf(stderr, "diskpulse: --canary.import-path needs --canary.import-records\n");
                return 2;
        }
        if (!!o->reset_reference + !!o->export_disk + !!o->import_file > 1) {
                fprintf(stderr, "diskpulse: --canary.reset-reference, --canary.export-records "
                                "and --canary.import-records are used one at a time\n");
                return 2;
        }
        fd = open(env->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                fprintf(stderr, "diskpulse: cannot open the state directory %s: %s\n",
                        env->state_dir, strerror(errno));
                return 1;
        }
        if (o->reset_reference)
                r = canary_reset_reference(fd, o->reset_reference, stdout, err, sizeof err);
        else if (o->export_disk)
                r = export_records(fd, o->export_disk, env, err, sizeof err);
        else
                r = import_records(fd, o, env, err, sizeof err);
        close(fd);
        if (r <= 0) {
                fprintf(stderr, "diskpulse: %s\n", err);
                return 1;
        }
        return 0;
}
