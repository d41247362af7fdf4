/* A status summary: what the landing page shows besides its links, as tables of text. Each
 * collector gives a function that fills it from the set it exported; the snapshot holds them
 * with the sets and makes the summary on the first request for it; the HTTP server lays it out
 * knowing no metric: it escapes cells, it does not read them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "metrics.h"

struct summary_table {
        char *title;
        size_t ncols;
        char **cols;  /* column headings */
        char **cells; /* nrows * ncols, row by row */
        size_t nrows, cap;
        size_t max_rows; /* rows shown at most (0: all); the others are only counted */
        size_t more;     /* rows not shown */
        char *more_what; /* "devices": "and N more devices: see /metrics" */
        bool show_empty; /* the table's heading even without rows */
        char *note;      /* printed under the table (NULL: none) */
};

/* The numbers of a device's row in the disk view, NaN when unknown. */
enum summary_disk_value {
        SUMMARY_READS,       /* r/s */
        SUMMARY_WRITES,      /* w/s */
        SUMMARY_READ_AWAIT,  /* r_await, seconds */
        SUMMARY_WRITE_AWAIT, /* w_await, seconds */
        SUMMARY_QUEUE_DEPTH, /* aqu-sz */
        SUMMARY_UTIL,        /* %util / 100 */
        SUMMARY_LAT_P50,     /* block-layer device time, seconds */
        SUMMARY_LAT_P99,
        SUMMARY_DISK_VALUES
};

/* What a collector found wrong with a disk: its severity and a few words ("SMART failing"). */
enum summary_severity { SUMMARY_WARNING = 1, SUMMARY_CRITICAL = 2 };
struct summary_fact {
        enum summary_severity severity;
        char *text;
};

/* Flags of a disk that only mean something together (flushes lost on a write-back cache). */
#define SUMMARY_DISK_WRITE_BACK 1u /* its volatile write cache is on ("write back") */
#define SUMMARY_DISK_NO_FLUSH   2u /* a canary target on it (not direct) saw no flush reach it */

/* One device of the disk view: the collectors fill its numbers and facts by its kernel name. */
struct summary_disk {
        char *device;
        double v[SUMMARY_DISK_VALUES];
        unsigned flags;
        struct summary_fact *facts;
        size_t nfacts;
};

/* Devices shown in the disk view at most. */
#define SUMMARY_MAX_DISKS 200

struct summary {
        struct summary_table *tables;
        size_t n;
        struct summary_disk
            *disks; /* the disk view, laid out as the first table by summary_finish */
        size_t ndisks, disks_cap;
        size_t disks_more; /* devices beyond SUMMARY_MAX_DISKS, as their collector counted them */
        /* Seconds the disk view's iostat numbers (r/s to %util) cover, as their collector says:
         * from the sample before to this page's; NaN when no collector said (summary_new()). */
        double disks_span;
};

/* What fills a summary from one collector's set: a pure function of the set, called on any
 * thread once the set is published (it reads the set, nothing else). */
typedef void (*summarize_fn)(const struct mset *set, struct summary *sum);

/* An empty summary. Never fails. */
struct summary *summary_new(void);
/* Frees it; accepts NULL; returns NULL. */
struct summary *summary_free(struct summary *s);

/* Adds a table with ncols headings (copied); returns it, valid until the next summary_table()
 * on s. max_rows, more_what (copied, may be NULL) and show_empty as in struct summary_table. */
struct summary_table *summary_table(struct summary *s, const char *title, const char *const *cols,
                                    size_t ncols, size_t max_rows, const char *more_what,
                                    bool show_empty);
/* Adds a row of ncols cells (copied), or counts it in more when max_rows are shown already. */
void summary_row(struct summary_table *t, const char *const *cells);
/* Whether the next row would be shown (not just counted). */
bool summary_room(const struct summary_table *t);
/* Sets the note printed under t (copied). */
void summary_note(struct summary_table *t, const char *note);

/* The disk view's row of device, added (its numbers NaN) when absent and create is set; NULL
 * when absent and not created, or when SUMMARY_MAX_DISKS rows exist already. Valid until the next
 * summary_disk() on s. */
struct summary_disk *summary_disk(struct summary *s, const char *device, bool create);
/* Adds a fact to d (text made by printf's rules, cut at 200 bytes). */
void summary_fact(struct summary_disk *d, enum summary_severity severity, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The thresholds the verdict applies to the disk view's own numbers, the alert rules' (etc/
 * prometheus/diskpulse.rules.yml): DiskpulseDiskLatencyHigh's average wait over 0.1 requests a
 * second, DiskpulseDiskSaturated's queue depth and wait. */
#define SUMMARY_AWAIT_HIGH      0.25
#define SUMMARY_AWAIT_MIN_IOPS  0.1
#define SUMMARY_SATURATED_QUEUE 4.0
#define SUMMARY_SATURATED_AWAIT 0.05

/* The one-line verdict of d into buf (size bytes, cut when too small): "ok" when nothing is
 * wrong, else its facts, the critical ones first (then in the order they were added), joined by
 * "; ". Besides the collectors' facts: flushes lost (both flags), an average wait (reads and
 * writes weighted by their rates) above SUMMARY_AWAIT_HIGH at SUMMARY_AWAIT_MIN_IOPS or more, a
 * queue above SUMMARY_SATURATED_QUEUE with a wait above SUMMARY_SATURATED_AWAIT. Pure. */
void summary_verdict(const struct summary_disk *d, char *buf, size_t size);

/* The q-quantile (0 <= q <= 1) of a classic histogram as Prometheus' histogram_quantile() reads
 * it: n buckets with increasing upper bounds le (the last may be INFINITY) and cumulative counts
 * cum; the rank q * total is found and interpolated linearly inside its bucket (the first from 0
 * when its bound is positive); a rank in the +Inf bucket gives the highest finite bound. NaN
 * without observations, without buckets or for q out of range. Pure. */
double summary_quantile(double q, const double *le, const double *cum, size_t n);

/* Lays the disk view out as the first two tables (after every collector has filled it):
 * "Devices", the numbers, and "Verdicts", a line per device; each with a note saying what they
 * are. */
void summary_finish(struct summary *s);

/* The summary as plain text for a terminal: each table as aligned columns (numbers and "-"
 * right-aligned), its rows left out counted, its note (indented by two spaces); no control
 * character a terminal acts on (C0, DEL, C1, Unicode's Bidi_Control) and no byte that is not
 * UTF-8: each is shown as '?'; nothing but the summary's text. A malloc'd NUL-terminated string (the caller frees); *ret_len its length. */
char *summary_text(const struct summary *s, size_t *ret_len);

/* The value of family name's sample without suffix whose labels include every pair of want
 * (name, value, ..., NULL) in the n sets, or NaN. */
double mset_value(const struct mset *const *sets, size_t n, const char *name,
                  const char *const *want);
