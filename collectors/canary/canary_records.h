/* The canary baselines' state file format: the records of canary_stats.h's baselines, keyed
 * by disk identity, mode, path and regime, their escaping, parsing and rendering. Pure: no I/O,
 * no globals, no clock reads (the collector reads and writes the file through lib/statefile.h).
 *
 * Format (line oriented, ASCII, version header first, '#' comments and blank lines
 * ignored, one record per line, space-separated name=value fields in any order, unknown names
 * ignored for forward compatibility):
 *   diskpulse-canary-baselines 3
 *   disk=wwn:0x5002538e4 mode=fdatasync path=/var/lib/pg regime=idle baseline=0.00042 (...)
 *   (...) updates=312 updated=1718000000000000 warmup=- reference=0.0004 refdays=final (...)
 *   (...) dayobs=0.00041,0.00043 days=1717900000:0.0004,1717986400:0.00041
 * In values a backslash is written twice and every byte outside '!'..'~' as a backslash, 'x'
 * and two hex digits (a space in a path: \x20). baseline is seconds (the shortest of %.15g to
 * %.17g that reads back exactly; 0 while warming up), updates a count, updated CLOCK_REALTIME in
 * microseconds, warmup the comma-separated warm-up observations in seconds or "-", regime
 * "idle" or "busy" (the key is disk, mode, path and regime), reference seconds (0: none yet),
 * refdays "final", "-" or the daily medians of the reference so far, dayobs the running day's
 * observations or "-", days "-" or the kept daily medians as SECONDS:MEDIAN (CLOCK_REALTIME in
 * whole seconds). disk, mode, path, baseline and updates are required; a record without regime
 * is the idle one. Version 1 (before regimes: the same records without regime, all idle) and
 * version 2 (before the reference) are read as well, their baseline becoming the final
 * reference (the best as-new figure they hold); every write is version 3. A line that does not parse or violates a limit is
 * skipped and counted, never fatal; a missing header or an unknown version refuses the whole
 * file.
 * Limits: 1024 records (CANARY_RECORDS_MAX: the least recently updated one makes room for a
 * new key, canary_records_put_evict() says which), disk id 255 bytes, mode 31, path 1023, line
 * 8192, file 8 MiB. Numbers are written and read in the C locale (the daemon
 * never changes LC_NUMERIC). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "canary_stats.h"

/* ---- State file records ---- */

#define CANARY_STATE_HEADER  "diskpulse-canary-baselines"
#define CANARY_STATE_VERSION 3 /* written; 1 (no regimes) and 2 (no reference) are read too */
#define CANARY_RECORDS_MAX   1024
#define CANARY_DISK_ID_MAX   256 /* with the NUL */
#define CANARY_MODE_MAX      32
#define CANARY_PATH_MAX      1024
#define CANARY_LINE_MAX      8192 /* one record line, escaped: the longest record fits */
/* Largest state file: room for CANARY_RECORDS_MAX of the longest lines (8 MiB), so that any set
 * of records we write can be read back. Real files hold a few lines. */
#define CANARY_STATE_MAX_BYTES (CANARY_RECORDS_MAX * (CANARY_LINE_MAX + 1) + 64)

struct canary_record {
        char disk[CANARY_DISK_ID_MAX]; /* "wwn:..." or "serial:..." */
        char mode[CANARY_MODE_MAX];
        char path[CANARY_PATH_MAX];
        enum canary_regime regime;
        struct canary_baseline_state st;
};

struct canary_records {
        struct canary_record *v;
        size_t n, cap;
        unsigned bad;       /* lines skipped by canary_records_parse() */
        unsigned first_bad; /* the number of the first of them (1: the file's first line) */
        unsigned version;   /* of the file canary_records_parse() read */
};

/* Writes the persistent disk identity into buf: "wwn:WWN" when wwn is not empty, else
 * "serial:SERIAL" (pass udev's ID_SERIAL, model and serial, so serials of different vendors
 * do not collide). Returns 0, -ENOENT when both are empty or NULL (then the baseline can only
 * live in memory), -ENAMETOOLONG when it does not fit in size bytes. */
int canary_disk_id(char *buf, size_t size, const char *wwn, const char *serial);
/* Fills rec's key (regime idle: set rec->regime for busy) and an empty state. Returns 0, -EINVAL
 * for an empty disk, mode or path, -ENAMETOOLONG when one does not fit. */
int canary_record_init(struct canary_record *rec, const char *disk, const char *mode,
                       const char *path);
/* Parses one record line (no newline) into *ret. Returns 0, -EINVAL (syntax, missing or
 * duplicate field, inconsistent state) or -ERANGE (number or length out of range); ret untouched
 * on failure. */
int canary_record_parse_line(const char *line, size_t len, struct canary_record *ret);
/* Parses a whole state file. Returns 0 with *ret filled (caller frees with
 * canary_records_free(); bad lines, duplicate keys and records past CANARY_RECORDS_MAX counted
 * in ret->bad; an empty file has no records), -EFBIG above CANARY_STATE_MAX_BYTES, -EBADMSG
 * without the header, -EPROTONOSUPPORT for a version other than 1 to 3. ret untouched on
 * failure. Records of versions 1 and 2 are migrated: their baseline becomes the final reference. */
int canary_records_parse(const char *buf, size_t len, struct canary_records *ret);
/* Renders records as a state file into a malloc'd buffer (caller frees; NUL-terminated, the NUL
 * not counted in *ret_len). Returns 0, or -EINVAL when a record is invalid. Aborts on OOM. */
int canary_records_format(const struct canary_records *r, char **ret, size_t *ret_len);
/* Frees the records and empties r; accepts a zeroed r. */
void canary_records_free(struct canary_records *r);
/* The record with this key or NULL; valid until r changes. */
struct canary_record *canary_records_find(const struct canary_records *r, const char *disk,
                                          const char *mode, const char *path,
                                          enum canary_regime regime);
/* Stores a copy of rec, replacing the record with the same key; when CANARY_RECORDS_MAX are
 * held, the least recently updated one makes room. Returns 0 or -EINVAL for an invalid record.
 * Aborts on OOM. */
int canary_records_put(struct canary_records *r, const struct canary_record *rec);
/* The same, saying what went: returns 1 with the record that made room in *ret_evicted (may be
 * NULL), 0 when none had to, or -EINVAL. */
int canary_records_put_evict(struct canary_records *r, const struct canary_record *rec,
                             struct canary_record *ret_evicted);

/* The normal form of an absolute path, as the records key it: every "." and empty component
 * dropped, each ".." taking back the component before it (never above "/"), no trailing
 * slash ("/a//b/../c/" is "/a/c"). Symlinks are not resolved: the key is the path as the canary
 * is given it. Writes it into buf (size bytes). Returns 0, -EINVAL for an empty or relative
 * path, -ENAMETOOLONG when the result does not fit. Pure. */
int canary_path_normalize(const char *path, char *buf, size_t size);
