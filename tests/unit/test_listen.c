/* Unit tests of listen addresses: accepted and rejected forms, real sockets on loopback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "listen.h"
#include "util.h"

static void test_parse_accepted(void **state)
{
        static const struct {
                const char *addr, *host, *port;
        } cases[] = {
            {":9477", "", "9477"},
            {"127.0.0.1:9100", "127.0.0.1", "9100"},
            {"0.0.0.0:80", "0.0.0.0", "80"},
            {"localhost:9477", "localhost", "9477"},
            {"metrics.example.com:1", "metrics.example.com", "1"},
            {"[::1]:9477", "::1", "9477"},
            {"[::]:9477", "::", "9477"},
            {"[fe80::1%eth0]:9477", "fe80::1%eth0", "9477"},
            {"[2001:db8::42]:65535", "2001:db8::42", "65535"},
            {":0", "", "0"},
            {":09477", "", "9477"}, /* normalized */
        };
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char host[64] = "x", port[8] = "y";
                int r = listen_parse(cases[i].addr, host, sizeof host, port, sizeof port);
                if (r != 0)
                        fail_msg("\"%s\" rejected (%d)", cases[i].addr, r);
                assert_string_equal(host, cases[i].host);
                assert_string_equal(port, cases[i].port);
        }
}

static void test_parse_rejected(void **state)
{
        static const char *const bad[] = {
            "",          "nohost",
            "9477",      "[::1]9477",
            ":70000",    ":65536",
            "::1:9477",  "[]:9477",
            "[::1]:",    "host:",
            ":",         "[::1",
            "[::1]",     "host:port",
            ":-1",       ": 80",
            ":80 ",      ":+80",
            "a:b:80",    "[::1]:80]",
            "[::1]x:80", ":99999999999999999999999",
            ":0x50",
        };
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char host[64] = "untouched", port[8] = "same";
                int r = listen_parse(bad[i], host, sizeof host, port, sizeof port);
                if (r != -EINVAL)
                        fail_msg("\"%s\" accepted (%d): host \"%s\" port \"%s\"", bad[i], r, host,
                                 port);
                assert_string_equal(host, "untouched");
                assert_string_equal(port, "same");
        }
        assert_int_equal(listen_parse(NULL, (char[8]){0}, 8, (char[8]){0}, 8), -EINVAL);
}

static void test_parse_buffer_sizes(void **state)
{
        char host[8], port[8];
        (void)state;

        /* host of 7 fits in 8, 8 does not */
        assert_int_equal(listen_parse("abcdefg:1", host, sizeof host, port, sizeof port), 0);
        assert_string_equal(host, "abcdefg");
        assert_int_equal(listen_parse("abcdefgh:1", host, sizeof host, port, sizeof port), -EINVAL);
        assert_int_equal(listen_parse("[1:2:3:4:5]:1", host, sizeof host, port, sizeof port),
                         -EINVAL);
        /* a port string longer than the buffer */
        assert_int_equal(listen_parse(":65535", host, sizeof host, port, 5), -EINVAL);
        assert_int_equal(listen_parse(":65535", host, sizeof host, port, 6), 0);
        assert_string_equal(port, "65535");
}

static unsigned port_of(const char *desc)
{
        const char *colon = strrchr(desc, ':');
        assert_non_null(colon);
        return (unsigned)strtoul(colon + 1, NULL, 10);
}

static void test_open_loopback(void **state)
{
        int *fds = NULL, accepting = 0, c;
        size_t n = 0;
        const char *msg = NULL;
        char desc[64], want[64];
        socklen_t len = sizeof accepting;
        struct sockaddr_in sa = {.sin_family = AF_INET};
        unsigned port;
        (void)state;

        assert_int_equal(listen_open("127.0.0.1:0", &fds, &n, &msg), 0);
        assert_int_equal(n, 1);
        assert_true(fds[0] >= 0);
        assert_int_equal(getsockopt(fds[0], SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len), 0);
        assert_int_equal(accepting, 1);

        listen_describe(fds[0], desc, sizeof desc);
        port = port_of(desc);
        assert_true(port > 0 && port < 65536);
        snprintf(want, sizeof want, "127.0.0.1:%u", port);
        assert_string_equal(desc, want);

        /* a client can connect to it */
        sa.sin_port = htons((uint16_t)port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(c >= 0);
        assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof sa), 0);
        close(c);

        /* the same port again is in use; the message says so and nothing is appended */
        msg = NULL;
        assert_int_equal(listen_open(want, &fds, &n, &msg), -EADDRINUSE);
        assert_non_null(msg);
        assert_int_equal(n, 1);

        /* a second socket is appended (a numeric host: name resolution depends on the machine's
         * /etc/hosts, which a minimal root may lack) */
        assert_int_equal(listen_open("127.0.0.1:0", &fds, &n, &msg), 0);
        assert_true(n >= 2);
        for (size_t i = 0; i < n; i++)
                close(fds[i]);
        free(fds);
}

static void test_open_any_and_v6(void **state)
{
        int *fds = NULL;
        size_t n = 0;
        const char *msg = NULL;
        char desc[64];
        int r;
        (void)state;

        /* ":0" is one dual-stack socket (or IPv4 only) */
        assert_int_equal(listen_open(":0", &fds, &n, &msg), 0);
        assert_int_equal(n, 1);
        listen_describe(fds[0], desc, sizeof desc);
        assert_true(strncmp(desc, "[::]:", 5) == 0 || strncmp(desc, "0.0.0.0:", 8) == 0);
        assert_true(port_of(desc) > 0);

        r = listen_open("[::1]:0", &fds, &n, &msg);
        if (r == 0) {
                assert_int_equal(n, 2);
                listen_describe(fds[1], desc, sizeof desc);
                assert_true(strncmp(desc, "[::1]:", 6) == 0);
        } else {
                /* a host without IPv6 */
                print_message("no IPv6 loopback here (%s)\n", msg);
                assert_int_equal(n, 1);
        }
        for (size_t i = 0; i < n; i++)
                close(fds[i]);
        free(fds);
}

static void test_open_bad(void **state)
{
        int *fds = NULL;
        size_t n = 0;
        const char *msg = NULL;
        char desc[32];
        (void)state;

        assert_int_equal(listen_open("nohost", &fds, &n, &msg), -EINVAL);
        assert_string_equal(msg, "invalid address");
        assert_int_equal(n, 0);
        assert_null(fds);

        /* a numeric address that is not ours */
        msg = NULL;
        assert_true(listen_open("192.0.2.1:0", &fds, &n, &msg) < 0);
        assert_non_null(msg);
        assert_int_equal(n, 0);

        /* not a socket */
        assert_string_equal(listen_describe(0 + 1000, desc, sizeof desc), "fd 1000");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_accepted),     cmocka_unit_test(test_parse_rejected),
            cmocka_unit_test(test_parse_buffer_sizes), cmocka_unit_test(test_open_loopback),
            cmocka_unit_test(test_open_any_and_v6),    cmocka_unit_test(test_open_bad),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
