/* Device name filters (--collector.diskstats.device-include/-exclude): node_exporter's
 * patterns, Go RE2 syntax, compiled by PCRE2 and matched with bounded work. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What differs from Go's regexp (RE2):
 * - refused though Go accepts: \NN octal escapes (\1..\9 read as backreferences; \0NN works),
 *   a "{" that is not a repetition but starts like one ("{,3}", "{ 1}": write \{), POSIX
 *   [=x=] and [.x.] inside brackets (PCRE2 refuses them), nesting deeper than 250 parentheses,
 *   and a pattern that backtracks past the limits on a probe name ("(a+)+$");
 * - refused as Go refuses them: backreferences, lookaround, atomic groups, recursion,
 *   conditionals, PCRE2's verbs "(*...)", possessive and stacked quantifiers, counts over 1000,
 *   escapes outside Go's list (\C, \K, \G, \R, \h, ...);
 * - matched the same: "$" only at the end, "." never a newline, \d \w \s \b ASCII only,
 *   (?imsU) flags, (?P<name>), \Q...\E, \pL, [[:alpha:]];
 * - matching backtracks (PCRE2), bounded per name by a match, depth and heap limit, where RE2 is
 *   linear: a name whose match reaches a limit does not pass. */

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
