/* Unit tests of exporters/exposition/encoding.c: Accept-Encoding and Accept decisions, gzip round
 * trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "encoding.h"

static void test_accept(void **state)
{
        static const struct {
                const char *value;
                bool gzip;
        } cases[] = {
            {NULL, false},
            {"", false},
            {"gzip", true},
            {"GZip", true},
            {"x-gzip", true},
            {"gzip, deflate, br", true},
            {"deflate, gzip;q=1.0, *;q=0.5", true},
            {"br;q=1, gzip;q=0.001", true},
            {"gzip;q=0", false},
            {"gzip;q=0.000", false},
            {"gzip ; q=0", false},
            {"gzip;Q=0", false},
            {"*", true},
            {"*;q=0", false},
            {"gzip;q=0, *", false},
            {"*, gzip;q=0", false},
            {"identity", false},
            {"deflate", false},
            {"gzipx", false},
            {"xgzip", false},
            {"gzip;q=1.5", false}, /* malformed qvalue: the element is ignored */
            {"gzip;q=abc", false}, /* likewise */
            {"gzip;q=0.1234", false},
            {"gzip;q=", false},
            {"gzip;level=9", true}, /* other parameters do not matter */
            {"gzip;q=0.5;level=1", true},
            {" ,, gzip ,", true},
            {"\tgzip\t", true},
            {"gzip q=1", false},
            {",", false},
            {";q=1", false},
            {"gzip;q=0, gzip", false}, /* the lowest of repeated gzip elements counts */
            /* identity named above gzip: the page uncompressed (RFC 9110 §12.5.3) */
            {"gzip;q=0.5, identity;q=1", false},
            {"identity;q=1, gzip;q=0.5", false},
            {"gzip;q=0.5, identity;q=0.5", true}, /* a tie: the smaller page */
            {"gzip;q=0.5, identity;q=0.4", true},
            {"gzip;q=0.5, identity", false},
            {"gzip, identity", true},
            {"gzip;q=0.001, identity;q=0", true},
            {"Identity;Q=1, GZIP;q=0.9", false},
            /* "*" stands for identity too when identity is not named */
            {"gzip;q=0.5, *", false},
            {"gzip;q=0.5, *;q=0.1", true},
            {"gzip;q=0.5, *;q=1, identity;q=0.2", true},
            {"*;q=0.5, identity;q=1", false},
            {"*;q=0.5, identity;q=0.5", true},
            {"deflate;q=1, gzip;q=0.3", true}, /* identity not named: after any coding named */
            /* a weight is read once, bare, whole */
            {"gzip;q=0.5;q=1, identity;q=0.7", false}, /* two weights: the element counts not */
            {"gzip;q=\"1\"", false},
            {"gzip;q=0.5 , identity;q=0.9 ", false},
            {"gzip;level=\"9,q=0\"", true}, /* a comma inside a quoted value ends nothing */
            {"gzip;a=\"x;q=0\";q=1", true},
            {"gzip;a=\"x\\\"y;q=0\"", true}, /* a quoted-pair does not close the string */
            {"gzip;a=\"unclosed, identity", false},
            {"gzip;;q=1;", true}, /* empty parameters */
            {"gzip;=1", false},
            {"gzip;a", false},
            {"gzip;a=", false},
            {"gzip;a=b\"c\"", false},
            {"gz(ip", false},
        };
        (void)state;

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                if (encoding_accept_gzip(cases[i].value) != cases[i].gzip)
                        fail_msg("encoding_accept_gzip(\"%s\") != %d",
                                 cases[i].value ? cases[i].value : "(null)", cases[i].gzip);
}

static void test_accept_openmetrics(void **state)
{
        static const struct {
                const char *value;
                bool om;
        } cases[] = {
            {NULL, false},
            {"", false},
            {"*/*", false},
            {"text/plain", false},
            /* what Prometheus 2.x sends */
            {"application/openmetrics-text;version=1.0.0,application/"
             "openmetrics-text;version=0.0.1;"
             "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
             true},
            {"application/openmetrics-text", true},
            {"Application/OpenMetrics-Text; version=\"1.0.0\"", true},
            {"application/openmetrics-text;version=0.0.1", true},
            {"application/openmetrics-text;version=2.0.0", false},
            {"application/openmetrics-text;version=2.0.0, text/plain", false},
            {"application/openmetrics-text;q=0", false},
            {"application/openmetrics-text;q=0.5, text/plain", false},
            {"text/plain;q=0.5, application/openmetrics-text", true},
            {"application/openmetrics-text, text/plain", true}, /* a tie goes to OpenMetrics */
            {"application/openmetrics-text;q=0.4, */*;q=0.5", false},
            {"application/openmetrics-text;q=0.4, text/*;q=0.5", false},
            {"application/openmetrics-text;q=x, text/plain;q=0.1", false},
            {"application/openmetrics-textx", false},
            {"application/json", false},
        };
        (void)state;

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                if (encoding_accept_openmetrics(cases[i].value) != cases[i].om)
                        fail_msg("encoding_accept_openmetrics(\"%s\") != %d",
                                 cases[i].value ? cases[i].value : "(null)", cases[i].om);
}

/* A long value is read whole (the request's header block is bounded by the connection's
 * memory): an element past 4 KiB counts, and one cut there would be read as another value. */
static void test_accept_long(void **state)
{
        size_t n = 16384;
        char *v = malloc(n + 64);
        (void)state;

        /* "gzip" only at the end of 16 KiB of separators */
        memset(v, ' ', n);
        for (size_t i = 0; i < n; i += 8)
                v[i] = ',';
        memcpy(v + n - 4, "gzip", 5);
        assert_true(encoding_accept_gzip(v));
        /* "gzip;q=0.5" where 4096 bytes end after "gzip;q=0": cut, it would refuse gzip */
        memset(v, ' ', n);
        strcpy(v + 4096 - strlen("gzip;q=0"), "gzip;q=0.5");
        assert_true(encoding_accept_gzip(v));
        /* "text/plain;q=0.75" cut after "q=0." is q=0, which would give HTML */
        memset(v, ' ', n);
        strcpy(v + 4096 - strlen("text/html;q=0.5, text/plain;q=0."),
               "text/html;q=0.5, text/plain;q=0.75");
        assert_false(encoding_accept_html(v));
        strcpy(v + 4096 - strlen("text/html;q=0.5, text/plain;q=0."),
               "text/html;q=0.5, text/plain;q=0.25");
        assert_true(encoding_accept_html(v));
        /* a protobuf element past 4 KiB */
        memset(v, ' ', n);
        v[0] = ',';
        strcpy(v + 8000, "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                         "encoding=delimited");
        assert_true(encoding_accept_protobuf(v));
        free(v);
}

/* Accept's list read as RFC 9110 §5.6.1 and §12.5.1 have it, for both pages: a parameter's
 * quoted-string may hold ';' and ',', which end nothing; an element that does not parse counts
 * for nothing (never as part of its neighbour); a value joined from several field lines (the
 * server joins them with ", ") is one list. */
static void test_accept_lists(void **state)
{
        static const struct {
                const char *value;
                bool html, om, pb;
        } cases[] = {
            {"text/html", true, false, false},
            /* a quoted ';': still one parameter, the element counts */
            {"text/html;foo=\"a;b\"", true, false, false},
            {"text/html;foo=\"a;b\";q=0.5, text/plain;q=0.4", true, false, false},
            {"text/html;foo=\"a;q=0\"", true, false, false},
            /* a quoted ',': not the end of the element */
            {"text/html;foo=\"a,b\", text/plain;q=0.1", true, false, false},
            {"text/html;foo=\"a, text/plain\"", true, false, false},
            /* a quoted-pair: \" does not close the string */
            {"text/html;foo=\"a\\\", text/plain\"", true, false, false},
            /* a quoted-string not closed: that element is ignored, up to the end */
            {"text/plain;q=0.1, text/html;foo=\"a, text/plain", false, false, false},
            /* a quote inside a token value is malformed: that element only */
            {"text/html;foo=a\"b, text/plain;q=0.1", false, false, false},
            {"text/plain;q=0.1, text/html;foo=a\"b\", text/x", false, false, false},
            /* two weights, or a quoted one: the element counts for nothing */
            {"text/html;q=1;q=0.5", false, false, false},
            {"text/html;q=\"1\"", false, false, false},
            {"text/html;;q=0.9;, text/plain;q=0.5", true, false, false}, /* empty parameters */
            /* the text/plain;q=0.1 then text/html field lines, joined */
            {"text/plain;q=0.1, text/html", true, false, false},
            /* parameters' values compare unquoted */
            {"application/openmetrics-text;version=\"1.0.0\"", false, true, false},
            {"application/openmetrics-text;version=\"1.0.\\0\"", false, true, false},
            {"application/openmetrics-text;version=\"1.0.0 \"", false, false, false},
            {"application/openmetrics-text;version=\"1.0.0", false, false, false},
            {"application/vnd.google.protobuf;proto=\"io.prometheus.client.MetricFamily\";"
             "encoding=\"delimited\"",
             false, false, true},
            /* on /metrics: text, then the protobuf type on a second line, joined */
            {"text/plain;version=0.0.4;q=0.5, application/vnd.google.protobuf;"
             "proto=io.prometheus.client.MetricFamily;encoding=delimited",
             false, false, true},
            {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
             "encoding=delimited;q=0.4, text/plain;q=0.5",
             false, false, false},
            {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
             "encoding=\"delimited,x\"",
             false, false, false},
        };
        (void)state;

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                const char *v = cases[i].value;

                if (encoding_accept_html(v) != cases[i].html)
                        fail_msg("encoding_accept_html(\"%s\") != %d", v, cases[i].html);
                if (encoding_accept_openmetrics(v) != cases[i].om)
                        fail_msg("encoding_accept_openmetrics(\"%s\") != %d", v, cases[i].om);
                if (encoding_accept_protobuf(v) != cases[i].pb)
                        fail_msg("encoding_accept_protobuf(\"%s\") != %d", v, cases[i].pb);
        }
}

/* Inflates a gzip member; returns the bytes (malloc'd) and their count, or NULL. */
static unsigned char *gunzip(const void *in, size_t len, size_t max, size_t *ret_len)
{
        z_stream z;
        unsigned char *out = malloc(max ? max : 1);
        int r;

        memset(&z, 0, sizeof z);
        assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = (uInt)len;
        z.next_out = out;
        z.avail_out = (uInt)max;
        r = inflate(&z, Z_FINISH);
        *ret_len = z.total_out;
        inflateEnd(&z);
        if (r != Z_STREAM_END || z.avail_in != 0) {
                free(out);
                return NULL;
        }
        return out;
}

static void roundtrip(const void *data, size_t len, int level)
{
        void *gz;
        size_t gz_len, out_len;
        unsigned char *out;

        assert_int_equal(encoding_gzip_compress(data, len, level, &gz, &gz_len), 0);
        assert_true(gz_len >= 18); /* header 10 + trailer 8 */
        assert_int_equal(((unsigned char *)gz)[0], 0x1f);
        assert_int_equal(((unsigned char *)gz)[1], 0x8b);
        out = gunzip(gz, gz_len, len + 1, &out_len);
        assert_non_null(out);
        assert_int_equal(out_len, len);
        assert_memory_equal(out, data, len);
        free(out);
        free(gz);
}

static void test_gzip(void **state)
{
        static const char text[] = "# HELP diskpulse_disk_reads_completed_total Reads.\n"
                                   "diskpulse_disk_reads_completed_total{device=\"sda\"} 1\n";
        size_t n = 3 * 1024 * 1024;
        char *big = malloc(n);
        uint32_t x = 1;
        void *gz;
        size_t gz_len;
        (void)state;

        roundtrip("", 0, 1);
        roundtrip(text, sizeof text - 1, 1);
        roundtrip(text, sizeof text - 1, 9);
        for (size_t i = 0; i < n; i++) {
                x = x * 1103515245u + 12345u;
                big[i] = (char)(i % 97 < 80 ? text[i % (sizeof text - 1)] : (char)(x >> 24));
        }
        roundtrip(big, n, 1);
        /* a metrics-like page shrinks */
        assert_int_equal(encoding_gzip_compress(big, n, 1, &gz, &gz_len), 0);
        assert_true(gz_len < n / 2);
        free(gz);
        free(big);
        assert_int_equal(encoding_gzip_compress(text, 4, 0, &gz, &gz_len), -EINVAL);
        assert_int_equal(encoding_gzip_compress(text, 4, 10, &gz, &gz_len), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_accept),      cmocka_unit_test(test_accept_openmetrics),
            cmocka_unit_test(test_accept_long), cmocka_unit_test(test_accept_lists),
            cmocka_unit_test(test_gzip),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
