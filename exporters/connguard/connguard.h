/* Connection guard of the HTTP front: its thread owns accept() on the listening sockets, admits a
 * connection to libmicrohttpd (MHD_add_connection) only within the limits (source networks, per
 * address, in total) and refuses the others at once; it enforces deadlines that libmicrohttpd's
 * inactivity timeout cannot (a byte a second resets that one) by shutting late connections down.
 * It sits below the transport: TLS sessions run inside libmicrohttpd on the sockets it hands
 * over, so the same limits and deadlines apply to them (the handshake counts as header time). */
#pragma once

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#include "cidr.h"
#include "util.h"

struct connguard_config {
        unsigned max_connections; /* open at once, all listening sockets together */
        unsigned max_per_address; /* open at once per IPv4 address or IPv6 /64 */
        usec_t header_timeout;    /* request start (accept, or its first byte on a kept-alive
                                       * connection) to the end of its headers */
        usec_t request_timeout;   /* request start to the end of the response; >= header */
        usec_t idle_timeout;      /* end of a response to the first byte of the next request */
        const struct cidr *allow; /* clients allowed; n_allow == 0: everyone */
        size_t n_allow;
};

/* Counters since start; `open` is the number of connections now. */
struct connguard_stats {
        uint64_t accepted;        /* admitted and handed to libmicrohttpd */
        uint64_t refused_network; /* source not in the allow-list */
        uint64_t refused_address; /* over the per-address limit */
        uint64_t refused_limit;   /* over the total limit, nothing to evict */
        uint64_t evicted;         /* waiting connections closed to make room at the limit */
        uint64_t timeout_header;  /* closed: headers not complete in time */
        uint64_t timeout_request; /* closed: response not sent in time */
        uint64_t timeout_idle;    /* closed: kept-alive connection idle too long */
        uint64_t timeout_write;   /* closed: its peer did not read what it was sent (the write
                                   * deadline: under 16 KiB in 5 s) */
        uint64_t closed_network;  /* closed: its network left the allow-list (SIGHUP) */
        uint64_t closed_framing;  /* closed after a 400 for unsound request framing (the HTTP
                                   * server's count, filled in by http_server_stats) */
        unsigned open;
};

/* libmicrohttpd start flags the guard needs (no listening socket of its own; a wake-up channel
 * for connections added from the guard's thread). */
#define CONNGUARD_MHD_FLAGS (MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC)

/* Number of MHD_OptionItem entries connguard_mhd_options() writes, the MHD_OPTION_END included. */
#define CONNGUARD_MHD_OPTIONS 6

struct connguard;

/* A guard for the config (copied, the allow-list too). Never fails. */
struct connguard *connguard_new(const struct connguard_config *cfg);

/* Fills opts (CONNGUARD_MHD_OPTIONS entries) for MHD_OPTION_ARRAY: the connection and request
 * notifications the guard follows, and the libmicrohttpd limits it leaves as a backstop. */
void connguard_mhd_options(struct connguard *g, struct MHD_OptionItem *opts);

/* Starts the guard's thread accepting on the n listening sockets (taken over: closed by
 * connguard_free, also on failure) and handing connections to d, which must have been started
 * with CONNGUARD_MHD_FLAGS and connguard_mhd_options(). Returns 0 or -errno. */
int connguard_start(struct connguard *g, struct MHD_Daemon *d, const int *fds, size_t n);

/* Stops accepting and closes the listening sockets; the connections stay with libmicrohttpd.
 * Call before MHD_stop_daemon(); the guard must outlive the daemon (its callbacks run until
 * the daemon has stopped). Idempotent. */
void connguard_stop(struct connguard *g);

/* Frees the guard (connguard_stop first if needed). Accepts NULL; returns NULL. */
struct connguard *connguard_free(struct connguard *g);

/* New limits, deadlines and allow-list for new connections and running deadlines; open
 * connections from networks no longer allowed are closed. Any thread. */
void connguard_reconfigure(struct connguard *g, const struct connguard_config *cfg);

/* A copy of the counters. Any thread. */
void connguard_get_stats(struct connguard *g, struct connguard_stats *ret);

/* Tells the guard that connection c's request headers are complete (the access handler's
 * first call); from then the request deadline applies. libmicrohttpd's thread. */
void connguard_headers_done(struct connguard *g, struct MHD_Connection *c);
