/* Device name filters (--collector.diskstats.device-include/-exclude): node_exporter's
 * patterns, Go RE2 syntax, compiled by PCRE2 and matched with bounded work. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest pattern accepted, in bytes. */
#define NAMEFILTER_PATTERN_MAX 1024

struct namefilter;

/* Checks one pattern as a flag or config value: compiles it and throws it away. Returns 0, or
 * -EINVAL with a one-line reason in err (syntax error with its offset, a construct Go's RE2
 * refuses such as a backreference or lookaround, or a pattern whose matching is too costly).
 * Pure; any thread. */
int namefilter_check(const char *pattern, char *err, size_t errsz);

/* Compiles a filter: a name passes when it matches include (when not NULL) and does not match
 * exclude (when not NULL). An empty exclude excludes nothing. Returns 0 and sets *ret (owned by
 * the caller, freed with namefilter_free), or -EINVAL with the reason in err, naming the
 * pattern that failed; -ENOMEM. */
int namefilter_new(const char *include, const char *exclude, struct namefilter **ret, char *err,
                   size_t errsz);

/* Frees f (NULL is fine); returns NULL. */
struct namefilter *namefilter_free(struct namefilter *f);

/* True when name passes f; a NULL f passes every name. A name whose match stops at the work
 * limits (or lacks memory) does not pass, and is counted by namefilter_errors(). Any thread,
 * concurrently: f is read-only but for that counter. */
bool namefilter_match(const struct namefilter *f, const char *name);

/* How many matches of f stopped at a work limit (or lacked memory) so far. Any thread. */
uint64_t namefilter_errors(const struct namefilter *f);
