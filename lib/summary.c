/* The status summary of the landing page: tables of copied strings. */
#include "summary.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct summary *summary_new(void)
{
        struct summary *s = xcalloc(1, sizeof(struct summary));

        s->disks_span = NAN;
        return s;
}

struct summary *summary_free(struct summary *s)
{
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n; i++) {
                struct summary_table *t = &s->tables[i];
                for (size_t k = 0; k < t->ncols; k++)
                        free(t->cols[k]);
                for (size_t k = 0; k < t->nrows * t->ncols; k++)
                        free(t->cells[k]);
                free(t->cols);
                free(t->cells);
                free(t->title);
                free(t->more_what);
                free(t->note);
        }
        for (size_t i = 0; i < s->ndisks; i++) {
                for (size_t k = 0; k < s->disks[i].nfacts; k++)
                        free(s->disks[i].facts[k].text);
                free(s->disks[i].facts);
                free(s->disks[i].device);
        }
        free(s->disks);
        free(s->tables);
        free(s);
        return NULL;
}

struct summary_table *summary_table(struct summary *s, const char *title, const char *const *cols,
                                    size_t ncols, size_t max_rows, const char *more_what,
                                    bool show_empty)
{
        struct summary_table *t;

        s->tables = xrealloc(s->tables, (s->n + 1) * sizeof(*s->tables));
        t = &s->tables[s->n++];
        *t = (struct summary_table){
            .title = xstrdup(title),
            .ncols = ncols,
            .cols = xcalloc(ncols ? ncols : 1, sizeof(char *)),
            .max_rows = max_rows,
            .more_what = more_what ? xstrdup(more_what) : NULL,
            .show_empty = show_empty,
        };
        for (size_t k = 0; k < ncols; k++)
                t->cols[k] = xstrdup(cols[k]);
        return t;
}

bool summary_room(const struct summary_table *t)
{
        return !t->max_rows || t->nrows < t->max_rows;
}

void summary_note(struct summary_table *t, const char *note)
{
        free(t->note);
        t->note = xstrdup(note);
}

void summary_row(struct summary_table *t, const char *const *cells)
{
        if (!summary_room(t)) {
                t->more++;
                return;
        }
        if (t->nrows == t->cap) {
                t->cap = t->cap ? 2 * t->cap : 8;
                t->cells = xrealloc(t->cells, t->cap * t->ncols * sizeof(char *));
        }
        for (size_t k = 0; k < t->ncols; k++)
                t->cells[t->nrows * t->ncols + k] = xstrdup(cells[k] ? cells[k] : "");
        t->nrows++;
}

double mset_value(const struct mset *const *sets, size_t n, const char *name,
                  const char *const *want)
{
        char buf[4096], lb[8192];

        for (size_t i = 0; i < n; i++) {
                const struct mfamily *f = mset_find(sets[i], name);
                struct msample sample, *sm = &sample;
                size_t pos = 0;
                while (f && mfamily_next(f, &pos, sm, lb, sizeof lb)) {
                        bool match = !*sm->suffix;
                        for (size_t w = 0; match && want[w]; w += 2)
                                match = labels_get(sm->labels, want[w], buf, sizeof buf) &&
                                        strcmp(buf, want[w + 1]) == 0;
                        if (match)
                                return sm->is_int ? (double)sm->u : sm->d;
                }
        }
        return 0.0 / 0.0;
}

struct summary_disk *summary_disk(struct summary *s, const char *device, bool create)
{
        struct summary_disk *d;

        for (size_t i = 0; i < s->ndisks; i++)
                if (strcmp(s->disks[i].device, device) == 0)
                        return &s->disks[i];
        if (!create || s->ndisks >= SUMMARY_MAX_DISKS)
                return NULL;
        if (s->ndisks == s->disks_cap) {
                s->disks_cap = s->disks_cap ? 2 * s->disks_cap : 8;
                s->disks = xrealloc(s->disks, s->disks_cap * sizeof(*s->disks));
        }
        d = &s->disks[s->ndisks++];
        *d = (struct summary_disk){.device = xstrdup(device)};
        for (size_t k = 0; k < SUMMARY_DISK_VALUES; k++)
                d->v[k] = NAN;
        return d;
}

void summary_fact(struct summary_disk *d, enum summary_severity severity, const char *fmt, ...)
{
        char buf[200];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        d->facts = xrealloc(d->facts, (d->nfacts + 1) * sizeof(*d->facts));
        d->facts[d->nfacts++] = (struct summary_fact){severity, xstrdup(buf)};
}

/* Appends text to buf (size bytes, *len used), "; " first unless it is the first. */
static void verdict_add(char *buf, size_t size, size_t *len, const char *text)
{
        int n = snprintf(buf + *len, size - *len, "%s%s", *len ? "; " : "", text);

        if (n > 0)
                *len = *len + (size_t)n < size ? *len + (size_t)n : size - 1;
}

void summary_verdict(const struct summary_disk *d, char *buf, size_t size)
{
        const double *v = d->v;
        double rate = v[SUMMARY_READS] + v[SUMMARY_WRITES], await = NAN;
        char line[96];
        size_t len = 0;

        if (!size)
                return;
        buf[0] = 0;
        if (rate > 0)
                await = (v[SUMMARY_READS] * v[SUMMARY_READ_AWAIT] +
                         v[SUMMARY_WRITES] * v[SUMMARY_WRITE_AWAIT]) /
                        rate;
        /* critical first, then warnings, each in the order found */
        for (int sev = SUMMARY_CRITICAL; sev >= SUMMARY_WARNING; sev--) {
                if (sev == SUMMARY_CRITICAL && (d->flags & SUMMARY_DISK_WRITE_BACK) &&
                    (d->flags & SUMMARY_DISK_NO_FLUSH))
                        verdict_add(buf, size, &len,
                                    "write-back cache gets no flush from fdatasync");
                for (size_t i = 0; i < d->nfacts; i++)
                        if ((int)d->facts[i].severity == sev)
                                verdict_add(buf, size, &len, d->facts[i].text);
                if (sev != SUMMARY_WARNING)
                        continue;
                if (await > SUMMARY_AWAIT_HIGH && rate >= SUMMARY_AWAIT_MIN_IOPS) {
                        snprintf(line, sizeof line, "requests wait %.0f ms on average",
                                 1000 * await);
                        verdict_add(buf, size, &len, line);
                } else if (v[SUMMARY_QUEUE_DEPTH] > SUMMARY_SATURATED_QUEUE &&
                           await > SUMMARY_SATURATED_AWAIT) {
                        snprintf(line, sizeof line, "saturated: %.1f requests queued, %.0f ms wait",
                                 v[SUMMARY_QUEUE_DEPTH], 1000 * await);
                        verdict_add(buf, size, &len, line);
                }
        }
        if (!len)
                snprintf(buf, size, "ok");
}

double summary_quantile(double q, const double *le, const double *cum, size_t n)
{
        double total, rank, lo = 0, below = 0;

        if (!(q >= 0 && q <= 1) || n == 0)
                return NAN;
        total = cum[n - 1];
        if (!(total > 0))
                return NAN;
        rank = q * total;
        for (size_t i = 0; i < n; i++) {
                if (cum[i] >= rank && cum[i] > below) {
                        if (isinf(le[i]))
                                return i ? le[i - 1] : NAN;
                        if (i == 0 && le[0] <= 0)
                                return le[0];
                        return lo + (le[i] - lo) * ((rank - below) / (cum[i] - below));
                }
                lo = le[i];
                below = cum[i];
        }
        return NAN; /* counts that go down */
}
