/* Pure parser of /proc/diskstats (kernel Documentation/admin-guide/iostats.rst and
 * Documentation/ABI/testing/procfs-diskstats): bytes in, entries out; no I/O, no globals. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Counter positions, in the kernel's order (fields 1..17 of iostats.rst). */
enum ds_field {
        DS_READS,
        DS_READS_MERGED,
        DS_READ_SECTORS,
        DS_READ_MS,
        DS_WRITES,
        DS_WRITES_MERGED,
        DS_WRITE_SECTORS,
        DS_WRITE_MS,
        DS_IO_NOW,
        DS_IO_MS,
        DS_IO_WEIGHTED_MS,
        DS_DISCARDS,
        DS_DISCARDS_MERGED,
        DS_DISCARD_SECTORS,
        DS_DISCARD_MS,
        DS_FLUSHES,
        DS_FLUSH_MS,
        DS_NFIELDS
};

#define DS_NAME_MAX 32 /* the kernel's DISK_NAME_LEN */

struct ds_entry {
        unsigned major, minor;
        char name[DS_NAME_MAX];
        uint32_t present; /* bit (1u << enum ds_field) set for each field the kernel printed */
        uint64_t v[DS_NFIELDS];
};

/* Parses one line (without its newline). The kernel prints 4 counters for partitions on
 * kernels before 2.6.25, 11 before 4.18, 15 before 5.5 and 17 since; more are accepted and
 * ignored. Returns 0, -EINVAL for a malformed line, -ERANGE for a number past 64 bits. */
int diskstats_parse_line(const char *line, size_t len, struct ds_entry *ret);

/* Parses a whole file. Calls cb for each good line and counts the malformed ones into
 * *ret_bad. cb returns < 0 to stop (that value is returned). Returns 0 or cb's error. */
int diskstats_parse(const char *buf, size_t len,
                    int (*cb)(const struct ds_entry *e, void *userdata), void *userdata,
                    unsigned *ret_bad);

/* Parses the complete lines at the start of buf (and, when final, a last line without its
 * newline), as diskstats_parse does, for a file read in chunks. Counts malformed lines into *bad.
 * Returns the bytes consumed; the rest is an unfinished line to be completed by the next
 * chunk. Sets *ret_err to cb's error when it stopped the parse (0 otherwise). */
size_t diskstats_parse_chunk(const char *buf, size_t len, bool final,
                             int (*cb)(const struct ds_entry *e, void *userdata), void *userdata,
                             unsigned *bad, int *ret_err);

/* True when the field is a 32-bit millisecond (or in-flight) counter in the kernel's output
 * (printed with %u since 2.6; wraps at 2^32). */
bool diskstats_field_is_32bit(enum ds_field f);
