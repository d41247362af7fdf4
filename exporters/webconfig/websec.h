/* The web config at work in the HTTP server (libmicrohttpd): what --web.config.file asks for,
 * loaded (websec_load), installed for every request and handshake (websec_install, at start and
 * on SIGHUP), and the few hooks http.c calls: the daemon flags and options, the check at the
 * start of every request (basic auth, client certificate) and the extra response headers.
 * One configuration per process: libmicrohttpd's certificate callback has no closure. */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct websec;

/* Reads and checks the web config file path (NULL or "": none, i.e. plain HTTP, no auth), with
 * the certificates and keys it names. Returns 0 and a state for websec_install(), or -errno
 * with "FILE:LINE: what is wrong" in err. Main thread (reads files). */
int websec_load(const char *path, struct websec **ret, char *err, size_t errsz);
/* Accepts NULL; returns NULL. */
struct websec *websec_free(struct websec *s);

/* Prints what s sets up, as "# web: ..." lines (--check-config). */
void websec_describe(const struct websec *s, FILE *out);

/* Makes s (taken over) the configuration of every request and handshake from now on. After the
 * server started, what only a restart changes (TLS turned on or off; versions, cipher suites,
 * curves) is logged and kept as running; everything else applies at once, to new handshakes
 * and requests. Main thread. */
void websec_install(struct websec *s);

/* For MHD_start_daemon on listen_fd: flags to add (MHD_USE_TLS when the installed configuration
 * serves TLS; MHD_ALLOW_SUSPEND_RESUME, which the bcrypt worker needs) and options for
 * MHD_OPTION_ARRAY (the certificate callback and priorities, or none); under TLS it also sets
 * TCP_NODELAY on listen_fd. Marks the server as started with them. */
unsigned websec_mhd_flags(void);
const struct MHD_OptionItem *websec_mhd_options(int listen_fd);

/* The first thing of every request. Returns true when it may be served. Otherwise it has
 * answered (401 with WWW-Authenticate, 503 when too many bcrypt checks wait), suspended the
 * connection until its bcrypt check is done, or chosen to close it; *ret is then what the
 * access handler returns. HTTP threads. */
bool websec_admit(struct MHD_Connection *c, enum MHD_Result *ret);

/* Adds the configured http_server_config.headers to a response. HTTP threads. */
void websec_add_headers(struct MHD_Response *r);

/* Adds the basic-auth and client-certificate counters (when those are configured). Main
 * thread. */
struct mset;
void websec_export(struct mset *out);

/* Before MHD_stop_daemon: resumes every connection waiting for a bcrypt check (they are denied)
 * and waits for a running check to end. Main thread. */
void websec_stop(void);
