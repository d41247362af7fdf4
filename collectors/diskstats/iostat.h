/* The derived disk gauges, computed as sysstat's iostat -x does (rd_stats.c
 * compute_ext_disk_stats, iostat.c compute_ext_stats / write_json_ext_stat). Pure math. */
#pragma once

#include <stdbool.h>

#include "diskstats_parse.h"
#include "util.h"

struct iostat_derived {
        double read_await, write_await, discard_await, flush_await; /* seconds per request */
        double utilization;                                         /* 0..1, %util / 100 */
        double queue_depth;                                         /* aqu-sz */
        double read_iops, write_iops;                               /* r/s, w/s */
        double read_bytes_per_second, write_bytes_per_second;       /* rkB/s, wkB/s in bytes */
};

/* Difference of one counter between two samples: modulo 2^32 for the kernel's 32-bit fields
 * (millisecond counters wrap every 49.7 days), 0 when a counter went back otherwise. */
uint64_t iostat_delta(enum ds_field f, uint64_t prev, uint64_t cur);

/* iostat's test for a device removed and added again between two samples: the sum of
 * completed requests went back and so did every non-zero sector counter. */
bool iostat_is_reset(const uint64_t prev[DS_NFIELDS], const uint64_t cur[DS_NFIELDS]);

/* Computes the gauges between prev and cur, taken interval apart. Fields absent from present
 * give 0. Never negative, never NaN; all 0 when interval is 0. */
void iostat_derive(const uint64_t prev[DS_NFIELDS], const uint64_t cur[DS_NFIELDS],
                   uint32_t present, usec_t interval, struct iostat_derived *ret);
