/* The operator's edits of the canary's state file, made while no daemon uses the state
 * directory (a running one holds its lock, statefile_lock(), and would write its own records
 * back over the edit, so each edit takes the lock itself and refuses while another process
 * holds it): --canary.reset-reference=PATH says "this disk's present speed is its new normal"
 * for one path, where deleting the state file would wipe every target's learning;
 * --canary.export-records and --canary.import-records move one disk's history to another host.
 * Every edit keeps the previous file beside it (statefile_set_aside(), tags "reset" and
 * "import"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Resets the reference, daily medians and trend of every record of path ("DIR/" is "DIR"; any
 * disk, mode and regime) in the state file of dirfd (canary_reference_reset()), keeps the
 * previous file as "canary-baselines.reset-TIME", writes the new one and prints one line per
 * record reset, and the copy's name, to out. Returns the number of records reset (0: none for
 * path, the file unchanged, err lists the paths it knows), or -errno with a sentence in err:
 * -EBUSY while another process holds the directory, -ENOENT without a state file, -EBADMSG for
 * a file with bad lines, the state file's parse error, or the copy's or the write's. */
int canary_reset_reference(int dirfd, const char *path, FILE *out, char *err, size_t errsz);

/* Writes the records of disk (its identity as the state file has it, "wwn:..." or
 * "serial:...") to out as a state file of their own. Needs no lock (the file is only ever
 * replaced whole). Returns how many (0: none, err lists the disks the file knows), or -errno
 * with a sentence in err as canary_reset_reference(). */
int canary_export_records(int dirfd, const char *disk, FILE *out, char *err, size_t errsz);

/* Adds the records of text (len bytes, a state file of one disk's records, as
 * canary_export_records() writes) to the state file of dirfd, each replacing the record of the
 * same key, with their path set to path when not NULL ("DIR/" is "DIR"). present(ud, disk), when
 * not NULL, says whether a disk of that identity is on this host: the records of a disk absent
 * here are refused (-ENODEV). Keeps the previous file as "canary-baselines.import-TIME". Prints
 * one line per record to out. Returns how many were imported, or -errno with a sentence in err:
 * -EBADMSG (bad lines, no record), -EINVAL (several disks, a relative path), -ENODEV, -EBUSY, or
 * the read's, copy's or write's. */
int canary_import_records(int dirfd, const char *text, size_t len, const char *path,
                          bool (*present)(void *ud, const char *disk), void *ud, FILE *out,
                          char *err, size_t errsz);
