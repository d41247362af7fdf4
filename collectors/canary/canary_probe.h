/* One fdatasync canary probe: a work file that leaves nothing behind, one timed write + sync. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

/* --canary.path=DIR[:MODE] (SPEC §2). */
enum canary_mode {
        /* pwrite of --canary.size over already written, allocated blocks, then fdatasync(),
         * timed together: the commit cost of a database that overwrites its WAL in place. No
         * metadata changes, so on ext4/xfs this is one data write plus one cache flush. */
        CANARY_MODE_FDATASYNC,
        /* pwrite at the end of the file, then fdatasync(): a WAL-like append, which includes
         * the journal commit of the new size/blocks. The file is truncated to 0 (untimed, just
         * before the next probe) once it would grow past canary_file.wrap_bytes; the first
         * append after that also commits the freed blocks. */
        CANARY_MODE_APPEND,
        /* pwrite on an O_DSYNC descriptor over allocated blocks (the kernel syncs in write). */
        CANARY_MODE_DSYNC,
        /* pwrite with O_DIRECT|O_DSYNC over allocated blocks, PostgreSQL's open_datasync with
         * direct I/O: an aligned buffer, size rounded up to 4096. On a device that supports FUA
         * (/sys/block/X/queue/fua = 1) this measures one FUA write, not a cache flush: the flush
         * counter then rises by less than one per probe (FACTS.md: NVMe 18 flushes in 40). */
        CANARY_MODE_DIRECT,
        _CANARY_MODE_MAX,
};

/* "fdatasync", "append", "dsync", "direct"; NULL for an invalid value. */
const char *canary_mode_to_string(enum canary_mode m);
/* Returns 0 and sets *ret, or -EINVAL for an unknown name. */
int canary_mode_from_string(const char *s, enum canary_mode *ret);

/* Slots of --canary.size that the overwrite modes cycle through (round robin). */
#define CANARY_SLOTS 16
/* The append mode wraps at max(CANARY_SLOTS * size, CANARY_APPEND_WRAP_MIN). */
#define CANARY_APPEND_WRAP_MIN ((size_t)1024 * 1024)
/* Accepted --canary.size: 1 byte .. 16 MiB (the file is at most 256 MiB then). */
#define CANARY_SIZE_MAX     ((size_t)16 * 1024 * 1024)
#define CANARY_DIRECT_ALIGN ((size_t)4096)
/* The name of the fallback work file while it exists (between create and unlink), so a sweep at
 * start can remove one left behind by a crash in that window: ".diskpulse-canary-XXXXXX". */
#define CANARY_TEMP_PREFIX ".diskpulse-canary-"

/* Removes work files left behind by a crash between create and unlink: regular files of this
 * user named CANARY_TEMP_PREFIX and 6 hex digits in the directory dirfd (any fd of it). Call once
 * before the first canary_file_open() there. Returns how many were removed, or -errno when the
 * directory cannot be read. */
int canary_remove_stale(int dirfd);

/* canary_file_open_flags() flags. */
enum {
        /* Skip O_TMPFILE and use the named-then-unlinked fallback (tests). */
        CANARY_OPEN_NO_TMPFILE = 1u << 0,
};

struct canary_file {
        int fd; /* O_CLOEXEC; the flags the mode needs; -1 when closed */
        enum canary_mode mode;
        size_t size;       /* bytes per probe (rounded up to 4096 for direct) */
        size_t file_bytes; /* overwrite modes: CANARY_SLOTS * size, the fixed file size */
        size_t wrap_bytes; /* append: the size past which the file is truncated */
        uint64_t offset;   /* next write offset */
        uint64_t seq;      /* probes done, written into each record */
        uint64_t rng;      /* prng state (lib/util.h) for the pseudo-random payload */
        void *buf;         /* size bytes, 4096-aligned */
        /* The fallback was used: a named hidden file, unlinked right away (only a crash between
         * create and unlink leaves a CANARY_TEMP_PREFIX* file behind). */
        bool named;
        bool poisoned; /* a write/sync failed: refuse probes until closed and reopened */
        dev_t dir_dev; /* the directory the file was created in */
        ino_t dir_ino;
};

/* Prepares the work file in the directory dirfd (any fd of the directory, O_PATH is fine;
 * borrowed, not kept) for the mode and probe size:
 *  - O_TMPFILE (open(2): an unnamed inode that vanishes on close or crash) where the filesystem
 *    supports it; on EOPNOTSUPP/EISDIR a named hidden file CANARY_TEMP_PREFIX+random, created
 *    O_EXCL and unlinked right after creation (ret->named = true);
 *  - overwrite modes: filled with CANARY_SLOTS * size bytes of pseudo-random data and fsync()ed
 *    once, so that every probe overwrites written, allocated blocks (fallocate() alone leaves
 *    unwritten extents whose conversion adds a journal commit to the first overwrite);
 *    append: one record written and fsync()ed, so a full filesystem fails here.
 * Returns 0 and fills *ret (owned by the caller: canary_file_close()), or -errno with *ret
 * untouched: -EROFS, -ENOSPC, -EDQUOT, -EACCES, -ENOENT, -ENOTDIR, -EIO, -EINVAL (bad mode or
 * size, or O_DIRECT not supported by the filesystem), -EPERM (ext4's answer to O_TMPFILE in a
 * directory that was removed), other -errno of open/write/fsync. While a canary file is open
 * (it is an orphan inode, O_TMPFILE or not), "mount -o remount,ro" of its filesystem is refused
 * with EBUSY (fs/super.c sb_prepare_remount_readonly; tested on ext4): the caller must close
 * its files to let an operator remount read-only. One
 * thread at a time per file; different files are independent. */
int canary_file_open(int dirfd, enum canary_mode mode, size_t size, struct canary_file *ret);
int canary_file_open_flags(int dirfd, enum canary_mode mode, size_t size, unsigned flags,
                           struct canary_file *ret);

/* One probe: refreshes the payload (untimed), then times the write and sync of the mode with
 * CLOCK_MONOTONIC and sets *ret_latency (>= 1 us). Returns 0, or:
 *  -EBADFD  the file is poisoned (an earlier write or sync failed) or closed;
 *  -errno   of the failing pwrite/fdatasync/ftruncate (-EIO, -ENOSPC, -EDQUOT, -EROFS ...); a
 *           short write that makes no progress counts as -EIO.
 * After ANY error the file is poisoned: Linux marks the pages clean after failed writeback and
 * reports the error once per open file, so a retried fdatasync can succeed although the data
 * never reached the disk (PostgreSQL wiki "Fsync Errors", "fsyncgate"). The caller counts the
 * error, calls canary_file_close() and prepares a new file with canary_file_open().
 * May block for as long as the device takes (the caller's prober thread detects that);
 * one thread at a time per file. *ret_latency untouched on failure. */
int canary_probe_once(struct canary_file *f, usec_t *ret_latency);

/* Whether the path dir still names the directory f was created in: 0, -ESTALE when it names
 * another directory (remounted, replaced), -ENOTDIR, or the -errno of stat() (-ENOENT when the
 * directory vanished). The open file itself keeps working in a removed directory; this is how
 * the prober notices that its path is gone. */
int canary_dir_check(const struct canary_file *f, const char *dir);

/* Closes the file (its blocks are freed: it has no name) and resets *f to closed. Accepts NULL
 * and an already closed file. Returns the close() -errno for the record only (nothing to act
 * on: the file is gone either way). */
int canary_file_close(struct canary_file *f);

/* Sets the I/O priority of the calling thread to best-effort level 7 (ioprio_set(2):
 * IOPRIO_WHO_PROCESS with who 0 is the calling thread): the canary yields to real work in the
 * scheduler's queue but is not starved. Not the idle class: flushes bypass the scheduler while
 * the data write in front of them can wait up to 10 s under mq-deadline (prio_aging_expire) and
 * forever under bfq, which would measure the scheduler instead of the disk (FACTS.md).
 * Returns 0 or -errno of ioprio_set (-EPERM, -EINVAL, -ENOSYS). Call from the prober thread. */
int canary_set_ioprio(void);
