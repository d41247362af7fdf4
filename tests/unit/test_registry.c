/* Unit tests of the registry's calls (daemon/registry.c), by which the rest of the daemon knows
 * the collectors: its count and definitions, the collector whose one-shot command the options
 * ask for, the sampler's window from the collectors' options. (The round's window sample is in
 * test_round.c.) */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "canary_collector.h"
#include "diskstats_collector.h"
#include "registry.h"

/* The registry's calls say what its table holds, in its order. */
static void test_registry_table(void **state)
{
        (void)state;
        assert_int_equal(registry_count(), COLLECTOR_MAX);
        for (size_t i = 0; i < registry_count(); i++)
                assert_ptr_equal(registry_def(i), collector_defs[i]);
        assert_ptr_equal(registry_def(COLLECTOR_DISKSTATS), &diskstats_collector_def);
        assert_ptr_equal(registry_def(COLLECTOR_CANARY), &canary_collector_def);
}

/* The canary's command is asked for by any of its four flags (import-path alone too, so that it
 * can refuse it); nothing else asks for a command. */
static void test_registry_commanded(void **state)
{
        struct canary_options co = {0};
        void *opts[COLLECTOR_MAX] = {0};
        char path[] = "/data";

        (void)state;
        assert_int_equal(registry_commanded(opts), -1); /* no options at all */
        opts[COLLECTOR_CANARY] = &co;
        assert_int_equal(registry_commanded(opts), -1);
        co.reset_reference = path;
        assert_int_equal(registry_commanded(opts), COLLECTOR_CANARY);
        co.reset_reference = NULL;
        co.export_disk = path;
        assert_int_equal(registry_commanded(opts), COLLECTOR_CANARY);
        co.export_disk = NULL;
        co.import_file = path;
        assert_int_equal(registry_commanded(opts), COLLECTOR_CANARY);
        co.import_file = NULL;
        co.import_path = path;
        assert_int_equal(registry_commanded(opts), COLLECTOR_CANARY);
        assert_true(canary_commanded(&co));
        co.import_path = NULL;
        assert_false(canary_commanded(&co));
}

/* The sampler's window is diskstats' --diskstats.window, read from its options blob; without
 * the blob no collector has one. */
static void test_registry_window(void **state)
{
        struct diskstats_options dso = {.window = 42 * USEC_PER_SEC};
        void *opts[COLLECTOR_MAX] = {0};
        usec_t w = 1;

        (void)state;
        assert_false(registry_window(opts, &w));
        assert_int_equal(w, 0);
        opts[COLLECTOR_DISKSTATS] = &dso;
        assert_true(registry_window(opts, &w));
        assert_int_equal(w, 42 * USEC_PER_SEC);
        dso.window = 10 * USEC_PER_SEC;
        assert_true(registry_window(opts, &w));
        assert_int_equal(w, 10 * USEC_PER_SEC);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_registry_table),
            cmocka_unit_test(test_registry_commanded),
            cmocka_unit_test(test_registry_window),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
