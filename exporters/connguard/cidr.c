/* Client addresses and source networks (see cidr.h). */
#include "cidr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* An IPv6 address, or the IPv4 address it maps. */
static void from_in6(const uint8_t in6[16], struct netaddr *ret)
{
        memset(ret, 0, sizeof(*ret));
        if (memcmp(in6, v4mapped, sizeof v4mapped) == 0) {
                ret->family = AF_INET;
                memcpy(ret->a, in6 + 12, 4);
        } else {
                ret->family = AF_INET6;
                memcpy(ret->a, in6, 16);
        }
}

static unsigned family_bits(int family)
{
        return family == AF_INET ? 32 : 128;
}

/* Whether the first bits of a and b agree. */
static bool prefix_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
        unsigned whole = bits / 8, rest = bits % 8;

        if (memcmp(a, b, whole) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t)(0xff << (8 - rest));
        return (a[whole] & mask) == (b[whole] & mask);
}

/* Whether any bit after the first bits of a (of total bits) is set. */
static bool host_bits_set(const uint8_t *a, unsigned bits, unsigned total)
{
        for (unsigned i = bits; i < total; i++)
                if (a[i / 8] & (0x80 >> (i % 8)))
                        return true;
        return false;
}

int cidr_parse(const char *s, struct cidr *ret, const char **ret_why)
{
        char host[INET6_ADDRSTRLEN + 1];
        const char *slash;
        size_t hl;
        uint8_t buf[16];
        struct cidr c;
        unsigned prefix, max;
        bool mapped = false;

        *ret_why = "not an IPv4 or IPv6 address";
        if (!s)
                return -EINVAL;
        slash = strchr(s, '/');
        hl = slash ? (size_t)(slash - s) : strlen(s);
        if (hl == 0 || hl >= sizeof host)
                return -EINVAL;
        memcpy(host, s, hl);
        host[hl] = 0;
        memset(&c, 0, sizeof c);
        if (inet_pton(AF_INET, host, buf) == 1) {
                c.net.family = AF_INET;
                memcpy(c.net.a, buf, 4);
        } else if (inet_pton(AF_INET6, host, buf) == 1) {
                mapped = memcmp(buf, v4mapped, sizeof v4mapped) == 0;
                from_in6(buf, &c.net);
        } else {
                return -EINVAL;
        }
        max = mapped ? 128 : family_bits(c.net.family);
        prefix = max;
        if (slash) {
                const char *p = slash + 1;
                size_t n = strspn(p, "0123456789");

                *ret_why = "bad prefix length (expected /0 to /32 for IPv4, /0 to /128 for IPv6)";
                if (n == 0 || n > 3 || p[n] != 0 || (n > 1 && p[0] == '0'))
                        return -EINVAL;
                prefix = 0;
                for (size_t i = 0; i < n; i++)
                        prefix = prefix * 10 + (unsigned)(p[i] - '0');
                if (prefix > max)
                        return -EINVAL;
        }
        if (mapped) {
                /* ::ffff:a.b.c.d/N is the IPv4 network a.b.c.d/(N-96); shorter prefixes reach
                 * beyond the mapped range, which IPv4 clients never leave. */
                *ret_why = "an IPv4-mapped network needs a prefix of at least /96";
                if (prefix < 96)
                        return -EINVAL;
                prefix -= 96;
        }
        if (host_bits_set(c.net.a, prefix, family_bits(c.net.family))) {
                *ret_why = "host bits set beyond the prefix length (write the network address)";
                return -EINVAL;
        }
        c.prefix = prefix;
        *ret = c;
        *ret_why = NULL;
        return 0;
}

const char *cidr_netaddr_format(const struct netaddr *a, char *buf, size_t size)
{
        if (!inet_ntop(a->family, a->a, buf, (socklen_t)size))
                snprintf(buf, size, "?");
        return buf;
}

const char *cidr_format(const struct cidr *c, char *buf, size_t size)
{
        char h[INET6_ADDRSTRLEN];

        snprintf(buf, size, "%s/%u", cidr_netaddr_format(&c->net, h, sizeof h), c->prefix);
        return buf;
}

int cidr_netaddr_from_sockaddr(const struct sockaddr *sa, socklen_t len, struct netaddr *ret)
{
        if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
                const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
                memset(ret, 0, sizeof(*ret));
                ret->family = AF_INET;
                memcpy(ret->a, &s4->sin_addr, 4);
                return 0;
        }
        if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
                const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
                from_in6(s6->sin6_addr.s6_addr, ret);
                return 0;
        }
        return -EAFNOSUPPORT;
}

bool cidr_contains(const struct cidr *c, const struct netaddr *a)
{
        return c->net.family == a->family && prefix_equal(c->net.a, a->a, c->prefix);
}

bool cidr_list_allows(const struct cidr *list, size_t n, const struct netaddr *a)
{
        if (n == 0)
                return true;
        for (size_t i = 0; i < n; i++)
                if (cidr_contains(&list[i], a))
                        return true;
        return false;
}

struct addrkey cidr_netaddr_key(const struct netaddr *a)
{
        struct addrkey k = {0, 0};

        if (a->family == AF_INET) {
                /* Tagged so that no IPv4 key equals an IPv6 one. */
                k.lo = (1ULL << 32) | ((uint64_t)a->a[0] << 24 | (uint64_t)a->a[1] << 16 |
                                       (uint64_t)a->a[2] << 8 | a->a[3]);
                return k;
        }
        for (int i = 0; i < 8; i++)
                k.hi = k.hi << 8 | a->a[i];
        k.lo = 2;
        return k;
}
