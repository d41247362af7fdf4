/* The status summary laid out: the disk view as a table, and the whole summary as plain text
 * for a terminal (aligned columns, no escape sequences). */
#include "summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* A cell of v times scale with decimals, or "-" for NaN. */
static void cell(char *buf, size_t size, double v, double scale, int decimals)
{
        if (isnan(v))
                snprintf(buf, size, "-");
        else
                snprintf(buf, size, "%.*f", decimals, v * scale);
}

void summary_finish(struct summary *s)
{
        static const char *const cols[] = {"device", "r/s",   "w/s",    "r_await_ms", "w_await_ms",
                                           "aqu-sz", "%util", "p50_ms", "p99_ms"};
        static const char *const vcols[] = {"device", "verdict"};
        struct summary_table *t, tmp[2];

        t = summary_table(s, "Devices", cols, ARRAY_SIZE(cols), 0, "devices", true);
        for (size_t i = 0; i < s->ndisks; i++) {
                const struct summary_disk *d = &s->disks[i];
                char v[SUMMARY_DISK_VALUES][32];
                const char *row[] = {d->device, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
                cell(v[0], sizeof v[0], d->v[SUMMARY_READS], 1, 1);
                cell(v[1], sizeof v[1], d->v[SUMMARY_WRITES], 1, 1);
                cell(v[2], sizeof v[2], d->v[SUMMARY_READ_AWAIT], 1000, 2);
                cell(v[3], sizeof v[3], d->v[SUMMARY_WRITE_AWAIT], 1000, 2);
                cell(v[4], sizeof v[4], d->v[SUMMARY_QUEUE_DEPTH], 1, 2);
                cell(v[5], sizeof v[5], d->v[SUMMARY_UTIL], 100, 1);
                cell(v[6], sizeof v[6], d->v[SUMMARY_LAT_P50], 1000, 3);
                cell(v[7], sizeof v[7], d->v[SUMMARY_LAT_P99], 1000, 3);
                summary_row(t, row);
        }
        t->more = s->disks_more;
        summary_note(t,
                     "r/s, w/s, r_await_ms, w_await_ms, aqu-sz, %util: as iostat -x prints them, "
                     "over --diskstats.window. p50_ms, p99_ms: block-layer device time (issued "
                     "to completed) of reads and writes together since the eBPF programs were "
                     "attached, interpolated linearly inside a histogram bucket as Prometheus' "
                     "histogram_quantile() does; \"-\" without the biolatency collector or "
                     "without I/O.");
        t = summary_table(s, "Verdicts", vcols, ARRAY_SIZE(vcols), 0, "devices", true);
        for (size_t i = 0; i < s->ndisks; i++) {
                char verdict[512];
                summary_verdict(&s->disks[i], verdict, sizeof verdict);
                summary_row(t, (const char *const[]){s->disks[i].device, verdict});
        }
        t->more = s->disks_more;
        summary_note(t, "Today's numbers against the alert rules' conditions, critical first; an "
                        "alert also waits its window and its \"for\" time.");
        /* the disk view comes first */
        memcpy(tmp, &s->tables[s->n - 2], sizeof tmp);
        memmove(&s->tables[2], &s->tables[0], (s->n - 2) * sizeof(*s->tables));
        memcpy(&s->tables[0], tmp, sizeof tmp);
}

/* A growing string. */
struct buf {
        char *p;
        size_t len, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
        if (b->len + n + 1 > b->cap) {
                b->cap = 2 * (b->len + n + 1) + 256;
                b->p = xrealloc(b->p, b->cap);
        }
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = 0;
}

static void puts_(struct buf *b, const char *s)
{
        put(b, s, strlen(s));
}

static void pad(struct buf *b, size_t n)
{
        while (n--)
                put(b, " ", 1);
}

/* Display width of s: its UTF-8 characters (bytes that do not continue one). */
static size_t width(const char *s)
{
        size_t w = 0;

        for (; *s; s++)
                w += ((unsigned char)*s & 0xc0) != 0x80;
        return w;
}

/* s with every control character (C0, DEL) as '?': nothing a terminal would act on. */
static void put_clean(struct buf *b, const char *s)
{
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                char r = c < 0x20 || c == 0x7f ? '?' : *s;
                put(b, &r, 1);
        }
}

/* Whether s reads as a number ("12.5", "-3", "42%") or is "-": a column of them, one a number at
 * least, is right-aligned. */
static bool numeric(const char *s)
{
        char *end;

        if (strcmp(s, "-") == 0)
                return true;
        if (!*s)
                return false;
        (void)strtod(s, &end);
        return end != s && (*end == 0 || (end[0] == '%' && end[1] == 0));
}

static void text_table(struct buf *b, const struct summary_table *t)
{
        size_t *w = xcalloc(t->ncols ? t->ncols : 1, sizeof(*w));
        bool *right = xcalloc(t->ncols ? t->ncols : 1, sizeof(*right));
        char line[64];

        if (!t->nrows && !t->more && !t->show_empty)
                goto out;
        puts_(b, "\n");
        put_clean(b, t->title);
        puts_(b, "\n");
        for (size_t k = 0; k < t->ncols; k++) {
                bool number = false; /* a column of dashes alone is text */
                w[k] = width(t->cols[k]);
                right[k] = true;
                for (size_t i = 0; i < t->nrows; i++) {
                        const char *c = t->cells[i * t->ncols + k];
                        if (width(c) > w[k])
                                w[k] = width(c);
                        right[k] = right[k] && numeric(c);
                        number = number || strcmp(c, "-") != 0;
                }
                right[k] = right[k] && number;
        }
        for (size_t i = 0; i <= t->nrows; i++) {
                const char *const *row = i ? (const char *const *)&t->cells[(i - 1) * t->ncols]
                                           : (const char *const *)t->cols;
                for (size_t k = 0; k < t->ncols; k++) {
                        size_t gap = w[k] - width(row[k]);
                        bool last = k + 1 == t->ncols;
                        if (k)
                                puts_(b, "  ");
                        if (right[k])
                                pad(b, gap);
                        put_clean(b, row[k]);
                        if (!right[k] && !last)
                                pad(b, gap);
                }
                puts_(b, "\n");
        }
        if (t->more) {
                snprintf(line, sizeof line, "and %zu more ", t->more);
                puts_(b, line);
                put_clean(b, t->more_what ? t->more_what : "rows");
                puts_(b, ": see /metrics\n");
        }
        if (t->note) {
                puts_(b, "\n");
                /* the note indented by 2, wrapped at 98 columns, at spaces */
                for (const char *p = t->note; *p;) {
                        size_t n = strlen(p), cut = n;
                        if (n > 96) {
                                cut = 96;
                                while (cut > 0 && p[cut] != ' ')
                                        cut--;
                                if (!cut)
                                        cut = 96;
                        }
                        puts_(b, "  ");
                        for (size_t j = 0; j < cut; j++) {
                                unsigned char c = (unsigned char)p[j];
                                char r = c < 0x20 || c == 0x7f ? '?' : p[j];
                                put(b, &r, 1);
                        }
                        puts_(b, "\n");
                        p += cut;
                        while (*p == ' ')
                                p++;
                }
        }
out:
        free(w);
        free(right);
}

char *summary_text(const struct summary *s, size_t *ret_len)
{
        struct buf b = {0};

        puts_(&b, "");
        for (size_t i = 0; i < s->n; i++)
                text_table(&b, &s->tables[i]);
        *ret_len = b.len;
        return b.p;
}
