/* The exposition writer: metric sets -> Prometheus text format 0.0.4
 * (prometheus.io/docs/instrumenting/exposition_formats) or OpenMetrics 1.0 (openmetrics.io).
 * Pure: no I/O. */
#pragma once

#include <stdio.h>

#include "metrics.h"

#define EXPO_TEXT_CONTENT_TYPE        "text/plain; version=0.0.4; charset=utf-8"
#define EXPO_OPENMETRICS_CONTENT_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define EXPO_PROTOBUF_CONTENT_TYPE                                                                 \
        "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "               \
        "encoding=delimited"

enum expo_format {
        EXPO_FORMAT_TEXT,        /* text format 0.0.4 */
        EXPO_FORMAT_OPENMETRICS, /* OpenMetrics 1.0: counter families named without _total,
                                  * '"' escaped in HELP, "# EOF" at the end */
        EXPO_FORMAT_PROTOBUF,    /* length-delimited io.prometheus.client.MetricFamily messages
                                  * with native histograms (expo_proto.h); made whole when the
                                  * stream starts */
        _EXPO_FORMAT_MAX,
};

struct expo_stream;

/* Writes the sets as one exposition: families of the same name from different sets are merged
 * under one header (the first set's help and type win; a later family of another type is
 * dropped). Returns 0 or -EIO when the stream failed. */
int expo_write_text(FILE *out, struct mset *const *sets, size_t n);

/* The same in either format. */
int expo_write(FILE *out, struct mset *const *sets, size_t n, enum expo_format fmt);

/* Renders into a malloc'd buffer of the page's size (NUL-terminated). Returns 0 and sets
 * *ret_buf / *ret_len, or -errno. */
int expo_render_text(struct mset *const *sets, size_t n, char **ret_buf, size_t *ret_len);
int expo_render(struct mset *const *sets, size_t n, enum expo_format fmt, char **ret_buf,
                size_t *ret_len);

/* The size of the pieces expo_write and expo_render write at a time. */
#define EXPO_CHUNK (64 * 1024)

/* A page written piece by piece (a response read in chunks) straight into the caller's buffer;
 * it reads the sets as it goes, so they must outlive it and stay unchanged. Never fails. */
struct expo_stream *expo_stream_new(struct mset *const *sets, size_t n, enum expo_format fmt);
/* Writes the next bytes of the page into buf, at most max (a line that does not fit continues
 * in the next call). Returns the bytes written, 0 once the page is complete (max > 0). */
size_t expo_stream_read(struct expo_stream *st, char *buf, size_t max);
/* Accepts NULL; returns NULL. */
struct expo_stream *expo_stream_free(struct expo_stream *st);

/* About how many bytes the page of the sets takes (within some 20 % either way), without
 * writing it. */
size_t expo_estimate(struct mset *const *sets, size_t n);

/* Formats a sample value as Prometheus expects (shortest exact form, NaN, +Inf, -Inf). */
const char *expo_format_double(double v, char *buf, size_t size);
