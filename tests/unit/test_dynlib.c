/* Unit tests of lib/dynlib.c: a missing library or symbol is an error naming the package, and
 * leaves no pointer set; a present one sets every pointer, once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dynlib.h"

static __typeof__(strlen) *sym_strlen;
static __typeof__(strchr) *sym_strchr;
/* Declared here only to be looked up: no library defines it. */
size_t diskpulse_test_no_such_symbol(const char *s);
static __typeof__(diskpulse_test_no_such_symbol) *sym_diskpulse_test_no_such_symbol;

static void test_missing_library(void **state)
{
        static const struct dynlib_sym syms[] = {DYNLIB_SYM(strlen)};
        struct dynlib l = DYNLIB_INIT("libdiskpulse-test-absent.so.7", "diskpulse-test-pkg",
                                      "the test feature", syms);
        char err[512] = "";
        (void)state;

        sym_strlen = NULL;
        assert_int_equal(dynlib_load(&l, err, sizeof err), -ENOENT);
        assert_non_null(strstr(err, "the test feature needs libdiskpulse-test-absent.so.7"));
        assert_non_null(strstr(err, "Debian package diskpulse-test-pkg"));
        assert_null(sym_strlen);
        assert_false(dynlib_loaded(&l));
        /* Not remembered: a later call tries again (the package may be installed since). */
        err[0] = '\0';
        assert_int_equal(dynlib_load(&l, err, sizeof err), -ENOENT);
        assert_non_null(strstr(err, "diskpulse-test-pkg"));
}

static void test_missing_symbol(void **state)
{
        static const struct dynlib_sym syms[] = {DYNLIB_SYM(strchr),
                                                 DYNLIB_SYM(diskpulse_test_no_such_symbol)};
        struct dynlib l = DYNLIB_INIT("libc.so.6", "libc6", "the test feature", syms);
        char err[512] = "";
        (void)state;

        sym_strchr = NULL;
        sym_diskpulse_test_no_such_symbol = NULL;
        assert_int_equal(dynlib_load(&l, err, sizeof err), -ENOSYS);
        assert_non_null(strstr(err, "has no symbol diskpulse_test_no_such_symbol"));
        assert_non_null(strstr(err, "Debian package libc6"));
        /* All or nothing: the symbol found before the missing one is not set either. */
        assert_null(sym_strchr);
        assert_null(sym_diskpulse_test_no_such_symbol);
        assert_false(dynlib_loaded(&l));
}

static void test_loads_once(void **state)
{
        static const struct dynlib_sym syms[] = {DYNLIB_SYM(strlen), DYNLIB_SYM(strchr)};
        struct dynlib l = DYNLIB_INIT("libc.so.6", "libc6", "the test feature", syms);
        char err[512] = "";
        (void)state;

        sym_strlen = NULL;
        sym_strchr = NULL;
        assert_int_equal(dynlib_load(&l, err, sizeof err), 0);
        assert_true(dynlib_loaded(&l));
        assert_non_null(sym_strlen);
        assert_int_equal(sym_strlen("diskpulse"), 9);
        assert_string_equal(sym_strchr("a:b", ':'), ":b");
        /* Loaded: the second call returns at once and changes nothing. */
        sym_strlen = NULL;
        assert_int_equal(dynlib_load(&l, err, sizeof err), 0);
        assert_null(sym_strlen);
}

static void test_table_too_long(void **state)
{
        static struct dynlib_sym syms[DYNLIB_MAX_SYMS + 1];
        struct dynlib l = DYNLIB_INIT("libc.so.6", "libc6", "the test feature", syms);
        char err[512] = "";
        (void)state;

        for (size_t i = 0; i < DYNLIB_MAX_SYMS + 1; i++)
                syms[i] = (struct dynlib_sym){"strlen", &sym_strlen};
        sym_strlen = NULL;
        assert_int_equal(dynlib_load(&l, err, sizeof err), -E2BIG);
        assert_null(sym_strlen);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_missing_library),
            cmocka_unit_test(test_missing_symbol),
            cmocka_unit_test(test_loads_once),
            cmocka_unit_test(test_table_too_long),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
