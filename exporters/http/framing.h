/* Request framing checks of RFC 9112 that libmicrohttpd leaves to its user: what would let a
 * proxy in front and this server disagree on where a request ends (request smuggling); and the
 * request target's percent-decoding, which must not let a NUL cut a path short. Pure: works on
 * the header fields libmicrohttpd parsed, as (name, value) with their lengths, and on the
 * target's bytes. */
#ifndef DISKPULSE_HTTP_FRAMING_H
#define DISKPULSE_HTTP_FRAMING_H

#include <stdbool.h>
#include <stddef.h>

struct framing_field {
        const char *name;
        size_t name_len;
        const char *value;
        size_t value_len;
};

/* Accumulates the fields of one request; framing_verdict() says whether its framing is sound. */
struct framing {
        unsigned content_length;     /* Content-Length fields seen */
        unsigned transfer_encoding;  /* Transfer-Encoding fields seen */
        bool content_length_invalid; /* a value that is not 1*DIGIT, or too large */
        bool te_not_chunked_last;    /* a Transfer-Encoding whose last coding is not chunked */
        bool bad_name;  /* a name with whitespace (before the colon) or a non-token byte */
        bool bad_value; /* a value with CR, LF, NUL or another control but HTAB */
};

void framing_init(struct framing *f);
void framing_add(struct framing *f, const struct framing_field *field);

/* NULL when the request may be served, else why it gets 400 (and the connection is closed),
 * one of the FRAMING_* strings. */
const char *framing_verdict(const struct framing *f);

/* Decodes the percent-encoded octets of s (a request target's path or query, NUL-terminated) in
 * place, as libmicrohttpd's own unescaper does (RFC 3986 §2.1: "%" and two hex digits), but
 * leaves "%00" as it is: a NUL would end the path early, and "/runbook%00" or "/metrics%00x"
 * would be served as "/runbook" and "/metrics" (now they name no page: 404). Returns the length
 * of the result (its terminator written). libmicrohttpd's MHD_OPTION_UNESCAPE_CALLBACK. */
size_t framing_unescape(char *s);

#define FRAMING_NAME           "whitespace or a forbidden byte in a header name"
#define FRAMING_VALUE          "a control character in a header value"
#define FRAMING_CL_MANY        "more than one Content-Length"
#define FRAMING_CL_INVALID     "an invalid Content-Length"
#define FRAMING_TE_AND_CL      "both Transfer-Encoding and Content-Length"
#define FRAMING_TE_MANY        "more than one Transfer-Encoding"
#define FRAMING_TE_NOT_CHUNKED "a Transfer-Encoding whose last coding is not chunked"

#endif
