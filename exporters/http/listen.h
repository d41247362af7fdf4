/* Listen addresses in the exporter convention ([HOST]:PORT, [v6]:PORT) and their sockets. */
#pragma once

#include <stddef.h>

/* Splits an address. host is "" for all addresses. Returns 0 or -EINVAL. */
int listen_parse(const char *addr, char *host, size_t hostsz, char *port, size_t portsz);

/* Opens listening TCP sockets for addr (every address a host name resolves to; ":PORT" is one
 * dual-stack socket, or IPv4 only where IPv6 is off). Appends the fds to *fds (realloc'd).
 * Returns 0 or -errno; on failure *err_msg (static or from gai_strerror) says why. */
int listen_open(const char *addr, int **fds, size_t *n, const char **err_msg);

/* Writes "host:port" of a bound socket into buf. Returns buf. */
const char *listen_describe(int fd, char *buf, size_t size);
