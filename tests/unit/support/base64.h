/* Base64 encoding (RFC 4648 §4, with padding) for tests that build Authorization headers. */
#pragma once

#include <stddef.h>

/* Writes the base64 of the n bytes at s and a NUL to out, which holds 4 * ((n + 2) / 3) + 1
 * bytes. */
static inline void base64_encode(const char *s, size_t n, char *out)
{
        static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t o = 0;

        for (size_t i = 0; i < n; i += 3) {
                unsigned v = (unsigned char)s[i] << 16;
                if (i + 1 < n)
                        v |= (unsigned char)s[i + 1] << 8;
                if (i + 2 < n)
                        v |= (unsigned char)s[i + 2];
                out[o++] = a[v >> 18 & 63];
                out[o++] = a[v >> 12 & 63];
                out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
                out[o++] = i + 2 < n ? a[v & 63] : '=';
        }
        out[o] = 0;
}
