/* TLS of the HTTP server with GnuTLS: the certificate, key and client CA that a web config
 * names, read into memory, and the GnuTLS priority string of its versions, cipher suites and
 * curves. libmicrohttpd asks for the certificate at every handshake (its
 * MHD_OPTION_HTTPS_CERT_CALLBACK2, GnuTLS's retrieve function), so the web config at work
 * (websec.c) swaps the certificate, key, client CA and client-auth policy for new handshakes
 * without restarting the server or touching open connections. The priority string is fixed when
 * the server starts. */
#pragma once

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "webconfig.h"

struct tls_creds;

/* Reads what c names (cert_file, key_file, client_ca_file, or the inline PEM), checks that the
 * key belongs to the certificate and that GnuTLS can honour the versions, suites and curves.
 * name is the config file's name for messages. Returns 0 and creds with one reference, or
 * -errno with "NAME:LINE: what is wrong" in err. c->tls must be true. Any thread. */
int tls_creds_load(const struct webconfig *c, const char *name, struct tls_creds **ret, char *err,
                   size_t errsz);
struct tls_creds *tls_creds_ref(struct tls_creds *t);
/* Drops a reference; accepts NULL; returns NULL. */
struct tls_creds *tls_creds_unref(struct tls_creds *t);

/* The GnuTLS priority string of the server (borrowed from t). */
const char *tls_creds_priorities(const struct tls_creds *t);
/* The leaf certificate's expiry (seconds since the epoch) and subject, for logs. */
long long tls_creds_not_after(const struct tls_creds *t);
const char *tls_creds_subject(const struct tls_creds *t);
/* What client certificates t asks for. */
enum web_client_auth tls_creds_client_auth(const struct tls_creds *t);

/* What a handshake under t gets, for the retrieve function of MHD_OPTION_HTTPS_CERT_CALLBACK2
 * (GnuTLS's gnutls_certificate_retrieve_function3), which the caller writes since it finds t
 * from the session: fresh copies of t's certificate chain and key in *certs, *certs_length and
 * *privkey (GnuTLS frees them with the session: GNUTLS_CERT_RETR_DEINIT_ALL), a client
 * certificate asked for as t's policy says, and verify installed as the check of it (the
 * caller's, calling tls_creds_verify()). Returns 0, or -1 (logged at debug). Any thread. */
int tls_creds_hand_over(const struct tls_creds *t, gnutls_session_t s,
                        gnutls_certificate_verify_function *verify, gnutls_pcert_st **certs,
                        unsigned *certs_length, gnutls_privkey_t *privkey);

/* The check of the client's certificate in the handshake of session s under t (NULL: no TLS
 * configuration, refused): 0, or -EACCES (the handshake ends: a fatal alert was sent, the reason
 * logged at debug) for a bad chain, a SAN not allowed, or none where one is required. Any
 * thread. */
int tls_creds_verify(const struct tls_creds *t, gnutls_session_t s);

/* Whether an established session satisfies t's client-certificate policy (a required
 * certificate was presented; NULL: no policy). The handshake already refused a bad one; this is
 * the second look before a request is served. Any thread. */
bool tls_creds_session_ok(const struct tls_creds *t, gnutls_session_t s);

/* Checks the peer's certificate chain of session s against creds t as the handshake does
 * (exposed for tests): 0 when acceptable, -EACCES with the reason in why. */
int tls_creds_check_peer(const struct tls_creds *t, const gnutls_datum_t *chain, unsigned n,
                         char *why, size_t whysz);
