/* The exposition writer: metric sets -> Prometheus text format 0.0.4
 * (prometheus.io/docs/instrumenting/exposition_formats). Pure: no I/O. */
#pragma once

#include <stdio.h>

#include "metrics.h"

#define EXPO_TEXT_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Writes the sets as one exposition: families of the same name from different sets are merged
 * under one header (the first set's help and type win; a later family of another type is
 * dropped). Returns 0 or -EIO when the stream failed. */
int expo_write_text(FILE *out, struct mset *const *sets, size_t n);

/* Renders into a malloc'd buffer. Returns 0 and sets *ret_buf / *ret_len, or -errno. */
int expo_render_text(struct mset *const *sets, size_t n, char **ret_buf, size_t *ret_len);

/* Formats a sample value as Prometheus expects (shortest exact form, NaN, +Inf, -Inf). */
const char *expo_format_double(double v, char *buf, size_t size);
