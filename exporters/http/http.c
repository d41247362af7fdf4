/* The HTTP front on libmicrohttpd (its manual, "libmicrohttpd.texi", for the options used). */
#include "http.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "encoding.h"
#include "escape.h"
#include "expo.h"
#include "framing.h"
#include "index.h"
#include "log.h"
#include "metrics.h"
#include "runbook.h"
#include "websec.h"

/* libmicrohttpd before 0.9.75 (Debian 11 has 0.9.72): 413's older name, and no response that
 * borrows a buffer with a free callback given a closure (the page is copied instead). */
#ifndef MHD_HTTP_CONTENT_TOO_LARGE
#define MHD_HTTP_CONTENT_TOO_LARGE MHD_HTTP_PAYLOAD_TOO_LARGE
#endif
#if MHD_VERSION < 0x00097500
#define HTTP_BORROWS_PAGE 0
#else
#define HTTP_BORROWS_PAGE 1
#endif

struct http_server {
        struct http_config cfg;
        struct publisher *pub;
        struct MHD_Daemon *daemon;
        struct connguard *guard;
        _Atomic uint64_t bad_framing;  /* requests answered 400 for their framing */
        _Atomic uint64_t health_stale; /* cfg.health_stale, as the last reload set it */
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

#define ALLOWED_METHODS "GET, HEAD, OPTIONS"

static enum MHD_Result reply(struct http_server *s, struct MHD_Connection *c, unsigned status,
                             const char *type, const char *body)
{
        struct MHD_Response *resp;
        enum MHD_Result r;

        resp = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, ALLOWED_METHODS);
        websec_add_headers(s->cfg.web, resp);
        r = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return r;
}

#if HTTP_BORROWS_PAGE
static void release_snapshot(void *cls)
{
        snapshot_unref(cls);
}
#endif

/* A page too big to keep whole is rendered into libmicrohttpd's buffer as it is sent. */
static ssize_t read_page(void *cls, uint64_t pos, char *buf, size_t max)
{
        ssize_t n = page_stream_read(cls, buf, max);

        (void)pos;
        if (n < 0)
                return (ssize_t)MHD_CONTENT_READER_END_WITH_ERROR;
        return n == 0 ? (ssize_t)MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void free_page(void *cls)
{
        page_stream_free(cls);
}

/* A header field sent on one line or several. */
struct field {
        const char *name;
        const char *first; /* the first line's value */
        char *joined;      /* with several lines: all of them, malloc'd */
        size_t len;
        unsigned lines;
};

static enum MHD_Result join_line(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size)
{
        struct field *f = cls;

        (void)kind;
        (void)key_size;
        if (strcasecmp(key, f->name) != 0)
                return MHD_YES;
        if (!value) {
                value = "";
                value_size = 0;
        }
        if (f->lines++ == 0) {
                f->first = value;
                f->len = value_size;
                return MHD_YES;
        }
        if (!f->joined) {
                f->joined = xmalloc(f->len + 1);
                memcpy(f->joined, f->first, f->len);
        }
        f->joined = xrealloc(f->joined, f->len + 2 + value_size + 1);
        memcpy(f->joined + f->len, ", ", 2);
        memcpy(f->joined + f->len + 2, value, value_size);
        f->len += 2 + value_size;
        f->joined[f->len] = 0;
        return MHD_YES;
}

/* The whole value of the list field name (Accept, Accept-Encoding): its lines joined by ", ", as
 * RFC 9110 §5.3 says a field sent on several lines is one list (libmicrohttpd's lookup gives
 * the first line only); NULL when it is absent. free_field() it. */
static const char *field_value(struct MHD_Connection *c, const char *name, struct field *f)
{
        *f = (struct field){.name = name};
        MHD_get_connection_values_n(c, MHD_HEADER_KIND, join_line, f);
        return f->joined ? f->joined : f->first;
}

static void free_field(struct field *f)
{
        free(f->joined);
        f->joined = NULL;
}

static enum MHD_Result serve_metrics(struct http_server *s, struct MHD_Connection *c)
{
        struct snapshot *snap = publisher_fresh(s->pub);
        struct field fa, fe;
        const char *accept = field_value(c, MHD_HTTP_HEADER_ACCEPT, &fa);
        bool gz = encoding_accept_gzip(field_value(c, MHD_HTTP_HEADER_ACCEPT_ENCODING, &fe));
        enum expo_format fmt = encoding_accept_protobuf(accept)      ? EXPO_FORMAT_PROTOBUF
                               : encoding_accept_openmetrics(accept) ? EXPO_FORMAT_OPENMETRICS
                                                                     : EXPO_FORMAT_TEXT;
        struct MHD_Response *resp;
        struct page_stream *ps;
        const void *body;
        size_t len;
        enum MHD_Result r;

        free_field(&fa);
        free_field(&fe);
        if (!snap)
                return reply(s, c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8",
                             "no collection has finished yet\n");
        if (snapshot_body(snap, fmt, gz, &body, &len, &ps) < 0) {
                snapshot_unref(snap);
                return reply(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8",
                             "rendering failed\n");
        }
        if (ps) {
                /* Rendered as it is sent (chunked); the stream holds its own reference. */
                snapshot_unref(snap);
                resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, EXPO_CHUNK, read_page,
                                                         ps, free_page);
                if (!resp) {
                        page_stream_free(ps);
                        return MHD_NO;
                }
        } else {
#if HTTP_BORROWS_PAGE
                /* The response borrows the snapshot's page and drops our reference when sent. */
                resp = MHD_create_response_from_buffer_with_free_callback_cls(
                    len, (void *)body, release_snapshot, snap);
                if (!resp) {
                        snapshot_unref(snap);
                        return MHD_NO;
                }
#else
                resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
                snapshot_unref(snap);
                if (!resp)
                        return MHD_NO;
#endif
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                fmt == EXPO_FORMAT_PROTOBUF      ? EXPO_PROTOBUF_CONTENT_TYPE
                                : fmt == EXPO_FORMAT_OPENMETRICS ? EXPO_OPENMETRICS_CONTENT_TYPE
                                                                 : EXPO_TEXT_CONTENT_TYPE);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept, Accept-Encoding");
        if (gz)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
        websec_add_headers(s->cfg.web, resp);
        r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return r;
}

/* The landing page, text or HTML as the client's Accept prefers (index.c). */
static enum MHD_Result serve_index(struct http_server *s, struct MHD_Connection *c)
{
        struct snapshot *snap = publisher_fresh(s->pub);
        struct field fa;
        const char *type = NULL;
        struct MHD_Response *resp;
        size_t len = 0;
        char *page = http_index_page(snap ? snapshot_summary(snap) : NULL,
                                     field_value(c, MHD_HTTP_HEADER_ACCEPT, &fa), s->cfg.version,
                                     s->cfg.revision, &len, &type);
        enum MHD_Result r;

        free_field(&fa);
        snapshot_unref(snap);
        if (!page)
                return MHD_NO;
        resp = MHD_create_response_from_buffer_with_free_callback(len, page, free);
        if (!resp) {
                free(page);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept");
        websec_add_headers(s->cfg.web, resp);
        r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return r;
}

/* The runbook, or 304 when the request's If-None-Match (a list field: all its lines) lists it. */
static enum MHD_Result serve_runbook(struct http_server *s, struct MHD_Connection *c)
{
        struct field f;
        enum MHD_Result r =
            http_runbook_serve(c, field_value(c, MHD_HTTP_HEADER_IF_NONE_MATCH, &f), s->cfg.web);

        free_field(&f);
        return r;
}

static enum MHD_Result serve_health(struct http_server *s, struct MHD_Connection *c)
{
        if (!publisher_alive(s->pub, atomic_load(&s->health_stale)))
                return reply(s, c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8",
                             "main loop stalled\n");
        return reply(s, c, MHD_HTTP_OK, "text/plain; charset=utf-8", "OK\n");
}

/* RFC 9112 §3.2: an HTTP/1.1 request without Host gets 400 (libmicrohttpd's strict mode checks
 * that); so does one with more than one. */
static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
        (void)kind;
        (void)value;
        if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
                (*(unsigned *)cls)++;
        return MHD_YES;
}

/* MHD_OPTION_UNESCAPE_CALLBACK: the target decoded, but for "%00" (framing_unescape()). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
        (void)cls;
        (void)c;
        return framing_unescape(s);
}

static enum MHD_Result add_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size)
{
        const struct framing_field f = {key, key_size, value ? value : "", value ? value_size : 0};

        (void)kind;
        framing_add(cls, &f);
        return MHD_YES;
}

/* RFC 9112 §5.1, §6.1, §6.3: why a request's framing is unsound (a proxy in front and this
 * server could see its end in different places), or NULL. */
static const char *framing_problem(struct MHD_Connection *c)
{
        struct framing fr;

        framing_init(&fr);
        MHD_get_connection_values_n(c, MHD_HEADER_KIND, add_field, &fr);
        return framing_verdict(&fr);
}

/* 400 with the reason, and the connection closed after it: nothing after the headers is read,
 * so nothing there is taken as a next request. */
static enum MHD_Result refuse_framing(struct http_server *s, struct MHD_Connection *c,
                                      const char *why)
{
        struct MHD_Response *resp;
        char body[128];
        enum MHD_Result r;

        atomic_fetch_add(&s->bad_framing, 1);
        snprintf(body, sizeof body, "bad request: %s\n", why);
        resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        websec_add_headers(s->cfg.web, resp);
        r = MHD_queue_response(c, MHD_HTTP_BAD_REQUEST, resp);
        MHD_destroy_response(resp);
        return r;
}

static bool has_body(struct MHD_Connection *c)
{
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

        return MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
               (cl && strcmp(cl, "0") != 0);
}

/* The response to a request whose headers are complete (and which carries no body). */
static enum MHD_Result respond(struct http_server *s, struct MHD_Connection *c, const char *url,
                               const char *method)
{
        bool star = strcmp(url, "*") == 0;
        bool known = strcmp(url, "/metrics") == 0 || strcmp(url, "/") == 0 ||
                     strcmp(url, "/-/healthy") == 0 || strcmp(url, "/runbook") == 0;
        bool get =
            strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;

        if (strcmp(method, MHD_HTTP_METHOD_OPTIONS) == 0 && (star || known)) {
                /* RFC 9110 §9.3.7: the methods the server (*) or the resource supports. */
                struct MHD_Response *resp =
                    MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
                enum MHD_Result r;
                if (!resp)
                        return MHD_NO;
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, ALLOWED_METHODS);
                websec_add_headers(s->cfg.web, resp);
                r = MHD_queue_response(c, MHD_HTTP_OK, resp);
                MHD_destroy_response(resp);
                return r;
        }
        if (star) /* the asterisk form is for OPTIONS only (RFC 9112 §3.2.4) */
                return reply(s, c, MHD_HTTP_BAD_REQUEST, "text/plain; charset=utf-8",
                             "bad request\n");
        if (!get)
                return reply(s, c, known ? MHD_HTTP_METHOD_NOT_ALLOWED : MHD_HTTP_NOT_FOUND,
                             "text/plain; charset=utf-8",
                             known ? "method not allowed\n" : "not found\n");
        if (strcmp(url, "/metrics") == 0)
                return serve_metrics(s, c);
        if (strcmp(url, "/") == 0)
                return serve_index(s, c);
        if (strcmp(url, "/-/healthy") == 0)
                return serve_health(s, c);
        if (strcmp(url, "/runbook") == 0)
                return serve_runbook(s, c);
        return reply(s, c, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8", "not found\n");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
        static const char headers_seen; /* only its address is used, as a mark */
        struct http_server *s = cls;
        enum MHD_Result denied;

        (void)version;
        (void)upload_data;
        if (!*req_cls) {
                /* First call, headers complete. A response queued now makes libmicrohttpd
                 * close the connection after it (it will not read what follows), so the
                 * normal answer waits for the second call, and keep-alive works; only
                 * requests that must not go on are answered here. */
                unsigned hosts = 0;
                const char *why;

                *req_cls = (void *)&headers_seen;
                connguard_headers_done(s->guard, c);
                why = framing_problem(c);
                if (why)
                        return refuse_framing(s, c, why);
                MHD_get_connection_values(c, MHD_HEADER_KIND, count_host, &hosts);
                if (hosts > 1)
                        return reply(s, c, MHD_HTTP_BAD_REQUEST, "text/plain; charset=utf-8",
                                     "more than one Host header\n");
                /* A request with a body is answered now, the body unread (so the connection is
                 * closed after it); any other on the next call, which keeps the connection. */
                if (!has_body(c))
                        return MHD_YES;
        }
        *upload_data_size = 0;
        /* Every path needs the credentials (client certificate, basic auth), as the toolkit's,
         * and so does every answer that tells something of the server (404 for a path, 405 or
         * 413 for a method): without them, 401 and nothing else. A bcrypt check suspends the
         * connection and this is called again when it is done (for a request with a body, at
         * the same point: its body is still unread). */
        if (!websec_admit(s->cfg.web, c, &denied))
                return denied;
        if (has_body(c) && (strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
                            strcmp(method, MHD_HTTP_METHOD_HEAD) == 0 ||
                            strcmp(method, MHD_HTTP_METHOD_OPTIONS) == 0))
                /* Nothing here takes a body: refuse it unread. */
                return reply(s, c, MHD_HTTP_CONTENT_TOO_LARGE, "text/plain; charset=utf-8",
                             "request body not accepted\n");
        return respond(s, c, url, method);
}

struct http_server *http_server_new(const int *fds, size_t n, const struct http_config *cfg,
                                    struct publisher *pub, int *ret_err)
{
        struct http_server *s = xcalloc(1, sizeof(*s));
        struct MHD_OptionItem guard_opts[CONNGUARD_MHD_OPTIONS];
        const struct MHD_OptionItem *sec_opts;
        int r;

        s->cfg = *cfg;
        atomic_store(&s->health_stale, cfg->health_stale);
        s->pub = pub;
        s->guard = connguard_new(&cfg->limits);
        connguard_mhd_options(s->guard, guard_opts);
        /* The web config's TLS options (the same for every socket; under TLS each listening
         * socket gets TCP_NODELAY, which the accepted ones inherit). */
        sec_opts = websec_mhd_options(cfg->web, n ? fds[0] : -1);
        for (size_t i = 1; i < n; i++)
                websec_mhd_options(cfg->web, fds[i]);
        /* One daemon for every listening socket: the guard accepts and hands connections in. */
        s->daemon = MHD_start_daemon(
            MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG | CONNGUARD_MHD_FLAGS |
                websec_mhd_flags(cfg->web),
            0, NULL, NULL, handle, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_ARRAY,
            guard_opts, MHD_OPTION_ARRAY, sec_opts, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
            (size_t)HTTP_CONNECTION_MEMORY, MHD_OPTION_STRICT_FOR_CLIENT, 1,
            MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
        if (!s->daemon) {
                *ret_err = errno ? -errno : -EIO;
                for (size_t k = 0; k < n; k++)
                        close(fds[k]);
                http_server_free(s);
                return NULL;
        }
        websec_attach(cfg->web, s->daemon);
        r = connguard_start(s->guard, s->daemon, fds, n);
        if (r < 0) {
                *ret_err = r;
                http_server_free(s);
                return NULL;
        }
        return s;
}

void http_server_reconfigure(struct http_server *s, const struct connguard_config *limits,
                             usec_t health_stale)
{
        connguard_reconfigure(s->guard, limits);
        atomic_store(&s->health_stale, health_stale);
}

void http_server_stats(struct http_server *s, struct connguard_stats *ret)
{
        connguard_get_stats(s->guard, ret);
        ret->closed_framing = atomic_load(&s->bad_framing);
}

struct http_server *http_server_free(struct http_server *s)
{
        if (!s)
                return NULL;
        /* No new connections, then the daemon (whose callbacks use the guard), then the guard. */
        connguard_stop(s->guard);
        websec_stop(s->cfg.web); /* MHD_stop_daemon must find no suspended connection */
        if (s->daemon) {
                MHD_stop_daemon(s->daemon);
                websec_detach(s->cfg.web);
        }
        s->guard = connguard_free(s->guard);
        free(s);
        return NULL;
}
