/* Unit tests of exporters/webconfig/tls.c with certificates made here by GnuTLS: loading (every
 * error), the priority strings of versions, suites and curves and the suites GnuTLS cannot honour,
 * and the client-certificate check of every client_auth_type and client_allowed_sans. */
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmptree.h"
#include "tls.h"
#include "webconfig.h"

struct ident {
        gnutls_x509_privkey_t key;
        gnutls_x509_crt_t crt;
};

static char dir[] = "/tmp/diskpulse-test-tls-XXXXXX";
static struct ident ca, other_ca, server, server_rsa, client, client_other, client_expired,
    client_server_only, client_ip;

static void gen(struct ident *id, gnutls_pk_algorithm_t pk, const char *cn,
                const struct ident *issuer, bool is_ca, const char *purpose, const char *dns,
                const char *ip, long from_days, long to_days)
{
        static unsigned serial = 1;
        unsigned char sn[4] = {0, 0, (unsigned char)(serial >> 8), (unsigned char)serial++};
        unsigned char kid[64];
        size_t kidlen = sizeof kid;
        time_t now = time(NULL);

        assert_int_equal(gnutls_x509_privkey_init(&id->key), 0);
        assert_int_equal(
            gnutls_x509_privkey_generate(
                id->key, pk,
                pk == GNUTLS_PK_RSA ? 2048 : GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0),
            0);
        assert_int_equal(gnutls_x509_crt_init(&id->crt), 0);
        gnutls_x509_crt_set_version(id->crt, 3);
        gnutls_x509_crt_set_serial(id->crt, sn, sizeof sn);
        gnutls_x509_crt_set_activation_time(id->crt, now + from_days * 86400);
        gnutls_x509_crt_set_expiration_time(id->crt, now + to_days * 86400);
        gnutls_x509_crt_set_dn_by_oid(id->crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, strlen(cn));
        assert_int_equal(gnutls_x509_crt_set_key(id->crt, id->key), 0);
        gnutls_x509_crt_set_basic_constraints(id->crt, is_ca, -1);
        gnutls_x509_crt_set_key_usage(
            id->crt, is_ca ? GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN
                           : GNUTLS_KEY_DIGITAL_SIGNATURE | GNUTLS_KEY_KEY_ENCIPHERMENT);
        if (purpose)
                gnutls_x509_crt_set_key_purpose_oid(id->crt, purpose, 0);
        if (dns)
                gnutls_x509_crt_set_subject_alt_name(id->crt, GNUTLS_SAN_DNSNAME, dns,
                                                     (unsigned)strlen(dns), GNUTLS_FSAN_APPEND);
        if (ip) {
                unsigned char a[4];
                assert_int_equal(inet_pton(AF_INET, ip, a), 1);
                gnutls_x509_crt_set_subject_alt_name(id->crt, GNUTLS_SAN_IPADDRESS, a, 4,
                                                     GNUTLS_FSAN_APPEND);
        }
        assert_int_equal(gnutls_x509_crt_get_key_id(id->crt, 0, kid, &kidlen), 0);
        gnutls_x509_crt_set_subject_key_id(id->crt, kid, kidlen);
        if (issuer) {
                kidlen = sizeof kid;
                assert_int_equal(gnutls_x509_crt_get_key_id(issuer->crt, 0, kid, &kidlen), 0);
                gnutls_x509_crt_set_authority_key_id(id->crt, kid, kidlen);
        }
        assert_int_equal(gnutls_x509_crt_sign2(id->crt, issuer ? issuer->crt : id->crt,
                                               issuer ? issuer->key : id->key, GNUTLS_DIG_SHA256,
                                               0),
                         0);
}

static void write_file(const char *name, const gnutls_datum_t *d1, const gnutls_datum_t *d2)
{
        char path[256];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        f = fopen(path, "w");
        assert_non_null(f);
        if (d1)
                fwrite(d1->data, 1, d1->size, f);
        if (d2)
                fwrite(d2->data, 1, d2->size, f);
        fclose(f);
}

static void write_cert(const char *name, const struct ident *id, const struct ident *chain)
{
        gnutls_datum_t a, b = {0};

        assert_int_equal(gnutls_x509_crt_export2(id->crt, GNUTLS_X509_FMT_PEM, &a), 0);
        if (chain)
                assert_int_equal(gnutls_x509_crt_export2(chain->crt, GNUTLS_X509_FMT_PEM, &b), 0);
        write_file(name, &a, chain ? &b : NULL);
        gnutls_free(a.data);
        gnutls_free(b.data);
}

static void write_key(const char *name, const struct ident *id)
{
        gnutls_datum_t a;

        assert_int_equal(gnutls_x509_privkey_export2_pkcs8(id->key, GNUTLS_X509_FMT_PEM, NULL,
                                                           GNUTLS_PKCS_PLAIN, &a),
                         0);
        write_file(name, &a, NULL);
        gnutls_free(a.data);
}

static int setup(void **state)
{
        gnutls_datum_t junk = {(unsigned char *)"not a pem\n", 10};
        (void)state;

        assert_non_null(mkdtemp(dir));
        gen(&ca, GNUTLS_PK_ECDSA, "test ca", NULL, true, NULL, NULL, NULL, -1, 30);
        gen(&other_ca, GNUTLS_PK_ECDSA, "other ca", NULL, true, NULL, NULL, NULL, -1, 30);
        gen(&server, GNUTLS_PK_ECDSA, "localhost", &ca, false, GNUTLS_KP_TLS_WWW_SERVER,
            "localhost", "127.0.0.1", -1, 30);
        gen(&server_rsa, GNUTLS_PK_RSA, "rsa", &ca, false, GNUTLS_KP_TLS_WWW_SERVER, "localhost",
            NULL, -1, 30);
        gen(&client, GNUTLS_PK_ECDSA, "scraper", &ca, false, GNUTLS_KP_TLS_WWW_CLIENT,
            "scraper.example", NULL, -1, 30);
        gen(&client_other, GNUTLS_PK_ECDSA, "scraper", &other_ca, false, GNUTLS_KP_TLS_WWW_CLIENT,
            "scraper.example", NULL, -1, 30);
        gen(&client_expired, GNUTLS_PK_ECDSA, "old", &ca, false, GNUTLS_KP_TLS_WWW_CLIENT, NULL,
            NULL, -10, -1);
        gen(&client_server_only, GNUTLS_PK_ECDSA, "wrong purpose", &ca, false,
            GNUTLS_KP_TLS_WWW_SERVER, NULL, NULL, -1, 30);
        gen(&client_ip, GNUTLS_PK_ECDSA, "by address", &ca, false, NULL, NULL, "10.0.0.1", -1, 30);
        write_cert("server.crt", &server, &ca);
        write_key("server.key", &server);
        write_cert("rsa.crt", &server_rsa, NULL);
        write_key("rsa.key", &server_rsa);
        write_cert("ca.crt", &ca, NULL);
        write_file("junk.pem", &junk, NULL);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        return test_remove_tree(dir);
}

/* Parses text (relative paths in dir) and loads it; returns the result, creds in *ret. */
static int load(const char *text, struct tls_creds **ret, char *err, size_t errsz)
{
        struct webconfig *c = NULL;
        int r = webconfig_parse(text, strlen(text), "web.yml", dir, &c, err, errsz);

        if (r < 0)
                fail_msg("parse: %s", err);
        *ret = NULL;
        r = tls_creds_load(c, "web.yml", ret, err, errsz);
        webconfig_free(c);
        return r;
}

static struct tls_creds *load_ok(const char *text)
{
        struct tls_creds *t;
        char err[1024] = "";

        if (load(text, &t, err, sizeof err) != 0)
                fail_msg("load failed: %s\n--- input:\n%s", err, text);
        return t;
}

static void load_fails(const char *text, const char *msg)
{
        struct tls_creds *t = NULL;
        char err[1024] = "";

        if (load(text, &t, err, sizeof err) == 0)
                fail_msg("accepted:\n%s", text);
        assert_null(t);
        if (!strstr(err, msg))
                fail_msg("got\n  %s\nwanted\n  ...%s...", err, msg);
}

#define BASE "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
#define RSA  "tls_server_config:\n  cert_file: rsa.crt\n  key_file: rsa.key\n"

static void test_load(void **state)
{
        struct tls_creds *t;
        (void)state;

        t = load_ok(BASE);
        assert_string_equal(tls_creds_subject(t), "CN=localhost");
        assert_true(tls_creds_not_after(t) > (long long)time(NULL) + 29 * 86400);
        assert_string_equal(tls_creds_priorities(t),
                            "NORMAL:%NO_TICKETS:%SERVER_PRECEDENCE:-VERS-ALL:+VERS-TLS1.3:"
                            "+VERS-TLS1.2");
        assert_int_equal(tls_creds_client_auth(t), WEB_CLIENT_NONE);
        assert_ptr_equal(tls_creds_ref(t), t);
        assert_null(tls_creds_unref(t));
        assert_null(tls_creds_unref(t));
        t = load_ok(RSA "  prefer_server_cipher_suites: false\n  min_version: TLS10\n"
                        "  max_version: TLS12\n  curve_preferences: [X25519, CurveP384]\n");
        assert_string_equal(tls_creds_priorities(t),
                            "NORMAL:%NO_TICKETS:-VERS-ALL:+VERS-TLS1.2:+VERS-TLS1.1:+VERS-TLS1.0:"
                            "-GROUP-ALL:+GROUP-X25519:+GROUP-SECP384R1");
        tls_creds_unref(t);
        /* inline PEM as the toolkit's cert and key, in YAML block scalars */
        {
                char text[8192];
                size_t n;
                gnutls_datum_t pem[2];
                assert_int_equal(gnutls_x509_crt_export2(server.crt, GNUTLS_X509_FMT_PEM, &pem[0]),
                                 0);
                assert_int_equal(
                    gnutls_x509_privkey_export2(server.key, GNUTLS_X509_FMT_PEM, &pem[1]), 0);
                n = (size_t)snprintf(text, sizeof text, "tls_server_config:\n");
                for (int i = 0; i < 2; i++) {
                        n += (size_t)snprintf(text + n, sizeof text - n, "  %s: |\n    ",
                                              i ? "key" : "cert");
                        for (unsigned k = 0; k < pem[i].size; k++) {
                                text[n++] = (char)pem[i].data[k];
                                if (pem[i].data[k] == '\n' && k + 1 < pem[i].size)
                                        n += (size_t)snprintf(text + n, sizeof text - n, "    ");
                        }
                        gnutls_free(pem[i].data);
                }
                text[n] = 0;
                t = load_ok(text);
                assert_string_equal(tls_creds_subject(t), "CN=localhost");
                tls_creds_unref(t);
        }
}

static void test_load_errors(void **state)
{
        (void)state;

        load_fails("tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
                   "web.yml:2: cert_file: cannot read ");
        load_fails("tls_server_config:\n  cert_file: server.crt\n  key_file: missing.key\n",
                   "web.yml:3: key_file: cannot read ");
        load_fails("tls_server_config:\n  cert_file: junk.pem\n  key_file: server.key\n",
                   "web.yml:2: cert_file: no PEM certificate found");
        load_fails("tls_server_config:\n  cert_file: server.crt\n  key_file: junk.pem\n",
                   "web.yml:3: key_file: not an unencrypted PEM private key");
        load_fails("tls_server_config:\n  cert_file: server.crt\n  key_file: rsa.key\n",
                   "web.yml:3: key_file: the private key does not belong to the certificate");
        load_fails("tls_server_config:\n  cert_file: server.crt\n  key_file: server.crt\n",
                   "web.yml:3: key_file: not an unencrypted PEM private key");
        load_fails(BASE
                   "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: junk.pem\n",
                   "web.yml:5: client_ca_file: no PEM certificate found");
        load_fails(BASE "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: nope\n",
                   "web.yml:5: client_ca_file: cannot read ");
        load_fails(BASE "  client_auth_type: RequireAndVerifyClientCert\n  client_ca: x\n",
                   "web.yml:5: client_ca: no PEM certificate found");
}

static void test_cipher_suites(void **state)
{
        struct tls_creds *t;
        (void)state;

        /* one suite: TLS 1.3 keeps the AEAD cipher it names */
        t = load_ok(BASE "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n");
        assert_string_equal(tls_creds_priorities(t),
                            "NORMAL:%NO_TICKETS:%SERVER_PRECEDENCE:-VERS-ALL:+VERS-TLS1.3:"
                            "+VERS-TLS1.2:-CIPHER-ALL:-MAC-ALL:-KX-ALL:+AES-128-GCM:+AEAD:"
                            "+ECDHE-ECDSA");
        tls_creds_unref(t);
        /* TLS 1.3 suites listed with the same ciphers */
        t = load_ok(BASE "  cipher_suites:\n    - TLS_AES_256_GCM_SHA384\n"
                         "    - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\n"
                         "    - TLS_CHACHA20_POLY1305_SHA256\n"
                         "    - TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256\n");
        tls_creds_unref(t);
        /* the full cross product of two kx and two ciphers is fine */
        t = load_ok(RSA "  max_version: TLS12\n  cipher_suites:\n"
                        "    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n"
                        "    - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\n"
                        "    - TLS_RSA_WITH_AES_128_GCM_SHA256\n"
                        "    - TLS_RSA_WITH_AES_256_GCM_SHA384\n");
        tls_creds_unref(t);
        /* CBC suites with TLS 1.0 */
        t = load_ok(RSA "  min_version: TLS10\n  max_version: TLS12\n"
                        "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA]\n");
        tls_creds_unref(t);
        /* TLS 1.3 alone takes only TLS 1.3 suites into account */
        t = load_ok(BASE "  min_version: TLS13\n  cipher_suites: [TLS_CHACHA20_POLY1305_SHA256]\n");
        tls_creds_unref(t);

        load_fails(BASE "  cipher_suites:\n    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n"
                        "    - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\n",
                   "web.yml:4: cipher_suites: GnuTLS cannot enable exactly these suites");
        load_fails(BASE "  cipher_suites:\n    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n"
                        "    - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\n",
                   "would also enable TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 "
                   "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256; list those too");
        load_fails(BASE "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA]\n",
                   "web.yml:4: cipher_suites: no TLS 1.3 suite is left");
        /* a TLS 1.3 suite listed brings its cipher to TLS 1.2 as well */
        load_fails(BASE "  cipher_suites:\n    - TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA\n"
                        "    - TLS_AES_128_GCM_SHA256\n",
                   "would also enable TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256; list those too, or "
                   "leave the TLS 1.3 suites out");
        load_fails(
            BASE "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n",
            "web.yml:5: tls_server_config: no enabled TLS 1.2 suite can use the "
            "certificate's EC/ECDSA key");
        load_fails(RSA "  min_version: TLS10\n  max_version: TLS11\n"
                       "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n",
                   "web.yml:6: cipher_suites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 needs TLS 1.2, "
                   "above max_version TLS11");
}

static void der_of(const struct ident *id, gnutls_datum_t *d)
{
        assert_int_equal(gnutls_x509_crt_export2(id->crt, GNUTLS_X509_FMT_DER, d), 0);
}

/* tls_creds_check_peer of ident (NULL: no certificate) under the given tls_server_config lines. */
static int check(const char *extra, const struct ident *id, char *why, size_t whysz)
{
        char text[1024];
        struct tls_creds *t;
        gnutls_datum_t d[2] = {{0}};
        int r;

        snprintf(text, sizeof text, BASE "%s", extra);
        t = load_ok(text);
        if (id)
                der_of(id, &d[0]);
        why[0] = 0;
        r = tls_creds_check_peer(t, id ? d : NULL, id ? 1 : 0, why, whysz);
        gnutls_free(d[0].data);
        tls_creds_unref(t);
        return r;
}

#define VERIFY "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"

static void test_client_certificates(void **state)
{
        char why[256];
        (void)state;

        assert_int_equal(check(VERIFY, &client, why, sizeof why), 0);
        assert_int_equal(check(VERIFY, &client_other, why, sizeof why), -EACCES);
        if (!strstr(why, "issuer is unknown"))
                fail_msg("why: %s", why);
        assert_int_equal(check(VERIFY, NULL, why, sizeof why), -EACCES);
        assert_string_equal(why, "no client certificate");
        assert_int_equal(check(VERIFY, &client_expired, why, sizeof why), -EACCES);
        assert_non_null(strstr(why, "expired"));
        assert_int_equal(check(VERIFY, &client_server_only, why, sizeof why), -EACCES);
        /* no key purpose at all is any purpose */
        assert_int_equal(check(VERIFY, &client_ip, why, sizeof why), 0);

        static const char if_given[] =
            "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n";
        assert_int_equal(check(if_given, NULL, why, sizeof why), 0);
        assert_int_equal(check(if_given, &client, why, sizeof why), 0);
        assert_int_equal(check(if_given, &client_other, why, sizeof why), -EACCES);

        static const char any[] = "  client_auth_type: RequireAnyClientCert\n";
        assert_int_equal(check(any, &client_other, why, sizeof why), 0);
        assert_int_equal(check(any, NULL, why, sizeof why), -EACCES);

        static const char request[] = "  client_auth_type: RequestClientCert\n";
        assert_int_equal(check(request, NULL, why, sizeof why), 0);
        assert_int_equal(check(request, &client_other, why, sizeof why), 0);

        assert_int_equal(check("", &client_other, why, sizeof why), 0);

        /* client_allowed_sans, by DNS name and by address in Go's notation */
        assert_int_equal(
            check(VERIFY "  client_allowed_sans: [scraper.example]\n", &client, why, sizeof why),
            0);
        assert_int_equal(check(VERIFY "  client_allowed_sans: [other.example, Scraper.example]\n",
                               &client, why, sizeof why),
                         -EACCES);
        assert_string_equal(why, "no subject alternative name in client_allowed_sans");
        assert_int_equal(
            check(VERIFY "  client_allowed_sans: [10.0.0.1]\n", &client_ip, why, sizeof why), 0);
        assert_int_equal(
            check(VERIFY "  client_allowed_sans: [10.0.0.2]\n", &client_ip, why, sizeof why),
            -EACCES);
        /* an allowed SAN does not excuse a bad chain */
        assert_int_equal(check(VERIFY "  client_allowed_sans: [scraper.example]\n", &client_other,
                               why, sizeof why),
                         -EACCES);
        assert_int_equal(check("  client_auth_type: RequireAnyClientCert\n"
                               "  client_allowed_sans: [scraper.example]\n",
                               &client_other, why, sizeof why),
                         0);
}

static int never_called(gnutls_session_t s)
{
        (void)s;
        return -1;
}

/* What a handshake gets from creds: fresh copies of the chain and key (freed here as GnuTLS
 * frees them with the session), and the second look at a session without a peer's
 * certificate by policy. */
static void test_hand_over(void **state)
{
        struct tls_creds *t = load_ok(BASE), *any = load_ok(BASE "  client_auth_type: "
                                                                 "RequireAnyClientCert\n");
        gnutls_session_t s;
        gnutls_pcert_st *certs = NULL;
        gnutls_privkey_t key = NULL;
        unsigned n = 0;
        gnutls_datum_t dn = {0};
        (void)state;

        assert_int_equal(gnutls_init(&s, GNUTLS_SERVER), 0);
        assert_int_equal(tls_creds_hand_over(t, s, never_called, &certs, &n, &key), 0);
        assert_int_equal(n, 2); /* server.crt: the leaf, then the CA */
        assert_non_null(key);
        assert_int_equal(gnutls_privkey_get_pk_algorithm(key, NULL), GNUTLS_PK_ECDSA);
        {
                gnutls_x509_crt_t crt;
                assert_int_equal(gnutls_pcert_export_x509(&certs[0], &crt), 0);
                assert_int_equal(gnutls_x509_crt_get_dn3(crt, &dn, 0), 0);
                assert_string_equal((const char *)dn.data, "CN=localhost");
                gnutls_free(dn.data);
                gnutls_x509_crt_deinit(crt);
        }
        for (unsigned i = 0; i < n; i++)
                gnutls_pcert_deinit(&certs[i]);
        gnutls_free(certs);
        gnutls_privkey_deinit(key);
        /* no certificate from the peer: fine unless one is required */
        assert_true(tls_creds_session_ok(t, s));
        assert_true(tls_creds_session_ok(NULL, s));
        assert_false(tls_creds_session_ok(any, s));
        gnutls_deinit(s);
        tls_creds_unref(any);
        tls_creds_unref(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_load),          cmocka_unit_test(test_load_errors),
            cmocka_unit_test(test_cipher_suites), cmocka_unit_test(test_client_certificates),
            cmocka_unit_test(test_hand_over),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
