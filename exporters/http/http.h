/* The HTTP front (libmicrohttpd): /metrics from the latest snapshot, /, /-/healthy. Its threads
 * only read snapshots; they never touch a device or a file. */
#pragma once

#include <stddef.h>

#include "connguard.h"
#include "publisher.h"
#include "util.h"

/* Per-connection memory of libmicrohttpd: the request line and headers must fit in about half
 * of it (431 or 414 otherwise). */
#define HTTP_CONNECTION_MEMORY 32768

struct websec;

struct http_config {
        struct connguard_config limits; /* connection limits, deadlines, allowed networks */
        usec_t health_stale; /* /-/healthy fails when the main loop is silent this long and, when
                              * it samples on demand, does not answer when asked */
        const char *version; /* shown on / */
        const char *revision;
        struct websec *web; /* the web config (websec.h): TLS, basic auth, extra headers; borrowed,
                             * it outlives the server and is the server's alone; SIGHUP
                             * installs the next file's configuration into it */
};

struct http_server;

/* Serves on the given listening sockets (taken over: closed by http_server_free). Returns NULL
 * and sets *ret_err (-errno) when libmicrohttpd refuses to start. */
struct http_server *http_server_new(const int *fds, size_t n, const struct http_config *cfg,
                                    struct publisher *pub, int *ret_err);
/* New limits, deadlines, allowed networks and health_stale (SIGHUP). Main thread. */
void http_server_reconfigure(struct http_server *s, const struct connguard_config *limits,
                             usec_t health_stale);
/* The connection guard's counters. Any thread. */
void http_server_stats(struct http_server *s, struct connguard_stats *ret);
/* Adds the server's own metrics (diskpulse_http_connections*) to out; nothing for NULL. Any
 * thread (http_metrics.c). */
void http_server_export(struct http_server *s, struct mset *out);
/* Stops all threads and closes every connection and socket; accepts NULL; returns NULL. */
struct http_server *http_server_free(struct http_server *s);
