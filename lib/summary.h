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
};

struct summary {
        struct summary_table *tables;
        size_t n;
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

/* The value of family name's sample without suffix whose labels include every pair of want
 * (name, value, ..., NULL) in the n sets, or NaN. */
double mset_value(const struct mset *const *sets, size_t n, const char *name,
                  const char *const *want);
