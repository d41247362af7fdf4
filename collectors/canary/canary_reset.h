/* The operator's edits of the canary's state file, made while no daemon uses the state
 * directory (a running one holds its lock, statefile_lock(), and would write its own records
 * back over the edit, so each edit takes the lock itself and refuses while another process
 * holds it): --canary.reset-reference=PATH says "this disk's present speed is its new normal"
 * for one path, where deleting the state file would wipe every target's learning;
 * --canary.export-records and --canary.import-records move one disk's history to another host.
 * Every edit keeps the previous file beside it (statefile_set_aside(), tags "reset" and
 * "import") and says what it did only once it is done. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Resets the reference, daily medians and trend of every record of path (its normal form,
 * canary_path_normalize(): "DIR/" and "DIR/." are "DIR"; any disk, mode and regime) in the
 * state file of dirfd (canary_reference_reset()), keeps the previous file as
 * "canary-baselines.reset-TIME.N", writes the new one, and only then prints one line per record
 * reset, and the copy's name, to out. Removes the temp files of an interrupted save first (and
 * says so on out). Returns the number of records reset (0: none for path, the file unchanged,
 * err lists the paths it knows), or -errno with a sentence in err: -EBUSY while another process
 * holds the directory, -ENOENT without a state file, -EBADMSG for a file with bad lines,
 * -EINVAL / -ENAMETOOLONG for a relative or too long path, the state file's parse error, or the
 * copy's or the write's. */
int canary_reset_reference(int dirfd, const char *path, FILE *out, char *err, size_t errsz);

/* Writes the records of disk (its identity as the state file has it, "wwn:..." or
 * "serial:...") to out as a state file of their own. Needs no lock (the file is only ever
 * replaced whole). Returns how many (0: none, err lists the disks the file knows), or -errno
 * with a sentence in err as canary_reset_reference() (a file with bad lines: how to have them
 * set aside without editing it). */
int canary_export_records(int dirfd, const char *disk, FILE *out, char *err, size_t errsz);

/* What an import asks of the host (canary_command.c answers from sysfs and udev as the canary
 * does; tests fake it). */
struct canary_import_host {
        /* Whether a disk of this identity is on this host. */
        bool (*present)(void *ud, const char *disk);
        /* The identity of the disk whose records the canary would use for the directory path (the
         * disk behind its filesystem, canary_backing_key_device()) into disk, that device's
         * kernel name into dev: 0, or -errno with a sentence in why (no such directory, a
         * filesystem without a block device, a disk without an identity, ...). */
        int (*path_disk)(void *ud, const char *path, char *disk, size_t disksz, char *dev,
                         size_t devsz, char *why, size_t whysz);
        void *ud;
};

/* Adds the records of text (len bytes, a state file of one disk's records, as
 * canary_export_records() writes) to the state file of dirfd, each replacing the record of the
 * same key, with their path set to path when not NULL (its normal form,
 * canary_path_normalize()). host, when not NULL, is asked whether the disk is on this host
 * (refused: -ENODEV) and which disk each resulting path lies on: a path that is not a
 * directory on that disk here is refused (its error, or -EXDEV for another disk), as records
 * there could never be used. Two records that path would give one key are refused (-EINVAL).
 * At CANARY_RECORDS_MAX records, room is made by the least recently updated records of disks
 * not on this host (never one being replaced); when they are too few the import is refused
 * (-ENOSPC) and nothing changes. Keeps the previous file as "canary-baselines.import-TIME.N";
 * removes the temp files of an interrupted save first. Only once the new file is written it
 * prints one line per record imported, the copy's name and one line per record dropped to out.
 * Returns how many were imported, or -errno with a sentence in err: -EBADMSG (no header, bad
 * lines, no record; the sentence says what a records file begins with), -EPROTONOSUPPORT,
 * -EINVAL (several disks, a relative path, two records on one key), -ENAMETOOLONG, -ENODEV,
 * -EXDEV, the path check's, -ENOSPC, -EBUSY, or the read's, copy's or write's. */
int canary_import_records(int dirfd, const char *text, size_t len, const char *path,
                          const struct canary_import_host *host, FILE *out, char *err,
                          size_t errsz);
