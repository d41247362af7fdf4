/* The derived disk gauges, computed as sysstat's iostat -x does. */
#include "iostat.h"

#include <string.h>

uint64_t iostat_delta(enum ds_field f, uint64_t prev, uint64_t cur)
{
        if (cur >= prev)
                return cur - prev;
        if (diskstats_field_is_32bit(f) && prev <= UINT32_MAX && cur <= UINT32_MAX)
                return cur + ((uint64_t)1 << 32) - prev;
        return 0;
}

bool iostat_is_reset(const uint64_t prev[DS_NFIELDS], const uint64_t cur[DS_NFIELDS])
{
        uint64_t p = prev[DS_READS] + prev[DS_WRITES] + prev[DS_DISCARDS] + prev[DS_FLUSHES];
        uint64_t c = cur[DS_READS] + cur[DS_WRITES] + cur[DS_DISCARDS] + cur[DS_FLUSHES];
        static const enum ds_field sect[] = {DS_READ_SECTORS, DS_WRITE_SECTORS, DS_DISCARD_SECTORS};

        if (c >= p)
                return false;
        for (size_t i = 0; i < ARRAY_SIZE(sect); i++)
                if (prev[sect[i]] != 0 && cur[sect[i]] >= prev[sect[i]])
                        return false;
        return true;
}

static double per_request(const uint64_t prev[DS_NFIELDS], const uint64_t cur[DS_NFIELDS],
                          uint32_t present, enum ds_field ios, enum ds_field ms)
{
        uint64_t n, t;

        if (!(present & (1u << ios)) || !(present & (1u << ms)))
                return 0.0;
        n = iostat_delta(ios, prev[ios], cur[ios]);
        if (n == 0)
                return 0.0;
        t = iostat_delta(ms, prev[ms], cur[ms]);
        return (double)t / (double)n / 1000.0;
}

static double per_second(const uint64_t prev[DS_NFIELDS], const uint64_t cur[DS_NFIELDS],
                         uint32_t present, enum ds_field f, double seconds)
{
        if (!(present & (1u << f)))
                return 0.0;
        return (double)iostat_delta(f, prev[f], cur[f]) / seconds;
}

void iostat_derive(const uint64_t prev[DS_NFIELDS], const uint64_t cur[DS_NFIELDS],
                   uint32_t present, usec_t interval, struct iostat_derived *ret)
{
        struct iostat_derived d;
        double secs = (double)interval / (double)USEC_PER_SEC;

        memset(&d, 0, sizeof(d));
        if (interval == 0) {
                *ret = d;
                return;
        }
        d.read_await = per_request(prev, cur, present, DS_READS, DS_READ_MS);
        d.write_await = per_request(prev, cur, present, DS_WRITES, DS_WRITE_MS);
        d.discard_await = per_request(prev, cur, present, DS_DISCARDS, DS_DISCARD_MS);
        d.flush_await = per_request(prev, cur, present, DS_FLUSHES, DS_FLUSH_MS);
        /* io_ticks and rq_ticks are milliseconds: per second of interval that is /1000. */
        d.utilization = per_second(prev, cur, present, DS_IO_MS, secs) / 1000.0;
        if (d.utilization > 1.0)
                d.utilization = 1.0;
        d.queue_depth = per_second(prev, cur, present, DS_IO_WEIGHTED_MS, secs) / 1000.0;
        d.read_iops = per_second(prev, cur, present, DS_READS, secs);
        d.write_iops = per_second(prev, cur, present, DS_WRITES, secs);
        d.read_bytes_per_second = per_second(prev, cur, present, DS_READ_SECTORS, secs) * 512.0;
        d.write_bytes_per_second = per_second(prev, cur, present, DS_WRITE_SECTORS, secs) * 512.0;
        *ret = d;
}
