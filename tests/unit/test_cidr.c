/* Unit tests of source networks: CIDR parsing, matching, IPv4-mapped addresses, address keys. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cidr.h"

static struct netaddr addr(const char *s)
{
        struct netaddr a;
        struct sockaddr_in s4 = {.sin_family = AF_INET};
        struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};

        if (inet_pton(AF_INET, s, &s4.sin_addr) == 1)
                assert_int_equal(cidr_netaddr_from_sockaddr((struct sockaddr *)&s4, sizeof s4, &a),
                                 0);
        else if (inet_pton(AF_INET6, s, &s6.sin6_addr) == 1)
                assert_int_equal(cidr_netaddr_from_sockaddr((struct sockaddr *)&s6, sizeof s6, &a),
                                 0);
        else
                fail_msg("bad test address %s", s);
        return a;
}

static struct cidr net(const char *s)
{
        struct cidr c;
        const char *why = "?";

        if (cidr_parse(s, &c, &why) != 0)
                fail_msg("%s: %s", s, why);
        assert_null(why);
        return c;
}

static void expect_bad(const char *s, const char *reason)
{
        struct cidr c;
        const char *why = NULL;

        if (cidr_parse(s, &c, &why) != -EINVAL)
                fail_msg("\"%s\" was accepted", s);
        if (!why || !strstr(why, reason))
                fail_msg("\"%s\": reason \"%s\" lacks \"%s\"", s, why ? why : "", reason);
}

/* The parsed network, formatted again. */
static const char *fmt(const char *s)
{
        static char buf[64];
        struct cidr c = net(s);
        return cidr_format(&c, buf, sizeof buf);
}

static bool in(const char *n, const char *a)
{
        struct cidr c = net(n);
        struct netaddr x = addr(a);
        return cidr_contains(&c, &x);
}

static bool allows(const struct cidr *list, size_t n, const char *a)
{
        struct netaddr x = addr(a);
        return cidr_list_allows(list, n, &x);
}

static void test_parse_and_format(void **state)
{
        (void)state;

        assert_string_equal(fmt("10.0.0.0/8"), "10.0.0.0/8");
        assert_string_equal(fmt("192.0.2.7"), "192.0.2.7/32");
        assert_string_equal(fmt("0.0.0.0/0"), "0.0.0.0/0");
        assert_string_equal(fmt("2001:DB8::/32"), "2001:db8::/32");
        assert_string_equal(fmt("::1"), "::1/128");
        assert_string_equal(fmt("::/0"), "::/0");
        /* an IPv4-mapped network is the IPv4 network */
        assert_string_equal(fmt("::ffff:10.0.0.0/104"), "10.0.0.0/8");
        assert_string_equal(fmt("::ffff:192.0.2.1"), "192.0.2.1/32");
        assert_int_equal(net("10.1.2.128/25").prefix, 25);

        expect_bad("", "not an IPv4");
        expect_bad("/8", "not an IPv4");
        expect_bad("10.0.0", "not an IPv4");
        expect_bad("10.0.0.0.0/8", "not an IPv4");
        expect_bad("host.example/8", "not an IPv4");
        expect_bad("10.0.0.0/", "prefix");
        expect_bad("10.0.0.0/33", "prefix");
        expect_bad("10.0.0.0/-1", "prefix");
        expect_bad("10.0.0.0/+8", "prefix");
        expect_bad("10.0.0.0/08", "prefix");
        expect_bad("10.0.0.0/8/8", "prefix");
        expect_bad("10.0.0.0/8 ", "prefix");
        expect_bad("10.0.0.0/1000", "prefix");
        expect_bad("2001:db8::/129", "prefix");
        expect_bad("10.0.0.1/8", "host bits");
        expect_bad("10.64.0.0/9", "host bits");
        expect_bad("2001:db8::1/64", "host bits");
        expect_bad("::ffff:10.0.0.0/95", "/96");
        expect_bad("::ffff:10.0.0.1/104", "host bits");
        {
                struct cidr c;
                const char *why;
                assert_int_equal(cidr_parse(NULL, &c, &why), -EINVAL);
        }
}

static void test_match(void **state)
{
        struct cidr list[3];
        (void)state;

        assert_true(in("10.0.0.0/8", "10.255.1.2"));
        assert_false(in("10.0.0.0/8", "11.0.0.0"));
        assert_true(in("10.1.2.128/25", "10.1.2.255"));
        assert_false(in("10.1.2.128/25", "10.1.2.127"));
        assert_true(in("0.0.0.0/0", "203.0.113.9"));
        assert_true(in("192.0.2.7", "192.0.2.7"));
        assert_false(in("192.0.2.7", "192.0.2.6"));
        assert_true(in("2001:db8::/32", "2001:db8:ffff::1"));
        assert_false(in("2001:db8::/33", "2001:db8:8000::1"));
        /* families never match each other; ::/0 is not IPv4 */
        assert_false(in("::/0", "10.0.0.1"));
        assert_false(in("0.0.0.0/0", "::1"));
        /* a dual-stack socket's IPv4 client (::ffff:a.b.c.d) is an IPv4 client */
        assert_true(in("127.0.0.0/8", "::ffff:127.0.0.1"));
        assert_true(in("::ffff:127.0.0.0/104", "127.9.9.9"));
        /* but not an IPv4-compatible or NAT64 one */
        assert_false(in("127.0.0.0/8", "::127.0.0.1"));
        assert_false(in("127.0.0.0/8", "64:ff9b::127.0.0.1"));

        list[0] = net("10.0.0.0/8");
        list[1] = net("::1");
        list[2] = net("192.168.1.0/24");
        assert_true(allows(list, 0, "8.8.8.8"));
        assert_true(allows(list, 3, "::1"));
        assert_true(allows(list, 3, "192.168.1.77"));
        assert_false(allows(list, 3, "192.168.2.1"));
        assert_false(allows(list, 3, "::2"));
        assert_false(allows(list, 1, "::1"));
}

static void test_sockaddr(void **state)
{
        struct netaddr a;
        struct sockaddr_in s4 = {.sin_family = AF_INET};
        struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
        struct sockaddr su = {.sa_family = AF_UNIX};
        char buf[64];
        (void)state;

        assert_int_equal(cidr_netaddr_from_sockaddr(&su, sizeof su, &a), -EAFNOSUPPORT);
        assert_int_equal(cidr_netaddr_from_sockaddr((struct sockaddr *)&s4, sizeof s4 - 1, &a),
                         -EAFNOSUPPORT);
        assert_int_equal(cidr_netaddr_from_sockaddr((struct sockaddr *)&s6, sizeof s6 - 1, &a),
                         -EAFNOSUPPORT);
        a = addr("::ffff:198.51.100.3");
        assert_int_equal(a.family, AF_INET);
        assert_string_equal(cidr_netaddr_format(&a, buf, sizeof buf), "198.51.100.3");
        a = addr("2001:db8::5");
        assert_int_equal(a.family, AF_INET6);
        assert_string_equal(cidr_netaddr_format(&a, buf, sizeof buf), "2001:db8::5");
}

static bool same_key(const char *x, const char *y)
{
        struct netaddr a = addr(x), b = addr(y);
        struct addrkey ka = cidr_netaddr_key(&a), kb = cidr_netaddr_key(&b);
        return ka.hi == kb.hi && ka.lo == kb.lo;
}

static void test_keys(void **state)
{
        (void)state;

        assert_true(same_key("127.0.0.2", "127.0.0.2"));
        assert_true(same_key("127.0.0.2", "::ffff:127.0.0.2"));
        assert_false(same_key("127.0.0.2", "127.0.0.3"));
        /* IPv6 counts per /64 */
        assert_true(same_key("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"));
        assert_false(same_key("2001:db8:1:2::1", "2001:db8:1:3::1"));
        /* no IPv4 address shares a key with an IPv6 network, not even ::/64 */
        assert_false(same_key("0.0.0.0", "::1"));
        assert_false(same_key("0.0.0.2", "::"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_and_format),
            cmocka_unit_test(test_match),
            cmocka_unit_test(test_sockaddr),
            cmocka_unit_test(test_keys),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
