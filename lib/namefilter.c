/* Device name filters: Go RE2 patterns checked for what RE2 refuses, compiled and matched by
 * PCRE2 with limits on the work and memory of one match. Syntax: Go's regexp/syntax package
 * documentation; the library: pcre2api(3), pcre2pattern(3). */
#include "namefilter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <pcre2.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds of one match. Device names are short (the kernel's DISK_NAME_LEN is 32), and a pattern
 * that needs more than this much backtracking on such a name is one that nests repetitions.
 * The match limit counts PCRE2's steps from each start position; the depth limit bounds the
 * nested backtracking points, the heap limit (KiB) the memory they take. No JIT: the service runs
 * with MemoryDenyWriteExecute=yes (no executable memory can be made), the depth and heap limits
 * apply to the interpreter only, and a filter runs once per new device name. */
#define MATCH_LIMIT  100000
#define DEPTH_LIMIT  1000
#define HEAP_LIMIT   1024
#define NEST_LIMIT   250  /* parentheses; Go allows 1000 */
#define REPEAT_MAX   1000 /* Go's largest {n,m} count */
#define PROBE_LENGTH 32   /* the costly-pattern probe: a name this long */

struct namefilter {
        pcre2_code *include, *exclude;
        pcre2_match_context *mctx; /* never changed after creation: shared by all threads */
        _Atomic uint64_t errors;
};

static void fail(char *err, size_t errsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(char *err, size_t errsz, const char *fmt, ...)
{
        va_list ap;

        if (!errsz)
                return;
        va_start(ap, fmt);
        vsnprintf(err, errsz, fmt, ap);
        va_end(ap);
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
        return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Checks the escape at p[i] == '\\' as Go accepts it; returns the index of its last byte, or
 * -1 with err set. Inside a bracket class fewer letters are allowed. */
static long check_escape(const char *p, size_t i, bool in_class, char *err, size_t errsz)
{
        char e = p[i + 1];

        if (!e) {
                fail(err, errsz, "trailing backslash at offset %zu", i);
                return -1;
        }
        if (e >= '1' && e <= '9') {
                fail(err, errsz,
                     "backreference \\%c at offset %zu: not supported (Go's RE2 refuses "
                     "backreferences)",
                     e, i);
                return -1;
        }
        if ((unsigned char)e >= 0x80) {
                fail(err, errsz, "invalid escape at offset %zu", i);
                return -1;
        }
        if (!is_alnum(e) || strchr("0afnrtvxdDsSwWpP", e) || (!in_class && strchr("AbBz", e)))
                return (long)i + 1;
        fail(err, errsz,
             "invalid escape \\%c at offset %zu: not in Go's RE2 syntax (backreferences, \\K, \\G, "
             "\\Z, \\R, \\h, \\C and the like are refused)",
             e, i);
        return -1;
}

/* Checks a group opening "(?" at p[i] == '('; returns 0 or -1 with err set. Go accepts (?:re),
 * (?flags), (?flags:re), (?P<name>re) and (?<name>re), with flags from "imsU-". */
static int check_group(const char *p, size_t i, char *err, size_t errsz)
{
        const char *q = p + i + 2;

        if (q[0] == ':' || (q[0] == 'P' && q[1] == '<') ||
            (q[0] == '<' && q[1] != '=' && q[1] != '!'))
                return 0;
        while (*q && strchr("imsU-", *q))
                q++;
        if (q > p + i + 2 && (*q == ')' || *q == ':'))
                return 0;
        fail(err, errsz,
             "unsupported group \"(?%.2s\" at offset %zu: lookaround, atomic groups, named "
             "backreferences, recursion, conditionals, comments and callouts are refused, as "
             "Go's RE2 refuses them",
             p + i + 2, i);
        return -1;
}

/* Reads a counted repetition "{n}", "{n,}" or "{n,m}" at p[i] == '{'. Returns the index of its
 * '}', 0 when it is not one (Go takes the brace literally), or -1 with err set. */
static long check_count(const char *p, size_t i, char *err, size_t errsz)
{
        size_t j = i + 1;
        unsigned long n[2] = {0, 0};
        int k = 0;

        for (;;) {
                size_t start = j;
                while (is_digit(p[j])) {
                        if (n[k] <= REPEAT_MAX)
                                n[k] = n[k] * 10 + (unsigned long)(p[j] - '0');
                        j++;
                }
                if (j == start && !(k == 1 && p[j] == '}'))
                        return 0;
                if (k == 0 && p[j] == ',') {
                        k = 1;
                        j++;
                        continue;
                }
                if (p[j] != '}')
                        return 0;
                break;
        }
        if (n[0] > REPEAT_MAX || n[1] > REPEAT_MAX) {
                fail(err, errsz, "repetition count over %d at offset %zu (Go's RE2 refuses it)",
                     REPEAT_MAX, i);
                return -1;
        }
        return (long)j;
}

/* Refuses what PCRE2 would accept but Go's RE2 does not: backreferences, lookaround and the
 * other Perl-only groups, verbs such as (*SKIP), possessive and stacked quantifiers, escapes
 * outside Go's list, repetition counts over 1000. Returns 0 or -1 with err set. */
static int check_go_syntax(const char *p, char *err, size_t errsz)
{
        enum { ATOM, NONE, QUANT, LAZY } last = NONE;

        for (size_t i = 0; p[i]; i++) {
                char c = p[i];
                long end;

                switch (c) {
                case '\\':
                        if (p[i + 1] == 'Q') {
                                const char *e = strstr(p + i + 2, "\\E");
                                i = e ? (size_t)(e - p) + 1 : strlen(p) - 1;
                                last = ATOM;
                                continue;
                        }
                        end = check_escape(p, i, false, err, errsz);
                        if (end < 0)
                                return -1;
                        i = (size_t)end;
                        last = ATOM;
                        continue;
                case '[': {
                        size_t j = i + 1;
                        if (p[j] == '^')
                                j++;
                        if (p[j] == ']')
                                j++;
                        for (; p[j] && p[j] != ']'; j++) {
                                if (p[j] == '[' && p[j + 1] == ':') {
                                        const char *e = strstr(p + j + 2, ":]");
                                        if (e)
                                                j = (size_t)(e - p) + 1;
                                } else if (p[j] == '\\') {
                                        end = check_escape(p, j, true, err, errsz);
                                        if (end < 0)
                                                return -1;
                                        j = (size_t)end;
                                }
                        }
                        if (!p[j])
                                return 0; /* unterminated: PCRE2 says so */
                        i = j;
                        last = ATOM;
                        continue;
                }
                case '(':
                        if (p[i + 1] == '*') {
                                fail(err, errsz,
                                     "\"(*\" at offset %zu: PCRE2's verbs and start options are "
                                     "refused, as Go's RE2 refuses them",
                                     i);
                                return -1;
                        }
                        if (p[i + 1] == '?' && check_group(p, i, err, errsz) < 0)
                                return -1;
                        last = NONE;
                        continue;
                case '*':
                case '+':
                case '?':
                        if (last == LAZY || (last == QUANT && c != '?')) {
                                fail(err, errsz,
                                     "nested repetition \"%c\" at offset %zu (possessive or "
                                     "stacked quantifiers are refused, as Go's RE2 refuses them)",
                                     c, i);
                                return -1;
                        }
                        last = last == QUANT ? LAZY : QUANT;
                        continue;
                case '{':
                        end = check_count(p, i, err, errsz);
                        if (end < 0)
                                return -1;
                        if (end == 0 && (p[i + 1] == ',' || p[i + 1] == ' ' || p[i + 1] == '\t' ||
                                         is_digit(p[i + 1]))) {
                                /* "{,3}", "{ 1 }", "{1,x": literal in Go, but PCRE2 10.43 and
                                 * later read some of them as repetitions */
                                fail(err, errsz,
                                     "ambiguous \"{\" at offset %zu: not a repetition {n}, {n,} "
                                     "or {n,m}; write \\{ for a literal brace",
                                     i);
                                return -1;
                        }
                        if (end == 0) {
                                last = ATOM;
                                continue;
                        }
                        if (last == QUANT || last == LAZY) {
                                fail(err, errsz,
                                     "nested repetition \"{\" at offset %zu (stacked quantifiers "
                                     "are refused, as Go's RE2 refuses them)",
                                     i);
                                return -1;
                        }
                        i = (size_t)end;
                        last = QUANT;
                        continue;
                default:
                        last = c == '|' || c == ')' || c == '^' ? NONE : ATOM;
                        continue;
                }
        }
        return 0;
}

static pcre2_match_context *match_context_new(void)
{
        pcre2_match_context *m = pcre2_match_context_create(NULL);

        if (!m)
                return NULL;
        pcre2_set_match_limit(m, MATCH_LIMIT);
        pcre2_set_depth_limit(m, DEPTH_LIMIT);
        pcre2_set_heap_limit(m, HEAP_LIMIT);
        return m;
}

/* 1 match, 0 none, or a PCRE2 error (negative): a limit reached, no memory. */
static int match_one(const pcre2_code *code, pcre2_match_context *mctx, const char *s, size_t n)
{
        pcre2_match_data *md = pcre2_match_data_create(1, NULL);
        int r;

        if (!md)
                return PCRE2_ERROR_NOMEMORY;
        r = pcre2_match(code, (PCRE2_SPTR)s, n, 0, 0, md, mctx);
        pcre2_match_data_free(md);
        if (r == PCRE2_ERROR_NOMATCH)
                return 0;
        return r < 0 ? r : 1;
}

/* Matches the pattern against names made to make nested repetitions backtrack: a run of one of
 * the pattern's letters or digits, a byte nothing expects, then every letter and digit of the
 * pattern (so that PCRE2's check for a required letter does not end the match early). Such a
 * pattern is refused at start-up and not met later on a real name. Returns 0 or -1 with err
 * set. */
static int probe_cost(const pcre2_code *code, pcre2_match_context *mctx, const char *pattern,
                      char *err, size_t errsz)
{
        char seen[128] = {0}, letters[64], name[PROBE_LENGTH + sizeof letters];
        size_t n = strlen(pattern), k = 0;

        for (size_t i = 0; i < n + 2; i++) {
                char c = i < n ? pattern[i] : "a0"[i - n];
                if (is_alnum(c) && !seen[(unsigned char)c] && k < sizeof letters) {
                        seen[(unsigned char)c] = 1;
                        letters[k++] = c;
                }
        }
        for (size_t i = 0; i < k; i++) {
                char c = letters[i];

                memset(name, c, PROBE_LENGTH - 1);
                name[PROBE_LENGTH - 1] = '\x01';
                memcpy(name + PROBE_LENGTH, letters, k);
                if (match_one(code, mctx, name, PROBE_LENGTH + k) < 0) {
                        fail(err, errsz,
                             "too costly: matching a %d-byte name of '%c's stopped at the "
                             "backtracking limit (nested repetition such as \"(a+)+\"? Go's RE2 "
                             "matches in linear time; write it without nesting)",
                             PROBE_LENGTH, c);
                        return -1;
                }
        }
        return 0;
}

static int compile(const char *pattern, pcre2_match_context *mctx, pcre2_code **ret, char *err,
                   size_t errsz)
{
        pcre2_compile_context *cctx;
        pcre2_code *code;
        PCRE2_SIZE off = 0;
        uint32_t backrefs = 0;
        int code_err = 0;

        if (strlen(pattern) > NAMEFILTER_PATTERN_MAX) {
                fail(err, errsz, "longer than %d bytes", NAMEFILTER_PATTERN_MAX);
                return -EINVAL;
        }
        if (check_go_syntax(pattern, err, errsz) < 0)
                return -EINVAL;
        cctx = pcre2_compile_context_create(NULL);
        if (!cctx)
                return -ENOMEM;
        pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
        pcre2_set_parens_nest_limit(cctx, NEST_LIMIT);
        pcre2_set_max_pattern_length(cctx, NAMEFILTER_PATTERN_MAX);
        /* Go: UTF-8 patterns, \d \w \s \b ASCII only (no PCRE2_UCP), "$" only at the end. */
        code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY |
                                 PCRE2_NEVER_BACKSLASH_C,
                             &code_err, &off, cctx);
        pcre2_compile_context_free(cctx);
        if (!code) {
                PCRE2_UCHAR msg[120];
                if (pcre2_get_error_message(code_err, msg, sizeof msg) < 0)
                        strcpy((char *)msg, "syntax error");
                fail(err, errsz, "%s at offset %zu", (const char *)msg, (size_t)off);
                return code_err == PCRE2_ERROR_NOMEMORY ? -ENOMEM : -EINVAL;
        }
        if (pcre2_pattern_info(code, PCRE2_INFO_BACKREFMAX, &backrefs) == 0 && backrefs > 0) {
                fail(err, errsz, "backreferences are not supported (Go's RE2 refuses them)");
                pcre2_code_free(code);
                return -EINVAL;
        }
        if (probe_cost(code, mctx, pattern, err, errsz) < 0) {
                pcre2_code_free(code);
                return -EINVAL;
        }
        *ret = code;
        return 0;
}

int namefilter_check(const char *pattern, char *err, size_t errsz)
{
        pcre2_match_context *mctx = match_context_new();
        pcre2_code *code = NULL;
        int r;

        if (!mctx)
                return -ENOMEM;
        r = compile(pattern, mctx, &code, err, errsz);
        pcre2_code_free(code);
        pcre2_match_context_free(mctx);
        return r;
}

int namefilter_new(const char *include, const char *exclude, struct namefilter **ret, char *err,
                   size_t errsz)
{
        struct namefilter *f = calloc(1, sizeof *f);
        char msg[256];
        int r = -ENOMEM;

        if (!f)
                return -ENOMEM;
        f->mctx = match_context_new();
        if (!f->mctx)
                goto fail;
        if (include) {
                r = compile(include, f->mctx, &f->include, msg, sizeof msg);
                if (r < 0) {
                        fail(err, errsz, "include \"%s\": %s", include, msg);
                        goto fail;
                }
        }
        if (exclude && *exclude) {
                r = compile(exclude, f->mctx, &f->exclude, msg, sizeof msg);
                if (r < 0) {
                        fail(err, errsz, "exclude \"%s\": %s", exclude, msg);
                        goto fail;
                }
        }
        *ret = f;
        return 0;
fail:
        if (r == -ENOMEM)
                fail(err, errsz, "out of memory");
        namefilter_free(f);
        return r;
}

struct namefilter *namefilter_free(struct namefilter *f)
{
        if (!f)
                return NULL;
        pcre2_code_free(f->include);
        pcre2_code_free(f->exclude);
        pcre2_match_context_free(f->mctx);
        free(f);
        return NULL;
}

bool namefilter_match(const struct namefilter *f, const char *name)
{
        struct namefilter *mf = (struct namefilter *)f; /* only the error counter changes */
        size_t n;
        int r;

        if (!f)
                return true;
        n = strlen(name);
        if (f->include) {
                r = match_one(f->include, f->mctx, name, n);
                if (r <= 0)
                        goto out;
        }
        if (f->exclude) {
                r = match_one(f->exclude, f->mctx, name, n);
                if (r != 0)
                        goto out;
        }
        return true;
out:
        if (r < 0)
                atomic_fetch_add_explicit(&mf->errors, 1, memory_order_relaxed);
        return false;
}

uint64_t namefilter_errors(const struct namefilter *f)
{
        return f ? atomic_load_explicit(&((struct namefilter *)f)->errors, memory_order_relaxed)
                 : 0;
}
