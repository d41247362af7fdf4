/* Unit tests of the protobuf exposition (exporters/exposition/expo_proto.c): pages decoded with
 * protobuf-c's unpack and compared field by field; native histograms (mnative_index, spans and
 * deltas); the label parser (labels_next); the Accept decision for protobuf. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "encoding.h"
#include "expo.h"
#include "metrics.h"
#include "prometheus_metrics.pb-c.h"

typedef Io__Prometheus__Client__MetricFamily PFamily;

/* The families of a page, decoded (varint length, message, ...). */
static size_t decode(const char *buf, size_t len, PFamily **out, size_t max)
{
        size_t pos = 0, n = 0;

        while (pos < len) {
                uint64_t size = 0;
                int shift = 0;
                for (;;) {
                        assert_true(pos < len);
                        unsigned char c = (unsigned char)buf[pos++];
                        size |= (uint64_t)(c & 0x7f) << shift;
                        shift += 7;
                        if (!(c & 0x80))
                                break;
                }
                assert_true(size <= len - pos);
                assert_true(n < max);
                out[n] = (PFamily *)protobuf_c_message_unpack(
                    &io__prometheus__client__metric_family__descriptor, NULL, size,
                    (const uint8_t *)buf + pos);
                assert_non_null(out[n]);
                n++;
                pos += size;
        }
        return n;
}

static void free_families(PFamily **f, size_t n)
{
        for (size_t i = 0; i < n; i++)
                protobuf_c_message_free_unpacked(&f[i]->base, NULL);
}

static void test_labels_next(void **state)
{
        const char *pos = "a=\"x\",b_2=\"q\\\"\\\\\\n\",c=\"\"", *name;
        char v[16];
        size_t nl, vl;

        (void)state;
        assert_int_equal(labels_next(&pos, &name, &nl, v, sizeof v, &vl), 1);
        assert_int_equal(nl, 1);
        assert_memory_equal(name, "a", 1);
        assert_string_equal(v, "x");
        assert_int_equal(labels_next(&pos, &name, &nl, v, sizeof v, &vl), 1);
        assert_int_equal(nl, 3);
        assert_memory_equal(name, "b_2", 3);
        assert_string_equal(v, "q\"\\\n");
        assert_int_equal(vl, 4);
        assert_int_equal(labels_next(&pos, &name, &nl, v, sizeof v, &vl), 1);
        assert_string_equal(v, "");
        assert_int_equal(vl, 0);
        assert_int_equal(labels_next(&pos, &name, &nl, v, sizeof v, &vl), 0);

        static const char *const bad[] = {"a=x",       "a=\"x",          "=\"x\"", "1a=\"x\"",
                                          "a=\"\\t\"", "a=\"x\"b=\"y\"", "a=\"x\\"};
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                pos = bad[i];
                int r;
                while ((r = labels_next(&pos, &name, &nl, v, sizeof v, &vl)) == 1)
                        ;
                assert_int_equal(r, -EINVAL);
        }
        pos = "a=\"0123456789abcdef\"";
        assert_int_equal(labels_next(&pos, &name, &nl, v, sizeof v, &vl), -ENOBUFS);

        /* what mset_labels escapes comes back as it was */
        struct mset *s = mset_new();
        char *l = mset_labels(s, "dev", "sd\"a\\b\nc", "x", "y", NULL);
        pos = l;
        assert_int_equal(labels_next(&pos, &name, &nl, v, sizeof v, &vl), 1);
        assert_string_equal(v, "sd\"a\\b\nc");
        mset_free(s);
}

static void test_native_index(void **state)
{
        static const struct {
                double v;
                int32_t schema, index;
        } cases[] = {
            {1, 0, 0},    {2, 0, 1},    {3, 0, 2},      {4, 0, 2},        {4.0001, 0, 3},
            {0.5, 0, -1}, {1, 2, 0},    {1.1, 2, 1},    {1.189207, 2, 1}, {1.1893, 2, 2},
            {2, 2, 4},    {0.5, 2, -4}, {1e-3, 2, -39}, {4, -1, 1},       {5, -1, 2},
            {1, -1, 0},   {16, -2, 1},  {17, -2, 2},    {1.0905, 3, 1},   {0.75, 1, 0},
            {0.7, 1, -1}, {1.5, 1, 2},  {1.4142, 1, 1}, {1.4143, 1, 2},   {1024, 8, 2560},
        };

        (void)state;
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
                int32_t got = mnative_index(cases[i].v, cases[i].schema);
                if (got != cases[i].index)
                        fail_msg("mnative_index(%g, %d) = %d, want %d", cases[i].v, cases[i].schema,
                                 got, cases[i].index);
        }
        /* every bound of schema 2 falls in the bucket it closes */
        for (int32_t i = -40; i <= 40; i++)
                assert_int_equal(mnative_index(exp2(i / 4.0), 2), i);
}

static void test_families(void **state)
{
        struct mset *s = mset_new();
        struct mfamily *f;
        PFamily *fams[8];
        char *buf;
        size_t len, n;

        (void)state;
        f = mset_family(s, "dp_reads_total", "Reads.", MT_COUNTER);
        mfamily_add_u64(s, f, "", 7, "device", "sda", NULL);
        mfamily_add_u64(s, f, "", 18446744073709551615u, "device", "s\"d\\b", NULL);
        mset_gauge(s, "dp_temp_celsius", "Temperature.", 41.5, "device", "sda", "model", "x y",
                   NULL);
        f = mset_family(s, "dp_thing", "Untyped thing.", MT_UNTYPED);
        mfamily_add(s, f, "", -2.25, NULL);
        f = mset_family(s, "dp_rtt_seconds", "A summary.", MT_SUMMARY);
        mfamily_add(s, f, "", 0.5, "quantile", "0.5", NULL);
        mfamily_add(s, f, "", 0.9, "quantile", "0.99", NULL);
        mfamily_add(s, f, "_sum", 12.5, NULL);
        mfamily_add_u64(s, f, "_count", 20, NULL);
        mset_family(s, "dp_empty", "No samples.", MT_GAUGE);

        assert_int_equal(expo_render(&s, 1, EXPO_FORMAT_PROTOBUF, &buf, &len), 0);
        n = decode(buf, len, fams, 8);
        assert_int_equal(n, 4); /* the family without samples is left out, as in the text */

        assert_string_equal(fams[0]->name, "dp_reads_total");
        assert_string_equal(fams[0]->help, "Reads.");
        assert_int_equal(fams[0]->type, IO__PROMETHEUS__CLIENT__METRIC_TYPE__COUNTER);
        assert_int_equal(fams[0]->n_metric, 2);
        assert_int_equal(fams[0]->metric[0]->n_label, 1);
        assert_string_equal(fams[0]->metric[0]->label[0]->name, "device");
        assert_string_equal(fams[0]->metric[0]->label[0]->value, "sda");
        assert_non_null(fams[0]->metric[0]->counter);
        assert_true(fams[0]->metric[0]->counter->value == 7);
        assert_string_equal(fams[0]->metric[1]->label[0]->value, "s\"d\\b");
        assert_true(fams[0]->metric[1]->counter->value == 18446744073709551615.0);

        assert_string_equal(fams[1]->name, "dp_temp_celsius");
        assert_int_equal(fams[1]->type, IO__PROMETHEUS__CLIENT__METRIC_TYPE__GAUGE);
        assert_int_equal(fams[1]->metric[0]->n_label, 2);
        assert_string_equal(fams[1]->metric[0]->label[1]->name, "model");
        assert_string_equal(fams[1]->metric[0]->label[1]->value, "x y");
        assert_true(fams[1]->metric[0]->gauge->value == 41.5);

        assert_int_equal(fams[2]->type, IO__PROMETHEUS__CLIENT__METRIC_TYPE__UNTYPED);
        assert_int_equal(fams[2]->metric[0]->n_label, 0);
        assert_true(fams[2]->metric[0]->untyped->value == -2.25);

        assert_int_equal(fams[3]->type, IO__PROMETHEUS__CLIENT__METRIC_TYPE__SUMMARY);
        assert_int_equal(fams[3]->n_metric, 1);
        assert_int_equal(fams[3]->metric[0]->n_label, 0);
        const Io__Prometheus__Client__Summary *sm = fams[3]->metric[0]->summary;
        assert_int_equal(sm->sample_count, 20);
        assert_true(sm->sample_sum == 12.5);
        assert_int_equal(sm->n_quantile, 2);
        assert_true(sm->quantile[0]->quantile == 0.5 && sm->quantile[0]->value == 0.5);
        assert_true(sm->quantile[1]->quantile == 0.99 && sm->quantile[1]->value == 0.9);

        free_families(fams, n);
        free(buf);
        mset_free(s);
}

/* A histogram series of classic buckets at 0.1, 1, +Inf. */
static void add_classic(struct mset *s, struct mfamily *f, const char *dev, uint64_t a, uint64_t b,
                        uint64_t c, double sum)
{
        mfamily_add_u64(s, f, "_bucket", a, "device", dev, "le", "0.1", NULL);
        mfamily_add_u64(s, f, "_bucket", b, "device", dev, "le", "1", NULL);
        mfamily_add_u64(s, f, "_bucket", c, "device", dev, "le", "+Inf", NULL);
        mfamily_add(s, f, "_sum", sum, "device", dev, NULL);
        mfamily_add_u64(s, f, "_count", c, "device", dev, NULL);
}

static void test_histograms(void **state)
{
        struct mset *s = mset_new(), *s2 = mset_new();
        struct mset *sets[2] = {s, s2};
        struct mfamily *f;
        PFamily *fams[4];
        char *buf;
        size_t len, n;
        /* buckets 3..12: gaps of one and two zero buckets stay in a span, three split it */
        static const uint64_t counts[] = {0, 4, 0, 2, 0, 0, 5, 0, 0, 0, 1, 0};
        struct mnative h = {.schema = 2,
                            .zero_threshold = 1e-9,
                            .zero_count = 3,
                            .count = 15,
                            .sum = 6.5,
                            .offset = 2,
                            .n = 12,
                            .counts = counts};
        struct mnative empty = {.schema = 2, .zero_threshold = 1e-9};

        (void)state;
        f = mset_family(s, "dp_lat_seconds", "Latency.", MT_HISTOGRAM);
        add_classic(s, f, "sda", 3, 14, 15, 6.5);
        add_classic(s, f, "sdb", 0, 0, 0, 0);
        mfamily_add_native(s, f, mset_labels(s, "device", "sda", NULL), &h);
        mfamily_add_native(s, f, mset_labels(s, "device", "sdb", NULL), &empty);
        /* a second set's family of the name is merged, one without native part */
        f = mset_family(s2, "dp_lat_seconds", "Other help.", MT_HISTOGRAM);
        add_classic(s2, f, "sdc", 1, 2, 2, 0.25);

        assert_int_equal(expo_render(sets, 2, EXPO_FORMAT_PROTOBUF, &buf, &len), 0);
        n = decode(buf, len, fams, 4);
        assert_int_equal(n, 1);
        assert_string_equal(fams[0]->name, "dp_lat_seconds");
        assert_string_equal(fams[0]->help, "Latency.");
        assert_int_equal(fams[0]->type, IO__PROMETHEUS__CLIENT__METRIC_TYPE__HISTOGRAM);
        assert_int_equal(fams[0]->n_metric, 3);

        const Io__Prometheus__Client__Histogram *a = fams[0]->metric[0]->histogram;
        assert_int_equal(fams[0]->metric[0]->n_label, 1);
        assert_string_equal(fams[0]->metric[0]->label[0]->value, "sda");
        assert_int_equal(a->sample_count, 15);
        assert_true(a->sample_sum == 6.5);
        assert_int_equal(a->n_bucket, 2); /* +Inf is sample_count */
        assert_true(a->bucket[0]->upper_bound == 0.1 && a->bucket[0]->cumulative_count == 3);
        assert_true(a->bucket[1]->upper_bound == 1 && a->bucket[1]->cumulative_count == 14);
        assert_true(a->has_schema && a->schema == 2);
        assert_true(a->zero_threshold == 1e-9);
        assert_int_equal(a->zero_count, 3);
        assert_int_equal(a->n_positive_span, 2);
        assert_int_equal(a->positive_span[0]->offset, 3);
        assert_int_equal(a->positive_span[0]->length, 6); /* 4 0 2 0 0 5 */
        assert_int_equal(a->positive_span[1]->offset, 3); /* after three zero buckets */
        assert_int_equal(a->positive_span[1]->length, 1);
        static const int64_t deltas[] = {4, -4, 2, -2, 0, 5, -4};
        assert_int_equal(a->n_positive_delta, 7);
        for (size_t i = 0; i < 7; i++)
                assert_int_equal(a->positive_delta[i], deltas[i]);
        assert_int_equal(a->n_negative_span, 0);

        const Io__Prometheus__Client__Histogram *b = fams[0]->metric[1]->histogram;
        assert_int_equal(b->sample_count, 0);
        assert_true(b->has_schema && b->schema == 2);
        assert_int_equal(b->zero_count, 0);
        assert_int_equal(b->n_positive_span, 1); /* the empty span that marks it native */
        assert_int_equal(b->positive_span[0]->offset, 0);
        assert_int_equal(b->positive_span[0]->length, 0);
        assert_int_equal(b->n_positive_delta, 0);

        const Io__Prometheus__Client__Histogram *c = fams[0]->metric[2]->histogram;
        assert_string_equal(fams[0]->metric[2]->label[0]->value, "sdc");
        assert_false(c->has_schema);
        assert_int_equal(c->n_positive_span, 0);
        assert_int_equal(c->sample_count, 2);
        assert_true(c->sample_sum == 0.25);
        assert_int_equal(c->n_bucket, 2);

        /* the text page does not show the native part */
        char *text;
        size_t tlen;
        assert_int_equal(expo_render(sets, 2, EXPO_FORMAT_TEXT, &text, &tlen), 0);
        assert_null(strstr(text, "schema"));
        assert_int_equal(strstr(text, "dp_lat_seconds_count{device=\"sda\"} 15\n") != NULL, 1);
        free(text);

        free_families(fams, n);
        free(buf);
        mset_free(s);
        mset_free(s2);
}

static void test_accept_protobuf(void **state)
{
        static const char prom242_native[] =
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,"
            "application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,"
            "*/*;q=0.1";
        static const char prom242[] =
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
            "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        static const struct {
                const char *value;
                bool pb;
        } cases[] = {
            {prom242_native, true},
            {prom242, false},
            {NULL, false},
            {"", false},
            {"*/*", false},
            {"application/vnd.google.protobuf", false},
            {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily", false},
            {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
             "encoding=text",
             false},
            {"application/vnd.google.protobuf; proto=\"io.prometheus.client.MetricFamily\"; "
             "encoding=\"delimited\"",
             true},
            {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
             "encoding=delimited;q=0",
             false},
            {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
             "encoding=delimited;q=0.5,text/plain;q=0.6",
             false},
            {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
             "encoding=delimited;q=0.5,*/*;q=0.5",
             true},
            {"text/*;q=0.9,application/vnd.google.protobuf;proto=io.prometheus.client."
             "MetricFamily;encoding=delimited;q=0.95",
             true},
            {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
             "encoding=delimited;q=0.7,application/openmetrics-text;version=1.0.0;q=0.8",
             false},
            {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
             "encoding=delimited;q=2",
             false},
        };

        (void)state;
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
                if (encoding_accept_protobuf(cases[i].value) != cases[i].pb)
                        fail_msg("case %zu (%s): want %d", i,
                                 cases[i].value ? cases[i].value : "NULL", cases[i].pb);
        /* without the feature, Prometheus keeps getting OpenMetrics */
        assert_true(encoding_accept_openmetrics(prom242));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_labels_next),     cmocka_unit_test(test_native_index),
            cmocka_unit_test(test_families),        cmocka_unit_test(test_histograms),
            cmocka_unit_test(test_accept_protobuf),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
