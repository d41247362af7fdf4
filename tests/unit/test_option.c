/* Unit tests of the option value engine (lib/option.h): each type parsed from good and bad
 * values with the exact message, written as the dump writes it, its --help default and range,
 * checked, copied, compared and freed; a custom type through the same calls. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "option.h"
#include "util.h"

/* A custom value: "KEY=N", no KEY twice. */
struct pair {
        char *key;
        unsigned n;
};

struct opts {
        bool b;
        char *s;
        char **list;
        size_t n_list;
        usec_t dur;
        unsigned u;
        uint64_t size;
        int e;
        struct pair *pairs;
        size_t n_pairs;
        bool sw[3];
};

#define OFF(f) offsetof(struct opts, f)

static int pair_parse(const struct opt_def *d, const char *value, const void *vals, size_t n,
                      void *v, char *why, size_t whysz)
{
        const struct pair *have = vals;
        const char *eq = strchr(value, '=');
        uint64_t num;

        (void)d;
        if (!eq || eq == value || parse_u64(eq + 1, &num) < 0) {
                snprintf(why, whysz, "\"%s\" (expected KEY=N)", value);
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++)
                if (strncmp(have[i].key, value, (size_t)(eq - value)) == 0 &&
                    !have[i].key[eq - value]) {
                        snprintf(why, whysz, "\"%s\" is given twice", value);
                        return -EINVAL;
                }
        *(struct pair *)v =
            (struct pair){.key = strndup(value, (size_t)(eq - value)), .n = (unsigned)num};
        return 0;
}

static void pair_copy(void *dst, const void *src)
{
        const struct pair *s = src;

        *(struct pair *)dst = (struct pair){.key = xstrdup(s->key), .n = s->n};
}

static bool pair_equal(const void *a, const void *b)
{
        const struct pair *x = a, *y = b;

        return x->n == y->n && strcmp(x->key, y->key) == 0;
}

static void pair_free(void *v)
{
        free(((struct pair *)v)->key);
}

static const char *pair_format(const struct opt_def *d, const void *v, char *buf, size_t size)
{
        const struct pair *p = v;

        (void)d;
        snprintf(buf, size, "%s=%u", p->key, p->n);
        return buf;
}

static const struct opt_type_ops pair_ops = {
    .size = sizeof(struct pair),
    .parse = pair_parse,
    .copy = pair_copy,
    .equal = pair_equal,
    .free = pair_free,
    .format = pair_format,
};

static int check_no_x(const char *value, char *why, size_t whysz)
{
        if (strchr(value, 'x')) {
                snprintf(why, whysz, "has an x");
                return -EINVAL;
        }
        return 0;
}

static const char *s_unset(const void *opts)
{
        return ((const struct opts *)opts)->b ? "(on)" : NULL;
}

static const char *const colours[] = {"red", "green", "blue", NULL};
static const char *const subs[] = {"one", "two", "three", NULL};

static const struct opt_def d_bool = {.name = "b", .type = OPT_BOOL, .offset = OFF(b), .def = 1};
static const struct opt_def d_string = {.name = "s",
                                        .type = OPT_STRING,
                                        .offset = OFF(s),
                                        .def_str = "/def",
                                        .def_env = "TEST_OPTION_DIR",
                                        .check = check_no_x,
                                        .unset = s_unset};
static const struct opt_def d_list = {.name = "l",
                                      .type = OPT_LIST,
                                      .offset = OFF(list),
                                      .count_offset = OFF(n_list),
                                      .def_str = ":1",
                                      .check = check_no_x};
static const struct opt_def d_dur = {.name = "dur",
                                     .type = OPT_DURATION,
                                     .offset = OFF(dur),
                                     .def = 60 * USEC_PER_SEC,
                                     .min = USEC_PER_SEC,
                                     .max = 3600 * USEC_PER_SEC};
static const struct opt_def d_uint = {
    .name = "u", .type = OPT_UINT, .offset = OFF(u), .def = 64, .min = 1, .max = 4096};
static const struct opt_def d_size = {
    .name = "size", .type = OPT_SIZE, .offset = OFF(size), .def = 4096, .min = 1, .max = 16 << 20};
static const struct opt_def d_enum = {
    .name = "e", .type = OPT_ENUM, .offset = OFF(e), .def = 1, .names = colours};
static const struct opt_def d_pairs = {.name = "p",
                                       .type = OPT_CUSTOM,
                                       .offset = OFF(pairs),
                                       .count_offset = OFF(n_pairs),
                                       .custom = &pair_ops,
                                       .help_default = ": none"};
static const struct opt_def d_sw = {
    .name = "sw", .type = OPT_COLLECTORS, .offset = OFF(sw), .def = 0x5, .subs = subs};

static const struct opt_def *const all[] = {&d_bool, &d_string, &d_list,  &d_dur, &d_uint,
                                            &d_size, &d_enum,   &d_pairs, &d_sw};

static void defaults(struct opts *o)
{
        memset(o, 0, sizeof(*o));
        for (size_t i = 0; i < ARRAY_SIZE(all); i++)
                opt_set_default(all[i], o);
}

static void clear(struct opts *o)
{
        for (size_t i = 0; i < ARRAY_SIZE(all); i++)
                opt_clear(all[i], o);
}

/* The dump's lines of d in o. */
static const char *printed(const struct opt_def *d, const struct opts *o)
{
        static char buf[1024];
        FILE *f;

        memset(buf, 0, sizeof buf);
        f = fmemopen(buf, sizeof buf, "w");

        assert_non_null(f);
        opt_print(d, o, f);
        fclose(f);
        return buf;
}

/* Parses value into o; returns the message, "" when accepted. */
static const char *parse(const struct opt_def *d, struct opts *o, size_t sub, const char *value,
                         bool negated)
{
        static char why[512];

        why[0] = 0;
        if (opt_parse(d, o, sub, value, negated, why, sizeof why) < 0)
                assert_true(why[0] != 0);
        else
                assert_string_equal(why, "");
        return why;
}

static const char *help(const struct opt_def *d)
{
        static char buf[256];

        return opt_help_default(d, buf, sizeof buf);
}

static const char *check(const struct opt_def *d, const struct opts *o)
{
        static char why[256];

        why[0] = 0;
        if (opt_check(d, o, why, sizeof why) < 0)
                assert_true(why[0] != 0);
        return why;
}

static int setup(void **state)
{
        (void)state;
        unsetenv("TEST_OPTION_DIR");
        return 0;
}

static void test_bool(void **state)
{
        struct opts o;
        (void)state;

        defaults(&o);
        assert_true(o.b);
        assert_true(opt_is_switch(&d_bool));
        assert_true(opt_is_negatable(&d_bool));
        assert_false(opt_is_repeatable(&d_bool));
        {
                /* a command (--once): on/off, but no "no-" form */
                const struct opt_def cmd = {
                    .name = "once", .type = OPT_BOOL, .offset = OFF(b), .flags = OPT_CLI_ONLY};
                assert_true(opt_is_switch(&cmd));
                assert_false(opt_is_negatable(&cmd));
        }
        assert_string_equal(printed(&d_bool, &o), "b = true\n");
        assert_string_equal(parse(&d_bool, &o, 0, "off", false), "");
        assert_false(o.b);
        assert_string_equal(parse(&d_bool, &o, 0, "maybe", false),
                            "\"maybe\" (expected true or false)");
        assert_false(o.b);
        assert_string_equal(parse(&d_bool, &o, 0, NULL, false), "");
        assert_true(o.b);
        assert_string_equal(parse(&d_bool, &o, 0, NULL, true), "");
        assert_false(o.b);
        /* --no-b=BOOL: the value's opposite, as the config file's "no-b = true" */
        assert_string_equal(parse(&d_bool, &o, 0, "false", true), "");
        assert_true(o.b);
        assert_string_equal(parse(&d_bool, &o, 0, "true", true), "");
        assert_false(o.b);
        assert_string_equal(parse(&d_bool, &o, 0, "no", true), "");
        assert_true(o.b);
        assert_string_equal(parse(&d_bool, &o, 0, "maybe", true),
                            "\"maybe\" (expected true or false)");
        assert_true(o.b);
        assert_string_equal(parse(&d_bool, &o, 0, "", true), "\"\" (expected true or false)");
        assert_string_equal(parse(&d_bool, &o, 0, "1", true), "");
        assert_false(o.b);
        assert_string_equal(printed(&d_bool, &o), "b = false\n");
        assert_string_equal(help(&d_bool), "");
        assert_string_equal(check(&d_bool, &o), "");
        clear(&o);
}

static void test_string(void **state)
{
        struct opts o, p;
        (void)state;

        defaults(&o);
        assert_false(opt_is_switch(&d_string));
        assert_string_equal(o.s, "/def");
        assert_string_equal(help(&d_string), " (default $TEST_OPTION_DIR or /def)");
        assert_string_equal(parse(&d_string, &o, 0, "", false), "empty");
        assert_string_equal(parse(&d_string, &o, 0, "/a/x", false), "\"/a/x\" (has an x)");
        assert_string_equal(o.s, "/def");
        assert_string_equal(parse(&d_string, &o, 0, "/other", false), "");
        assert_string_equal(printed(&d_string, &o), "s = /other\n");

        /* copy, compare, free */
        defaults(&p);
        assert_false(opt_equal(&d_string, &o, &p));
        opt_copy(&d_string, &p, &o);
        assert_true(opt_equal(&d_string, &o, &p));
        assert_ptr_not_equal(o.s, p.s);
        opt_clear(&d_string, &o);
        assert_null(o.s);
        assert_false(opt_equal(&d_string, &o, &p));
        /* not set: the unset value, or no line */
        o.b = false;
        assert_string_equal(printed(&d_string, &o), "");
        o.b = true;
        assert_string_equal(printed(&d_string, &o), "s = (on)\n");
        clear(&o);
        clear(&p);

        /* the environment's absolute value, its first ':' entry; a relative one is ignored */
        setenv("TEST_OPTION_DIR", "/run/a:/run/b", 1);
        defaults(&o);
        assert_string_equal(o.s, "/run/a");
        clear(&o);
        setenv("TEST_OPTION_DIR", "run/a", 1);
        defaults(&o);
        assert_string_equal(o.s, "/def");
        clear(&o);
        unsetenv("TEST_OPTION_DIR");

        /* allow_empty */
        struct opt_def e = d_string;
        e.allow_empty = true;
        defaults(&o);
        assert_string_equal(parse(&e, &o, 0, "", false), "");
        assert_string_equal(o.s, "");
        clear(&o);
}

static void test_list(void **state)
{
        struct opts o, p;
        (void)state;

        defaults(&o);
        assert_int_equal(o.n_list, 1);
        assert_string_equal(o.list[0], ":1");
        assert_string_equal(help(&d_list), " (default :1)");
        assert_string_equal(parse(&d_list, &o, 0, ":2", false), "");
        assert_string_equal(parse(&d_list, &o, 0, "", false), ""); /* no "empty" for a list */
        assert_string_equal(parse(&d_list, &o, 0, "x:3", false), "\"x:3\" (has an x)");
        assert_int_equal(o.n_list, 3);
        assert_string_equal(printed(&d_list, &o), "l = :1\nl = :2\nl = \n");

        defaults(&p);
        assert_false(opt_equal(&d_list, &o, &p));
        opt_copy(&d_list, &p, &o);
        assert_true(opt_equal(&d_list, &o, &p));
        assert_int_equal(p.n_list, 3);
        assert_string_equal(p.list[1], ":2");
        opt_clear(&d_list, &o);
        assert_null(o.list);
        assert_int_equal(o.n_list, 0);
        assert_string_equal(printed(&d_list, &o), "");
        clear(&o);
        clear(&p);
}

static void test_duration(void **state)
{
        struct opts o;
        (void)state;

        defaults(&o);
        assert_int_equal(o.dur, 60 * USEC_PER_SEC);
        assert_string_equal(printed(&d_dur, &o), "dur = 1m\n");
        /* --help gives the range that is checked, whatever bounds it has */
        assert_string_equal(help(&d_dur), " (default 1m, 1s to 1h)");
        struct opt_def plain = d_dur;
        plain.min = plain.max = 0;
        assert_string_equal(help(&plain), " (default 1m)");
        plain.min = 100 * USEC_PER_MSEC;
        assert_string_equal(help(&plain), " (default 1m, at least 100ms)");
        plain.max = 86400 * USEC_PER_SEC;
        assert_string_equal(help(&plain), " (default 1m, 100ms to 24h)");
        /* a bound checked against another option, named in its place */
        plain.min = 0;
        plain.help_min = "--other";
        assert_string_equal(help(&plain), " (default 1m, --other to 24h)");
        plain.max = 0;
        plain.help_max = "3600 x --other";
        assert_string_equal(help(&plain), " (default 1m, --other to 3600 x --other)");

        assert_string_equal(parse(&d_dur, &o, 0, "1m30s", false), "");
        assert_int_equal(o.dur, 90 * USEC_PER_SEC);
        assert_string_equal(printed(&d_dur, &o), "dur = 90s\n");
        assert_string_equal(check(&d_dur, &o), "");
        static const char *const bad[] = {"abc", "0", "0s", "10"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char want[128];
                snprintf(want, sizeof want,
                         "\"%s\" (expected a positive duration such as 500ms, 10s, 5m, 1h)",
                         bad[i]);
                assert_string_equal(parse(&d_dur, &o, 0, bad[i], false), want);
                assert_int_equal(o.dur, 90 * USEC_PER_SEC);
        }
        /* the range, once everything is read */
        assert_string_equal(parse(&d_dur, &o, 0, "500ms", false), "");
        assert_string_equal(check(&d_dur, &o), "500ms (expected 1s to 1h)");
        assert_string_equal(parse(&d_dur, &o, 0, "2h", false), "");
        assert_string_equal(check(&d_dur, &o), "2h (expected 1s to 1h)");
        plain = d_dur;
        plain.max = 0;
        assert_string_equal(check(&plain, &o), "");
        assert_string_equal(parse(&d_dur, &o, 0, "10ms", false), "");
        assert_string_equal(check(&plain, &o), "10ms (expected at least 1s)");
        clear(&o);
}

static void test_uint(void **state)
{
        struct opts o;
        (void)state;

        defaults(&o);
        assert_int_equal(o.u, 64);
        assert_string_equal(help(&d_uint), " (default 64, 1 to 4096)");
        assert_string_equal(printed(&d_uint, &o), "u = 64\n");
        assert_string_equal(parse(&d_uint, &o, 0, "4096", false), "");
        assert_int_equal(o.u, 4096);
        assert_string_equal(parse(&d_uint, &o, 0, "1", false), "");
        assert_string_equal(printed(&d_uint, &o), "u = 1\n");
        /* its range is checked as it is parsed */
        static const char *const bad[] = {"0", "4097", "-1", "x", "", "99999999999999999999"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char want[128];
                snprintf(want, sizeof want, "\"%s\" (expected a number from 1 to 4096)", bad[i]);
                assert_string_equal(parse(&d_uint, &o, 0, bad[i], false), want);
                assert_int_equal(o.u, 1);
        }
        assert_string_equal(check(&d_uint, &o), "");
        clear(&o);
}

static void test_size(void **state)
{
        struct opts o;
        (void)state;

        defaults(&o);
        assert_int_equal(o.size, 4096);
        assert_string_equal(help(&d_size), " (default 4096, 1 byte to 16M)");
        assert_string_equal(parse(&d_size, &o, 0, "8k", false), "");
        assert_int_equal(o.size, 8192);
        assert_string_equal(printed(&d_size, &o), "size = 8192\n");
        assert_string_equal(parse(&d_size, &o, 0, "0", false),
                            "\"0\" (expected a size in bytes such as 4096, 8k or 1M)");
        assert_string_equal(parse(&d_size, &o, 0, "lots", false),
                            "\"lots\" (expected a size in bytes such as 4096, 8k or 1M)");
        assert_int_equal(o.size, 8192);
        assert_string_equal(check(&d_size, &o), "");
        assert_string_equal(parse(&d_size, &o, 0, "17M", false), "");
        assert_string_equal(check(&d_size, &o), "17825792 (expected 1 byte to 16M)");
        struct opt_def k = d_size;
        k.min = 2048;
        k.max = 3 << 10;
        assert_string_equal(check(&k, &o), "17825792 (expected 2k to 3k)");
        clear(&o);
}

static void test_enum(void **state)
{
        struct opts o;
        (void)state;

        defaults(&o);
        assert_int_equal(o.e, 1);
        assert_string_equal(help(&d_enum), " (default green)");
        assert_string_equal(printed(&d_enum, &o), "e = green\n");
        assert_string_equal(parse(&d_enum, &o, 0, "blue", false), "");
        assert_int_equal(o.e, 2);
        assert_string_equal(printed(&d_enum, &o), "e = blue\n");
        assert_string_equal(parse(&d_enum, &o, 0, "Blue", false),
                            "\"Blue\" (expected red, green or blue)");
        assert_int_equal(o.e, 2);
        clear(&o);
}

static void test_custom(void **state)
{
        struct opts o, p;
        (void)state;

        defaults(&o);
        assert_ptr_equal(opt_type_ops(&d_pairs), &pair_ops);
        assert_int_equal(o.n_pairs, 0); /* no default */
        assert_string_equal(help(&d_pairs), " (default: none)");
        assert_string_equal(printed(&d_pairs, &o), "");
        assert_string_equal(parse(&d_pairs, &o, 0, "a=1", false), "");
        assert_string_equal(parse(&d_pairs, &o, 0, "b=2", false), "");
        /* the values so far reach the type's parse */
        assert_string_equal(parse(&d_pairs, &o, 0, "a=3", false), "\"a=3\" is given twice");
        assert_string_equal(parse(&d_pairs, &o, 0, "a", false), "\"a\" (expected KEY=N)");
        assert_int_equal(o.n_pairs, 2);
        assert_string_equal(printed(&d_pairs, &o), "p = a=1\np = b=2\n");

        defaults(&p);
        assert_false(opt_equal(&d_pairs, &o, &p));
        opt_copy(&d_pairs, &p, &o);
        assert_true(opt_equal(&d_pairs, &o, &p));
        assert_ptr_not_equal(o.pairs[0].key, p.pairs[0].key);
        p.pairs[1].n = 7;
        assert_false(opt_equal(&d_pairs, &o, &p));
        clear(&o);
        assert_null(o.pairs);
        assert_int_equal(o.n_pairs, 0);
        clear(&p);
}

static void test_switches(void **state)
{
        struct opts o, p;
        (void)state;

        defaults(&o);
        assert_true(opt_is_switch(&d_sw));
        assert_true(opt_is_negatable(&d_sw));
        assert_false(opt_is_negatable(&d_string));
        assert_false(opt_is_repeatable(&d_sw));
        assert_true(opt_is_repeatable(&d_list));
        /* bit i of def is subs[i]'s default */
        assert_true(o.sw[0]);
        assert_false(o.sw[1]);
        assert_true(o.sw[2]);
        assert_string_equal(printed(&d_sw, &o), "sw.one = true\nsw.two = false\nsw.three = true\n");
        defaults(&p);
        assert_true(opt_equal(&d_sw, &o, &p));
        assert_string_equal(parse(&d_sw, &o, 1, NULL, false), "");
        assert_string_equal(parse(&d_sw, &o, 2, NULL, true), "");
        assert_string_equal(parse(&d_sw, &o, 0, "nope", false),
                            "\"nope\" (expected true or false)");
        assert_true(o.sw[0]);
        assert_true(o.sw[1]);
        assert_false(o.sw[2]);
        assert_false(opt_equal(&d_sw, &o, &p));
        /* clearing keeps a switch's state (a flag replaces one switch, not the others) */
        opt_clear(&d_sw, &o);
        assert_true(o.sw[1]);
        opt_copy(&d_sw, &p, &o);
        assert_true(opt_equal(&d_sw, &o, &p));
        assert_string_equal(printed(&d_sw, &p), "sw.one = true\nsw.two = true\nsw.three = false\n");
        assert_string_equal(help(&d_sw), "");
        clear(&o);
        clear(&p);
}

/* A help_default replaces what the type would show. */
static void test_help_default(void **state)
{
        struct opt_def d = d_uint;
        (void)state;

        d.help_default = ": all";
        assert_string_equal(help(&d), " (default: all)");
        d = d_string;
        d.def_str = NULL;
        d.def_env = NULL;
        assert_string_equal(help(&d), "");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bool),     cmocka_unit_test(test_string),
            cmocka_unit_test(test_list),     cmocka_unit_test(test_duration),
            cmocka_unit_test(test_uint),     cmocka_unit_test(test_size),
            cmocka_unit_test(test_enum),     cmocka_unit_test(test_custom),
            cmocka_unit_test(test_switches), cmocka_unit_test(test_help_default),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
