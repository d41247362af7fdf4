/* lib/namefilter: node_exporter's device patterns as they are, Go's RE2 syntax and no more,
 * bounded matching. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "namefilter.h"
#include "util.h"

/* node_exporter's default --collector.diskstats.device-exclude, today's and the older one. */
#define NE_EXCLUDE     "^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\\d+n\\d+p)\\d+$"
#define NE_EXCLUDE_OLD "^(ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\\d+n\\d+p)\\d+$"

static bool passes(const char *include, const char *exclude, const char *name)
{
        struct namefilter *f = NULL;
        char err[256] = "";
        bool m;

        if (namefilter_new(include, exclude, &f, err, sizeof err) < 0)
                fail_msg("include %s exclude %s: %s", include ? include : "-",
                         exclude ? exclude : "-", err);
        m = namefilter_match(f, name);
        assert_int_equal(namefilter_errors(f), 0);
        namefilter_free(f);
        return m;
}

static void test_node_exporter_defaults(void **state)
{
        static const char *const both_drop[] = {"sda1",  "sdz15", "nvme0n1p2", "nvme12n3p45",
                                                "loop3", "loop0", "ram0",      "xvda1",
                                                "hda2",  "vdb1",  "fd0",       "ram15"};
        static const char *const both_keep[] = {
            "sda", "nvme0n1", "dm-0",     "md127", "vda",       "xvda", "zram",  "loop",
            "sr0", "mmcblk0", "nvme0n1p", "sda1x", "mmcblk0p1", "nbd0", "sdaa1", "dm-12"};
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(both_drop); i++) {
                if (passes(NULL, NE_EXCLUDE, both_drop[i]))
                        fail_msg("default exclude keeps %s", both_drop[i]);
                if (passes(NULL, NE_EXCLUDE_OLD, both_drop[i]))
                        fail_msg("older default exclude keeps %s", both_drop[i]);
        }
        for (size_t i = 0; i < ARRAY_SIZE(both_keep); i++) {
                if (!passes(NULL, NE_EXCLUDE, both_keep[i]))
                        fail_msg("default exclude drops %s", both_keep[i]);
                if (!passes(NULL, NE_EXCLUDE_OLD, both_keep[i]))
                        fail_msg("older default exclude drops %s", both_keep[i]);
        }
        /* the one difference: zram devices, excluded since node_exporter added "z?" */
        assert_false(passes(NULL, NE_EXCLUDE, "zram0"));
        assert_true(passes(NULL, NE_EXCLUDE_OLD, "zram0"));
        /* "$" is the end of the name only, as in Go (not before a final newline) */
        assert_true(passes(NULL, NE_EXCLUDE, "sda1\n"));
}

static void test_include_and_exclude(void **state)
{
        (void)state;

        assert_true(passes(NULL, NULL, "anything"));
        assert_true(namefilter_match(NULL, "anything"));
        assert_true(passes("^(sd|nvme)", NULL, "sdb"));
        assert_false(passes("^(sd|nvme)", NULL, "dm-0"));
        assert_false(passes("^sd", "^sdb$", "sdb"));
        assert_true(passes("^sd", "^sdb$", "sdc"));
        assert_true(passes(NULL, "", "sdb")); /* an empty exclude excludes nothing */
        /* Go syntax PCRE2 takes the same way */
        assert_true(passes("^[[:alpha:]\\d]+$", NULL, "sda1"));
        assert_true(passes("^[]\\d]+$", NULL, "]9"));
        assert_true(passes("^(?i)SDA$", NULL, "sda"));
        assert_true(passes("^(?P<kind>sd|vd)[a-z]$", NULL, "vdc"));
        assert_true(passes("^(?:md)\\d{1,3}$", NULL, "md127"));
        assert_false(passes("^(?:md)\\d{1,3}$", NULL, "md1270"));
        assert_true(passes("^\\Qdm-0\\E$", NULL, "dm-0"));
        assert_true(passes("^\\x{64}m\\b", NULL, "dm-3"));
        assert_true(passes("^\\pL+\\d*\\z", NULL, "sda12"));
        assert_true(passes("^sd[a-z]*?$", NULL, "sdab"));
        assert_true(passes("^a{x}$", NULL, "a{x}")); /* not a repetition: a literal, as in Go */
        assert_true(passes("^a\\{,5}$", NULL, "a{,5}"));
        /* \d is ASCII only, as in Go */
        assert_false(passes("^\\d$", NULL, "\xd9\xa3")); /* ARABIC-INDIC DIGIT THREE */
}

static void refused(const char *pattern, const char *why)
{
        char err[256] = "";

        if (namefilter_check(pattern, err, sizeof err) != -EINVAL)
                fail_msg("\"%s\" accepted", pattern);
        if (!strstr(err, why))
                fail_msg("\"%s\": \"%s\" does not say \"%s\"", pattern, err, why);
}

static void test_refuses_what_go_refuses(void **state)
{
        struct namefilter *f = NULL;
        char err[256] = "";
        (void)state;

        refused("(", "missing closing parenthesis");
        refused("a[", "missing terminating ]");
        refused("trailing\\", "trailing backslash");
        refused("(a)\\1", "backreference \\1");
        refused("(?P<x>a)(?P=x)", "unsupported group");
        refused("(?<x>a)\\k<x>", "invalid escape \\k");
        refused("(a)\\g1", "invalid escape \\g");
        refused("sd(?=a)", "lookaround");
        refused("sd(?!a)", "lookaround");
        refused("(?<=s)d", "lookaround");
        refused("(?<!s)d", "lookaround");
        refused("(?>sd)", "atomic groups");
        refused("(?|a|b)", "unsupported group");
        refused("(a|(?R))", "recursion");
        refused("(?(1)a|b)", "conditionals");
        refused("(?#note)sd", "comments");
        refused("(*SKIP)sd", "verbs");
        refused("(*LIMIT_MATCH=99999999)sd", "verbs");
        refused("sd\\C", "invalid escape \\C");
        refused("sd\\K", "invalid escape \\K");
        refused("a++", "nested repetition");
        refused("a*+", "nested repetition");
        refused("a{2}{3}", "nested repetition");
        refused("a*??", "nested repetition");
        refused("a{1001}", "repetition count over 1000");
        /* literal in Go, a repetition in newer PCRE2: refused, with the way to write it */
        refused("a{,5}", "write \\{ for a literal brace");
        refused("a{ 1,2 }", "ambiguous");
        refused("[\\b]", "invalid escape \\b");
        /* the error names the pattern */
        assert_int_equal(namefilter_new("^sd", "a(", &f, err, sizeof err), -EINVAL);
        assert_null(f);
        assert_non_null(strstr(err, "exclude \"a(\": missing closing parenthesis"));
        assert_int_equal(namefilter_new("(?=x)", NULL, &f, err, sizeof err), -EINVAL);
        assert_non_null(strstr(err, "include \"(?=x)\": unsupported group"));
}

static void test_pathological_is_bounded(void **state)
{
        struct namefilter *f = NULL;
        char err[256] = "", name[200];
        usec_t t0;
        (void)state;

        /* refused at once, with the reason */
        t0 = now_monotonic();
        refused("(a+)+$", "too costly");
        refused("^(\\d+)+x", "too costly");
        refused("(x+x+)+y", "too costly");
        assert_true(now_monotonic() - t0 < 2 * USEC_PER_SEC);

        /* one the probe does not see (its letter is not in the pattern) is still bounded at
         * match time: the name does not pass, the error is counted */
        refused("^([^x]+)+y", "too costly");
        assert_int_equal(namefilter_new("^(\\W+)+y", NULL, &f, err, sizeof err), 0);
        memset(name, '-', sizeof name - 3);
        memcpy(name + sizeof name - 3, "zy", 3);
        t0 = now_monotonic();
        assert_false(namefilter_match(f, name));
        assert_true(now_monotonic() - t0 < 2 * USEC_PER_SEC);
        assert_int_equal(namefilter_errors(f), 1);
        assert_true(namefilter_match(f, "--y"));
        f = namefilter_free(f);

        /* too long */
        {
                char big[NAMEFILTER_PATTERN_MAX + 2];
                memset(big, 'a', sizeof big - 1);
                big[sizeof big - 1] = 0;
                refused(big, "longer than");
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_node_exporter_defaults),
            cmocka_unit_test(test_include_and_exclude),
            cmocka_unit_test(test_refuses_what_go_refuses),
            cmocka_unit_test(test_pathological_is_bounded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
