/* The web config at work in an HTTP server (libmicrohttpd): an object made from what
 * --web.config.file asks for (websec_load), handed to the server that serves with it, given the
 * next file's configuration on SIGHUP (websec_install) and freed after the server. It holds its
 * own running state: the basic-auth checker (auth.h), the requests waiting for a bcrypt check,
 * what the server started with, and the counters it exports. Two objects are two independent
 * configurations (two servers side by side, tests). */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct websec;

/* Reads and checks the web config file path (NULL or "": none, i.e. plain HTTP, no auth), with
 * the certificates and keys it names. Returns 0 and a new object in *ret, or -errno with
 * "FILE:LINE: what is wrong" in err (*ret untouched). Main thread (reads files). */
int websec_load(const char *path, struct websec **ret, char *err, size_t errsz);
/* Accepts NULL; returns NULL. After the server that served with s is freed. Main thread. */
struct websec *websec_free(struct websec *s);

/* Prints what s sets up, as "# web: ..." lines (--check-config). */
void websec_describe(const struct websec *s, FILE *out);

/* Puts next (taken over) in use and returns the object in use from now on: next itself when
 * running is NULL (at start), else running, which takes next's configuration for every new
 * handshake and request and keeps its counters and waiting checks (next is freed). Once its
 * server started, what only a restart changes (TLS turned on or off; versions, cipher suites,
 * curves) is logged and kept as running. Logs the configuration in use. Main thread. */
struct websec *websec_install(struct websec *running, struct websec *next);

/* For MHD_start_daemon on listen_fd: flags to add (MHD_USE_TLS when s serves TLS;
 * MHD_ALLOW_SUSPEND_RESUME, which the bcrypt worker needs) and options for MHD_OPTION_ARRAY (the
 * certificate callback and priorities, or none; borrowed from s); under TLS it also sets
 * TCP_NODELAY on listen_fd. Marks s as started with them: s serves one server. */
unsigned websec_mhd_flags(struct websec *s);
const struct MHD_OptionItem *websec_mhd_options(struct websec *s, int listen_fd);

/* Tells s the daemon started with its flags and options, before the daemon gets a connection:
 * the certificate callback finds s by it. websec_detach() after MHD_stop_daemon. Main thread. */
void websec_attach(struct websec *s, struct MHD_Daemon *d);
void websec_detach(struct websec *s);

/* The first thing of every request. Returns true when it may be served. Otherwise it has
 * answered (401 with WWW-Authenticate, 503 when too many bcrypt checks wait), suspended the
 * connection until its bcrypt check is done, or chosen to close it; *ret is then what the
 * access handler returns. HTTP threads. */
bool websec_admit(struct websec *s, struct MHD_Connection *c, enum MHD_Result *ret);

/* Adds the configured http_server_config.headers to a response. HTTP threads. */
void websec_add_headers(struct websec *s, struct MHD_Response *r);

/* Adds s's basic-auth and client-certificate counters (when those are configured); nothing
 * for NULL. Main thread. */
struct mset;
void websec_export(struct websec *s, struct mset *out);

/* Before MHD_stop_daemon: resumes every connection waiting for a bcrypt check (they are denied)
 * and waits for a running check to end. Main thread. */
void websec_stop(struct websec *s);
