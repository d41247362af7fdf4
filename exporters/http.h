/* The HTTP front (libmicrohttpd): /metrics from the latest snapshot, /, /-/healthy. Its threads
 * only read snapshots; they never touch a device or a file. */
#pragma once

#include <stddef.h>

#include "snapshot.h"
#include "util.h"

struct http_config {
        unsigned max_connections; /* per listening socket; beyond it new ones are refused */
        unsigned timeout_sec;     /* idle connection timeout */
        usec_t health_stale;      /* /-/healthy fails when the main loop is silent this long */
        const char *version;      /* shown on / */
        const char *revision;
};

struct http_server;

/* Serves on the given listening sockets (taken over: closed by http_server_free). Returns NULL
 * and sets *ret_err (-errno) when libmicrohttpd refuses to start. */
struct http_server *http_server_new(const int *fds, size_t n, const struct http_config *cfg,
                                    struct publisher *pub, int *ret_err);
/* Stops all threads and closes every connection and socket; accepts NULL; returns NULL. */
struct http_server *http_server_free(struct http_server *s);
