/* Fuzz target of the web config parser (exporters/webconfig/webconfig.c): no crash or leak, and
 * what it accepts keeps the promises the TLS and auth code rely on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "webconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct webconfig *c)
{
        unsigned cost;

        if (c->tls && ((!c->cert_file && !c->cert) || (!c->key_file && !c->key)))
                abort();
        if ((c->cert_file && c->cert) || (c->key_file && c->key) || (c->ca_file && c->ca))
                abort();
        if (c->min_version < WEB_TLS10 || c->max_version > WEB_TLS13 ||
            c->min_version > c->max_version)
                abort();
        if ((c->client_auth == WEB_CLIENT_REQUIRE_VERIFY ||
             c->client_auth == WEB_CLIENT_VERIFY_IF_GIVEN) &&
            !c->ca_file && !c->ca)
                abort();
        if ((c->ca_file || c->ca) && c->client_auth == WEB_CLIENT_NONE)
                abort();
        if (c->n_allowed_sans && c->client_auth != WEB_CLIENT_REQUIRE_ANY &&
            c->client_auth != WEB_CLIENT_REQUIRE_VERIFY)
                abort();
        for (size_t i = 0; i < c->n_ciphers; i++)
                if (c->ciphers[i] < webconfig_ciphers ||
                    c->ciphers[i] >= webconfig_ciphers + webconfig_n_ciphers)
                        abort();
        for (size_t i = 0; i < c->n_users; i++) {
                if (!webconfig_bcrypt_valid(c->users[i].hash, &cost) || cost != c->users[i].cost ||
                    strchr(c->users[i].name, ':'))
                        abort();
                for (size_t k = 0; k < i; k++)
                        if (strcmp(c->users[k].name, c->users[i].name) == 0)
                                abort();
        }
        /* a header value can never split a response */
        for (size_t i = 0; i < WEB_HEADER_MAX; i++)
                if (c->headers[i] &&
                    (strchr(c->headers[i], '\r') || strchr(c->headers[i], '\n') || !*c->headers[i]))
                        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct webconfig *c = NULL;
        char err[512];

        if (size > 64 * 1024)
                return 0;
        err[0] = 0;
        if (webconfig_parse((const char *)data, size, "fuzz.yml", "/etc", &c, err, sizeof err) ==
            0) {
                check(c);
                webconfig_free(c);
        } else if (strncmp(err, "fuzz.yml:", 9) != 0 || !memchr(err, 0, sizeof err) || c) {
                abort(); /* every error names the file */
        }
        return 0;
}
