/* The biolatency histograms' pure arithmetic (biolatency_hist.h). */
#include "biolatency_hist.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t biolatency_native_bound_ns(int32_t i)
{
        /* 2^(i/4) = 2^q * 2^(r/4) with r in 0..3: the power of two exact, the root once rounded;
         * the product's error is far below the distance of any of these bounds to an integer,
         * except the exact ones (r 0), which floor leaves as they are. */
        static const double root[4] = {1.0, 1.189207115002721, 1.4142135623730951,
                                       1.681792830507429};
        int32_t q = i >= 0 ? i / 4 : -((-i + 3) / 4), r = i - 4 * q;

        return (uint64_t)floor(ldexp(1e9 * root[r], q));
}

int biolatency_grid(const uint64_t *classic_ns, size_t nclassic, struct biolat_grid *g)
{
        size_t c = 0, n = 0;
        int32_t i = BIOLAT_NATIVE_MIN;
        uint64_t out[BIOLAT_MAX_BOUNDS];

        if (nclassic < 1 || nclassic > BIOLAT_MAX_CLASSIC)
                return -EINVAL;
        for (size_t k = 0; k < nclassic; k++)
                if (classic_ns[k] == 0 || (k > 0 && classic_ns[k] <= classic_ns[k - 1]))
                        return -EINVAL;
        /* a merge of two increasing lists, a bound in both once */
        while (c < nclassic || i <= BIOLAT_NATIVE_MAX) {
                uint64_t nat = i <= BIOLAT_NATIVE_MAX ? biolatency_native_bound_ns(i) : UINT64_MAX;
                uint64_t cl = c < nclassic ? classic_ns[c] : UINT64_MAX;

                out[n++] = nat < cl ? nat : cl;
                if (nat <= cl)
                        i++;
                if (cl <= nat)
                        c++;
        }
        g->n = n;
        memcpy(g->ns, out, n * sizeof(*out));
        return 0;
}

size_t biolatency_grid_find(const struct biolat_grid *g, uint64_t ns)
{
        size_t i = biolatency_bucket(g, ns);

        return i < g->n && g->ns[i] == ns ? i : g->n;
}

double biolatency_bound_seconds(const struct biolat_grid *g, size_t i)
{
        /* Both exact in a double and IEEE division rounds correctly: the double nearest to the
         * decimal bound, the one strtod makes of its text. */
        return i < g->n ? (double)g->ns[i] / 1e9 : INFINITY;
}

const char *biolatency_le(uint64_t ns, char *buf, size_t size)
{
        if (ns == UINT64_MAX) {
                snprintf(buf, size, "+Inf");
                return buf;
        }
        return format_double_shortest((double)ns / 1e9, buf, size);
}

size_t biolatency_bucket(const struct biolat_grid *g, uint64_t ns)
{
        size_t lo = 0, hi = g->n;

        /* the first bound >= ns, in [lo, hi] */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (g->ns[mid] >= ns)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return lo;
}

int32_t biolatency_native_of(const struct biolat_grid *g, size_t i)
{
        int32_t lo = BIOLAT_NATIVE_MIN, hi = BIOLAT_NATIVE_MAX + 1;
        uint64_t ns;

        if (i >= g->n)
                return BIOLAT_NATIVE_MAX + 1;
        ns = g->ns[i];
        if (ns <= biolatency_native_bound_ns(BIOLAT_NATIVE_MIN))
                return BIOLAT_NATIVE_ZERO;
        /* the first native index whose bound is >= ns: the grid bucket lies inside it, the
         * native bounds being bounds of the grid */
        while (lo < hi) {
                int32_t mid = lo + (hi - lo) / 2;
                if (biolatency_native_bound_ns(mid) >= ns)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return lo;
}

int biolatency_parse_buckets(const char *text, uint64_t *ns, size_t *ret_n, char *why, size_t whysz)
{
        const char *p = text;
        size_t n = 0;

        for (;;) {
                const char *end = p + strcspn(p, ",");
                char item[64], *e;
                double v, scaled;
                size_t len = (size_t)(end - p);

                if (len == 0 || len >= sizeof item) {
                        snprintf(why, whysz,
                                 "\"%s\" (expected seconds separated by commas, e.g. "
                                 "0.001,0.01,0.1)",
                                 text);
                        return -EINVAL;
                }
                memcpy(item, p, len);
                item[len] = 0;
                errno = 0;
                v = strtod(item, &e);
                if (*e || errno || !(v > 0) || v > 1e6) {
                        snprintf(why, whysz,
                                 "\"%s\" is not a latency in seconds above 0 and at most "
                                 "1e6",
                                 item);
                        return -EINVAL;
                }
                scaled = v * 1e9;
                if (fabs(scaled - nearbyint(scaled)) > 1e-15 * scaled + 1e-9 ||
                    nearbyint(scaled) < 1) {
                        snprintf(why, whysz, "\"%s\" is not a whole number of nanoseconds", item);
                        return -EINVAL;
                }
                if (n == BIOLAT_MAX_CLASSIC) {
                        snprintf(why, whysz, "\"%s\" has more than %d bounds", text,
                                 BIOLAT_MAX_CLASSIC);
                        return -EINVAL;
                }
                ns[n] = (uint64_t)nearbyint(scaled);
                if (n > 0 && ns[n] <= ns[n - 1]) {
                        snprintf(why, whysz, "\"%s\" does not increase (%s after a bound as large)",
                                 text, item);
                        return -EINVAL;
                }
                n++;
                if (!*end)
                        break;
                p = end + 1;
        }
        *ret_n = n;
        return 0;
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

double biolatency_quantile(const struct biolat_grid *g, const uint64_t *counts, double q)
{
        uint64_t total = 0, cum = 0;
        double rank;

        if (!(q >= 0 && q <= 1))
                return NAN;
        for (size_t i = 0; i <= g->n; i++)
                total += counts[i];
        if (total == 0)
                return NAN;
        rank = q * (double)total;
        for (size_t i = 0; i < g->n; i++) {
                double lo = i ? biolatency_bound_seconds(g, i - 1) : 0, hi;

                if (counts[i] == 0 || (double)(cum + counts[i]) < rank) {
                        cum += counts[i];
                        continue;
                }
                hi = biolatency_bound_seconds(g, i);
                return lo + (hi - lo) * ((rank - (double)cum) / (double)counts[i]);
        }
        return biolatency_bound_seconds(g, g->n - 1);
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
