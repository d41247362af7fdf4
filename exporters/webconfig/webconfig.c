/* The exporter-toolkit web configuration, read with libyaml's document loader (yaml.h). The
 * schema walk below descends only into the keys it knows, so shared (aliased) nodes cannot
 * multiply the work, and the depth is bounded by the schema. */
#include "webconfig.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "auth.h"
#include "dynlib.h"
#include "util.h"

/* libyaml, loaded when a web config file is given (webconfig_parse): without one the daemon does
 * not map it. */
static __typeof__(yaml_parser_initialize) *sym_yaml_parser_initialize;
static __typeof__(yaml_parser_set_input_string) *sym_yaml_parser_set_input_string;
static __typeof__(yaml_parser_load) *sym_yaml_parser_load;
static __typeof__(yaml_parser_delete) *sym_yaml_parser_delete;
static __typeof__(yaml_document_get_root_node) *sym_yaml_document_get_root_node;
static __typeof__(yaml_document_get_node) *sym_yaml_document_get_node;
static __typeof__(yaml_document_delete) *sym_yaml_document_delete;
static const struct dynlib_sym yaml_syms[] = {
    DYNLIB_SYM(yaml_parser_initialize),
    DYNLIB_SYM(yaml_parser_set_input_string),
    DYNLIB_SYM(yaml_parser_load),
    DYNLIB_SYM(yaml_parser_delete),
    DYNLIB_SYM(yaml_document_get_root_node),
    DYNLIB_SYM(yaml_document_get_node),
    DYNLIB_SYM(yaml_document_delete),
};
static struct dynlib libyaml =
    DYNLIB_INIT("libyaml-0.so.2", "libyaml-0-2", "a web config file", yaml_syms);

/* Go's tls.CipherSuites() (crypto/tls cipher_suites.go), the list the toolkit accepts. */
const struct web_cipher webconfig_ciphers[] = {
    {"TLS_RSA_WITH_AES_128_CBC_SHA", {0x00, 0x2f}, "RSA", "AES-128-CBC", "SHA1"},
    {"TLS_RSA_WITH_AES_256_CBC_SHA", {0x00, 0x35}, "RSA", "AES-256-CBC", "SHA1"},
    {"TLS_RSA_WITH_AES_128_GCM_SHA256", {0x00, 0x9c}, "RSA", "AES-128-GCM", "AEAD"},
    {"TLS_RSA_WITH_AES_256_GCM_SHA384", {0x00, 0x9d}, "RSA", "AES-256-GCM", "AEAD"},
    {"TLS_AES_128_GCM_SHA256", {0x13, 0x01}, NULL, "AES-128-GCM", "AEAD"},
    {"TLS_AES_256_GCM_SHA384", {0x13, 0x02}, NULL, "AES-256-GCM", "AEAD"},
    {"TLS_CHACHA20_POLY1305_SHA256", {0x13, 0x03}, NULL, "CHACHA20-POLY1305", "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", {0xc0, 0x09}, "ECDHE-ECDSA", "AES-128-CBC", "SHA1"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", {0xc0, 0x0a}, "ECDHE-ECDSA", "AES-256-CBC", "SHA1"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", {0xc0, 0x13}, "ECDHE-RSA", "AES-128-CBC", "SHA1"},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", {0xc0, 0x14}, "ECDHE-RSA", "AES-256-CBC", "SHA1"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", {0xc0, 0x2b}, "ECDHE-ECDSA", "AES-128-GCM", "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", {0xc0, 0x2c}, "ECDHE-ECDSA", "AES-256-GCM", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", {0xc0, 0x2f}, "ECDHE-RSA", "AES-128-GCM", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", {0xc0, 0x30}, "ECDHE-RSA", "AES-256-GCM", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
     {0xcc, 0xa8},
     "ECDHE-RSA",
     "CHACHA20-POLY1305",
     "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
     {0xcc, 0xa9},
     "ECDHE-ECDSA",
     "CHACHA20-POLY1305",
     "AEAD"},
};
const size_t webconfig_n_ciphers = ARRAY_SIZE(webconfig_ciphers);

/* The toolkit's curve names (tls_config.go) and the GnuTLS groups. */
const struct web_curve webconfig_curves[] = {
    {"CurveP256", "GROUP-SECP256R1"},
    {"CurveP384", "GROUP-SECP384R1"},
    {"CurveP521", "GROUP-SECP521R1"},
    {"X25519", "GROUP-X25519"},
};
const size_t webconfig_n_curves = ARRAY_SIZE(webconfig_curves);

const char *const webconfig_header_names[WEB_HEADER_MAX] = {
    [WEB_HEADER_CSP] = "Content-Security-Policy",
    [WEB_HEADER_FRAME_OPTIONS] = "X-Frame-Options",
    [WEB_HEADER_CONTENT_TYPE_OPTIONS] = "X-Content-Type-Options",
    [WEB_HEADER_XSS_PROTECTION] = "X-XSS-Protection",
    [WEB_HEADER_HSTS] = "Strict-Transport-Security",
};

static const char *const client_auth_names[] = {
    [WEB_CLIENT_NONE] = "NoClientCert",
    [WEB_CLIENT_REQUEST] = "RequestClientCert",
    [WEB_CLIENT_REQUIRE_ANY] = "RequireAnyClientCert",
    [WEB_CLIENT_VERIFY_IF_GIVEN] = "VerifyClientCertIfGiven",
    [WEB_CLIENT_REQUIRE_VERIFY] = "RequireAndVerifyClientCert",
};

static const char *const version_names[] = {
    [WEB_TLS10] = "TLS10",
    [WEB_TLS11] = "TLS11",
    [WEB_TLS12] = "TLS12",
    [WEB_TLS13] = "TLS13",
};

const char *webconfig_client_auth_name(enum web_client_auth a)
{
        return (size_t)a < ARRAY_SIZE(client_auth_names) ? client_auth_names[a] : "?";
}

const char *webconfig_tls_version_name(enum web_tls_version v)
{
        return v >= WEB_TLS10 && v <= WEB_TLS13 ? version_names[v] : "?";
}

bool webconfig_bcrypt_valid(const char *s, unsigned *ret_cost)
{
        static const char alphabet[] =
            "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        unsigned cost;

        /* $2b$10$ + 22 salt + 31 hash characters (OpenBSD bcrypt.c, libxcrypt crypt-bcrypt.c) */
        if (strlen(s) != 60 || s[0] != '$' || s[1] != '2' || !strchr("aby", s[2]) || s[3] != '$' ||
            s[4] < '0' || s[4] > '9' || s[5] < '0' || s[5] > '9' || s[6] != '$')
                return false;
        cost = (unsigned)(s[4] - '0') * 10 + (unsigned)(s[5] - '0');
        if (cost < 4 || cost > 31)
                return false;
        for (size_t i = 7; i < 60; i++)
                if (!s[i] || !strchr(alphabet, s[i]))
                        return false;
        *ret_cost = cost;
        return true;
}

struct parser {
        yaml_document_t doc;
        const char *name, *dir;
        char *err;
        size_t errsz;
        struct webconfig *c;
        /* which tls_server_config keys were given, for the checks after the walk */
        unsigned tls_line, tls_other_line;
        const char *tls_other_key;
        bool auth_given;
        unsigned auth_line, sans_line, version_line;
};

/* More keys than any real web config has; keeps the duplicate check cheap. */
#define MAX_KEYS 1000

static unsigned line_of(const yaml_node_t *n)
{
        return (unsigned)n->start_mark.line + 1;
}

static int fail(struct parser *p, unsigned line, const char *fmt, ...) _printf_(3, 4);
static int fail(struct parser *p, unsigned line, const char *fmt, ...)
{
        va_list ap;
        int l;

        if (line)
                l = snprintf(p->err, p->errsz, "%s:%u: ", p->name, line);
        else
                l = snprintf(p->err, p->errsz, "%s: ", p->name);
        if (l < 0 || (size_t)l >= p->errsz)
                return -EINVAL;
        va_start(ap, fmt);
        vsnprintf(p->err + l, p->errsz - (size_t)l, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static const char *kind(const yaml_node_t *n)
{
        switch (n->type) {
        case YAML_SCALAR_NODE:
                return "a scalar";
        case YAML_SEQUENCE_NODE:
                return "a list";
        case YAML_MAPPING_NODE:
                return "a mapping";
        default:
                return "nothing";
        }
}

static yaml_node_t *node(struct parser *p, int index)
{
        return sym_yaml_document_get_node(&p->doc, index);
}

/* A plain scalar that YAML 1.1 reads as null (yaml.org/type/null.html), or an empty one. */
static bool is_null(const yaml_node_t *n)
{
        const char *v = (const char *)n->data.scalar.value;

        if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return false;
        return !*v || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
               strcmp(v, "NULL") == 0;
}

/* A string value. Null and "" give NULL (unset, as the toolkit's zero values). */
static int get_string(struct parser *p, const yaml_node_t *n, const char *key, char **ret)
{
        const char *v;

        if (n->type != YAML_SCALAR_NODE)
                return fail(p, line_of(n), "%s: expected a string, got %s", key, kind(n));
        v = (const char *)n->data.scalar.value;
        if (strlen(v) != n->data.scalar.length)
                return fail(p, line_of(n), "%s: contains a NUL character", key);
        free(*ret);
        *ret = is_null(n) || !*v ? NULL : xstrdup(v);
        return 0;
}

/* A boolean as YAML 1.1 reads a plain scalar (yaml.org/type/bool.html, the forms go-yaml v2
 * resolves: true/false, yes/no, on/off, y/n in three letter cases). */
static int get_bool(struct parser *p, const yaml_node_t *n, const char *key, bool *ret)
{
        static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                          "on",   "On",   "ON",   "y",   "Y"};
        static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO",
                                         "off",   "Off",   "OFF",   "n",  "N"};
        const char *v = (const char *)n->data.scalar.value;

        if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return fail(p, line_of(n), "%s: expected true or false, got %s", key,
                            n->type == YAML_SCALAR_NODE ? "a quoted string" : kind(n));
        for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
                if (strcmp(v, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcmp(v, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return fail(p, line_of(n), "%s: expected true or false, got \"%s\"", key, v);
}

/* A list of strings (null: empty). Calls each(p, item node, value, ud) per item. */
static int each_string(struct parser *p, const yaml_node_t *n, const char *key,
                       int (*each)(struct parser *, const yaml_node_t *, const char *, void *),
                       void *ud)
{
        if (is_null(n))
                return 0;
        if (n->type != YAML_SEQUENCE_NODE)
                return fail(p, line_of(n), "%s: expected a list, got %s", key, kind(n));
        if (n->data.sequence.items.top - n->data.sequence.items.start > MAX_KEYS)
                return fail(p, line_of(n), "%s: more than %d items", key, MAX_KEYS);
        for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top;
             i++) {
                const yaml_node_t *item = node(p, *i);
                _cleanup_free_ char *v = NULL;
                int r;

                if (!item)
                        return fail(p, line_of(n), "%s: broken list", key);
                if (item->type != YAML_SCALAR_NODE || is_null(item))
                        return fail(p, line_of(item), "%s: expected a string in the list, got %s",
                                    key, is_null(item) ? "null" : kind(item));
                r = get_string(p, item, key, &v);
                if (r < 0)
                        return r;
                r = each(p, item, v ? v : "", ud);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Walks a mapping's pairs: every key must be a string, none twice. Calls each(p, key, value)
 * and leaves unknown keys to it. A null value stands for an empty mapping. */
static int each_pair(struct parser *p, const yaml_node_t *n, const char *what,
                     int (*each)(struct parser *, const char *, const yaml_node_t *,
                                 const yaml_node_t *))
{
        if (is_null(n))
                return 0;
        if (n->type != YAML_MAPPING_NODE)
                return fail(p, line_of(n), "%s: expected a mapping, got %s", what, kind(n));
        if (n->data.mapping.pairs.top - n->data.mapping.pairs.start > MAX_KEYS)
                return fail(p, line_of(n), "%s: more than %d keys", what, MAX_KEYS);
        for (yaml_node_pair_t *a = n->data.mapping.pairs.start; a < n->data.mapping.pairs.top;
             a++) {
                const yaml_node_t *k = node(p, a->key), *v = node(p, a->value);
                const char *key;
                int r;

                if (!k || !v)
                        return fail(p, line_of(n), "%s: broken mapping", what);
                if (k->type != YAML_SCALAR_NODE)
                        return fail(p, line_of(k), "%s: a key must be a string, got %s", what,
                                    kind(k));
                key = (const char *)k->data.scalar.value;
                if (strlen(key) != k->data.scalar.length)
                        return fail(p, line_of(k), "%s: a key contains a NUL character", what);
                for (yaml_node_pair_t *b = n->data.mapping.pairs.start; b < a; b++) {
                        const yaml_node_t *o = node(p, b->key);
                        if (o && o->type == YAML_SCALAR_NODE &&
                            strcmp((const char *)o->data.scalar.value, key) == 0)
                                return fail(p, line_of(k),
                                            "%s: key \"%s\" is given twice, on lines %u and %u",
                                            what, key, line_of(o), line_of(k));
                }
                r = each(p, key, k, v);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A relative path joined with the config file's directory, as the toolkit's SetDirectory. */
static int get_path(struct parser *p, const yaml_node_t *n, const char *key, char **ret)
{
        char *v = NULL;
        int r = get_string(p, n, key, &v);

        if (r < 0)
                return r;
        free(*ret);
        *ret = v;
        if (v && v[0] != '/' && p->dir && *p->dir) {
                size_t l = strlen(p->dir);
                char *j = xmalloc(l + strlen(v) + 2);
                sprintf(j, "%s%s%s", p->dir, p->dir[l - 1] == '/' ? "" : "/", v);
                free(v);
                *ret = j;
        }
        return 0;
}

static int add_cipher(struct parser *p, const yaml_node_t *n, const char *v, void *ud)
{
        struct webconfig *c = p->c;

        (void)ud;
        for (size_t i = 0; i < webconfig_n_ciphers; i++) {
                if (strcmp(webconfig_ciphers[i].name, v) != 0)
                        continue;
                for (size_t k = 0; k < c->n_ciphers; k++)
                        if (c->ciphers[k] == &webconfig_ciphers[i])
                                return fail(p, line_of(n), "cipher_suites: %s is listed twice", v);
                c->ciphers = xrealloc(c->ciphers, (c->n_ciphers + 1) * sizeof(*c->ciphers));
                c->ciphers[c->n_ciphers++] = &webconfig_ciphers[i];
                return 0;
        }
        return fail(p, line_of(n),
                    "cipher_suites: unknown cipher \"%s\" (expected a name from Go's "
                    "tls.CipherSuites(), such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)",
                    v);
}

static int add_curve(struct parser *p, const yaml_node_t *n, const char *v, void *ud)
{
        struct webconfig *c = p->c;

        (void)ud;
        for (size_t i = 0; i < webconfig_n_curves; i++) {
                if (strcmp(webconfig_curves[i].name, v) != 0)
                        continue;
                for (size_t k = 0; k < c->n_curves; k++)
                        if (c->curves[k] == &webconfig_curves[i])
                                return fail(p, line_of(n), "curve_preferences: %s is listed twice",
                                            v);
                c->curves = xrealloc(c->curves, (c->n_curves + 1) * sizeof(*c->curves));
                c->curves[c->n_curves++] = &webconfig_curves[i];
                return 0;
        }
        return fail(p, line_of(n),
                    "curve_preferences: unknown curve \"%s\" (expected CurveP256, CurveP384, "
                    "CurveP521 or X25519)",
                    v);
}

static int add_san(struct parser *p, const yaml_node_t *n, const char *v, void *ud)
{
        struct webconfig *c = p->c;

        (void)ud;
        if (!*v)
                return fail(p, line_of(n), "client_allowed_sans: an empty name matches nothing");
        c->allowed_sans = xrealloc(c->allowed_sans, (c->n_allowed_sans + 1) * sizeof(char *));
        c->allowed_sans[c->n_allowed_sans++] = xstrdup(v);
        return 0;
}

static int get_version(struct parser *p, const yaml_node_t *n, const char *key,
                       enum web_tls_version *ret)
{
        _cleanup_free_ char *v = NULL;
        int r = get_string(p, n, key, &v);

        if (r < 0)
                return r;
        if (!v)
                return 0; /* unset: the default */
        for (enum web_tls_version i = WEB_TLS10; i <= WEB_TLS13; i++)
                if (strcmp(v, version_names[i]) == 0) {
                        *ret = i;
                        return 0;
                }
        return fail(p, line_of(n),
                    "%s: unknown TLS version \"%s\" (expected TLS10, TLS11, TLS12 "
                    "or TLS13)",
                    key, v);
}

static int tls_key(struct parser *p, const char *key, const yaml_node_t *k, const yaml_node_t *v)
{
        struct webconfig *c = p->c;
        int r;

        if (strcmp(key, "cert_file") == 0 || strcmp(key, "key_file") == 0 ||
            strcmp(key, "client_ca_file") == 0) {
                char **dst =
                    key[0] == 'c' ? (key[1] == 'e' ? &c->cert_file : &c->ca_file) : &c->key_file;
                unsigned *line =
                    key[0] == 'c' ? (key[1] == 'e' ? &c->cert_line : &c->ca_line) : &c->key_line;
                r = get_path(p, v, key, dst);
                if (*dst)
                        *line = line_of(k);
                return r;
        }
        if (strcmp(key, "cert") == 0 || strcmp(key, "key") == 0 || strcmp(key, "client_ca") == 0) {
                char **dst = key[0] == 'c' ? (key[1] == 'e' ? &c->cert : &c->ca) : &c->key;
                unsigned *line =
                    key[0] == 'c' ? (key[1] == 'e' ? &c->cert_line : &c->ca_line) : &c->key_line;
                r = get_string(p, v, key, dst);
                if (*dst)
                        *line = line_of(k);
                return r;
        }
        if (strcmp(key, "client_auth_type") == 0) {
                _cleanup_free_ char *s = NULL;
                r = get_string(p, v, key, &s);
                if (r < 0 || !s)
                        return r;
                p->auth_given = true;
                p->auth_line = line_of(k);
                for (size_t i = 0; i < ARRAY_SIZE(client_auth_names); i++)
                        if (strcmp(s, client_auth_names[i]) == 0) {
                                c->client_auth = (enum web_client_auth)i;
                                return 0;
                        }
                if (strcmp(s, "RequireClientCert") == 0) { /* the toolkit's older name */
                        c->client_auth = WEB_CLIENT_REQUIRE_ANY;
                        return 0;
                }
                return fail(p, line_of(v),
                            "client_auth_type: unknown value \"%s\" (expected NoClientCert, "
                            "RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven or "
                            "RequireAndVerifyClientCert)",
                            s);
        }
        if (!p->tls_other_key) {
                p->tls_other_key = key;
                p->tls_other_line = line_of(k);
        }
        if (strcmp(key, "client_allowed_sans") == 0) {
                p->sans_line = line_of(k);
                return each_string(p, v, key, add_san, NULL);
        }
        if (strcmp(key, "min_version") == 0 || strcmp(key, "max_version") == 0) {
                p->version_line = line_of(k);
                return get_version(p, v, key, key[1] == 'i' ? &c->min_version : &c->max_version);
        }
        if (strcmp(key, "cipher_suites") == 0) {
                c->ciphers_line = line_of(k);
                return each_string(p, v, key, add_cipher, NULL);
        }
        if (strcmp(key, "curve_preferences") == 0) {
                c->curves_line = line_of(k);
                return each_string(p, v, key, add_curve, NULL);
        }
        if (strcmp(key, "prefer_server_cipher_suites") == 0)
                return get_bool(p, v, key, &c->prefer_server_ciphers);
        return fail(p, line_of(k),
                    "unknown key \"%s\" in tls_server_config (expected cert_file, key_file, cert, "
                    "key, client_auth_type, client_ca_file, client_ca, client_allowed_sans, "
                    "min_version, max_version, cipher_suites, prefer_server_cipher_suites or "
                    "curve_preferences)",
                    key);
}

static bool header_value_ok(const char *v)
{
        for (const unsigned char *s = (const unsigned char *)v; *s; s++)
                if ((*s < 0x20 && *s != '\t') || *s == 0x7f)
                        return false;
        return true;
}

static int header_key(struct parser *p, const char *key, const yaml_node_t *k, const yaml_node_t *v)
{
        struct webconfig *c = p->c;

        for (size_t i = 0; i < WEB_HEADER_MAX; i++) {
                char **dst = &c->headers[i];
                int r;

                if (strcmp(key, webconfig_header_names[i]) != 0)
                        continue;
                r = get_string(p, v, key, dst);
                if (r < 0 || !*dst)
                        return r;
                if (!header_value_ok(*dst))
                        return fail(p, line_of(v), "%s: the value holds a control character", key);
                if (i == WEB_HEADER_CONTENT_TYPE_OPTIONS && strcmp(*dst, "nosniff") != 0)
                        return fail(p, line_of(v), "%s: expected \"nosniff\", got \"%s\"", key,
                                    *dst);
                if (i == WEB_HEADER_FRAME_OPTIONS && strcmp(*dst, "deny") != 0 &&
                    strcmp(*dst, "sameorigin") != 0)
                        return fail(p, line_of(v),
                                    "%s: expected \"deny\" or \"sameorigin\", got \"%s\"", key,
                                    *dst);
                return 0;
        }
        return fail(p, line_of(k),
                    "HTTP header \"%s\" can not be configured (expected Content-Security-Policy, "
                    "X-Frame-Options, X-Content-Type-Options, X-XSS-Protection or "
                    "Strict-Transport-Security)",
                    key);
}

static int http_key(struct parser *p, const char *key, const yaml_node_t *k, const yaml_node_t *v)
{
        if (strcmp(key, "http2") == 0)
                return get_bool(p, v, key, &p->c->http2);
        if (strcmp(key, "headers") == 0)
                return each_pair(p, v, "headers", header_key);
        return fail(p, line_of(k),
                    "unknown key \"%s\" in http_server_config (expected http2 or headers)", key);
}

static int user_key(struct parser *p, const char *key, const yaml_node_t *k, const yaml_node_t *v)
{
        struct webconfig *c = p->c;
        _cleanup_free_ char *hash = NULL;
        char why[512];
        unsigned cost;
        int r;

        for (const unsigned char *s = (const unsigned char *)key; *s; s++) {
                if (*s == ':')
                        return fail(p, line_of(k),
                                    "basic_auth_users: user \"%s\" has a ':', which basic "
                                    "authentication cannot send (RFC 7617)",
                                    key);
                if (*s < 0x20 || *s == 0x7f)
                        return fail(p, line_of(k),
                                    "basic_auth_users: a user name holds a control character");
        }
        if (v->type != YAML_SCALAR_NODE || is_null(v))
                return fail(p, line_of(v),
                            "basic_auth_users: user \"%s\": expected a bcrypt hash, "
                            "got %s",
                            key, is_null(v) ? "nothing" : kind(v));
        r = get_string(p, v, key, &hash);
        if (r < 0)
                return r;
        if (!hash || !webconfig_bcrypt_valid(hash, &cost))
                return fail(p, line_of(v),
                            "basic_auth_users: user \"%s\": not a bcrypt hash (expected $2y$, $2b$ "
                            "or $2a$, a cost from 04 to 31 and 53 characters, as htpasswd -nBC 10 "
                            "prints)",
                            key);
        /* libcrypt is loaded for the first user: a config without users never maps it. */
        r = auth_load(why, sizeof why);
        if (r < 0)
                return fail(p, line_of(k), "basic_auth_users: %s", why);
        c->users = xrealloc(c->users, (c->n_users + 1) * sizeof(*c->users));
        c->users[c->n_users++] =
            (struct web_user){.name = xstrdup(key), .hash = hash, .cost = cost};
        hash = NULL;
        return 0;
}

static int top_key(struct parser *p, const char *key, const yaml_node_t *k, const yaml_node_t *v)
{
        if (strcmp(key, "tls_server_config") == 0) {
                p->tls_line = line_of(k);
                return each_pair(p, v, "tls_server_config", tls_key);
        }
        if (strcmp(key, "http_server_config") == 0)
                return each_pair(p, v, "http_server_config", http_key);
        if (strcmp(key, "basic_auth_users") == 0)
                return each_pair(p, v, "basic_auth_users", user_key);
        if (strcmp(key, "rate_limit") == 0)
                return fail(p, line_of(k),
                            "rate_limit is not supported: one token bucket shared by every client "
                            "lets any client starve the scrapes; diskpulse bounds connections "
                            "instead");
        return fail(p, line_of(k),
                    "unknown key \"%s\" (expected tls_server_config, http_server_config or "
                    "basic_auth_users)",
                    key);
}

/* The checks of the toolkit's ConfigToTLSConfig and validateTLSPaths, made at load time. */
static int check_tls(struct parser *p)
{
        struct webconfig *c = p->c;
        bool verify = c->client_auth == WEB_CLIENT_VERIFY_IF_GIVEN ||
                      c->client_auth == WEB_CLIENT_REQUIRE_VERIFY;

        c->tls = c->cert_file || c->cert || c->key_file || c->key || c->ca_file || c->ca ||
                 p->auth_given;
        if (!c->tls) {
                /* The toolkit serves plain HTTP then and ignores the rest; a TLS setting
                 * without a certificate is a mistake worth stopping for. */
                if (p->tls_other_key)
                        return fail(p, p->tls_other_line,
                                    "tls_server_config: %s is set but no certificate is "
                                    "configured (cert_file and key_file)",
                                    p->tls_other_key);
                return 0;
        }
        if (c->cert_file && c->cert)
                return fail(p, c->cert_line, "tls_server_config: give cert_file or cert, not both");
        if (c->key_file && c->key)
                return fail(p, c->key_line, "tls_server_config: give key_file or key, not both");
        if (c->ca_file && c->ca)
                return fail(p, c->ca_line,
                            "tls_server_config: give client_ca_file or client_ca, not both");
        if (!c->cert_file && !c->cert)
                return fail(p, p->tls_line, "tls_server_config: missing one of cert or cert_file");
        if (!c->key_file && !c->key)
                return fail(p, p->tls_line, "tls_server_config: missing one of key or key_file");
        if ((c->ca_file || c->ca) && c->client_auth == WEB_CLIENT_NONE)
                return fail(p, c->ca_line,
                            "tls_server_config: a client CA is configured but client_auth_type is "
                            "NoClientCert; set client_auth_type: RequireAndVerifyClientCert");
        /* Go would verify against the system's roots then: any certificate from a public CA
         * would be let in, which is never what an exporter wants. */
        if (verify && !c->ca_file && !c->ca)
                return fail(p, p->auth_line,
                            "tls_server_config: client_auth_type %s needs client_ca_file (the CA "
                            "that signs the client certificates)",
                            webconfig_client_auth_name(c->client_auth));
        if (c->n_allowed_sans && c->client_auth != WEB_CLIENT_REQUIRE_ANY &&
            c->client_auth != WEB_CLIENT_REQUIRE_VERIFY)
                return fail(p, p->sans_line,
                            "client_allowed_sans requires client_auth_type to be one of "
                            "RequireAnyClientCert or RequireAndVerifyClientCert");
        if (c->min_version > c->max_version)
                return fail(p, p->version_line,
                            "tls_server_config: min_version %s is above max_version %s",
                            webconfig_tls_version_name(c->min_version),
                            webconfig_tls_version_name(c->max_version));
        return 0;
}

static int yaml_fail(struct parser *p, const yaml_parser_t *y)
{
        const char *problem = y->problem ? y->problem : "cannot be parsed";

        if (y->error == YAML_MEMORY_ERROR)
                return fail(p, 0, "out of memory");
        if (y->context)
                return fail(p, (unsigned)y->problem_mark.line + 1, "YAML: %s %s", y->context,
                            problem);
        return fail(p, (unsigned)y->problem_mark.line + 1, "YAML: %s", problem);
}

int webconfig_parse(const char *buf, size_t len, const char *name, const char *dir,
                    struct webconfig **ret, char *err, size_t errsz)
{
        struct parser p = {.name = name, .dir = dir, .err = err, .errsz = errsz};
        yaml_parser_t y;
        yaml_document_t more;
        const yaml_node_t *root;
        char why[512];
        int r = 0;

        if (dynlib_load(&libyaml, why, sizeof why) < 0)
                return fail(&p, 0, "%s", why);
        if (!sym_yaml_parser_initialize(&y))
                return fail(&p, 0, "out of memory");
        sym_yaml_parser_set_input_string(&y, (const unsigned char *)buf, len);
        if (!sym_yaml_parser_load(&y, &p.doc)) {
                r = yaml_fail(&p, &y);
                sym_yaml_parser_delete(&y);
                return r;
        }
        p.c = xcalloc(1, sizeof(*p.c));
        p.c->min_version = WEB_TLS12;
        p.c->max_version = WEB_TLS13;
        p.c->prefer_server_ciphers = true;
        p.c->http2 = true;
        root = sym_yaml_document_get_root_node(&p.doc);
        if (root) {
                /* go-yaml reads the first document only; a second one is a mistake */
                if (!sym_yaml_parser_load(&y, &more)) {
                        r = yaml_fail(&p, &y);
                } else {
                        const yaml_node_t *m = sym_yaml_document_get_root_node(&more);
                        if (m)
                                r = fail(&p, line_of(m), "a second YAML document; expected one");
                        sym_yaml_document_delete(&more);
                }
                if (r == 0 && !is_null(root) && root->type != YAML_MAPPING_NODE)
                        r = fail(&p, line_of(root), "expected a mapping at the top, got %s",
                                 kind(root));
                if (r == 0)
                        r = each_pair(&p, root, "the file", top_key);
        }
        if (r == 0)
                r = check_tls(&p);
        sym_yaml_document_delete(&p.doc);
        sym_yaml_parser_delete(&y);
        if (r < 0) {
                webconfig_free(p.c);
                return r;
        }
        *ret = p.c;
        return 0;
}

struct webconfig *webconfig_free(struct webconfig *c)
{
        if (!c)
                return NULL;
        free(c->cert_file);
        free(c->key_file);
        free(c->ca_file);
        free(c->cert);
        if (c->key) {
                explicit_bzero(c->key, strlen(c->key));
                free(c->key);
        }
        free(c->ca);
        for (size_t i = 0; i < c->n_allowed_sans; i++)
                free(c->allowed_sans[i]);
        free(c->allowed_sans);
        free(c->ciphers);
        free(c->curves);
        for (size_t i = 0; i < WEB_HEADER_MAX; i++)
                free(c->headers[i]);
        for (size_t i = 0; i < c->n_users; i++) {
                free(c->users[i].name);
                free(c->users[i].hash);
        }
        free(c->users);
        free(c);
        return NULL;
}
