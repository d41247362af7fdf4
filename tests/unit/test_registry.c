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
#include "options.h"
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

/* A collector's command flags (collector_def.command_options) are options exactly once, in their
 * order, command-line only and read at start, inside its options struct; an OPT_CLI_ONLY mark
 * of the daemon's table puts them right after the entry before it: the canary's after --once,
 * where --help has always listed them. */
static void test_command_flags(void **state)
{
        size_t marks = 0;

        (void)state;
        for (size_t c = 0; c < registry_count(); c++) {
                const struct collector_def *def = registry_def(c);
                size_t at = 0;

                for (size_t k = 0; k < def->n_command_options; k++) {
                        const struct opt_def *own = &def->command_options[k];
                        size_t found = 0;

                        assert_true(own->offset < def->options_size);
                        assert_true(own->flags & OPT_CLI_ONLY);
                        assert_int_equal(own->reload, OPT_START);
                        for (size_t i = 0; i < options_count(); i++) {
                                if (strcmp(options_entry(i)->name, own->name) != 0)
                                        continue;
                                found++;
                                if (k > 0 && i != at + 1)
                                        fail_msg("%s: not next to the previous command flag",
                                                 own->name);
                                at = i;
                        }
                        if (found != 1)
                                fail_msg("%s: %zu options of that name", own->name, found);
                }
        }
        for (size_t m = 1; m < options_table_size; m++) {
                const struct opt_def *d = &options_table[m];
                const struct collector_def *def = NULL;
                size_t prev = options_count();

                if (d->type != OPT_FRAGMENT || !(d->flags & OPT_CLI_ONLY))
                        continue;
                for (size_t c = 0; c < registry_count(); c++)
                        if (strcmp(registry_def(c)->name, d->name) == 0)
                                def = registry_def(c);
                assert_non_null(def);
                assert_true(def->n_command_options > 0);
                for (size_t i = 0; i < options_count(); i++)
                        if (strcmp(options_entry(i)->name, options_table[m - 1].name) == 0)
                                prev = i;
                assert_true(prev + 1 < options_count());
                assert_string_equal(options_entry(prev + 1)->name, def->command_options[0].name);
                marks++;
        }
        assert_true(marks >= 1);
        for (size_t i = 0; i + 1 < options_count(); i++)
                if (strcmp(options_entry(i)->name, "once") == 0)
                        assert_string_equal(options_entry(i + 1)->name, "canary.reset-reference");
}

/* The canary's command flags parsed from a command line land in its options, and the registry
 * finds its command there. */
static void test_command_parsed(void **state)
{
        char *argv[] = {"diskpulse", "--state.directory=/nonexistent-state",
                        "--canary.export-records=sdb", "--canary.import-path=/srv/pg"};
        char *plain[] = {"diskpulse", "--state.directory=/nonexistent-state"};
        const struct canary_options *co;
        struct dp_options o;
        char err[512];

        (void)state;
        assert_int_equal(options_parse(4, argv, &o, err, sizeof err), 0);
        co = o.collector_opts[COLLECTOR_CANARY];
        assert_string_equal(co->export_disk, "sdb");
        assert_string_equal(co->import_path, "/srv/pg");
        assert_null(co->reset_reference);
        assert_null(co->import_file);
        assert_int_equal(registry_commanded(o.collector_opts), COLLECTOR_CANARY);
        options_free(&o);
        assert_int_equal(options_parse(2, plain, &o, err, sizeof err), 0);
        assert_int_equal(registry_commanded(o.collector_opts), -1);
        options_free(&o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_registry_table),  cmocka_unit_test(test_registry_commanded),
            cmocka_unit_test(test_registry_window), cmocka_unit_test(test_command_flags),
            cmocka_unit_test(test_command_parsed),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
