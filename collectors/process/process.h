/* The standard process_* metrics of the daemon itself (as Prometheus client libraries export
 * them), read from /proc/self. */
#pragma once

#include "metrics.h"
#include "util.h"

/* Writes process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_open_fds, process_max_fds and process_start_time_seconds. start_time is the realtime
 * (usec) the process started. Families whose source cannot be read are left out. */
void process_export(struct mset *out, usec_t start_time);

/* Pure parser of /proc/self/stat (proc(5)): utime+stime in clock ticks, vsize bytes, rss pages.
 * Returns 0 or -EINVAL. */
int process_parse_stat(const char *buf, uint64_t *ret_ticks, uint64_t *ret_vsize,
                       uint64_t *ret_rss_pages);

/* The open file descriptors counted from a listing of /proc/self/fd, or -1. process_export
 * takes the count from the directory's size where the kernel gives it (Linux 6.2 and later)
 * and falls back to this. */
long process_fds_listed(void);
