/* Unit tests of the metric model: label escaping, UTF-8 repair, label lookup, name checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics.h"
#include "util.h"

#define FFFD "\xEF\xBF\xBD"

static int setup(void **state)
{
        *state = mset_new();
        return *state ? 0 : -1;
}

static int teardown(void **state)
{
        assert_null(mset_free(*state));
        return 0;
}

/* The escaped form of a single label value v, as `k="..."`. */
static const char *one(struct mset *s, const char *v)
{
        return mset_labels(s, "k", v, NULL);
}

static void test_escape_specials(void **state)
{
        struct mset *s = *state;

        assert_string_equal(one(s, "plain"), "k=\"plain\"");
        assert_string_equal(one(s, ""), "k=\"\"");
        assert_string_equal(one(s, "a\\b"), "k=\"a\\\\b\"");
        assert_string_equal(one(s, "say \"hi\""), "k=\"say \\\"hi\\\"\"");
        assert_string_equal(one(s, "line1\nline2"), "k=\"line1\\nline2\"");
        assert_string_equal(one(s, "\\\"\n"), "k=\"\\\\\\\"\\n\"");
        /* '=' ',' '{' '}' need no escaping inside a quoted value */
        assert_string_equal(one(s, "a=b,c{d}"), "k=\"a=b,c{d}\"");
}

static void test_escape_control_and_invalid_utf8(void **state)
{
        struct mset *s = *state;

        /* control bytes other than newline */
        assert_string_equal(one(s, "a\tb"), "k=\"a" FFFD "b\"");
        assert_string_equal(one(s, "\x01\x1f"), "k=\"" FFFD FFFD "\"");
        assert_string_equal(one(s, "del\x7f"), "k=\"del" FFFD "\"");
        assert_string_equal(one(s, "cr\r"), "k=\"cr" FFFD "\"");
        /* a lone byte >= 0x80 (Latin-1 é) */
        assert_string_equal(one(s, "caf\xe9"), "k=\"caf" FFFD "\"");
        assert_string_equal(one(s, "\xff"), "k=\"" FFFD "\"");
        /* a truncated sequence at the end */
        assert_string_equal(one(s, "ab\xc3"), "k=\"ab" FFFD "\"");
        assert_string_equal(one(s, "\xe2\x82"), "k=\"" FFFD FFFD "\"");
        /* a lead byte followed by ASCII: the ASCII survives */
        assert_string_equal(one(s, "\xc3"
                                   "A"),
                            "k=\"" FFFD "A\"");
        /* overlong encodings of '/' and NUL */
        assert_string_equal(one(s, "\xc0\xaf"), "k=\"" FFFD FFFD "\"");
        assert_string_equal(one(s, "\xe0\x80\xaf"), "k=\"" FFFD FFFD FFFD "\"");
        /* a UTF-16 surrogate (U+D800) */
        assert_string_equal(one(s, "\xed\xa0\x80"), "k=\"" FFFD FFFD FFFD "\"");
        /* past U+10FFFF */
        assert_string_equal(one(s, "\xf4\x90\x80\x80"), "k=\"" FFFD FFFD FFFD FFFD "\"");
        /* a stray continuation byte */
        assert_string_equal(one(s, "x\x80y"), "k=\"x" FFFD "y\"");
}

static void test_valid_utf8_kept(void **state)
{
        struct mset *s = *state;

        assert_string_equal(one(s, "caf\xc3\xa9"), "k=\"caf\xc3\xa9\"");           /* é */
        assert_string_equal(one(s, "\xe2\x82\xac 5"), "k=\"\xe2\x82\xac 5\"");     /* € */
        assert_string_equal(one(s, "\xf0\x9f\x98\x80"), "k=\"\xf0\x9f\x98\x80\""); /* 😀 */
        assert_string_equal(one(s, "\xf4\x8f\xbf\xbf"), "k=\"\xf4\x8f\xbf\xbf\""); /* U+10FFFF */
        assert_string_equal(one(s, "\xed\x9f\xbf"), "k=\"\xed\x9f\xbf\"");         /* U+D7FF */
        assert_string_equal(one(s, "\xef\xbf\xbd"), "k=\"" FFFD "\"");             /* U+FFFD */
        /* escapes and UTF-8 together */
        assert_string_equal(one(s, "\xc3\xa9\"\xc3\xa9"), "k=\"\xc3\xa9\\\"\xc3\xa9\"");
}

static void test_label_pairs(void **state)
{
        struct mset *s = *state;

        assert_string_equal(mset_labels(s, NULL), "");
        assert_string_equal(mset_labels(s, "device", "sda", "mode", "fdatasync", NULL),
                            "device=\"sda\",mode=\"fdatasync\"");
        /* NULL values skip their pair, wherever they are */
        assert_string_equal(mset_labels(s, "a", "1", "b", NULL, "c", "3", NULL), "a=\"1\",c=\"3\"");
        assert_string_equal(mset_labels(s, "a", NULL, "b", "2", NULL), "b=\"2\"");
        assert_string_equal(mset_labels(s, "a", "1", "b", NULL, NULL), "a=\"1\"");
        assert_string_equal(mset_labels(s, "a", NULL, "b", NULL, NULL), "");
        /* an empty value is kept */
        assert_string_equal(mset_labels(s, "serial", "", NULL), "serial=\"\"");
}

static void test_long_label_value(void **state)
{
        struct mset *s = *state;
        size_t n = 40000;
        char *v = malloc(n + 1), *want = malloc(2 * n + 8);

        /* bigger than one arena chunk; every byte needs escaping */
        assert_non_null(v);
        assert_non_null(want);
        memset(v, '"', n);
        v[n] = 0;
        strcpy(want, "k=\"");
        for (size_t i = 0; i < n; i++)
                memcpy(want + 3 + 2 * i, "\\\"", 2);
        strcpy(want + 3 + 2 * n, "\"");
        assert_string_equal(one(s, v), want);
        /* and the arena still works after it */
        assert_string_equal(one(s, "x"), "k=\"x\"");
        free(v);
        free(want);
}

static void test_families(void **state)
{
        struct mset *s = *state;
        struct mfamily *f, *g;
        const struct mfamily *c;

        assert_null(mset_find(s, "diskpulse_disk_devices"));
        f = mset_family(s, "diskpulse_disk_reads_completed_total", "Reads.", MT_COUNTER);
        assert_string_equal(f->name, "diskpulse_disk_reads_completed_total");
        assert_string_equal(f->help, "Reads.");
        assert_int_equal(f->type, MT_COUNTER);
        assert_int_equal(f->n, 0);
        mfamily_add_u64(s, f, "", UINT64_MAX, "device", "sda", NULL);
        mfamily_add(s, f, NULL, 2.5, NULL);

        /* the same name gives the same family; the first help and type stay */
        g = mset_family(s, "diskpulse_disk_reads_completed_total", "Other.", MT_GAUGE);
        assert_ptr_equal(f, g);
        assert_string_equal(g->help, "Reads.");
        assert_int_equal(g->type, MT_COUNTER);

        mset_gauge(s, "diskpulse_disk_devices", "Devices.", 3.0, NULL);
        c = mset_find(s, "diskpulse_disk_reads_completed_total");
        assert_non_null(c);
        assert_int_equal(c->n, 2);
        assert_true(c->samples[0].is_int);
        assert_true(c->samples[0].u == UINT64_MAX);
        assert_string_equal(c->samples[0].labels, "device=\"sda\"");
        assert_string_equal(c->samples[0].suffix, "");
        assert_false(c->samples[1].is_int);
        assert_true(c->samples[1].d == 2.5);
        assert_string_equal(c->samples[1].labels, "");
        assert_string_equal(c->samples[1].suffix, ""); /* NULL suffix becomes "" */

        c = mset_find(s, "diskpulse_disk_devices");
        assert_non_null(c);
        assert_int_equal(c->type, MT_GAUGE);
        assert_int_equal(c->n, 1);
        assert_true(c->samples[0].d == 3.0);
        assert_int_equal(s->n, 2);
}

static void test_many_families_and_samples(void **state)
{
        struct mset *s = *state;
        char name[32], dev[16];

        /* pointers move as the arrays grow; names and labels live in the arena */
        for (int i = 0; i < 300; i++) {
                snprintf(name, sizeof name, "fam_%d", i);
                struct mfamily *f = mset_family(s, name, "h", MT_GAUGE);
                for (int k = 0; k < 20; k++) {
                        snprintf(dev, sizeof dev, "d%d", k);
                        mfamily_add(s, f, "", i * 100 + k, "device", dev, NULL);
                }
        }
        assert_int_equal(s->n, 300);
        const struct mfamily *f = mset_find(s, "fam_299");
        assert_non_null(f);
        assert_int_equal(f->n, 20);
        assert_true(f->samples[19].d == 29919);
        assert_string_equal(f->samples[19].labels, "device=\"d19\"");
        assert_string_equal(mset_find(s, "fam_0")->samples[3].labels, "device=\"d3\"");
}

static void test_add_sample(void **state)
{
        struct mset *s = *state;
        struct mfamily *f = mset_family(s, "diskpulse_sync_recent_seconds", "h", MT_SUMMARY);
        const char *base = mset_labels(s, "path", "/var/lib/pg", "device", "sda", NULL);

        mfamily_add_sample(
            s, f,
            &(struct msample_args){
                .labels = base, .extra_name = "quantile", .extra_value = "0.5", .d = 0.001});
        mfamily_add_sample(s, f,
                           &(struct msample_args){.suffix = "_sum", .labels = base, .d = 12.5});
        mfamily_add_sample(
            s, f,
            &(struct msample_args){.suffix = "_count", .labels = base, .is_int = true, .u = 42});
        mfamily_add_sample(
            s, f,
            &(struct msample_args){.extra_name = "quantile", .extra_value = "0.9", .d = 0.002});
        mfamily_add_sample(
            s, f,
            &(struct msample_args){
                .labels = base, .extra_name = "odd", .extra_value = "a\"b\\c\nd", .d = 1});

        assert_int_equal(f->n, 5);
        assert_string_equal(f->samples[0].labels,
                            "path=\"/var/lib/pg\",device=\"sda\",quantile=\"0.5\"");
        assert_true(f->samples[0].d == 0.001);
        assert_string_equal(f->samples[1].suffix, "_sum");
        assert_string_equal(f->samples[1].labels, "path=\"/var/lib/pg\",device=\"sda\"");
        /* a copy, not the caller's pointer */
        assert_ptr_not_equal(f->samples[1].labels, base);
        assert_true(f->samples[2].is_int);
        assert_true(f->samples[2].u == 42);
        assert_true(f->samples[2].d == 42.0); /* an integer's double is its value */
        /* what a call leaves out: suffix "", no labels, a double */
        assert_string_equal(f->samples[3].suffix, "");
        assert_false(f->samples[3].is_int);
        assert_string_equal(f->samples[3].labels, "quantile=\"0.9\"");
        assert_string_equal(f->samples[4].labels,
                            "path=\"/var/lib/pg\",device=\"sda\",odd=\"a\\\"b\\\\c\\nd\"");

        mfamily_add_sample(s, f, &(struct msample_args){.d = 7});
        assert_int_equal(f->n, 6);
        assert_string_equal(f->samples[5].suffix, "");
        assert_string_equal(f->samples[5].labels, "");
        assert_true(f->samples[5].d == 7);
}

static void test_labels_get(void **state)
{
        struct mset *s = *state;
        const char *l = mset_labels(s, "devicex", "no", "device", "sda", "model",
                                    "Samsung SSD \"860\"\\EVO\nx", "empty", "", NULL);
        char buf[64];

        assert_true(labels_get(l, "device", buf, sizeof buf));
        assert_string_equal(buf, "sda");
        assert_true(labels_get(l, "devicex", buf, sizeof buf));
        assert_string_equal(buf, "no");
        assert_true(labels_get(l, "model", buf, sizeof buf));
        assert_string_equal(buf, "Samsung SSD \"860\"\\EVO\nx");
        assert_true(labels_get(l, "empty", buf, sizeof buf));
        assert_string_equal(buf, "");
        assert_false(labels_get(l, "serial", buf, sizeof buf));
        assert_false(labels_get(l, "dev", buf, sizeof buf));
        assert_false(labels_get("", "device", buf, sizeof buf));

        /* truncated to the buffer, terminated */
        memset(buf, 'X', sizeof buf);
        assert_true(labels_get(l, "model", buf, 8));
        assert_string_equal(buf, "Samsung");

        /* a name that appears inside an earlier value is not a label */
        l = mset_labels(s, "a", "device=\"x\",", "device", "y", NULL);
        assert_true(labels_get(l, "device", buf, sizeof buf));
        assert_string_equal(buf, "y");

        /* round trip through escaping of every special byte */
        l = mset_labels(s, "v", "\\\\\"\"\n\n", NULL);
        assert_true(labels_get(l, "v", buf, sizeof buf));
        assert_string_equal(buf, "\\\\\"\"\n\n");
}

static void test_metric_name_valid(void **state)
{
        static const char *const good_metric[] = {
            "diskpulse_disk_reads_completed_total",
            "a",
            "_",
            "A9",
            "a:b",
            ":x",
            "_0_",
            "process_cpu_seconds_total",
        };
        static const char *const bad_metric[] = {"",    "0a", "9",  "a-b", "a b", "a.b",
                                                 "a\n", "é",  "a{", "a\"", "a=b"};
        static const char *const good_label[] = {"device", "_x", "le", "a9", "__name__"};
        static const char *const bad_label[] = {"", "a:b", ":", "1a", "a-b", "a b"};
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(good_metric); i++)
                if (!metric_name_valid(good_metric[i], false))
                        fail_msg("metric name \"%s\" rejected", good_metric[i]);
        for (size_t i = 0; i < ARRAY_SIZE(bad_metric); i++)
                if (metric_name_valid(bad_metric[i], false))
                        fail_msg("metric name \"%s\" accepted", bad_metric[i]);
        for (size_t i = 0; i < ARRAY_SIZE(good_label); i++)
                if (!metric_name_valid(good_label[i], true))
                        fail_msg("label name \"%s\" rejected", good_label[i]);
        for (size_t i = 0; i < ARRAY_SIZE(bad_label); i++)
                if (metric_name_valid(bad_label[i], true))
                        fail_msg("label name \"%s\" accepted", bad_label[i]);
        assert_false(metric_name_valid(NULL, false));
        assert_false(metric_name_valid(NULL, true));
}

static void test_strdup_and_free_null(void **state)
{
        struct mset *s = *state;
        char *p = mset_strdup(s, "hello");

        assert_string_equal(p, "hello");
        assert_string_equal(mset_strdup(s, ""), "");
        assert_null(mset_free(NULL));
}

static void test_table_rows(void **state)
{
        static const char *const names[] = {"device", "model"};
        const char *a[] = {"sda", "x\"y\\z\n\x01"}, *b[] = {"sdb", NULL}, *c[] = {"sdc", ""};
        struct mrows *r = mrows_new(names, 2), *copy = mrows_new(names, 2);
        size_t len;
        const char *v;
        (void)state;

        assert_int_equal(mrows_add(r, a), 0);
        assert_int_equal(mrows_add(r, b), 1);
        v = mrows_value(r, 0, 1, &len);
        assert_int_equal(len, strlen("x\\\"y\\\\z\\n" FFFD));
        assert_memory_equal(v, "x\\\"y\\\\z\\n" FFFD, len);
        v = mrows_value(r, 1, 0, &len);
        assert_int_equal(len, 3);
        assert_memory_equal(v, "sdb", 3);
        (void)mrows_value(r, 1, 1, &len);
        assert_int_equal(len, 0); /* NULL is empty */
        assert_int_equal(r->max_row, 3 + strlen("x\\\"y\\\\z\\n" FFFD));
        assert_int_equal(r->sum_len[0], 6);
        /* copies compare equal, other rows do not; NULL and "" are the same */
        assert_int_equal(mrows_copy_row(copy, r, 1), 0);
        assert_true(mrows_row_equal(copy, 0, r, 1));
        assert_false(mrows_row_equal(copy, 0, r, 0));
        assert_int_equal(mrows_add(copy, c), 1);
        mrows_truncate(copy, 1);
        assert_int_equal(copy->n, 1);
        assert_int_equal(copy->sum_len[0], 3);
        assert_int_equal(mrows_add(copy, c), 1);
        v = mrows_value(copy, 1, 0, &len);
        assert_memory_equal(v, "sdc", 3);
        /* shared: the last unref frees */
        assert_ptr_equal(mrows_ref(r), r);
        assert_null(mrows_unref(r));
        assert_int_equal(r->n, 2);
        assert_null(mrows_unref(r));
        assert_null(mrows_unref(copy));
        assert_null(mrows_unref(NULL));
}

static void test_table_cells_and_iterator(void **state)
{
        static const char *const names[] = {"device", "mode"};
        const char *a[] = {"sda", "write back"}, *b[] = {"sdb", ""}, *c[] = {"sdc", "m"};
        struct mrows *r = mrows_new(names, 2);
        struct mtable *t;
        struct mset *s = *state;
        struct mfamily *f;
        struct msample sm;
        char buf[64];
        size_t pos = 0;

        mrows_add(r, a);
        mrows_add(r, b);
        mrows_add(r, c);
        t = mtable_new(r, 3);
        mtable_add_row(t, 0, 0x7, (const uint64_t[]){5, 0, mtable_double(0.25)});
        mtable_add_row(t, 1, 0x5, (const uint64_t[]){0, 99, 0}); /* 99: not present */
        /* row 2 never added: no samples */
        assert_int_equal(t->ncells, 2); /* only what is not 0 takes room */
        assert_true(mtable_cell(t, 0, 0) == 5);
        assert_true(mtable_cell(t, 0, 1) == 0);
        assert_true(mtable_get_double(t, 0, 2) == 0.25);
        assert_true(mtable_cell(t, 1, 1) == 0);
        f = mset_table_family(s, "x_total", "X.", MT_COUNTER, t, 0, MCELL_U64, 1);
        assert_int_equal(f->n, 2);
        assert_ptr_equal(f->table, t);
        assert_null(f->samples);
        assert_true(mfamily_next(f, &pos, &sm, buf, sizeof buf));
        assert_string_equal(sm.labels, "device=\"sda\"");
        assert_true(sm.is_int && sm.u == 5);
        assert_true(mfamily_next(f, &pos, &sm, buf, sizeof buf));
        assert_string_equal(sm.labels, "device=\"sdb\"");
        assert_true(sm.u == 0);
        assert_false(mfamily_next(f, &pos, &sm, buf, sizeof buf));
        f = mset_table_family(s, "y", "Y.", MT_GAUGE, t, 2, MCELL_DOUBLE, 3);
        pos = 0;
        assert_int_equal(f->n, 2);
        assert_true(mfamily_next(f, &pos, &sm, buf, sizeof buf));
        assert_string_equal(sm.labels, "device=\"sda\",mode=\"write back\"");
        assert_false(sm.is_int);
        assert_true(sm.d == 0.25);
        /* labels cut where the buffer ends, between pairs */
        pos = 0;
        assert_true(mfamily_next(f, &pos, &sm, buf, 20));
        assert_string_equal(sm.labels, "device=\"sda\"");
        f = mset_table_family(s, "z", "Z.", MT_GAUGE, t, 1, MCELL_ONE, 0);
        assert_int_equal(f->n, 1);
        pos = 0;
        assert_true(mfamily_next(f, &pos, &sm, buf, sizeof buf));
        assert_string_equal(sm.labels, "");
        assert_true(sm.d == 1.0);
        /* the set holds its own references: the family outlives ours */
        mtable_unref(t);
        mrows_unref(r);
        assert_memory_equal(mrows_value(mset_find(s, "y")->table->rows, 2, 0, &pos), "sdc", 3);
        assert_int_equal(pos, 3);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_table_rows),
            cmocka_unit_test_setup_teardown(test_table_cells_and_iterator, setup, teardown),
            cmocka_unit_test_setup_teardown(test_escape_specials, setup, teardown),
            cmocka_unit_test_setup_teardown(test_escape_control_and_invalid_utf8, setup, teardown),
            cmocka_unit_test_setup_teardown(test_valid_utf8_kept, setup, teardown),
            cmocka_unit_test_setup_teardown(test_label_pairs, setup, teardown),
            cmocka_unit_test_setup_teardown(test_long_label_value, setup, teardown),
            cmocka_unit_test_setup_teardown(test_families, setup, teardown),
            cmocka_unit_test_setup_teardown(test_many_families_and_samples, setup, teardown),
            cmocka_unit_test_setup_teardown(test_add_sample, setup, teardown),
            cmocka_unit_test_setup_teardown(test_labels_get, setup, teardown),
            cmocka_unit_test_setup_teardown(test_metric_name_valid, setup, teardown),
            cmocka_unit_test_setup_teardown(test_strdup_and_free_null, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
