/* Base64 encoding (RFC 4648 §4, with padding) for tests that build Authorization headers: GnuTLS's
 * encoder, the library whose decoder the parser uses (the tests' expected decodings are fixed
 * strings, so a fault shared by both would still show). */
#pragma once

#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>

/* Writes the base64 of the n bytes at s and a NUL to out, which holds 4 * ((n + 2) / 3) + 1
 * bytes. Aborts when GnuTLS cannot encode (out of memory). */
static inline void base64_encode(const char *s, size_t n, char *out)
{
        gnutls_datum_t in = {.data = (unsigned char *)s, .size = (unsigned)n}, enc = {NULL, 0};

        if (gnutls_base64_encode2(&in, &enc) < 0)
                abort();
        if (enc.size)
                memcpy(out, enc.data, enc.size);
        out[enc.size] = 0;
        gnutls_free(enc.data);
}
