/* The operator's reset of one canary target's reference (--canary.reset-reference=PATH): the
 * documented way to say "this disk's present speed is its new normal" for one path, where
 * deleting the state file would wipe every target's learning.
 *
 * It edits the state file while no daemon uses the state directory: a running daemon holds a
 * shared lock on the directory (canary_state_dir_lock()) and would write its own records back
 * over the edit, so the reset takes the lock exclusively and refuses while a daemon runs. */
#pragma once

#include <stddef.h>
#include <stdio.h>

/* Takes the running daemon's shared lock on the state directory dirfd (flock LOCK_SH), held
 * until dirfd is closed. Returns 0 or -errno (the daemon goes on without it). */
int canary_state_dir_lock(int dirfd);

/* Resets the reference, daily medians and trend of every record of path (any disk, mode and
 * regime) in the state file of dirfd (canary_reference_reset()), writes the file back and prints
 * one line per record reset to out. Returns the number of records reset (0: none for path, the
 * file unchanged), or -errno with a sentence in err: -EBUSY while a daemon holds the directory,
 * -ENOENT without a state file, the state file's parse error, or the write's. */
int canary_reset_reference(int dirfd, const char *path, FILE *out, char *err, size_t errsz);
