/* The status summary laid out: the disk view as a table, and the whole summary as plain text
 * for a terminal (aligned columns, no escape sequences). */
#include "summary.h"

#include <math.h>
#include <stdint.h>
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
        char span[512], note[1024];

        /* what the iostat columns cover: the span the collector says, never a window it is not */
        if (isnan(s->disks_span))
                snprintf(span, sizeof span, "over --diskstats.window");
        else if (s->disks_span <= 0)
                snprintf(span, sizeof span, "over no span yet (one sample: 0)");
        else
                snprintf(span, sizeof span,
                         "over the last %.1fs, from the sample before to this page's "
                         "(--diskstats.window when a scraper is followed, longer for a request "
                         "the daemon did not expect, since boot at the first sample)",
                         s->disks_span);
        snprintf(note, sizeof note,
                 "r/s, w/s, r_await_ms, w_await_ms, aqu-sz, %%util: as iostat -x prints them, %s. "
                 "p50_ms, p99_ms: block-layer device time (issued to completed) of reads and "
                 "writes together since the eBPF programs were attached, interpolated linearly "
                 "inside a histogram bucket as Prometheus' histogram_quantile() does; \"-\" "
                 "without the biolatency collector or without I/O.",
                 span);

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
        summary_note(t, note);
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

/* The valid UTF-8 sequence at p: its length (1 to 4) and code point, or 0 when the byte at p
 * starts none (a continuation byte, a cut, overlong or surrogate sequence, beyond U+10FFFF). */
static size_t utf8_at(const unsigned char *p, uint32_t *ret_cp)
{
        size_t len;
        uint32_t cp;

        if (p[0] < 0x80) {
                *ret_cp = p[0];
                return 1;
        }
        if ((p[0] & 0xe0) == 0xc0)
                len = 2, cp = p[0] & 0x1f;
        else if ((p[0] & 0xf0) == 0xe0)
                len = 3, cp = p[0] & 0x0f;
        else if ((p[0] & 0xf8) == 0xf0)
                len = 4, cp = p[0] & 0x07;
        else
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xc0) != 0x80) /* also the terminating NUL */
                        return 0;
                cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        *ret_cp = cp;
        return len;
}

/* What a terminal may act on rather than print: C0 controls and DEL, C1 controls (U+0080 to
 * U+009F: U+009B is a CSI for terminals that take 8-bit controls), and the Bidi_Control
 * characters of Unicode (UAX #9: U+061C, U+200E, U+200F, the embeddings and overrides U+202A to
 * U+202E, the isolates U+2066 to U+2069), which reorder what follows them on the line. */
static bool control(uint32_t cp)
{
        return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x61c || cp == 0x200e ||
               cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* The bytes the character at s takes (at least 1; s not at its end); *ret_clean: whether it is
 * shown as it is (else as one '?'). */
static size_t next_char(const char *s, bool *ret_clean)
{
        uint32_t cp;
        size_t n = utf8_at((const unsigned char *)s, &cp);

        *ret_clean = n > 0 && !control(cp);
        return n ? n : 1;
}

/* Display width of s as put_clean() shows it: one column per character or '?'. */
static size_t width(const char *s)
{
        size_t w = 0;
        bool clean;

        while (*s) {
                s += next_char(s, &clean);
                w++;
        }
        return w;
}

/* The first n bytes of s (n at a character's end) with every control character (see control())
 * and every byte that is not UTF-8 as '?': nothing a terminal would act on. */
static void put_clean_n(struct buf *b, const char *s, size_t n)
{
        const char *end = s + n;
        bool clean;

        while (s < end && *s) {
                size_t k = next_char(s, &clean);
                if (clean)
                        put(b, s, k);
                else
                        put(b, "?", 1);
                s += k;
        }
}

static void put_clean(struct buf *b, const char *s)
{
        put_clean_n(b, s, strlen(s));
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
                                /* never inside a character */
                                while (cut > 1 && ((unsigned char)p[cut] & 0xc0) == 0x80)
                                        cut--;
                        }
                        puts_(b, "  ");
                        put_clean_n(b, p, cut);
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
