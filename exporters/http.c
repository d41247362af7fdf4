/* The HTTP front on libmicrohttpd (its manual, "libmicrohttpd.texi", for the options used). */
#include "http.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "encoding.h"
#include "expo.h"
#include "log.h"
#include "metrics.h"

struct http_server {
        struct http_config cfg;
        struct publisher *pub;
        struct MHD_Daemon **daemons;
        size_t n;
};

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        char buf[512];
        size_t l;

        (void)cls;
        vsnprintf(buf, sizeof buf, fmt, ap);
        l = strlen(buf);
        while (l > 0 && buf[l - 1] == '\n')
                buf[--l] = 0;
        log_debug("http", "detail", buf);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body)
{
        struct MHD_Response *resp;
        enum MHD_Result r;

        resp = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        r = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return r;
}

static void release_snapshot(void *cls)
{
        snapshot_unref(cls);
}

static enum MHD_Result serve_metrics(struct http_server *s, struct MHD_Connection *c)
{
        struct snapshot *snap = publisher_get(s->pub);
        const char *ae =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
        const char *accept =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
        bool gz = accept_gzip(ae);
        enum expo_format fmt =
            accept_openmetrics(accept) ? EXPO_FORMAT_OPENMETRICS : EXPO_FORMAT_TEXT;
        struct MHD_Response *resp;
        const void *body;
        size_t len;
        enum MHD_Result r;

        if (!snap)
                return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8",
                             "no collection has finished yet\n");
        if (snapshot_page(snap, fmt, gz, &body, &len) < 0) {
                snapshot_unref(snap);
                return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8",
                             "rendering failed\n");
        }
        /* The response borrows the snapshot's page and drops our reference when sent. */
        resp = MHD_create_response_from_buffer_with_free_callback_cls(len, (void *)body,
                                                                      release_snapshot, snap);
        if (!resp) {
                snapshot_unref(snap);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                fmt == EXPO_FORMAT_OPENMETRICS ? EXPO_OPENMETRICS_CONTENT_TYPE
                                                               : EXPO_TEXT_CONTENT_TYPE);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept, Accept-Encoding");
        if (gz)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
        r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return r;
}

static void html_escape(FILE *f, const char *s)
{
        for (; *s; s++) {
                switch (*s) {
                case '<':
                        fputs("&lt;", f);
                        break;
                case '>':
                        fputs("&gt;", f);
                        break;
                case '&':
                        fputs("&amp;", f);
                        break;
                case '"':
                        fputs("&quot;", f);
                        break;
                default:
                        fputc(*s, f);
                }
        }
}

/* The value of family name's sample without suffix whose labels include every pair of want
 * (name, value, ..., NULL), or NaN. */
static double sample_value(struct mset *const *sets, size_t n, const char *name,
                           const char *const *want)
{
        char buf[4096];

        for (size_t i = 0; i < n; i++) {
                const struct mfamily *f = mset_find(sets[i], name);
                for (size_t k = 0; f && k < f->n; k++) {
                        const struct msample *sm = &f->samples[k];
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

/* The value of family name for the sample whose device label is dev, or NaN. */
static double device_value(struct mset *const *sets, size_t n, const char *name, const char *dev)
{
        return sample_value(sets, n, name, (const char *const[]){"device", dev, NULL});
}

#define INDEX_MAX_DEVICES 200

/* The value of family name for the canary target with path and mode (and the quantile label
 * when q is not NULL), or NaN. */
static double target_value(struct mset *const *sets, size_t n, const char *name, const char *path,
                           const char *mode, const char *q)
{
        return sample_value(
            sets, n, name,
            (const char *const[]){"path", path, "mode", mode, q ? "quantile" : NULL, q, NULL});
}

/* A table cell with the value, or a dash when there is none (NaN). */
static void cell(FILE *f, double v, int decimals)
{
        if (v == v)
                fprintf(f, "<td>%.*f</td>", decimals, v);
        else
                fputs("<td>-</td>", f);
}

/* The canary targets: up, recent median, baseline, degradation and flush ratios. */
static void index_canary(FILE *f, struct mset *const *sets, size_t n)
{
        bool header = false;

        for (size_t i = 0; i < n; i++) {
                const struct mfamily *up = mset_find(sets[i], "diskpulse_sync_target_up");
                for (size_t k = 0; up && k < up->n; k++) {
                        char path[4096], dev[64], mode[32];
                        labels_get(up->samples[k].labels, "path", path, sizeof path);
                        labels_get(up->samples[k].labels, "device", dev, sizeof dev);
                        labels_get(up->samples[k].labels, "mode", mode, sizeof mode);
                        if (!header) {
                                fputs("<h2>Sync canary</h2>\n<table><tr><th>path</th><th>device"
                                      "</th><th>mode</th><th>up</th><th>median 5m (ms)</th>"
                                      "<th>baseline (ms)</th><th>degradation</th>"
                                      "<th>flushes per probe</th><th>probes</th></tr>\n",
                                      f);
                                header = true;
                        }
                        fputs("<tr><td>", f);
                        html_escape(f, path);
                        fputs("</td><td>", f);
                        html_escape(f, dev);
                        fputs("</td><td>", f);
                        html_escape(f, mode);
                        fprintf(f, "</td><td>%s</td>", up->samples[k].d > 0 ? "yes" : "no");
                        cell(f,
                             1000 * target_value(sets, n, "diskpulse_sync_recent_seconds", path,
                                                 mode, "0.5"),
                             3);
                        cell(f,
                             1000 * target_value(sets, n, "diskpulse_sync_baseline_seconds", path,
                                                 mode, NULL),
                             3);
                        cell(f,
                             target_value(sets, n, "diskpulse_sync_degradation_ratio", path, mode,
                                          NULL),
                             2);
                        cell(f,
                             target_value(sets, n, "diskpulse_sync_flush_ratio", path, mode, NULL),
                             2);
                        cell(f,
                             target_value(sets, n, "diskpulse_sync_probes_total", path, mode, NULL),
                             0);
                        fputs("</tr>\n", f);
                }
        }
        if (header)
                fputs("</table>\n", f);
}

static enum MHD_Result serve_index(struct http_server *s, struct MHD_Connection *c)
{
        struct snapshot *snap = publisher_get(s->pub);
        char *page = NULL;
        size_t len = 0, shown = 0, total = 0;
        FILE *f = open_memstream(&page, &len);
        enum MHD_Result r;

        if (!f) {
                snapshot_unref(snap);
                return MHD_NO;
        }
        fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>diskpulse</title>"
              "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 10px;"
              "text-align:left}</style></head><body>\n<h1>diskpulse</h1>\n<p>Version ",
              f);
        html_escape(f, s->cfg.version);
        fputs(" (revision ", f);
        html_escape(f, s->cfg.revision);
        fputs(")</p>\n<ul><li><a href=\"/metrics\">Metrics</a></li>"
              "<li><a href=\"/-/healthy\">Health</a></li></ul>\n",
              f);
        if (snap) {
                struct mset *const *sets;
                size_t n = snapshot_sets(snap, &sets);

                fputs("<h2>Devices</h2>\n<table><tr><th>device</th><th>model</th><th>serial</th>"
                      "<th>write await (ms)</th><th>flush await (ms)</th><th>utilization</th>"
                      "</tr>\n",
                      f);
                for (size_t i = 0; i < n; i++) {
                        const struct mfamily *info = mset_find(sets[i], "diskpulse_disk_info");
                        for (size_t k = 0; info && k < info->n; k++, total++) {
                                char dev[64], model[128], serial[128];
                                if (shown >= INDEX_MAX_DEVICES)
                                        continue;
                                labels_get(info->samples[k].labels, "device", dev, sizeof dev);
                                labels_get(info->samples[k].labels, "model", model, sizeof model);
                                labels_get(info->samples[k].labels, "serial", serial,
                                           sizeof serial);
                                fputs("<tr><td>", f);
                                html_escape(f, dev);
                                fputs("</td><td>", f);
                                html_escape(f, model);
                                fputs("</td><td>", f);
                                html_escape(f, serial);
                                fprintf(
                                    f, "</td><td>%.3f</td><td>%.3f</td><td>%.1f%%</td></tr>\n",
                                    1000 * device_value(sets, n,
                                                        "diskpulse_disk_write_await_seconds", dev),
                                    1000 * device_value(sets, n,
                                                        "diskpulse_disk_flush_await_seconds", dev),
                                    100 * device_value(sets, n, "diskpulse_disk_utilization_ratio",
                                                       dev));
                                shown++;
                        }
                }
                fputs("</table>\n", f);
                if (total > shown)
                        fprintf(f, "<p>and %zu more devices: see /metrics</p>\n", total - shown);
                index_canary(f, sets, n);
        }
        fputs("</body></html>\n", f);
        snapshot_unref(snap);
        if (fclose(f) != 0) {
                free(page);
                return MHD_NO;
        }
        r = reply(c, MHD_HTTP_OK, "text/html; charset=utf-8", page);
        free(page);
        return r;
}

static enum MHD_Result serve_health(struct http_server *s, struct MHD_Connection *c)
{
        usec_t beat = publisher_last_beat(s->pub), now = now_monotonic();

        if (beat == 0 || now - beat > s->cfg.health_stale)
                return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8",
                             "main loop stalled\n");
        return reply(c, MHD_HTTP_OK, "text/plain; charset=utf-8", "OK\n");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
        struct http_server *s = cls;
        bool known =
            strcmp(url, "/metrics") == 0 || strcmp(url, "/") == 0 || strcmp(url, "/-/healthy") == 0;

        (void)version;
        (void)upload_data;
        (void)req_cls;
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
                *upload_data_size = 0;
                return reply(c, known ? MHD_HTTP_METHOD_NOT_ALLOWED : MHD_HTTP_NOT_FOUND,
                             "text/plain; charset=utf-8",
                             known ? "method not allowed\n" : "not found\n");
        }
        if (strcmp(url, "/metrics") == 0)
                return serve_metrics(s, c);
        if (strcmp(url, "/") == 0)
                return serve_index(s, c);
        if (strcmp(url, "/-/healthy") == 0)
                return serve_health(s, c);
        return reply(c, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8", "not found\n");
}

struct http_server *http_server_new(const int *fds, size_t n, const struct http_config *cfg,
                                    struct publisher *pub, int *ret_err)
{
        struct http_server *s = xcalloc(1, sizeof(*s));

        s->cfg = *cfg;
        s->pub = pub;
        s->daemons = xcalloc(n ? n : 1, sizeof(*s->daemons));
        for (size_t i = 0; i < n; i++) {
                struct MHD_Daemon *d = MHD_start_daemon(
                    MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, s,
                    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, fds[i],
                    MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
                    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout_sec,
                    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768, MHD_OPTION_END);
                if (!d) {
                        *ret_err = errno ? -errno : -EIO;
                        for (size_t k = i; k < n; k++)
                                close(fds[k]);
                        http_server_free(s);
                        return NULL;
                }
                s->daemons[s->n++] = d;
        }
        return s;
}

struct http_server *http_server_free(struct http_server *s)
{
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n; i++)
                MHD_stop_daemon(s->daemons[i]);
        free(s->daemons);
        free(s);
        return NULL;
}
