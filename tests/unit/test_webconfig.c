/* Unit tests of exporters/webconfig/webconfig.c: every key of the exporter-toolkit web config, the
 * defaults, and every error with the line it names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "webconfig.h"

#define H10 "$2y$10$b2hxBQgqRxqbMOrTZv0v8.N76f9wX3NDhSAuoWk1Qy4H0/uw1FOyq"
#define H12 "$2b$12$pYZXHN0O8rNU2Ioj8Icd.OwJzMqfhytPs5RR9GtAHwOnoBJo3dBIm"

static struct webconfig *parse_ok(const char *text)
{
        struct webconfig *c = NULL;
        char err[512] = "";
        int r = webconfig_parse(text, strlen(text), "web.yml", "/etc/dp", &c, err, sizeof err);

        if (r != 0)
                fail_msg("parse failed: %s\n--- input:\n%s", err, text);
        assert_non_null(c);
        return c;
}

static void test_every_key(void **state)
{
        static const char text[] =
            "# a comment\n"
            "tls_server_config:\n"
            "  cert_file: server.crt\n"
            "  key_file: /secret/server.key\n"
            "  client_auth_type: RequireAndVerifyClientCert\n"
            "  client_ca_file: 'ca dir/ca.crt'\n"
            "  client_allowed_sans: [scraper.example, 10.0.0.1]\n"
            "  min_version: TLS13\n"
            "  max_version: TLS13\n"
            "  cipher_suites:\n"
            "    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n"
            "    - TLS_AES_128_GCM_SHA256\n"
            "  prefer_server_cipher_suites: false\n"
            "  curve_preferences: [X25519, CurveP256]\n"
            "http_server_config:\n"
            "  http2: false\n"
            "  headers:\n"
            "    Content-Security-Policy: \"default-src 'self'\"\n"
            "    X-Frame-Options: sameorigin\n"
            "    X-Content-Type-Options: nosniff\n"
            "    X-XSS-Protection: \"1; mode=block\"\n"
            "    Strict-Transport-Security: max-age=31536000; includeSubDomains\n"
            "basic_auth_users:\n"
            "  alice: " H10 "\n"
            "  \"bob smith\": '" H12 "'\n";
        struct webconfig *c = parse_ok(text);

        (void)state;
        assert_true(c->tls);
        assert_string_equal(c->cert_file, "/etc/dp/server.crt");
        assert_int_equal(c->cert_line, 3);
        assert_string_equal(c->key_file, "/secret/server.key");
        assert_int_equal(c->key_line, 4);
        assert_string_equal(c->ca_file, "/etc/dp/ca dir/ca.crt");
        assert_int_equal(c->ca_line, 6);
        assert_null(c->cert);
        assert_null(c->key);
        assert_null(c->ca);
        assert_int_equal(c->client_auth, WEB_CLIENT_REQUIRE_VERIFY);
        assert_int_equal(c->n_allowed_sans, 2);
        assert_string_equal(c->allowed_sans[0], "scraper.example");
        assert_string_equal(c->allowed_sans[1], "10.0.0.1");
        assert_int_equal(c->min_version, WEB_TLS13);
        assert_int_equal(c->max_version, WEB_TLS13);
        assert_int_equal(c->n_ciphers, 2);
        assert_string_equal(c->ciphers[0]->name, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
        assert_string_equal(c->ciphers[0]->kx, "ECDHE-RSA");
        assert_string_equal(c->ciphers[0]->cipher, "AES-128-GCM");
        assert_int_equal(c->ciphers[0]->id[0], 0xc0);
        assert_int_equal(c->ciphers[0]->id[1], 0x2f);
        assert_null(c->ciphers[1]->kx);
        assert_int_equal(c->ciphers_line, 10);
        assert_false(c->prefer_server_ciphers);
        assert_int_equal(c->n_curves, 2);
        assert_string_equal(c->curves[0]->group, "GROUP-X25519");
        assert_string_equal(c->curves[1]->group, "GROUP-SECP256R1");
        assert_false(c->http2);
        assert_string_equal(c->headers[WEB_HEADER_CSP], "default-src 'self'");
        assert_string_equal(c->headers[WEB_HEADER_FRAME_OPTIONS], "sameorigin");
        assert_string_equal(c->headers[WEB_HEADER_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_string_equal(c->headers[WEB_HEADER_XSS_PROTECTION], "1; mode=block");
        assert_string_equal(c->headers[WEB_HEADER_HSTS], "max-age=31536000; includeSubDomains");
        assert_int_equal(c->n_users, 2);
        assert_string_equal(c->users[0].name, "alice");
        assert_string_equal(c->users[0].hash, H10);
        assert_int_equal(c->users[0].cost, 10);
        assert_string_equal(c->users[1].name, "bob smith");
        assert_int_equal(c->users[1].cost, 12);
        webconfig_free(c);
}

static void test_inline_pem(void **state)
{
        static const char text[] = "tls_server_config:\n"
                                   "  cert: |\n"
                                   "    -----BEGIN CERTIFICATE-----\n"
                                   "    MIIB\n"
                                   "    -----END CERTIFICATE-----\n"
                                   "  key: \"-----BEGIN PRIVATE KEY-----\\nMIIE\\n\"\n"
                                   "  client_ca: >-\n"
                                   "    CA\n"
                                   "  client_auth_type: VerifyClientCertIfGiven\n";
        struct webconfig *c = parse_ok(text);

        (void)state;
        assert_true(c->tls);
        assert_null(c->cert_file);
        assert_string_equal(c->cert,
                            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
        assert_int_equal(c->cert_line, 2);
        assert_string_equal(c->key, "-----BEGIN PRIVATE KEY-----\nMIIE\n");
        assert_int_equal(c->key_line, 6);
        assert_string_equal(c->ca, "CA");
        assert_int_equal(c->ca_line, 7);
        assert_int_equal(c->client_auth, WEB_CLIENT_VERIFY_IF_GIVEN);
        webconfig_free(c);
}

static void test_defaults(void **state)
{
        static const char *const empty[] = {"",
                                            "\n\n# nothing\n",
                                            "---\n",
                                            "---\n...\n",
                                            "{}\n",
                                            "~\n",
                                            "tls_server_config:\n",
                                            "tls_server_config: {}\nhttp_server_config: ~\n",
                                            "basic_auth_users: {}\n",
                                            "http_server_config:\n  headers:\n",
                                            "tls_server_config:\n  cert_file: ''\n"};
        (void)state;

        for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
                struct webconfig *c = parse_ok(empty[i]);
                assert_false(c->tls);
                assert_int_equal(c->min_version, WEB_TLS12);
                assert_int_equal(c->max_version, WEB_TLS13);
                assert_true(c->prefer_server_ciphers);
                assert_true(c->http2);
                assert_int_equal(c->n_users, 0);
                assert_int_equal(c->n_ciphers, 0);
                for (size_t k = 0; k < WEB_HEADER_MAX; k++)
                        assert_null(c->headers[k]);
                webconfig_free(c);
        }
}

static void test_forms(void **state)
{
        struct webconfig *c;
        (void)state;

        /* the toolkit's older name, and TLS from client_auth_type alone is then incomplete */
        c = parse_ok("tls_server_config:\n  cert_file: a\n  key_file: b\n"
                     "  client_auth_type: RequireClientCert\n");
        assert_int_equal(c->client_auth, WEB_CLIENT_REQUIRE_ANY);
        assert_string_equal(c->cert_file, "/etc/dp/a");
        webconfig_free(c);
        c = parse_ok("tls_server_config:\n  cert_file: a\n  key_file: b\n"
                     "  client_auth_type: RequestClientCert\n");
        assert_int_equal(c->client_auth, WEB_CLIENT_REQUEST);
        webconfig_free(c);
        c = parse_ok("tls_server_config:\n  cert_file: a\n  key_file: b\n"
                     "  client_auth_type: NoClientCert\n  min_version: TLS10\n"
                     "  max_version: TLS11\n");
        assert_int_equal(c->client_auth, WEB_CLIENT_NONE);
        assert_int_equal(c->min_version, WEB_TLS10);
        assert_int_equal(c->max_version, WEB_TLS11);
        webconfig_free(c);
        /* YAML 1.1 booleans as go-yaml v2 reads them */
        static const char *const yes[] = {"true", "True", "TRUE", "yes", "on", "Y"};
        static const char *const no[] = {"false", "False", "no", "Off", "OFF", "n"};
        for (size_t i = 0; i < 6; i++) {
                char text[128];
                snprintf(text, sizeof text, "http_server_config:\n  http2: %s\n", no[i]);
                c = parse_ok(text);
                assert_false(c->http2);
                webconfig_free(c);
                snprintf(text, sizeof text, "http_server_config:\n  http2: %s\n", yes[i]);
                c = parse_ok(text);
                assert_true(c->http2);
                webconfig_free(c);
        }
        /* a blank header is not sent; flow style; anchors and aliases */
        c = parse_ok("http_server_config: {headers: {X-XSS-Protection: ''}}\n");
        assert_null(c->headers[WEB_HEADER_XSS_PROTECTION]);
        webconfig_free(c);
        c = parse_ok("basic_auth_users:\n  a: &h " H10 "\n  b: *h\n");
        assert_int_equal(c->n_users, 2);
        assert_string_equal(c->users[1].hash, H10);
        webconfig_free(c);
        /* no directory: paths stay as given */
        {
                struct webconfig *d = NULL;
                char err[256];
                static const char t[] = "tls_server_config:\n  cert_file: a.crt\n  key_file: b\n";
                assert_int_equal(webconfig_parse(t, strlen(t), "w", "", &d, err, sizeof err), 0);
                assert_string_equal(d->cert_file, "a.crt");
                webconfig_free(d);
                assert_int_equal(webconfig_parse(t, strlen(t), "w", "/", &d, err, sizeof err), 0);
                assert_string_equal(d->cert_file, "/a.crt");
                webconfig_free(d);
        }
}

static void test_errors(void **state)
{
        static const struct {
                const char *text;
                const char *msg; /* the whole message starts with it */
        } cases[] = {
            {"# top\nfoo: 1\n", "web.yml:2: unknown key \"foo\" (expected tls_server_config"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  certfile: c\n",
             "web.yml:4: unknown key \"certfile\" in tls_server_config"},
            {"http_server_config:\n  http3: true\n",
             "web.yml:2: unknown key \"http3\" in http_server_config"},
            {"http_server_config:\n  headers:\n    Server: x\n",
             "web.yml:3: HTTP header \"Server\" can not be configured"},
            {"http_server_config:\n  headers:\n    x-frame-options: deny\n",
             "web.yml:3: HTTP header \"x-frame-options\" can not be configured"},
            {"http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n",
             "web.yml:3: X-Content-Type-Options: expected \"nosniff\", got \"sniff\""},
            {"http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
             "web.yml:3: X-Frame-Options: expected \"deny\" or \"sameorigin\", got \"allow\""},
            {"http_server_config:\n  headers:\n    Content-Security-Policy: \"a\\r\\nSet-Cookie: "
             "x\"\n",
             "web.yml:3: Content-Security-Policy: the value holds a control character"},
            {"http_server_config:\n  headers: [a]\n",
             "web.yml:2: headers: expected a mapping, got a list"},
            {"http_server_config:\n  http2: maybe\n",
             "web.yml:2: http2: expected true or false, got \"maybe\""},
            {"http_server_config:\n  http2: 'true'\n",
             "web.yml:2: http2: expected true or false, got a quoted string"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  prefer_server_cipher_suites: "
             "{}\n",
             "web.yml:4: prefer_server_cipher_suites: expected true or false, got a mapping"},
            {"basic_auth_users:\n  alice: secret\n",
             "web.yml:2: basic_auth_users: user \"alice\": not a bcrypt hash"},
            {"basic_auth_users:\n  alice: "
             "$2x$10$b2hxBQgqRxqbMOrTZv0v8.N76f9wX3NDhSAuoWk1Qy4H0/uw1FOyq\n",
             "web.yml:2: basic_auth_users: user \"alice\": not a bcrypt hash"},
            {"basic_auth_users:\n  alice:\n",
             "web.yml:2: basic_auth_users: user \"alice\": expected "
             "a bcrypt hash, got nothing"},
            {"basic_auth_users:\n  alice: [" H10 "]\n",
             "web.yml:2: basic_auth_users: user \"alice\": expected a bcrypt hash, got a list"},
            {"basic_auth_users:\n  \"a:b\": " H10 "\n",
             "web.yml:2: basic_auth_users: user \"a:b\" has a ':'"},
            {"basic_auth_users:\n  \"a\\tb\": " H10 "\n",
             "web.yml:2: basic_auth_users: a user name holds a control character"},
            {"basic_auth_users:\n  - alice\n",
             "web.yml:2: basic_auth_users: expected a mapping, got a list"},
            {"basic_auth_users:\n  alice: " H10 "\n  alice: " H12 "\n",
             "web.yml:3: basic_auth_users: key \"alice\" is given twice, on lines 2 and 3"},
            {"tls_server_config: {}\ntls_server_config: {}\n",
             "web.yml:2: the file: key \"tls_server_config\" is given twice, on lines 1 and 2"},
            {"tls_server_config:\n  cert_file: [a]\n",
             "web.yml:2: cert_file: expected a string, got a list"},
            {"tls_server_config:\n  cert_file: \"a\\0b\"\n",
             "web.yml:2: cert_file: contains a NUL character"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites:\n"
             "    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n    - TLS_RSA_WITH_RC4_128_SHA\n",
             "web.yml:6: cipher_suites: unknown cipher \"TLS_RSA_WITH_RC4_128_SHA\""},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites:\n"
             "    - TLS_AES_128_GCM_SHA256\n    - TLS_AES_128_GCM_SHA256\n",
             "web.yml:6: cipher_suites: TLS_AES_128_GCM_SHA256 is listed twice"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: "
             "TLS_AES_128_GCM_SHA256\n",
             "web.yml:4: cipher_suites: expected a list, got a scalar"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [[x]]\n",
             "web.yml:4: cipher_suites: expected a string in the list, got a list"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  curve_preferences: [P256]\n",
             "web.yml:4: curve_preferences: unknown curve \"P256\""},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  curve_preferences: [X25519, "
             "X25519]\n",
             "web.yml:4: curve_preferences: X25519 is listed twice"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS1.2\n",
             "web.yml:4: min_version: unknown TLS version \"TLS1.2\""},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  max_version: TLS12\n"
             "  min_version: TLS13\n",
             "web.yml:5: tls_server_config: min_version TLS13 is above max_version TLS12"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Require\n",
             "web.yml:4: client_auth_type: unknown value \"Require\""},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: ca\n",
             "web.yml:4: tls_server_config: a client CA is configured but client_auth_type is "
             "NoClientCert"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n"
             "  client_auth_type: RequireAndVerifyClientCert\n",
             "web.yml:4: tls_server_config: client_auth_type RequireAndVerifyClientCert needs "
             "client_ca_file"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n"
             "  client_auth_type: VerifyClientCertIfGiven\n",
             "web.yml:4: tls_server_config: client_auth_type VerifyClientCertIfGiven needs "
             "client_ca_file"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: ca\n"
             "  client_auth_type: VerifyClientCertIfGiven\n  client_allowed_sans: [x]\n",
             "web.yml:6: client_allowed_sans requires client_auth_type to be one of "
             "RequireAnyClientCert or RequireAndVerifyClientCert"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n"
             "  client_auth_type: RequireAnyClientCert\n  client_allowed_sans: ['']\n",
             "web.yml:5: client_allowed_sans: an empty name matches nothing"},
            {"tls_server_config:\n  cert_file: a\n  key_file: b\n"
             "  client_auth_type: RequireAnyClientCert\n  client_allowed_sans: x\n",
             "web.yml:5: client_allowed_sans: expected a list, got a scalar"},
            {"tls_server_config:\n  key_file: b\n",
             "web.yml:1: tls_server_config: missing one of cert or cert_file"},
            {"tls_server_config:\n  cert_file: a\n",
             "web.yml:1: tls_server_config: missing one of key or key_file"},
            {"tls_server_config:\n  client_auth_type: RequireAnyClientCert\n",
             "web.yml:1: tls_server_config: missing one of cert or cert_file"},
            {"tls_server_config:\n  cert_file: a\n  cert: b\n  key_file: c\n",
             "web.yml:3: tls_server_config: give cert_file or cert, not both"},
            {"tls_server_config:\n  cert_file: a\n  key: b\n  key_file: c\n",
             "web.yml:4: tls_server_config: give key_file or key, not both"},
            {"tls_server_config:\n  cert_file: a\n  key_file: c\n  client_ca: x\n"
             "  client_ca_file: y\n  client_auth_type: RequireAndVerifyClientCert\n",
             "web.yml:5: tls_server_config: give client_ca_file or client_ca, not both"},
            {"tls_server_config:\n  min_version: TLS13\n",
             "web.yml:2: tls_server_config: min_version is set but no certificate is configured"},
            {"tls_server_config:\n  prefer_server_cipher_suites: true\n  cert_file: ''\n",
             "web.yml:2: tls_server_config: prefer_server_cipher_suites is set but no certificate"},
            {"rate_limit:\n  interval: 1s\n  burst: 10\n",
             "web.yml:1: rate_limit is not supported"},
            {"tls_server_config:\n  cert_file: a\n   key_file: b\n", "web.yml:3: YAML: "},
            {"tls_server_config:\n\tcert_file: a\n", "web.yml:2: YAML: "},
            {"basic_auth_users: {a: b\n", "web.yml:2: YAML: "},
            {"a: *undefined\n", "web.yml:1: YAML: "},
            {"tls_server_config: {}\n---\nbasic_auth_users: {}\n",
             "web.yml:3: a second YAML document; expected one"},
            {"- tls_server_config\n", "web.yml:1: expected a mapping at the top, got a list"},
            {"just text\n", "web.yml:1: expected a mapping at the top, got a scalar"},
            {"? [a, b]\n: c\n", "web.yml:1: the file: a key must be a string, got a list"},
            {"tls_server_config: 3\n", "web.yml:1: tls_server_config: expected a mapping, got a "
                                       "scalar"},
        };
        (void)state;

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                struct webconfig *c = (struct webconfig *)0x1;
                char err[512] = "";
                int r = webconfig_parse(cases[i].text, strlen(cases[i].text), "web.yml", "/etc", &c,
                                        err, sizeof err);
                if (r != -EINVAL)
                        fail_msg("case %zu: accepted:\n%s", i, cases[i].text);
                if (strncmp(err, cases[i].msg, strlen(cases[i].msg)) != 0)
                        fail_msg("case %zu: got\n  %s\nwanted\n  %s...", i, err, cases[i].msg);
                assert_ptr_equal(c, (struct webconfig *)0x1); /* untouched on failure */
        }
}

static void test_limits(void **state)
{
        size_t n = 1001, cap = n * 16 + 64, len = 0;
        char *text = malloc(cap), err[256];
        struct webconfig *c = NULL;

        (void)state;
        len += (size_t)snprintf(text + len, cap - len, "http_server_config:\n  headers:\n");
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(text + len, cap - len, "    h%zu: x\n", i);
        assert_int_equal(webconfig_parse(text, len, "w", "", &c, err, sizeof err), -EINVAL);
        assert_non_null(strstr(err, "more than 1000 keys"));
        free(text);
}

static void test_bcrypt_syntax(void **state)
{
        static const struct {
                const char *hash;
                bool ok;
                unsigned cost;
        } cases[] = {
            {H10, true, 10},
            {H12, true, 12},
            {"$2a$04$abcdefghijklmnopqrstuuPp7HPfoAs8I2dCQCQ/fW7zEJv8I8C8e", true, 4},
            {"$2b$31$abcdefghijklmnopqrstuuPp7HPfoAs8I2dCQCQ/fW7zEJv8I8C8e", true, 31},
            {"$2b$03$abcdefghijklmnopqrstuuPp7HPfoAs8I2dCQCQ/fW7zEJv8I8C8e", false, 0},
            {"$2b$32$abcdefghijklmnopqrstuuPp7HPfoAs8I2dCQCQ/fW7zEJv8I8C8e", false, 0},
            {"$2x$10$abcdefghijklmnopqrstuuPp7HPfoAs8I2dCQCQ/fW7zEJv8I8C8e", false, 0},
            {"$2$10$abcdefghijklmnopqrstuuPp7HPfoAs8I2dCQCQ/fW7zEJv8I8C8e", false, 0},
            {"$2b$10$abcdefghijklmnopqrstuuPp7HPfoAs8I2dCQCQ/fW7zEJv8I8C8", false, 0},
            {"$2b$10$abcdefghijklmnopqrstuuPp7HPfoAs8I2dCQCQ/fW7zEJv8I8C8ee", false, 0},
            {"$2b$10$abcdefghijklmnopqrstuuPp7HPfoAs8I2dCQCQ/fW7zEJv8I8C8+", false, 0},
            {"$2b$1a$abcdefghijklmnopqrstuuPp7HPfoAs8I2dCQCQ/fW7zEJv8I8C8e", false, 0},
            {"$6$salt$hash", false, 0},
            {"", false, 0},
        };
        (void)state;

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                unsigned cost = 0;
                bool ok = webconfig_bcrypt_valid(cases[i].hash, &cost);
                if (ok != cases[i].ok || (ok && cost != cases[i].cost))
                        fail_msg("webconfig_bcrypt_valid(\"%s\") = %d, cost %u", cases[i].hash, ok,
                                 cost);
        }
}

static void test_names(void **state)
{
        (void)state;
        assert_string_equal(webconfig_client_auth_name(WEB_CLIENT_REQUIRE_VERIFY),
                            "RequireAndVerifyClientCert");
        assert_string_equal(webconfig_tls_version_name(WEB_TLS11), "TLS11");
        /* every cipher has a name, an id and GnuTLS words; only TLS 1.3 ones lack a kx */
        for (size_t i = 0; i < webconfig_n_ciphers; i++) {
                const struct web_cipher *w = &webconfig_ciphers[i];
                assert_non_null(w->cipher);
                assert_non_null(w->mac);
                assert_true((w->kx == NULL) == (w->id[0] == 0x13));
        }
        assert_int_equal(webconfig_n_ciphers, 17);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_key),     cmocka_unit_test(test_inline_pem),
            cmocka_unit_test(test_defaults),      cmocka_unit_test(test_forms),
            cmocka_unit_test(test_errors),        cmocka_unit_test(test_limits),
            cmocka_unit_test(test_bcrypt_syntax), cmocka_unit_test(test_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
