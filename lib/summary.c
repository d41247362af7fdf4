/* The status summary of the landing page: tables of copied strings. */
#include "summary.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

struct summary *summary_new(void)
{
        return xcalloc(1, sizeof(struct summary));
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
        }
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
