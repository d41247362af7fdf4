/* The landing page in its two forms, made from the same tables: aligned plain text (lib's
 * summary_text()) for curl, HTML tables with every string escaped for a browser. */
#include "index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encoding.h"
#include "escape.h"
#include "util.h"

#define INDEX_TEXT_TYPE "text/plain; charset=utf-8"
#define INDEX_HTML_TYPE "text/html; charset=utf-8"

/* s as HTML text (lib's escaper), written to f. */
static void html_escape(FILE *f, const char *s)
{
        size_t n = escape_html(s, NULL);
        char small[256], *buf = n < sizeof small ? small : xmalloc(n + 1);

        fwrite(buf, 1, escape_html(s, buf), f);
        if (buf != small)
                free(buf);
}

/* One table of the status summary: its heading, rows, the count of rows left out, its note. */
static void html_table(FILE *f, const struct summary_table *t)
{
        if (!t->nrows && !t->more && !t->show_empty)
                return;
        fputs("<h2>", f);
        html_escape(f, t->title);
        fputs("</h2>\n<table><tr>", f);
        for (size_t k = 0; k < t->ncols; k++) {
                fputs("<th>", f);
                html_escape(f, t->cols[k]);
                fputs("</th>", f);
        }
        fputs("</tr>\n", f);
        for (size_t i = 0; i < t->nrows; i++) {
                fputs("<tr>", f);
                for (size_t k = 0; k < t->ncols; k++) {
                        fputs("<td>", f);
                        html_escape(f, t->cells[i * t->ncols + k]);
                        fputs("</td>", f);
                }
                fputs("</tr>\n", f);
        }
        fputs("</table>\n", f);
        if (t->more) {
                fprintf(f, "<p>and %zu more ", t->more);
                html_escape(f, t->more_what ? t->more_what : "rows");
                fputs(": see /metrics</p>\n", f);
        }
        if (t->note) {
                fputs("<p class=\"note\">", f);
                html_escape(f, t->note);
                fputs("</p>\n", f);
        }
}

static char *html_page(const struct summary *sum, const char *version, const char *revision,
                       size_t *ret_len)
{
        char *page = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&page, &len);

        if (!f)
                return NULL;
        fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>diskpulse</title>"
              "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 10px;"
              "text-align:left}td{font-variant-numeric:tabular-nums}.note{font-size:small;"
              "max-width:60em}</style></head><body>\n<h1>diskpulse</h1>\n<p>Version ",
              f);
        html_escape(f, version);
        fputs(" (revision ", f);
        html_escape(f, revision);
        fputs(")</p>\n<ul><li><a href=\"/metrics\">Metrics</a></li>"
              "<li><a href=\"/-/healthy\">Health</a></li>"
              "<li><a href=\"/runbook\">Runbook</a></li></ul>\n",
              f);
        if (!sum)
                fputs("<p>No collection has finished yet.</p>\n", f);
        for (size_t i = 0; sum && i < sum->n; i++)
                html_table(f, &sum->tables[i]);
        fputs("</body></html>\n", f);
        if (fclose(f) != 0) {
                free(page);
                return NULL;
        }
        *ret_len = len;
        return page;
}

static char *text_page(const struct summary *sum, const char *version, const char *revision,
                       size_t *ret_len)
{
        char *body = NULL, *page;
        size_t blen = 0;
        int n;

        if (sum)
                body = summary_text(sum, &blen);
        n = asprintf(&page, "diskpulse %s (revision %s); as HTML with Accept: text/html\n%s%s",
                     version, revision, sum ? "" : "\nno collection has finished yet\n",
                     body ? body : "");
        free(body);
        if (n < 0)
                return NULL;
        *ret_len = (size_t)n;
        return page;
}

char *http_index_page(const struct summary *sum, const char *accept, const char *version,
                      const char *revision, size_t *ret_len, const char **ret_type)
{
        bool html = encoding_accept_html(accept);
        char *page = html ? html_page(sum, version, revision, ret_len)
                          : text_page(sum, version, revision, ret_len);

        if (page)
                *ret_type = html ? INDEX_HTML_TYPE : INDEX_TEXT_TYPE;
        return page;
}
