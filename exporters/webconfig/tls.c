/* TLS with GnuTLS (the GnuTLS manual: "Priority strings", gnutls_certificate_set_retrieve_
 * function3, gnutls_session_set_verify_function, gnutls_x509_trust_list_verify_crt2). */
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/x509.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fsroot.h"
#include "log.h"
#include "refcount.h"
#include "util.h"

#define MAX_FILE  (1 << 20)
#define MAX_CHAIN 16

struct tls_creds {
        struct refcount refs;
        gnutls_datum_t *chain; /* DER, leaf first */
        unsigned n_chain;
        gnutls_datum_t key; /* PKCS#8 DER */
        gnutls_pk_algorithm_t pk;
        gnutls_x509_trust_list_t trust; /* client CA; NULL when none */
        enum web_client_auth auth;
        char **sans;
        size_t n_sans;
        char *prio;
        long long not_after;
        char *subject;
};

static int fail(char *err, size_t errsz, const char *name, unsigned line, const char *fmt, ...)
    _printf_(5, 6);
static int fail(char *err, size_t errsz, const char *name, unsigned line, const char *fmt, ...)
{
        va_list ap;
        int l =
            line ? snprintf(err, errsz, "%s:%u: ", name, line) : snprintf(err, errsz, "%s: ", name);

        if (l < 0 || (size_t)l >= errsz)
                return -EINVAL;
        va_start(ap, fmt);
        vsnprintf(err + l, errsz - (size_t)l, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static void tls_creds_destroy(struct tls_creds *t)
{
        for (unsigned i = 0; i < t->n_chain; i++)
                gnutls_free(t->chain[i].data);
        free(t->chain);
        if (t->key.data) {
                explicit_bzero(t->key.data, t->key.size);
                gnutls_free(t->key.data);
        }
        if (t->trust)
                gnutls_x509_trust_list_deinit(t->trust, 1);
        for (size_t i = 0; i < t->n_sans; i++)
                free(t->sans[i]);
        free(t->sans);
        free(t->prio);
        free(t->subject);
        free(t);
}

REFCOUNT_DEFINE(, struct tls_creds, tls_creds, refs, tls_creds_destroy)

const char *tls_creds_priorities(const struct tls_creds *t)
{
        return t->prio;
}

long long tls_creds_not_after(const struct tls_creds *t)
{
        return t->not_after;
}

const char *tls_creds_subject(const struct tls_creds *t)
{
        return t->subject;
}

enum web_client_auth tls_creds_client_auth(const struct tls_creds *t)
{
        return t->auth;
}

/* The PEM text of a file or of the inline value; the caller frees *ret (wiped for keys). */
static int read_pem(const char *file, const char *inline_pem, const char *key, const char *name,
                    unsigned line, char **ret, size_t *ret_len, char *err, size_t errsz)
{
        char why[128];
        int r;

        if (!file) {
                *ret = xstrdup(inline_pem);
                *ret_len = strlen(inline_pem);
                return 0;
        }
        /* a regular file only: a FIFO in its place would block a reload forever */
        r = read_regular_at(AT_FDCWD, file, MAX_FILE, ret, ret_len, why, sizeof why);
        if (r < 0)
                return fail(err, errsz, name, line, "%s: cannot read %s: %s", key, file, why);
        return 0;
}

static void wipe_free(char *s, size_t len)
{
        if (s) {
                explicit_bzero(s, len);
                free(s);
        }
}

static int load_chain(struct tls_creds *t, const struct webconfig *c, const char *name, char *err,
                      size_t errsz, gnutls_x509_crt_t *ret_leaf)
{
        _cleanup_free_ char *pem = NULL;
        gnutls_x509_crt_t *crts = NULL;
        unsigned n = 0;
        size_t len;
        const char *key = c->cert_file ? "cert_file" : "cert";
        gnutls_datum_t d;
        int r;

        r = read_pem(c->cert_file, c->cert, key, name, c->cert_line, &pem, &len, err, errsz);
        if (r < 0)
                return r;
        d = (gnutls_datum_t){.data = (unsigned char *)pem, .size = (unsigned)len};
        r = gnutls_x509_crt_list_import2(&crts, &n, &d, GNUTLS_X509_FMT_PEM, 0);
        if (r < 0 || n == 0)
                return fail(err, errsz, name, c->cert_line, "%s: no PEM certificate found%s%s", key,
                            r < 0 ? ": " : "", r < 0 ? gnutls_strerror(r) : "");
        if (n > MAX_CHAIN) {
                r = fail(err, errsz, name, c->cert_line, "%s: more than %d certificates", key,
                         MAX_CHAIN);
                goto out;
        }
        t->chain = xcalloc(n, sizeof(*t->chain));
        for (unsigned i = 0; i < n; i++) {
                r = gnutls_x509_crt_export2(crts[i], GNUTLS_X509_FMT_DER, &t->chain[i]);
                if (r < 0) {
                        r = fail(err, errsz, name, c->cert_line, "%s: %s", key, gnutls_strerror(r));
                        goto out;
                }
                t->n_chain++;
        }
        t->not_after = (long long)gnutls_x509_crt_get_expiration_time(crts[0]);
        if (gnutls_x509_crt_get_dn3(crts[0], &d, 0) >= 0) {
                t->subject = xmalloc(d.size + 1);
                memcpy(t->subject, d.data, d.size);
                t->subject[d.size] = 0;
                gnutls_free(d.data);
        } else {
                t->subject = xstrdup("");
        }
        *ret_leaf = crts[0];
        crts[0] = NULL;
        r = 0;
out:
        for (unsigned i = 0; i < n; i++)
                if (crts[i])
                        gnutls_x509_crt_deinit(crts[i]);
        gnutls_free(crts);
        return r;
}

static int load_key(struct tls_creds *t, const struct webconfig *c, gnutls_x509_crt_t leaf,
                    const char *name, char *err, size_t errsz)
{
        char *pem = NULL;
        size_t len = 0;
        const char *key = c->key_file ? "key_file" : "key";
        gnutls_x509_privkey_t k = NULL;
        unsigned char id1[64], id2[64];
        size_t l1 = sizeof id1, l2 = sizeof id2;
        gnutls_datum_t d;
        int r;

        r = read_pem(c->key_file, c->key, key, name, c->key_line, &pem, &len, err, errsz);
        if (r < 0)
                return r;
        d = (gnutls_datum_t){.data = (unsigned char *)pem, .size = (unsigned)len};
        if ((r = gnutls_x509_privkey_init(&k)) < 0 ||
            (r = gnutls_x509_privkey_import2(k, &d, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
                r = fail(err, errsz, name, c->key_line,
                         "%s: not an unencrypted PEM private key: %s", key, gnutls_strerror(r));
                goto out;
        }
        if (gnutls_x509_crt_get_key_id(leaf, GNUTLS_KEYID_USE_SHA256, id1, &l1) < 0 ||
            gnutls_x509_privkey_get_key_id(k, GNUTLS_KEYID_USE_SHA256, id2, &l2) < 0 || l1 != l2 ||
            memcmp(id1, id2, l1) != 0) {
                r = fail(err, errsz, name, c->key_line,
                         "%s: the private key does not belong to the certificate", key);
                goto out;
        }
        r = gnutls_x509_privkey_export2_pkcs8(k, GNUTLS_X509_FMT_DER, NULL, GNUTLS_PKCS_PLAIN,
                                              &t->key);
        if (r < 0) {
                r = fail(err, errsz, name, c->key_line, "%s: %s", key, gnutls_strerror(r));
                goto out;
        }
        t->pk = (gnutls_pk_algorithm_t)gnutls_x509_privkey_get_pk_algorithm(k);
        r = 0;
out:
        if (k)
                gnutls_x509_privkey_deinit(k);
        wipe_free(pem, len);
        return r;
}

static int load_trust(struct tls_creds *t, const struct webconfig *c, const char *name, char *err,
                      size_t errsz)
{
        _cleanup_free_ char *pem = NULL;
        const char *key = c->ca_file ? "client_ca_file" : "client_ca";
        size_t len;
        gnutls_datum_t d;
        int r;

        if (!c->ca_file && !c->ca)
                return 0;
        r = read_pem(c->ca_file, c->ca, key, name, c->ca_line, &pem, &len, err, errsz);
        if (r < 0)
                return r;
        if ((r = gnutls_x509_trust_list_init(&t->trust, 0)) < 0)
                return fail(err, errsz, name, c->ca_line, "%s: %s", key, gnutls_strerror(r));
        d = (gnutls_datum_t){.data = (unsigned char *)pem, .size = (unsigned)len};
        r = gnutls_x509_trust_list_add_trust_mem(t->trust, &d, NULL, GNUTLS_X509_FMT_PEM, 0, 0);
        if (r <= 0)
                return fail(err, errsz, name, c->ca_line, "%s: no PEM certificate found%s%s", key,
                            r < 0 ? ": " : "", r < 0 ? gnutls_strerror(r) : "");
        return 0;
}

static void append(char **s, size_t *len, const char *add)
{
        size_t l = strlen(add);

        *s = xrealloc(*s, *len + l + 1);
        memcpy(*s + *len, add, l + 1);
        *len += l;
}

/* Appends ":+word" unless the string already has it. */
static void append_once(char **s, size_t *len, const char *word)
{
        char tok[64];

        snprintf(tok, sizeof tok, ":+%s", word);
        for (const char *p = *s; (p = strstr(p, tok)); p += strlen(tok))
                if (p[strlen(tok)] == ':' || !p[strlen(tok)])
                        return;
        append(s, len, tok);
}

/* The GnuTLS priority string of the web config: NORMAL with the versions, suites and curves it
 * names, no session tickets (a resumed session would skip the client-certificate check made at
 * the handshake) and, as Go's prefer_server_cipher_suites, the server's order. */
static char *build_priorities(const struct webconfig *c, bool *ret_listed13)
{
        static const char *const vers[] = {[WEB_TLS10] = "VERS-TLS1.0",
                                           [WEB_TLS11] = "VERS-TLS1.1",
                                           [WEB_TLS12] = "VERS-TLS1.2",
                                           [WEB_TLS13] = "VERS-TLS1.3"};
        char *s = xstrdup("NORMAL:%NO_TICKETS");
        size_t len = strlen(s);
        bool listed13 = false;

        if (c->prefer_server_ciphers)
                append(&s, &len, ":%SERVER_PRECEDENCE");
        append(&s, &len, ":-VERS-ALL");
        for (int v = (int)c->max_version; v >= (int)c->min_version; v--)
                append_once(&s, &len, vers[v]);
        if (c->n_ciphers) {
                append(&s, &len, ":-CIPHER-ALL:-MAC-ALL:-KX-ALL");
                for (size_t i = 0; i < c->n_ciphers; i++) {
                        const struct web_cipher *w = c->ciphers[i];
                        append_once(&s, &len, w->cipher);
                        append_once(&s, &len, w->mac);
                        if (w->kx)
                                append_once(&s, &len, w->kx);
                        else
                                listed13 = true;
                }
        }
        if (c->n_curves) {
                append(&s, &len, ":-GROUP-ALL");
                for (size_t i = 0; i < c->n_curves; i++)
                        append_once(&s, &len, c->curves[i]->group);
        }
        *ret_listed13 = listed13;
        return s;
}

static const char *suite_name(const unsigned char id[2], const char *gnutls_name)
{
        for (size_t i = 0; i < webconfig_n_ciphers; i++)
                if (webconfig_ciphers[i].id[0] == id[0] && webconfig_ciphers[i].id[1] == id[1])
                        return webconfig_ciphers[i].name;
        return gnutls_name;
}

static bool listed(const struct webconfig *c, const unsigned char id[2])
{
        for (size_t i = 0; i < c->n_ciphers; i++)
                if (c->ciphers[i]->id[0] == id[0] && c->ciphers[i]->id[1] == id[1])
                        return true;
        return false;
}

static bool kx_fits(gnutls_kx_algorithm_t kx, gnutls_pk_algorithm_t pk)
{
        if (pk == GNUTLS_PK_RSA || pk == GNUTLS_PK_RSA_PSS)
                return kx == GNUTLS_KX_RSA || kx == GNUTLS_KX_ECDHE_RSA || kx == GNUTLS_KX_DHE_RSA;
        if (pk == GNUTLS_PK_EC || pk == GNUTLS_PK_EDDSA_ED25519 || pk == GNUTLS_PK_EDDSA_ED448)
                return kx == GNUTLS_KX_ECDHE_ECDSA;
        return true;
}

/* Checks that GnuTLS enables exactly what the config asks for. GnuTLS enables the combinations
 * of its cipher, MAC and key-exchange lists rather than a list of suites, and one cipher list
 * serves TLS 1.2 and 1.3, so some lists of suites cannot be had: those are refused. */
static int check_priorities(struct tls_creds *t, const struct webconfig *c, bool listed13,
                            const char *name, char *err, size_t errsz)
{
        static const gnutls_protocol_t want[] = {[WEB_TLS10] = GNUTLS_TLS1_0,
                                                 [WEB_TLS11] = GNUTLS_TLS1_1,
                                                 [WEB_TLS12] = GNUTLS_TLS1_2,
                                                 [WEB_TLS13] = GNUTLS_TLS1_3};
        struct {
                unsigned char id[2];
                gnutls_kx_algorithm_t kx;
                gnutls_protocol_t minv;
                const char *name;
        } on[128];
        size_t n_on = 0;
        gnutls_priority_t pc;
        const char *pos = NULL;
        const unsigned *protos;
        char extra[512] = "", missing[512] = "";
        bool has12 = c->min_version <= WEB_TLS12, has13 = c->max_version == WEB_TLS13;
        bool any12 = false, any13 = false, fits = false, old_ok = false;
        unsigned line = c->n_ciphers ? c->ciphers_line : c->curves_line;
        int n, r;

        r = gnutls_priority_init(&pc, t->prio, &pos);
        if (r < 0)
                return fail(err, errsz, name, line,
                            "GnuTLS refuses the priority string \"%s\" (at \"%s\"): %s", t->prio,
                            pos ? pos : "", gnutls_strerror(r));
        n = gnutls_priority_protocol_list(pc, &protos);
        for (int v = (int)c->min_version; v <= (int)c->max_version; v++) {
                bool found = false;
                for (int i = 0; i < n; i++)
                        found |= protos[i] == (unsigned)want[v];
                if (!found) {
                        gnutls_priority_deinit(pc);
                        return fail(err, errsz, name, 0,
                                    "tls_server_config: %s is disabled by this system's GnuTLS "
                                    "configuration",
                                    webconfig_tls_version_name((enum web_tls_version)v));
                }
        }
        for (unsigned i = 0; n_on < ARRAY_SIZE(on); i++) {
                unsigned idx;

                r = gnutls_priority_get_cipher_suite_index(pc, i, &idx);
                if (r == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
                        break;
                if (r < 0)
                        continue;
                on[n_on].name = gnutls_cipher_suite_info(idx, on[n_on].id, &on[n_on].kx, NULL, NULL,
                                                         &on[n_on].minv);
                if (on[n_on].name)
                        n_on++;
        }
        gnutls_priority_deinit(pc);

        for (size_t i = 0; i < n_on; i++) {
                bool is13 = on[i].minv == GNUTLS_TLS1_3;
                if (is13) {
                        any13 = true;
                } else {
                        any12 = true;
                        fits |= kx_fits(on[i].kx, t->pk);
                        old_ok |= on[i].minv < GNUTLS_TLS1_2;
                }
                /* a TLS 1.3 suite is extra only when TLS 1.3 suites were listed */
                if (c->n_ciphers && (!is13 || listed13) && !listed(c, on[i].id)) {
                        strncat(extra, " ", sizeof extra - strlen(extra) - 1);
                        strncat(extra, suite_name(on[i].id, on[i].name),
                                sizeof extra - strlen(extra) - 1);
                }
        }
        for (size_t i = 0; i < c->n_ciphers; i++) {
                const struct web_cipher *w = c->ciphers[i];
                bool found = false;
                if (w->kx ? !has12 : !has13)
                        continue; /* a suite of a version out of range is ignored, as Go does */
                if (w->kx && strcmp(w->mac, "AEAD") == 0 && c->max_version < WEB_TLS12)
                        return fail(err, errsz, name, c->ciphers_line,
                                    "cipher_suites: %s needs TLS 1.2, above max_version %s",
                                    w->name, webconfig_tls_version_name(c->max_version));
                for (size_t k = 0; k < n_on; k++)
                        found |= on[k].id[0] == w->id[0] && on[k].id[1] == w->id[1];
                if (!found) {
                        strncat(missing, " ", sizeof missing - strlen(missing) - 1);
                        strncat(missing, w->name, sizeof missing - strlen(missing) - 1);
                }
        }
        if (*missing)
                return fail(err, errsz, name, c->ciphers_line,
                            "cipher_suites: GnuTLS here does not offer%s", missing);
        if (*extra)
                return fail(err, errsz, name, c->ciphers_line,
                            "cipher_suites: GnuTLS cannot enable exactly these suites: it combines "
                            "ciphers, MACs and key exchanges, and TLS 1.2 and 1.3 share one "
                            "cipher list, so it would also enable%s; list those too%s",
                            extra, listed13 ? ", or leave the TLS 1.3 suites out" : "");
        if (has13 && !any13)
                return fail(err, errsz, name, c->ciphers_line,
                            "cipher_suites: no TLS 1.3 suite is left (TLS 1.3 takes the AEAD "
                            "ciphers of the listed suites, or the TLS 1.3 suites listed); list "
                            "one, such as TLS_AES_128_GCM_SHA256, or set max_version: TLS12");
        if (!has13 && !any12)
                return fail(err, errsz, name, line, "tls_server_config: no cipher suite is left");
        if (!has13 && !fits)
                return fail(err, errsz, name, c->n_ciphers ? c->ciphers_line : c->cert_line,
                            "tls_server_config: no enabled TLS 1.2 suite can use the "
                            "certificate's %s key",
                            gnutls_pk_get_name(t->pk));
        if (c->max_version < WEB_TLS12 && !old_ok)
                return fail(err, errsz, name, c->n_ciphers ? c->ciphers_line : 0,
                            "tls_server_config: every enabled suite needs TLS 1.2, above "
                            "max_version %s",
                            webconfig_tls_version_name(c->max_version));
        return 0;
}

int tls_creds_load(const struct webconfig *c, const char *name, struct tls_creds **ret, char *err,
                   size_t errsz)
{
        struct tls_creds *t = xcalloc(1, sizeof(*t));
        gnutls_x509_crt_t leaf = NULL;
        bool listed13;
        int r;

        refcount_init(&t->refs);
        t->auth = c->client_auth;
        r = load_chain(t, c, name, err, errsz, &leaf);
        if (r >= 0)
                r = load_key(t, c, leaf, name, err, errsz);
        if (leaf)
                gnutls_x509_crt_deinit(leaf);
        if (r >= 0)
                r = load_trust(t, c, name, err, errsz);
        if (r >= 0) {
                t->prio = build_priorities(c, &listed13);
                r = check_priorities(t, c, listed13, name, err, errsz);
        }
        if (r < 0) {
                tls_creds_unref(t);
                return r;
        }
        if (c->n_allowed_sans) {
                t->sans = xcalloc(c->n_allowed_sans, sizeof(char *));
                for (size_t i = 0; i < c->n_allowed_sans; i++)
                        t->sans[i] = xstrdup(c->allowed_sans[i]);
                t->n_sans = c->n_allowed_sans;
        }
        *ret = t;
        return 0;
}

/* Whether one of the leaf's subject alternative names is in the allowed list, compared as the
 * toolkit does (exact strings; IP addresses in Go's notation). */
static bool san_allowed(const struct tls_creds *t, gnutls_x509_crt_t leaf, char *why, size_t whysz)
{
        for (unsigned seq = 0;; seq++) {
                char buf[1024], text[INET6_ADDRSTRLEN];
                size_t size = sizeof buf - 1;
                const char *v = buf;
                int type = gnutls_x509_crt_get_subject_alt_name(leaf, seq, buf, &size, NULL);

                if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
                        break;
                if (type < 0)
                        continue;
                if (type == GNUTLS_SAN_IPADDRESS) {
                        static const unsigned char mapped[12] = {0, 0, 0, 0, 0,    0,
                                                                 0, 0, 0, 0, 0xff, 0xff};
                        if (size == 16 && memcmp(buf, mapped, 12) == 0)
                                v = inet_ntop(AF_INET, buf + 12, text, sizeof text);
                        else if (size == 4 || size == 16)
                                v = inet_ntop(size == 4 ? AF_INET : AF_INET6, buf, text,
                                              sizeof text);
                        else
                                continue;
                        if (!v)
                                continue;
                } else if (type == GNUTLS_SAN_DNSNAME || type == GNUTLS_SAN_RFC822NAME ||
                           type == GNUTLS_SAN_URI) {
                        buf[size] = 0;
                        if (strlen(buf) != size)
                                continue;
                } else {
                        continue;
                }
                for (size_t i = 0; i < t->n_sans; i++)
                        if (strcmp(t->sans[i], v) == 0)
                                return true;
        }
        snprintf(why, whysz, "no subject alternative name in client_allowed_sans");
        return false;
}

int tls_creds_check_peer(const struct tls_creds *t, const gnutls_datum_t *chain, unsigned n,
                         char *why, size_t whysz)
{
        gnutls_x509_crt_t crts[MAX_CHAIN];
        unsigned k = 0, status = 0;
        bool verify = t->auth == WEB_CLIENT_VERIFY_IF_GIVEN || t->auth == WEB_CLIENT_REQUIRE_VERIFY;
        int r = 0;

        if (!chain || n == 0) {
                if (t->auth == WEB_CLIENT_REQUIRE_ANY || t->auth == WEB_CLIENT_REQUIRE_VERIFY) {
                        snprintf(why, whysz, "no client certificate");
                        return -EACCES;
                }
                return 0;
        }
        if (n > MAX_CHAIN) {
                snprintf(why, whysz, "a chain of more than %d certificates", MAX_CHAIN);
                return -EACCES;
        }
        for (; k < n; k++) {
                if (gnutls_x509_crt_init(&crts[k]) < 0)
                        break;
                if (gnutls_x509_crt_import(crts[k], &chain[k], GNUTLS_X509_FMT_DER) < 0) {
                        gnutls_x509_crt_deinit(crts[k]);
                        break;
                }
        }
        if (k < n) {
                snprintf(why, whysz, "a certificate that cannot be parsed");
                r = -EACCES;
        } else if (verify) {
                gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
                                                 .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT};
                int v = gnutls_x509_trust_list_verify_crt2(t->trust, crts, n, &purpose, 1, 0,
                                                           &status, NULL);
                if (v < 0 || status != 0) {
                        gnutls_datum_t out = {0};
                        if (v >= 0 && gnutls_certificate_verification_status_print(
                                          status, GNUTLS_CRT_X509, &out, 0) >= 0) {
                                snprintf(why, whysz, "%s", (const char *)out.data);
                                gnutls_free(out.data);
                        } else {
                                snprintf(why, whysz, "%s", gnutls_strerror(v));
                        }
                        r = -EACCES;
                }
        }
        if (r == 0 && t->n_sans && !san_allowed(t, crts[0], why, whysz))
                r = -EACCES;
        for (unsigned i = 0; i < k; i++)
                gnutls_x509_crt_deinit(crts[i]);
        return r;
}

int tls_creds_verify(const struct tls_creds *t, gnutls_session_t s)
{
        unsigned n = 0;
        const gnutls_datum_t *chain = gnutls_certificate_get_peers(s, &n);
        char why[256] = "no TLS configuration";
        int r = t ? tls_creds_check_peer(t, chain, n, why, sizeof why) : -EACCES;

        if (r < 0) {
                log_debug("client certificate refused", "reason", why);
                (void)gnutls_alert_send(s, GNUTLS_AL_FATAL,
                                        n ? GNUTLS_A_BAD_CERTIFICATE
                                        : gnutls_protocol_get_version(s) == GNUTLS_TLS1_3
                                            ? GNUTLS_A_CERTIFICATE_REQUIRED
                                            : GNUTLS_A_HANDSHAKE_FAILURE);
                return -EACCES;
        }
        return 0;
}

int tls_creds_hand_over(const struct tls_creds *t, gnutls_session_t s,
                        gnutls_certificate_verify_function *verify, gnutls_pcert_st **certs,
                        unsigned *certs_length, gnutls_privkey_t *privkey)
{
        gnutls_pcert_st *p = NULL;
        gnutls_privkey_t k = NULL;
        unsigned n = 0;

        p = gnutls_malloc(t->n_chain * sizeof(*p));
        if (!p)
                goto fail;
        for (; n < t->n_chain; n++)
                if (gnutls_pcert_import_x509_raw(&p[n], &t->chain[n], GNUTLS_X509_FMT_DER, 0) < 0)
                        goto fail;
        if (gnutls_privkey_init(&k) < 0 ||
            gnutls_privkey_import_x509_raw(k, &t->key, GNUTLS_X509_FMT_DER, NULL, 0) < 0)
                goto fail;
        switch (t->auth) {
        case WEB_CLIENT_NONE:
                break;
        case WEB_CLIENT_REQUEST:
        case WEB_CLIENT_VERIFY_IF_GIVEN:
                gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUEST);
                gnutls_session_set_verify_function(s, verify);
                break;
        case WEB_CLIENT_REQUIRE_ANY:
        case WEB_CLIENT_REQUIRE_VERIFY:
                gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
                gnutls_session_set_verify_function(s, verify);
                break;
        }
        /* GnuTLS owns the copies now and frees them with the session */
        *certs = p;
        *certs_length = n;
        *privkey = k;
        return 0;
fail:
        log_debug("cannot hand the certificate to GnuTLS");
        for (unsigned i = 0; i < n; i++)
                gnutls_pcert_deinit(&p[i]);
        gnutls_free(p);
        if (k)
                gnutls_privkey_deinit(k);
        return -1;
}

bool tls_creds_session_ok(const struct tls_creds *t, gnutls_session_t s)
{
        unsigned n = 0;

        if (t && (t->auth == WEB_CLIENT_REQUIRE_ANY || t->auth == WEB_CLIENT_REQUIRE_VERIFY))
                return gnutls_certificate_get_peers(s, &n) && n > 0;
        return true;
}
