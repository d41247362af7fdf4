/* Client addresses and source networks: CIDR parsing (RFC 4632 prefix notation; IPv6 text as
 * RFC 4291 §2.2 and §2.3), matching, and the key that groups clients for the per-address
 * connection limit. Pure functions: no I/O, no globals; any thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An IPv4 or IPv6 address; IPv4-mapped IPv6 addresses (::ffff:a.b.c.d, RFC 4291 §2.5.5.2) are
 * held as IPv4, so a dual-stack socket's IPv4 clients match IPv4 networks. */
struct netaddr {
        int family;    /* AF_INET or AF_INET6 */
        uint8_t a[16]; /* network byte order; IPv4 in a[0..3], the rest zero */
};

struct cidr {
        struct netaddr net; /* host bits zero */
        unsigned prefix;    /* 0..32 or 0..128 */
};

/* The key of the per-address limit: the whole IPv4 address, or the /64 network of an IPv6
 * address (a single IPv6 host usually owns a whole /64, RFC 7421). Equal keys share a count. */
struct addrkey {
        uint64_t hi, lo;
};

/* Parses "ADDR" (a single host) or "ADDR/PREFIX". Returns 0 and fills *ret, or -EINVAL with the
 * reason in *ret_why (a static string): not an address, a bad prefix, or host bits set beyond
 * the prefix (a likely typo, so refused rather than silently masked). */
int cidr_parse(const char *s, struct cidr *ret, const char **ret_why);

/* Writes "ADDR/PREFIX" into buf (at least 64 bytes); returns buf. */
const char *cidr_format(const struct cidr *c, char *buf, size_t size);

/* Takes the address out of a socket address. Returns 0, or -EAFNOSUPPORT for anything but
 * AF_INET / AF_INET6 (or a length too short for its family). */
int cidr_netaddr_from_sockaddr(const struct sockaddr *sa, socklen_t len, struct netaddr *ret);

/* Writes the address as text into buf (at least 46 bytes); returns buf. */
const char *cidr_netaddr_format(const struct netaddr *a, char *buf, size_t size);

/* True when a lies in c (families must agree). */
bool cidr_contains(const struct cidr *c, const struct netaddr *a);

/* True when a lies in one of the n networks; n == 0 allows everyone. */
bool cidr_list_allows(const struct cidr *list, size_t n, const struct netaddr *a);

struct addrkey cidr_netaddr_key(const struct netaddr *a);
