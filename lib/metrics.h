/* The metric model: families of samples with pre-escaped label sets, built by collectors and
 * read (never changed) by exporters once published. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum mtype { MT_COUNTER, MT_GAUGE, MT_HISTOGRAM, MT_SUMMARY, MT_INFO, MT_UNTYPED };

struct msample {
        const char *suffix; /* static: "", "_bucket", "_sum", "_count" */
        char *labels;       /* `a="x",b="y"` escaped for the text format, "" for none */
        bool is_int;        /* integer counters are printed exactly */
        uint64_t u;
        double d;
};

struct mfamily {
        char *name; /* full name as in the text format 0.0.4 (counters end in _total) */
        char *help;
        enum mtype type;
        struct msample *samples;
        size_t n, cap;
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
/* Adds a sample with labels already rendered (`a="x"`), plus one extra escaped pair (extra_name
 * may be NULL). */
void mfamily_add_raw(struct mset *s, struct mfamily *f, const char *suffix, const char *labels,
                     const char *extra_name, const char *extra_value, bool is_int, uint64_t u,
                     double d);

/* Shorthand: a one-sample family. */
void mset_gauge(struct mset *s, const char *name, const char *help, double v, ...)
    __attribute__((sentinel));

/* Renders label pairs into an escaped `a="x",b="y"` string allocated in the set's arena. */
char *mset_labels(struct mset *s, ...) __attribute__((sentinel));
char *mset_labelsv(struct mset *s, va_list ap);

/* Copies a string into the set's arena. */
char *mset_strdup(struct mset *s, const char *str);

/* Looks up a label's unescaped value in a rendered label string; copies it into buf.
 * Returns true when found. */
bool labels_get(const char *labels, const char *name, char *buf, size_t size);

/* Returns true when name is a valid metric (or label, if label) name. */
bool metric_name_valid(const char *name, bool label);
