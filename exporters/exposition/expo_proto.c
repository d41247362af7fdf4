/* The protobuf exposition format (prometheus.io/docs/instrumenting/exposition_formats, the
 * messages of Prometheus' client_model io/prometheus/client/metrics.proto) through protobuf-c. */
#include "expo_proto.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prometheus_metrics.pb-c.h"
#include "util.h"

typedef Io__Prometheus__Client__MetricFamily PFamily;
typedef Io__Prometheus__Client__Metric PMetric;
typedef Io__Prometheus__Client__LabelPair PLabel;
typedef Io__Prometheus__Client__Histogram PHistogram;
typedef Io__Prometheus__Client__Bucket PBucket;
typedef Io__Prometheus__Client__BucketSpan PSpan;
typedef Io__Prometheus__Client__Quantile PQuantile;

/* Everything of one MetricFamily message, freed at once after it is packed. */
struct pool {
        void **ptrs;
        size_t n, cap;
};

static void *pool_alloc(struct pool *p, size_t size)
{
        void *q = xcalloc(1, size ? size : 1);

        GROW(p->ptrs, p->cap, p->n + 1);
        p->ptrs[p->n++] = q;
        return q;
}

static char *pool_strndup(struct pool *p, const char *s, size_t n)
{
        char *q = pool_alloc(p, n + 1);

        memcpy(q, s, n);
        return q;
}

static void pool_clear(struct pool *p)
{
        for (size_t i = 0; i < p->n; i++)
                free(p->ptrs[i]);
        p->n = 0;
}

/* Appends x to the array *arr of *n elements of size sz (grown in powers of two). */
static void push(struct pool *p, void **arr, size_t *n, size_t sz, const void *x)
{
        if ((*n & (*n - 1)) == 0) {
                void *bigger = pool_alloc(p, (*n ? *n * 2 : 1) * sz);
                if (*n)
                        memcpy(bigger, *arr, *n * sz);
                *arr = bigger;
        }
        memcpy((char *)*arr + *n * sz, x, sz);
        (*n)++;
}

static Io__Prometheus__Client__MetricType proto_type(enum mtype t)
{
        switch (t) {
        case MT_COUNTER:
                return IO__PROMETHEUS__CLIENT__METRIC_TYPE__COUNTER;
        case MT_GAUGE:
        case MT_INFO:
                return IO__PROMETHEUS__CLIENT__METRIC_TYPE__GAUGE;
        case MT_HISTOGRAM:
                return IO__PROMETHEUS__CLIENT__METRIC_TYPE__HISTOGRAM;
        case MT_SUMMARY:
                return IO__PROMETHEUS__CLIENT__METRIC_TYPE__SUMMARY;
        default:
                return IO__PROMETHEUS__CLIENT__METRIC_TYPE__UNTYPED;
        }
}

/* The labels of a sample as LabelPairs, the one named special (le, quantile; NULL: none) left
 * out and its value put in *ret_special; *ret_key: the rendered labels without it (the series).
 * Returns 0 or -EINVAL. */
static int parse_labels(struct pool *p, const char *labels, const char *special, PMetric *m,
                        char **ret_special, char **ret_key)
{
        size_t len = strlen(labels), klen = 0;
        char *key = pool_alloc(p, len + 1), *value = pool_alloc(p, len + 1);
        const char *pos = labels;
        int r;

        *ret_special = NULL;
        for (;;) {
                const char *start = pos, *name;
                size_t nl, vl;

                r = labels_next(&pos, &name, &nl, value, len + 1, &vl);
                if (r <= 0)
                        break;
                if (special && nl == strlen(special) && memcmp(name, special, nl) == 0) {
                        *ret_special = pool_strndup(p, value, vl);
                        continue;
                }
                size_t raw = (size_t)(pos - start) - (pos[-1] == ',');
                if (klen)
                        key[klen++] = ',';
                memcpy(key + klen, start, raw);
                klen += raw;
                PLabel *lp = pool_alloc(p, sizeof(*lp));
                io__prometheus__client__label_pair__init(lp);
                lp->name = pool_strndup(p, name, nl);
                lp->value = pool_strndup(p, value, vl);
                push(p, (void **)&m->label, &m->n_label, sizeof(lp), &lp);
        }
        *ret_key = key;
        return r;
}

/* The native part of h: spans over the buckets that are not zero (a run of at most two zero
 * buckets stays inside a span, as Prometheus' clients do: a span costs more than two deltas),
 * and the deltas of their counts. An empty histogram gets one empty span, which marks it
 * native. */
static void put_native(struct pool *p, PHistogram *ph, const struct mnative *h)
{
        int64_t prev_count = 0;
        int32_t next_index = 0; /* the index after the last span */
        bool any = false;
        PSpan *span = NULL;

        ph->has_schema = true;
        ph->schema = h->schema;
        ph->has_zero_threshold = true;
        ph->zero_threshold = h->zero_threshold;
        ph->has_zero_count = true;
        ph->zero_count = h->zero_count;
        for (size_t i = 0; i < h->n; i++) {
                int32_t index = h->offset + (int32_t)i;

                if (!h->counts[i])
                        continue;
                if (!any || index - next_index > 2) {
                        span = pool_alloc(p, sizeof(*span));
                        io__prometheus__client__bucket_span__init(span);
                        span->has_offset = span->has_length = true;
                        span->offset = any ? index - next_index : index;
                        push(p, (void **)&ph->positive_span, &ph->n_positive_span, sizeof(span),
                             &span);
                } else {
                        /* the zero buckets in between join the span */
                        for (int32_t z = next_index; z < index; z++) {
                                int64_t d = -prev_count;
                                push(p, (void **)&ph->positive_delta, &ph->n_positive_delta,
                                     sizeof(d), &d);
                                prev_count = 0;
                                span->length++;
                        }
                }
                int64_t d = (int64_t)h->counts[i] - prev_count;
                push(p, (void **)&ph->positive_delta, &ph->n_positive_delta, sizeof(d), &d);
                prev_count = (int64_t)h->counts[i];
                span->length++;
                next_index = index + 1;
                any = true;
        }
        if (!any) {
                span = pool_alloc(p, sizeof(*span));
                io__prometheus__client__bucket_span__init(span);
                span->has_offset = span->has_length = true;
                push(p, (void **)&ph->positive_span, &ph->n_positive_span, sizeof(span), &span);
        }
}

static double sample_value(const struct msample *s)
{
        return s->is_int ? (double)s->u : s->d;
}

static uint64_t sample_count(const struct msample *s)
{
        return s->is_int ? s->u : s->d > 0 ? (uint64_t)s->d : 0;
}

/* The metric of series key in mf (made when new): the last one or an earlier. */
static PMetric *series(struct pool *p, PFamily *mf, const char *key, char ***keys, PMetric *fresh)
{
        for (size_t i = mf->n_metric; i-- > 0;)
                if (strcmp((*keys)[i], key) == 0)
                        return mf->metric[i];
        size_t n = mf->n_metric;
        push(p, (void **)&mf->metric, &mf->n_metric, sizeof(fresh), &fresh);
        push(p, (void **)keys, &n, sizeof(key), &key);
        return fresh;
}

/* Adds the samples of f to mf. */
static int add_family(struct pool *p, PFamily *mf, const struct mfamily *f, char ***keys)
{
        bool hist = f->type == MT_HISTOGRAM, summ = f->type == MT_SUMMARY;
        char buf[4096];
        struct msample s;
        size_t pos = 0, next_native = 0;

        while (mfamily_next(f, &pos, &s, buf, sizeof buf)) {
                PMetric *m = pool_alloc(p, sizeof(*m));
                char *special, *key;
                int r;

                io__prometheus__client__metric__init(m);
                r = parse_labels(p, s.labels,
                                 hist   ? "le"
                                 : summ ? "quantile"
                                        : NULL,
                                 m, &special, &key);
                if (r < 0)
                        return r;
                if (!hist && !summ) {
                        double v = sample_value(&s);
                        push(p, (void **)&mf->metric, &mf->n_metric, sizeof(m), &m);
                        if (f->type == MT_COUNTER) {
                                m->counter = pool_alloc(p, sizeof(*m->counter));
                                io__prometheus__client__counter__init(m->counter);
                                m->counter->has_value = true;
                                m->counter->value = v;
                        } else if (f->type == MT_GAUGE || f->type == MT_INFO) {
                                m->gauge = pool_alloc(p, sizeof(*m->gauge));
                                io__prometheus__client__gauge__init(m->gauge);
                                m->gauge->has_value = true;
                                m->gauge->value = v;
                        } else {
                                m->untyped = pool_alloc(p, sizeof(*m->untyped));
                                io__prometheus__client__untyped__init(m->untyped);
                                m->untyped->has_value = true;
                                m->untyped->value = v;
                        }
                        continue;
                }
                m = series(p, mf, key, keys, m);
                if (hist) {
                        PHistogram *h = m->histogram;
                        if (!h) {
                                /* collectors attach native parts in the order of
                                 * their series: the next one, else a search */
                                const struct mnative *nh = NULL;
                                if (next_native < f->nnatives &&
                                    strcmp(f->natives[next_native].labels, key) == 0)
                                        nh = &f->natives[next_native++].h;
                                else
                                        nh = mfamily_native(f, key);
                                h = m->histogram = pool_alloc(p, sizeof(*h));
                                io__prometheus__client__histogram__init(h);
                                h->has_sample_count = h->has_sample_sum = true;
                                if (nh)
                                        put_native(p, h, nh);
                        }
                        if (strcmp(s.suffix, "_bucket") == 0 && special) {
                                double le = strtod(special, NULL);
                                if (isinf(le) && le > 0)
                                        continue; /* sample_count is the +Inf bucket */
                                PBucket *b = pool_alloc(p, sizeof(*b));
                                io__prometheus__client__bucket__init(b);
                                b->has_cumulative_count = b->has_upper_bound = true;
                                b->cumulative_count = sample_count(&s);
                                b->upper_bound = le;
                                push(p, (void **)&h->bucket, &h->n_bucket, sizeof(b), &b);
                        } else if (strcmp(s.suffix, "_sum") == 0) {
                                h->sample_sum = sample_value(&s);
                        } else if (strcmp(s.suffix, "_count") == 0) {
                                h->sample_count = sample_count(&s);
                        }
                } else {
                        Io__Prometheus__Client__Summary *sm = m->summary;
                        if (!sm) {
                                sm = m->summary = pool_alloc(p, sizeof(*sm));
                                io__prometheus__client__summary__init(sm);
                                sm->has_sample_count = sm->has_sample_sum = true;
                        }
                        if (s.suffix[0] == 0 && special) {
                                PQuantile *q = pool_alloc(p, sizeof(*q));
                                io__prometheus__client__quantile__init(q);
                                q->has_quantile = q->has_value = true;
                                q->quantile = strtod(special, NULL);
                                q->value = sample_value(&s);
                                push(p, (void **)&sm->quantile, &sm->n_quantile, sizeof(q), &q);
                        } else if (strcmp(s.suffix, "_sum") == 0) {
                                sm->sample_sum = sample_value(&s);
                        } else if (strcmp(s.suffix, "_count") == 0) {
                                sm->sample_count = sample_count(&s);
                        }
                }
        }
        return 0;
}

/* Appends mf, its length first as a varint, to *buf (*len bytes used of *cap). */
static void pack(const PFamily *mf, char **buf, size_t *len, size_t *cap)
{
        size_t size = protobuf_c_message_get_packed_size(&mf->base);

        if (*cap - *len < size + 11) {
                *cap = (*len + size + 11) * 2;
                *buf = xrealloc(*buf, *cap);
        }
        for (size_t v = size;; v >>= 7) {
                (*buf)[(*len)++] = (char)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
                if (v < 0x80)
                        break;
        }
        *len += protobuf_c_message_pack(&mf->base, (uint8_t *)*buf + *len);
}

int expo_proto_encode(const struct mfamily *const *fams, const bool *head, size_t n, char **ret_buf,
                      size_t *ret_len)
{
        struct pool p = {0};
        size_t len = 0, cap = 4096;
        char *buf = xmalloc(cap);
        int r = 0;

        for (size_t i = 0; i < n && r == 0;) {
                PFamily mf = IO__PROMETHEUS__CLIENT__METRIC_FAMILY__INIT;
                char **keys = NULL;

                mf.name = fams[i]->name;
                mf.help = fams[i]->help;
                mf.has_type = true;
                mf.type = proto_type(fams[i]->type);
                do
                        r = add_family(&p, &mf, fams[i], &keys);
                while (r == 0 && ++i < n && !head[i]);
                if (r == 0 && mf.n_metric)
                        pack(&mf, &buf, &len, &cap);
                pool_clear(&p);
        }
        free(p.ptrs);
        if (r < 0) {
                free(buf);
                return r;
        }
        buf = xrealloc(buf, len + 1);
        buf[len] = 0;
        *ret_buf = buf;
        *ret_len = len;
        return 0;
}
