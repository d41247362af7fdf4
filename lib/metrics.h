/* The metric model: families of samples with pre-escaped label sets, built by collectors and
 * read (never changed) by exporters once published. A collector with many devices fills a table
 * instead: one row of values per device, one column per family, label values kept once per row
 * and shared from one round to the next while they stay the same. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "refcount.h"

enum mtype { MT_COUNTER, MT_GAUGE, MT_HISTOGRAM, MT_SUMMARY, MT_INFO, MT_UNTYPED };

struct msample {
        const char *suffix; /* static: "", "_bucket", "_sum", "_count" */
        const char *labels; /* `a="x",b="y"` escaped for the text format, "" for none */
        bool is_int;        /* integer counters are printed exactly */
        uint64_t u;
        double d;
};

/* How a cell of a table family is printed. */
enum mcell {
        MCELL_U64,    /* an integer as is */
        MCELL_SCALED, /* an integer times the family's scale (mfamily_scale()): a count in the
                        * source's unit printed in the metric's */
        MCELL_MILLIS, /* milliseconds, printed as seconds */
        MCELL_DOUBLE, /* a double (mtable_set_double) */
        MCELL_ONE,    /* the value 1 whatever the cell holds (info families) */
};

#define MROWS_MAX_LABELS 16
#define MTABLE_MAX_COLS  32

/* The label values of a table's rows: the same label names in every row, one value per row and
 * name, escaped once when the row is added (as mset_labels escapes). Reference counted, so that
 * the sets of several rounds share them while the rows stay the same; immutable once shared.
 * Read-only outside metrics.c. */
struct mrows {
        struct refcount refs;
        size_t nnames;
        const char *names[MROWS_MAX_LABELS]; /* static strings */
        unsigned char name_len[MROWS_MAX_LABELS];
        size_t n, cap;
        uint32_t *off; /* row i starts at data + off[i]: per name a 16-bit length (host order,
                        * unaligned) and the escaped bytes */
        char *data;
        size_t len, dcap;
        size_t max_row;                   /* the longest row's value bytes */
        size_t sum_len[MROWS_MAX_LABELS]; /* value bytes of each label over all rows */
};

/* The cells of a table: rows x columns of 64-bit values (integers, or a double's bits), stored
 * row by row and only where not 0 (an idle device's gauges take no room); per row a bit for
 * each column that has a sample. Reference counted like its rows. Read-only outside
 * metrics.c: read cells with mtable_cell(). */
struct mtable {
        struct refcount refs;
        struct mrows *rows; /* referenced */
        size_t cols;
        size_t added;      /* rows added so far */
        uint32_t *present; /* rows->n */
        uint32_t *nonzero; /* rows->n: bit c when the cell is stored */
        uint32_t *off;     /* rows->n: the row's first stored cell */
        uint64_t *cells;   /* the stored cells, row by row, in column order */
        size_t ncells, cap;
        size_t *count; /* rows that have each column, counted once when first asked */
};

static inline uint64_t mtable_cell(const struct mtable *t, size_t row, size_t col)
{
        uint32_t nz = t->nonzero[row], bit = 1u << col;

        if (!(nz & bit))
                return 0;
        return t->cells[t->off[row] + (size_t)__builtin_popcount(nz & (bit - 1))];
}

/* A native (sparse, exponential) histogram: Prometheus' schema (-4..8; bucket i holds
 * (base^(i-1), base^i], base = 2^(2^-schema)), a zero bucket [-zero_threshold, zero_threshold],
 * and absolute counts of the buckets offset .. offset + n - 1 (zeros allowed anywhere). */
struct mnative {
        int32_t schema;
        double zero_threshold;
        uint64_t zero_count;
        uint64_t count; /* all observations: zero_count + the buckets' */
        double sum;
        int32_t offset; /* the index of counts[0] */
        size_t n;
        const uint64_t *counts; /* copied by mfamily_add_native */
};

/* A native histogram attached to a series of a histogram family (mfamily_add_native). */
struct mnative_series {
        const char *labels; /* rendered as mset_labels makes them, without le */
        struct mnative h;   /* counts in the set's arena */
};

struct mfamily {
        char *name; /* full name as in the text format 0.0.4 (counters end in _total) */
        char *help;
        enum mtype type;
        struct msample *samples; /* NULL for a table family */
        size_t n, cap;           /* n: samples (a table family: rows that have the column) */
        /* A table family: column col of table (referenced), valued as cell says, labelled with
         * the row labels whose bit is in label_mask (bit k: the table rows' label k). */
        struct mtable *table;
        unsigned col;
        enum mcell cell;
        uint32_t scale; /* MCELL_SCALED: the factor */
        uint32_t label_mask;
        struct mnative_series *natives; /* histogram families: the series' native parts */
        size_t nnatives, natives_cap;
};

struct mset {
        struct mfamily *fams;
        size_t n, cap;
        struct arena_chunk *arena;
};

/* Creates an empty set. Never fails (aborts on OOM). Owned by the caller: mset_free(). */
struct mset *mset_new(void);
/* Frees a set and everything in it; accepts NULL; returns NULL. */
struct mset *mset_free(struct mset *s);

/* Returns the family called name, created with help and type if absent. The pointer is valid
 * until the next mset_family() on the same set. help must be plain text. */
struct mfamily *mset_family(struct mset *s, const char *name, const char *help, enum mtype type);
/* Returns the family called name or NULL. */
const struct mfamily *mset_find(const struct mset *s, const char *name);

/* Adds a sample. Labels are NULL-terminated name/value pairs (values are escaped and made valid
 * UTF-8 here). A NULL value skips its pair. */
void mfamily_add(struct mset *s, struct mfamily *f, const char *suffix, double value, ...)
    __attribute__((sentinel));
void mfamily_add_u64(struct mset *s, struct mfamily *f, const char *suffix, uint64_t value, ...)
    __attribute__((sentinel));
/* A sample for mfamily_add_sample(), given with designated initializers so that a call names
 * only what it sets; what it leaves out is zero:
 *   mfamily_add_sample(set, f, &(struct msample_args){.labels = labels, .d = seconds});
 *   mfamily_add_sample(set, f, &(struct msample_args){.suffix = "_count", .labels = labels,
 *                                                     .is_int = true, .u = n}); */
struct msample_args {
        const char *suffix;      /* static: "_bucket", "_sum", "_count"; NULL: "" */
        const char *labels;      /* already rendered (`a="x",b="y"`, mset_labels()); NULL: none */
        const char *extra_name;  /* one more pair after labels, escaped here (the "le" of a */
        const char *extra_value; /* bucket, a quantile); none when either is NULL */
        bool is_int;             /* an integer, printed exactly: u (d is set to it); else d */
        uint64_t u;
        double d;
};

/* Adds the sample a describes to f; its labels are copied into s's arena. Never fails. */
void mfamily_add_sample(struct mset *s, struct mfamily *f, const struct msample_args *a);

/* A table's rows. names: n static label names (n <= MROWS_MAX_LABELS). Never fails. The caller
 * owns the reference. */
struct mrows *mrows_new(const char *const *names, size_t n);
/* Appends a row: values[k] is the value of label k, NULL or "" for an empty one; escaped here.
 * Only before the rows are shared. Returns the row's index. */
size_t mrows_add(struct mrows *r, const char *const *values);
/* Drops the rows from n on (of rows not shared), to be filled again. */
void mrows_truncate(struct mrows *r, size_t n);
/* The escaped value of label k in row (NUL-terminated only when copied out: use *ret_len). */
const char *mrows_value(const struct mrows *r, size_t row, size_t k, size_t *ret_len);
/* Whether row a of ra and row b of rb hold the same values. */
bool mrows_row_equal(const struct mrows *ra, size_t a, const struct mrows *rb, size_t b);
/* Appends row of src to r (the label names must be the same). */
size_t mrows_copy_row(struct mrows *r, const struct mrows *src, size_t row);
/* Any thread. unref accepts NULL and returns NULL. */
struct mrows *mrows_ref(struct mrows *r);
struct mrows *mrows_unref(struct mrows *r);

/* A table of cols columns (<= MTABLE_MAX_COLS) over the rows (referenced). Never fails; the
 * caller owns the reference. */
struct mtable *mtable_new(struct mrows *rows, size_t cols);
/* Sets the cells of row, which must be the next row not added yet (rows are filled in order;
 * rows never added have no samples): v[c] (cols values) for each column c in present. Only
 * before the table's first mset_table_family. */
void mtable_add_row(struct mtable *t, size_t row, uint32_t present, const uint64_t *v);
/* A double's bits as a cell, and back. */
uint64_t mtable_double(double v);
double mtable_get_double(const struct mtable *t, size_t row, size_t col);
/* Any thread. unref accepts NULL and returns NULL. */
struct mtable *mtable_ref(struct mtable *t);
struct mtable *mtable_unref(struct mtable *t);

/* Renders the labels of mask of a row into buf as `a="x",b="y"`, NUL-terminated; a pair that
 * does not fit is left out with the rest. Returns the length. */
size_t mtable_row_labels(const struct mtable *t, size_t row, uint32_t mask, char *buf, size_t size);

/* Adds the family that column col of t is, after the table is filled: its samples are the rows
 * that have the column, in row order, with the labels of label_mask. The set takes its own
 * reference to t. A family of that name must not exist in the set yet. */
struct mfamily *mset_table_family(struct mset *s, const char *name, const char *help,
                                  enum mtype type, struct mtable *t, unsigned col, enum mcell cell,
                                  uint32_t label_mask);

/* Makes the cells of table family f print as integers times factor (> 0): the table keeps what
 * the source counts, the page shows the metric's unit. */
void mfamily_scale(struct mfamily *f, uint32_t factor);

/* Iterates the samples of any family in order: *pos starts at 0; returns false after the last.
 * A table family's labels are rendered into buf (size bytes, cut when too small); others point
 * into the set. */
bool mfamily_next(const struct mfamily *f, size_t *pos, struct msample *ret, char *buf,
                  size_t size);

/* Shorthand: a one-sample family. */
void mset_gauge(struct mset *s, const char *name, const char *help, double v, ...)
    __attribute__((sentinel));

/* Attaches a native histogram to histogram family f for the series whose labels (rendered and
 * escaped as mset_labels makes them, without le) are labels; copied into the set. */
void mfamily_add_native(struct mset *s, struct mfamily *f, const char *labels,
                        const struct mnative *h);
/* The native histogram of f's series labels, or NULL. */
const struct mnative *mfamily_native(const struct mfamily *f, const char *labels);
/* The q-th bucket index of value v (> 0) in schema: the i with base^(i-1) < v <= base^i,
 * exact at powers of the base (frexp-based as Prometheus' client_golang does). */
int32_t mnative_index(double v, int32_t schema);

/* Renders label pairs into an escaped `a="x",b="y"` string allocated in the set's arena. */
char *mset_labels(struct mset *s, ...) __attribute__((sentinel));
char *mset_labelsv(struct mset *s, va_list ap);

/* Copies a string into the set's arena. */
char *mset_strdup(struct mset *s, const char *str);

/* Escapes a label value as the text format wants (\\, \", \n; invalid UTF-8 and control bytes
 * become U+FFFD) into out (at least 3 * strlen(v) bytes), or only measures it when out is NULL.
 * Returns the escaped length. */
size_t metric_escape_value(const char *v, char *out);

/* Looks up a label's unescaped value in a rendered label string; copies it into buf.
 * Returns true when found. */
bool labels_get(const char *labels, const char *name, char *buf, size_t size);

/* Reads the next pair of a rendered label string (`a="x",b="y"`, as mset_labels makes them):
 * *pos starts at the string and is advanced past the pair; the name is *ret_name (not
 * NUL-terminated, *ret_name_len bytes), the unescaped value is copied into value (size bytes,
 * NUL-terminated, *ret_value_len bytes without the NUL). Returns 1 for a pair, 0 at the end,
 * -EINVAL when the string is malformed (a bad name, a missing quote, an unknown escape) and
 * -ENOBUFS when the value does not fit. Pure, any thread. */
int labels_next(const char **pos, const char **ret_name, size_t *ret_name_len, char *value,
                size_t size, size_t *ret_value_len);

/* Returns true when name is a valid metric (or label, if label) name. */
bool metric_name_valid(const char *name, bool label);
