/* Listen addresses and sockets. */
#include "listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

/* The accept queue: the kernel clamps it to net.core.somaxconn (4096 since Linux 5.4). A queue
 * of 128 (the old default) filled under a flood of connects from many addresses faster than the
 * guard's thread accepts them; the kernel then drops the handshake's last ACK or the SYN, and a
 * scraper caught in that waits for its retransmission, a second later (p99 of 1.0 to 1.5 s under
 * 1,000 attacking addresses). With SYN cookies on (net.ipv4.tcp_syncookies, Debian's default) a
 * full SYN queue does not drop; a full accept queue still does, hence its size. The unit's
 * diskpulse.socket gets the same from systemd (its default Backlog= is capped by somaxconn). */
#define LISTEN_BACKLOG 4096

int listen_parse(const char *addr, char *host, size_t hostsz, char *port, size_t portsz)
{
        const char *colon, *h = addr;
        size_t hl;
        uint64_t p;

        if (!addr)
                return -EINVAL;
        if (addr[0] == '[') {
                const char *end = strchr(addr, ']');
                if (!end || end[1] != ':')
                        return -EINVAL;
                h = addr + 1;
                hl = (size_t)(end - h);
                colon = end + 1;
                if (hl == 0)
                        return -EINVAL;
        } else {
                colon = strrchr(addr, ':');
                if (!colon || memchr(addr, ':', (size_t)(colon - addr)))
                        return -EINVAL;
                hl = (size_t)(colon - addr);
        }
        if (hl >= hostsz || strlen(colon + 1) >= portsz)
                return -EINVAL;
        if (parse_u64(colon + 1, &p) < 0 || p > 65535)
                return -EINVAL;
        memcpy(host, h, hl);
        host[hl] = 0;
        snprintf(port, portsz, "%u", (unsigned)p);
        return 0;
}

static int open_one(const struct sockaddr *sa, socklen_t len, int family, int v6only)
{
        int fd, one = 1;

        fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
        if (fd < 0)
                return -errno;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (family == AF_INET6 &&
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only) < 0)
                goto fail;
        if (bind(fd, sa, len) < 0 || listen(fd, LISTEN_BACKLOG) < 0)
                goto fail;
        return fd;
fail : {
        int r = -errno;
        close(fd);
        return r;
}
}

static void push_fd(int **fds, size_t *n, int fd)
{
        *fds = xrealloc(*fds, (*n + 1) * sizeof(**fds));
        (*fds)[(*n)++] = fd;
}

int listen_open(const char *addr, int **fds, size_t *n, const char **err_msg)
{
        char host[256], port[8];
        struct addrinfo hints, *res = NULL;
        int r, fd;
        size_t opened = 0;

        *err_msg = "invalid address";
        if (listen_parse(addr, host, sizeof host, port, sizeof port) < 0)
                return -EINVAL;

        if (!host[0]) {
                struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = in6addr_any};
                struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_addr.s_addr = INADDR_ANY};
                uint16_t p = (uint16_t)atoi(port);

                s6.sin6_port = htons(p);
                s4.sin_port = htons(p);
                fd = open_one((struct sockaddr *)&s6, sizeof s6, AF_INET6, 0);
                if (fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL)
                        fd = open_one((struct sockaddr *)&s4, sizeof s4, AF_INET, 0);
                if (fd < 0) {
                        *err_msg = strerror(-fd);
                        return fd;
                }
                push_fd(fds, n, fd);
                return 0;
        }

        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
        r = getaddrinfo(host, port, &hints, &res);
        if (r != 0) {
                *err_msg = gai_strerror(r);
                return -EADDRNOTAVAIL;
        }
        r = 0;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                fd = open_one(ai->ai_addr, ai->ai_addrlen, ai->ai_family, 1);
                if (fd < 0) {
                        /* A host may resolve to a family this machine lacks (::1 without
                         * IPv6): that is fine as long as one address works. */
                        if (r == 0)
                                r = fd;
                        continue;
                }
                push_fd(fds, n, fd);
                opened++;
        }
        freeaddrinfo(res);
        if (opened == 0) {
                *err_msg = strerror(r ? -r : EADDRNOTAVAIL);
                return r ? r : -EADDRNOTAVAIL;
        }
        return 0;
}

const char *listen_describe(int fd, char *buf, size_t size)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        char h[INET6_ADDRSTRLEN] = "?";
        unsigned port = 0;

        if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
                if (ss.ss_family == AF_INET) {
                        struct sockaddr_in *s = (struct sockaddr_in *)&ss;
                        inet_ntop(AF_INET, &s->sin_addr, h, sizeof h);
                        port = ntohs(s->sin_port);
                        snprintf(buf, size, "%s:%u", h, port);
                        return buf;
                }
                if (ss.ss_family == AF_INET6) {
                        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
                        inet_ntop(AF_INET6, &s->sin6_addr, h, sizeof h);
                        port = ntohs(s->sin6_port);
                        snprintf(buf, size, "[%s]:%u", h, port);
                        return buf;
                }
        }
        snprintf(buf, size, "fd %d", fd);
        return buf;
}
