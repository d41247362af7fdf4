/* The web configuration of --web.config.file, in the Prometheus exporter-toolkit format
 * (prometheus/exporter-toolkit docs/web-configuration.md): TLS, basic auth users with bcrypt
 * hashes and extra response headers, in YAML parsed with libyaml. Pure: bytes in, a struct out;
 * no file is opened here (tls.c reads the certificates and keys the config names). As the
 * toolkit's strict YAML unmarshalling does, an unknown key is an error, and so is every value
 * of the wrong kind; each error names the file and line. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum web_client_auth {
        WEB_CLIENT_NONE,            /* NoClientCert (the default) */
        WEB_CLIENT_REQUEST,         /* RequestClientCert: asked for, neither required nor checked */
        WEB_CLIENT_REQUIRE_ANY,     /* RequireAnyClientCert: required, any certificate */
        WEB_CLIENT_VERIFY_IF_GIVEN, /* VerifyClientCertIfGiven: optional, checked when sent */
        WEB_CLIENT_REQUIRE_VERIFY,  /* RequireAndVerifyClientCert: required and checked */
};

enum web_tls_version { WEB_TLS10 = 1, WEB_TLS11, WEB_TLS12, WEB_TLS13 };

/* A cipher suite by its Go crypto/tls name (the names the toolkit accepts: Go's
 * tls.CipherSuites()), its IANA number and the GnuTLS priority keywords of its parts. */
struct web_cipher {
        const char *name;
        uint8_t id[2];
        const char *kx; /* NULL for the TLS 1.3 suites, which have no key exchange of their own */
        const char *cipher;
        const char *mac;
};

/* An elliptic curve by the toolkit's name and GnuTLS's group keyword. */
struct web_curve {
        const char *name;
        const char *group;
};

extern const struct web_cipher webconfig_ciphers[];
extern const size_t webconfig_n_ciphers;
extern const struct web_curve webconfig_curves[];
extern const size_t webconfig_n_curves;

/* The headers http_server_config.headers may set, as the toolkit allows them. */
enum web_header {
        WEB_HEADER_CSP,
        WEB_HEADER_FRAME_OPTIONS,
        WEB_HEADER_CONTENT_TYPE_OPTIONS,
        WEB_HEADER_XSS_PROTECTION,
        WEB_HEADER_HSTS,
        WEB_HEADER_MAX
};
extern const char *const webconfig_header_names[WEB_HEADER_MAX];

struct web_user {
        char *name;
        char *hash; /* bcrypt: "$2y$10$" and 53 characters */
        unsigned cost;
};

struct webconfig {
        /* tls_server_config */
        bool tls;                             /* a certificate is configured: serve HTTPS only */
        char *cert_file, *key_file, *ca_file; /* NULL when unset; relative ones are joined with
                                               * the directory of the config file */
        char *cert, *key, *ca; /* inline PEM (cert, key, client_ca), NULL when unset */
        unsigned cert_line, key_line, ca_line; /* where they were given, for later errors */
        enum web_client_auth client_auth;
        char **allowed_sans; /* client_allowed_sans: exact SAN values, one must match */
        size_t n_allowed_sans;
        enum web_tls_version min_version, max_version; /* default TLS12, TLS13 */
        const struct web_cipher **ciphers;             /* cipher_suites, in the given order */
        size_t n_ciphers;
        unsigned ciphers_line;
        const struct web_curve **curves; /* curve_preferences */
        size_t n_curves;
        unsigned curves_line;
        bool prefer_server_ciphers; /* default true */
        /* http_server_config */
        bool http2;                    /* accepted; diskpulse serves HTTP/1.1 only */
        char *headers[WEB_HEADER_MAX]; /* NULL: not sent */
        /* basic_auth_users, in file order */
        struct web_user *users;
        size_t n_users;
};

/* Parses the YAML text buf[0..len). name is the file name used in messages, dir the directory
 * that relative paths are joined with ("" for none). On success returns 0 and a config the
 * caller frees with webconfig_free(); an empty file is an empty config (plain HTTP, no auth).
 * On failure returns -EINVAL and writes "NAME:LINE: what is wrong" into err. Any thread. */
int webconfig_parse(const char *buf, size_t len, const char *name, const char *dir,
                    struct webconfig **ret, char *err, size_t errsz);

/* Accepts NULL; returns NULL. */
struct webconfig *webconfig_free(struct webconfig *c);

/* The toolkit's names, for messages and --check-config. */
const char *webconfig_client_auth_name(enum web_client_auth a);
const char *webconfig_tls_version_name(enum web_tls_version v);

/* Whether s is a bcrypt hash libxcrypt can check ($2a$, $2b$ or $2y$, cost 04 to 31, 22
 * characters of salt and 31 of hash in bcrypt's base64); sets *ret_cost. */
bool webconfig_bcrypt_valid(const char *s, unsigned *ret_cost);
