/* The biolatency histograms' pure arithmetic (biolatency_hist.h). */
#include "biolatency_hist.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const uint64_t bounds_ns[BIOLAT_NBOUNDS] = BIOLAT_BOUNDS_NS;

uint64_t biolatency_bound_ns(size_t i)
{
        return i < BIOLAT_NBOUNDS ? bounds_ns[i] : UINT64_MAX;
}

double biolatency_bound_seconds(size_t i)
{
        /* Both exact in a double and IEEE division rounds correctly: the double nearest to the
         * decimal bound, the one strtod makes of its text. */
        return i < BIOLAT_NBOUNDS ? (double)bounds_ns[i] / 1e9 : INFINITY;
}

const char *biolatency_le(size_t i, char *buf, size_t size)
{
        if (i >= BIOLAT_NBOUNDS) {
                snprintf(buf, size, "+Inf");
                return buf;
        }
        return format_double_shortest(biolatency_bound_seconds(i), buf, size);
}

size_t biolatency_bucket(uint64_t ns)
{
        size_t lo = 0, hi = BIOLAT_NBOUNDS;

        /* the first bound >= ns, in [lo, hi] */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (bounds_ns[mid] >= ns)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return lo;
}

void biolatency_add_u32(uint64_t *total, uint32_t *prev, uint32_t cur)
{
        *total += (uint32_t)(cur - *prev);
        *prev = cur;
}

void biolatency_add_u64(uint64_t *total, uint64_t *prev, uint64_t cur)
{
        *total += cur - *prev;
        *prev = cur;
}

double biolatency_quantile(const uint64_t *counts, double q)
{
        uint64_t total = 0, cum = 0;
        double rank;

        if (!(q >= 0 && q <= 1))
                return NAN;
        for (size_t i = 0; i < BIOLAT_NBUCKETS; i++)
                total += counts[i];
        if (total == 0)
                return NAN;
        rank = q * (double)total;
        for (size_t i = 0; i < BIOLAT_NBOUNDS; i++) {
                double lo = i ? biolatency_bound_seconds(i - 1) : 0, hi;

                if (counts[i] == 0 || (double)(cum + counts[i]) < rank) {
                        cum += counts[i];
                        continue;
                }
                hi = biolatency_bound_seconds(i);
                return lo + (hi - lo) * ((rank - (double)cum) / (double)counts[i]);
        }
        return biolatency_bound_seconds(BIOLAT_NBOUNDS - 1);
}

/* A decimal CPU number at *p (below end), advancing *p. 0, -EINVAL or -ERANGE. */
static int parse_cpu(const char **p, const char *end, uint32_t *ret)
{
        uint32_t v = 0;
        const char *s = *p;

        if (s == end || *s < '0' || *s > '9')
                return -EINVAL;
        for (; s < end && *s >= '0' && *s <= '9'; s++) {
                v = v * 10 + (uint32_t)(*s - '0');
                if (v >= BIOLAT_MAX_CPUS)
                        return -ERANGE;
        }
        *p = s;
        *ret = v;
        return 0;
}

int biolatency_parse_cpus(const char *text, size_t len, uint32_t *ret_ncpu)
{
        const char *p = text, *end = text + len;
        uint32_t max = 0;
        int r;

        if (len > 0 && end[-1] == '\n')
                end--;
        if (p == end)
                return -EINVAL;
        for (;;) {
                uint32_t a, b;

                if ((r = parse_cpu(&p, end, &a)) < 0)
                        return r;
                b = a;
                if (p < end && *p == '-') {
                        p++;
                        if ((r = parse_cpu(&p, end, &b)) < 0)
                                return r;
                        if (b < a)
                                return -EINVAL;
                }
                if (b > max)
                        max = b;
                if (p == end)
                        break;
                if (*p++ != ',')
                        return -EINVAL;
        }
        *ret_ncpu = max + 1;
        return 0;
}

int biolatency_parse_devname(const char *text, size_t len, char *name, size_t size)
{
        static const char key[] = "DEVNAME=";
        const size_t klen = sizeof key - 1;
        const char *p = text, *end = text + len;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
                size_t vlen;

                if ((size_t)(eol - p) < klen || memcmp(p, key, klen) != 0) {
                        p = eol + 1;
                        continue;
                }
                p += klen;
                vlen = (size_t)(eol - p);
                if (vlen == 0 || vlen >= size)
                        return -EINVAL;
                for (size_t i = 0; i < vlen; i++)
                        if (p[i] < '!' || p[i] > '~' || p[i] == '"' || p[i] == '\\')
                                return -EINVAL;
                memcpy(name, p, vlen);
                name[vlen] = 0;
                return 0;
        }
        return -ENOENT;
}
