/* Unit tests of exporters/webconfig/websec.c through two real HTTP servers side by side on
 * loopback, each with its own web config object: each answers its own users and sends its own
 * headers, counts its own checks, takes the next file's configuration on reload while keeping
 * its counters, and goes on serving when the other one is freed; two TLS servers each present
 * their own certificate (the certificate callback finds its server's object). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "http.h"
#include "metrics.h"
#include "snapshot.h"
#include "tmptree.h"
#include "websec.h"

/* OpenBSD's bcrypt test vectors (cost 5): "U*U" and "U*U*" with the salt of C's. */
#define HASH_UU  "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"
#define HASH_UUU "$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"

/* base64 of "alice:U*U", "bob:U*U*", "alice:U*U*" */
#define ALICE     "YWxpY2U6VSpV"
#define BOB       "Ym9iOlUqVSo="
#define ALICE_BAD "YWxpY2U6VSpVKg=="

static struct tmpdir dir;

static void write_bytes(const char *name, const void *data, size_t len)
{
        char path[512];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", dir.path, name);
        f = fopen(path, "w");
        assert_non_null(f);
        assert_int_equal(fwrite(data, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
}

static void write_file(const char *name, const char *text)
{
        write_bytes(name, text, strlen(text));
}

static struct websec *load(const char *name)
{
        char path[512], err[512] = "";
        struct websec *s = NULL;

        snprintf(path, sizeof path, "%s/%s", dir.path, name);
        if (websec_load(path, &s, err, sizeof err) < 0)
                fail_msg("%s", err);
        return websec_install(NULL, s);
}

struct server {
        struct http_server *http;
        struct publisher *pub;
        unsigned short port;
};

static void server_start(struct server *sv, struct websec *web)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
        struct http_config cfg = {
            .limits = {.max_connections = 64,
                       .max_per_address = 64,
                       .header_timeout = 60 * USEC_PER_SEC,
                       .request_timeout = 120 * USEC_PER_SEC,
                       .idle_timeout = 60 * USEC_PER_SEC},
            .health_stale = 600 * USEC_PER_SEC,
            .version = "test",
            .revision = "test",
            .web = web,
        };

        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
        assert_int_equal(listen(fd, 16), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        sv->port = ntohs(a.sin_port);
        sv->pub = publisher_new();
        sv->http = http_server_new(&fd, 1, &cfg, sv->pub, &err);
        assert_non_null(sv->http);
}

static void server_stop(struct server *sv)
{
        sv->http = http_server_free(sv->http);
        sv->pub = publisher_free(sv->pub);
}

/* GET /runbook with the credentials given (NULL: none); returns the status and copies the
 * response's head into head. */
static int get(const struct server *sv, const char *cred, char *head, size_t headsz)
{
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(sv->port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        struct timeval tv = {.tv_sec = 60}; /* a bcrypt under the sanitizers on a busy machine */
        char req[512], buf[4096];
        size_t got = 0;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), status = -1;
        ssize_t n;

        assert_true(fd >= 0);
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
        snprintf(req, sizeof req,
                 "GET /runbook HTTP/1.1\r\nHost: localhost\r\n%s%s%sConnection: close\r\n\r\n",
                 cred ? "Authorization: Basic " : "", cred ? cred : "", cred ? "\r\n" : "");
        assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
        /* the head is enough: the body (the runbook) is read and dropped */
        while ((n = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0) {
                got += (size_t)n;
                if (got == sizeof buf - 1)
                        break;
        }
        buf[got] = 0;
        close(fd);
        if (sscanf(buf, "HTTP/1.1 %d ", &status) != 1)
                fail_msg("no status line in \"%s\"", buf);
        if (strstr(buf, "\r\n\r\n"))
                *strstr(buf, "\r\n\r\n") = 0;
        snprintf(head, headsz, "%s", buf);
        return status;
}

static int status_of(const struct server *sv, const char *cred)
{
        char head[4096];

        return get(sv, cred, head, sizeof head);
}

/* The value of the sample of family name with labels that s exports (-1: none). */
static long long counter(struct websec *s, const char *name, const char *labels)
{
        struct mset *set = mset_new();
        const struct mfamily *f;
        long long v = -1;

        websec_export(s, set);
        f = mset_find(set, name);
        for (size_t i = 0; f && i < f->n; i++)
                if (strcmp(f->samples[i].labels, labels) == 0)
                        v = (long long)f->samples[i].u;
        mset_free(set);
        return v;
}

/* A self-signed ECDSA certificate for cn, written as NAME.crt and NAME.key. */
static void make_cert(const char *name, const char *cn)
{
        gnutls_x509_privkey_t key;
        gnutls_x509_crt_t crt;
        gnutls_datum_t pem;
        unsigned char sn[2] = {1, (unsigned char)cn[0]};
        time_t now = time(NULL);
        char file[64];

        assert_int_equal(gnutls_x509_privkey_init(&key), 0);
        assert_int_equal(
            gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
                                         GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0),
            0);
        assert_int_equal(gnutls_x509_crt_init(&crt), 0);
        gnutls_x509_crt_set_version(crt, 3);
        gnutls_x509_crt_set_serial(crt, sn, sizeof sn);
        gnutls_x509_crt_set_activation_time(crt, now - 86400);
        gnutls_x509_crt_set_expiration_time(crt, now + 30 * 86400);
        gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, strlen(cn));
        assert_int_equal(gnutls_x509_crt_set_key(crt, key), 0);
        gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
        assert_int_equal(gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0), 0);
        assert_int_equal(gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &pem), 0);
        snprintf(file, sizeof file, "%s.crt", name);
        write_bytes(file, pem.data, pem.size);
        gnutls_free(pem.data);
        assert_int_equal(gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL,
                                                           GNUTLS_PKCS_PLAIN, &pem),
                         0);
        snprintf(file, sizeof file, "%s.key", name);
        write_bytes(file, pem.data, pem.size);
        gnutls_free(pem.data);
        gnutls_x509_crt_deinit(crt);
        gnutls_x509_privkey_deinit(key);
}

/* A TLS handshake with sv, then GET /runbook with cred (NULL: none) over it: the status, and
 * the subject of the certificate the server presented in subject. */
static int get_tls(const struct server *sv, const char *cred, char *subject, size_t subjectsz)
{
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(sv->port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        struct timeval tv = {.tv_sec = 60};
        gnutls_certificate_credentials_t xc;
        gnutls_session_t t;
        const gnutls_datum_t *peer;
        gnutls_x509_crt_t crt;
        gnutls_datum_t dn;
        unsigned n = 0;
        char req[512], buf[512];
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), r, status = -1;

        assert_true(fd >= 0);
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
        assert_int_equal(gnutls_certificate_allocate_credentials(&xc), 0);
        assert_int_equal(gnutls_init(&t, GNUTLS_CLIENT), 0);
        assert_int_equal(gnutls_set_default_priority(t), 0);
        assert_int_equal(gnutls_credentials_set(t, GNUTLS_CRD_CERTIFICATE, xc), 0);
        gnutls_transport_set_int(t, fd);
        do
                r = gnutls_handshake(t);
        while (r < 0 && !gnutls_error_is_fatal(r));
        if (r < 0)
                fail_msg("handshake: %s", gnutls_strerror(r));
        /* the client trusts anything here: what matters is which certificate came */
        peer = gnutls_certificate_get_peers(t, &n);
        assert_true(peer && n == 1);
        assert_int_equal(gnutls_x509_crt_init(&crt), 0);
        assert_int_equal(gnutls_x509_crt_import(crt, &peer[0], GNUTLS_X509_FMT_DER), 0);
        assert_int_equal(gnutls_x509_crt_get_dn3(crt, &dn, 0), 0);
        snprintf(subject, subjectsz, "%.*s", (int)dn.size, (const char *)dn.data);
        gnutls_free(dn.data);
        gnutls_x509_crt_deinit(crt);
        snprintf(req, sizeof req,
                 "GET /runbook HTTP/1.1\r\nHost: localhost\r\n%s%s%sConnection: close\r\n\r\n",
                 cred ? "Authorization: Basic " : "", cred ? cred : "", cred ? "\r\n" : "");
        assert_int_equal(gnutls_record_send(t, req, strlen(req)), (ssize_t)strlen(req));
        do
                r = (int)gnutls_record_recv(t, buf, sizeof buf - 1);
        while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
        assert_true(r > 0);
        buf[r] = 0;
        if (sscanf(buf, "HTTP/1.1 %d ", &status) != 1)
                fail_msg("no status line in \"%s\"", buf);
        gnutls_deinit(t);
        gnutls_certificate_free_credentials(xc);
        close(fd);
        return status;
}

static int setup(void **state)
{
        (void)state;
        if (test_tmpdir_new(&dir, "diskpulse-test-websec") < 0)
                return -1;
        write_file("a.yml", "basic_auth_users:\n  alice: " HASH_UU "\n"
                            "http_server_config:\n  headers:\n    X-Frame-Options: deny\n");
        write_file("b.yml", "basic_auth_users:\n  bob: " HASH_UUU "\n"
                            "http_server_config:\n  headers:\n    X-Frame-Options: sameorigin\n");
        write_file("b2.yml", "basic_auth_users:\n  bob: " HASH_UUU "\n  alice: " HASH_UU "\n");
        write_file("bad.yml", "basic_auth_users:\n  bob: not-a-hash\n");
        make_cert("one", "one");
        make_cert("two", "two");
        write_file("one.yml", "tls_server_config:\n  cert_file: one.crt\n  key_file: one.key\n"
                              "basic_auth_users:\n  alice: " HASH_UU "\n");
        write_file("two.yml", "tls_server_config:\n  cert_file: two.crt\n  key_file: two.key\n");
        write_file("two2.yml", "tls_server_config:\n  cert_file: one.crt\n  key_file: one.key\n");
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        return test_tmpdir_free(&dir);
}

static void test_side_by_side(void **state)
{
        struct websec *wa = load("a.yml"), *wb = load("b.yml"), *next = NULL;
        struct server a, b;
        char head[4096], err[512];
        (void)state;

        server_start(&a, wa);
        server_start(&b, wb);

        /* each server knows its own users only */
        assert_int_equal(get(&a, ALICE, head, sizeof head), 200);
        assert_non_null(strcasestr(head, "\r\nX-Frame-Options: deny"));
        assert_int_equal(get(&b, BOB, head, sizeof head), 200);
        assert_non_null(strcasestr(head, "\r\nX-Frame-Options: sameorigin"));
        assert_int_equal(get(&a, BOB, head, sizeof head), 401);
        assert_non_null(strcasestr(head, "\r\nWWW-Authenticate: Basic realm=\"diskpulse\""));
        assert_non_null(strcasestr(head, "\r\nX-Frame-Options: deny"));
        assert_int_equal(status_of(&b, ALICE), 401);
        assert_int_equal(status_of(&a, ALICE_BAD), 401);
        assert_int_equal(status_of(&b, NULL), 401);
        /* a second time from each one's cache, still its own answer */
        assert_int_equal(status_of(&a, ALICE), 200);
        assert_int_equal(status_of(&b, ALICE), 401);

        /* and each counts its own checks */
        assert_int_equal(counter(wa, "diskpulse_http_basic_auth_total", "result=\"ok\""), 2);
        assert_int_equal(counter(wa, "diskpulse_http_basic_auth_total", "result=\"refused\""), 2);
        assert_int_equal(counter(wa, "diskpulse_http_bcrypt_checks_total", ""), 3);
        assert_int_equal(counter(wb, "diskpulse_http_basic_auth_total", "result=\"ok\""), 1);
        assert_int_equal(counter(wb, "diskpulse_http_basic_auth_total", "result=\"refused\""), 3);
        assert_int_equal(counter(wb, "diskpulse_http_bcrypt_checks_total", ""), 2);

        /* a reload of b: a bad file is refused and b runs on; the next one adds alice, and b's
         * counters go on from where they were */
        {
                char path[512];
                snprintf(path, sizeof path, "%s/bad.yml", dir.path);
                assert_true(websec_load(path, &next, err, sizeof err) < 0);
                assert_non_null(strstr(err, "bad.yml"));
                snprintf(path, sizeof path, "%s/b2.yml", dir.path);
                assert_int_equal(websec_load(path, &next, err, sizeof err), 0);
        }
        assert_int_equal(status_of(&b, BOB), 200);
        assert_ptr_equal(websec_install(wb, next), wb);
        assert_int_equal(get(&b, ALICE, head, sizeof head), 200);
        assert_null(strcasestr(head, "X-Frame-Options")); /* b2.yml sets no header */
        assert_int_equal(status_of(&b, BOB), 200);
        assert_int_equal(counter(wb, "diskpulse_http_basic_auth_total", "result=\"ok\""), 4);
        assert_int_equal(counter(wb, "diskpulse_http_basic_auth_total", "result=\"refused\""), 3);
        assert_int_equal(status_of(&a, BOB), 401); /* a is untouched */

        /* freeing a leaves b working */
        server_stop(&a);
        wa = websec_free(wa);
        assert_int_equal(status_of(&b, ALICE), 200);
        assert_int_equal(status_of(&b, BOB), 200);
        assert_int_equal(status_of(&b, ALICE_BAD), 401);
        assert_int_equal(counter(wb, "diskpulse_http_basic_auth_total", "result=\"ok\""), 6);

        server_stop(&b);
        websec_free(wb);
}

/* Two TLS servers: each handshake gets its own server's certificate, before and after a reload
 * of one and after the other is freed. */
static void test_tls_side_by_side(void **state)
{
        struct websec *w1 = load("one.yml"), *w2 = load("two.yml"), *next = NULL;
        struct server s1, s2;
        char subject[256], path[512], err[512];
        (void)state;

        server_start(&s1, w1);
        server_start(&s2, w2);
        assert_int_equal(get_tls(&s1, ALICE, subject, sizeof subject), 200);
        assert_string_equal(subject, "CN=one");
        assert_int_equal(get_tls(&s1, NULL, subject, sizeof subject), 401);
        assert_int_equal(get_tls(&s2, NULL, subject, sizeof subject), 200);
        assert_string_equal(subject, "CN=two");
        assert_int_equal(counter(w1, "diskpulse_http_basic_auth_total", "result=\"ok\""), 1);
        assert_int_equal(counter(w2, "diskpulse_http_basic_auth_total", "result=\"ok\""), -1);

        /* server 2 takes server 1's certificate for new handshakes */
        snprintf(path, sizeof path, "%s/two2.yml", dir.path);
        assert_int_equal(websec_load(path, &next, err, sizeof err), 0);
        assert_ptr_equal(websec_install(w2, next), w2);
        assert_int_equal(get_tls(&s2, NULL, subject, sizeof subject), 200);
        assert_string_equal(subject, "CN=one");

        server_stop(&s1);
        websec_free(w1);
        assert_int_equal(get_tls(&s2, NULL, subject, sizeof subject), 200);
        assert_string_equal(subject, "CN=one");
        server_stop(&s2);
        websec_free(w2);
}

/* Without a file: plain HTTP, no authentication, no counters. */
static void test_none(void **state)
{
        struct websec *w = NULL;
        struct server sv;
        char err[64];
        (void)state;

        assert_int_equal(websec_load(NULL, &w, err, sizeof err), 0);
        w = websec_install(NULL, w);
        server_start(&sv, w);
        assert_int_equal(status_of(&sv, NULL), 200);
        assert_int_equal(status_of(&sv, BOB), 200);
        assert_int_equal(counter(w, "diskpulse_http_basic_auth_total", "result=\"ok\""), -1);
        server_stop(&sv);
        websec_free(w);
        websec_export(NULL, NULL); /* nothing for no object */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_side_by_side),
            cmocka_unit_test(test_tls_side_by_side),
            cmocka_unit_test(test_none),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
