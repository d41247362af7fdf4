/* The form of a page a client accepts (Accept, RFC 9110 §12.5.1) and its content coding
 * (Accept-Encoding, §12.5.3), both read by one list parser; gzip compression (RFC 1952) through
 * zlib. Each value is a header's whole field value: the server joins a field sent on several
 * lines with ", " first (§5.3), and nothing is cut (libmicrohttpd bounds a request's header block
 * by the connection's memory). An element is "token *( OWS ; OWS [ parameter ] )" with token or
 * quoted-string parameter values (§5.6.6): an empty or malformed element (a weight that is not a
 * qvalue, given twice or quoted, a quoted-string not closed, a byte that is no token's) counts
 * for nothing; a comma or ';' inside a quoted-string ends nothing. Types, codings and parameter
 * names compare case-insensitively, parameter values exactly. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Whether the Accept-Encoding value (NUL-terminated; NULL = no header) gets gzip: the qvalue of
 * "gzip" or "x-gzip" (else of "*") is above 0 and at least that of identity (its own, else
 * "*"'s; not named at all, identity comes after any coding named). A coding named twice has its
 * lowest qvalue: "gzip;q=0" refuses gzip even beside "*"; "gzip;q=0.5, identity;q=1" prefers
 * the page uncompressed. Pure, any thread. */
bool encoding_accept_gzip(const char *value);

/* Whether the Accept value (NUL-terminated; NULL = no header) asks for OpenMetrics rather than
 * the text format: "application/openmetrics-text" (version absent, 1.0.0 or 0.0.1) with a
 * qvalue above 0 and at least that of "text/plain", "text" with any subtype and any type. Pure,
 * any thread. */
bool encoding_accept_openmetrics(const char *value);

/* Whether the Accept value (NUL-terminated; NULL = no header) asks for the protobuf exposition
 * rather than a text one: "application/vnd.google.protobuf" with the parameters
 * proto=io.prometheus.client.MetricFamily and encoding=delimited, with a qvalue above 0 and at
 * least that of every text form (OpenMetrics 1.0.0 or 0.0.1, "text/plain", "text" with any
 * subtype and any type). Pure, any thread. */
bool encoding_accept_protobuf(const char *value);

/* Whether the Accept value (NUL-terminated; NULL = no header) prefers HTML to plain text: the
 * qvalue that text/html gets is above 0 and above the one text/plain gets, each from the most
 * specific range that matches it (RFC 9110 §12.5.1: "text/html" before "text" with any subtype
 * before any type; not matched: not acceptable). Any type alone, as curl asks, or no header
 * gives plain text; a browser's "text/html,...;q=0.8" HTML. Pure, any thread. */
bool encoding_accept_html(const char *value);

/* Compresses len bytes of in into a malloc'd gzip member (*ret, *ret_len; the caller frees).
 * level: zlib's 1 (fastest) to 9. Returns 0, -EINVAL for a bad level or a length zlib cannot
 * take, -ENOMEM. */
int encoding_gzip_compress(const void *in, size_t len, int level, void **ret, size_t *ret_len);

/* A gzip member compressed piece by piece, for pages that are never whole in memory. */
struct gzip_stream;

/* Returns a stream at zlib level (1..9), or NULL (-ENOMEM, -EINVAL) with *ret_err set. */
struct gzip_stream *encoding_gzip_stream_new(int level, int *ret_err);
/* Compresses in[0..in_len) (finish: it is the last piece) into out, at most out_max bytes.
 * Sets *ret_used to the input consumed and *ret_len to the output written; call again with the
 * rest (and, after the last piece, with no input while finish) until it returns 1. Returns 0
 * (more to come), 1 (the member is complete) or -ENOMEM. */
int encoding_gzip_stream_deflate(struct gzip_stream *z, const void *in, size_t in_len, bool finish,
                                 void *out, size_t out_max, size_t *ret_used, size_t *ret_len);
/* Accepts NULL; returns NULL. The stream freed last is kept, and the next one made is it, reset
 * (a page every scrape would otherwise set up the compressor's state each time). */
struct gzip_stream *encoding_gzip_stream_free(struct gzip_stream *z);
