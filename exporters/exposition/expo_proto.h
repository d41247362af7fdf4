/* The protobuf exposition: metric families -> length-delimited io.prometheus.client.MetricFamily
 * messages (Prometheus' client_model metrics.proto; prometheus_metrics.proto here). Pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "metrics.h"

/* Encodes the families in order: a family with head set starts a MetricFamily (its name, help
 * and type), the ones after it without head add their samples to it. Counters keep their
 * _total; histograms send their classic buckets (without +Inf, which sample_count is) and, where
 * mfamily_add_native attached one, the native part. Returns 0 and a malloc'd *ret_buf of
 * *ret_len bytes (NUL-terminated beyond), or -EINVAL when a label string does not parse. */
int expo_proto_encode(const struct mfamily *const *fams, const bool *head, size_t n, char **ret_buf,
                      size_t *ret_len);
