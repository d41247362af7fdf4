/* String escaping, one function per format: JSON strings, logfmt values, HTML text, and the
 * "\xNN" form of the state files. Each writes the escaped bytes without quotes and without a
 * terminator, or only counts them when out is NULL (measure, allocate, write). Pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* JSON string contents (RFC 8259 section 7): `"` and `\` escaped, newline as \n, other control
 * bytes as \u00XX; every other byte as it is. Returns the length. */
size_t escape_json(const char *s, char *out);

/* True when s must be quoted as a logfmt value: empty, or holding a space, `"`, `=` or a control
 * byte. */
bool escape_logfmt_needs_quotes(const char *s);

/* The contents of a quoted logfmt value: `"` and `\` escaped, newline as \n, other control bytes
 * as \xNN (as Go's strconv.Quote writes them). Returns the length. */
size_t escape_logfmt(const char *s, char *out);

/* HTML text or a double-quoted attribute value: `<`, `>`, `&` and `"` as entities. Returns the
 * length. */
size_t escape_html(const char *s, char *out);

/* The state files' form: bytes outside printable ASCII ('!'..'~') as \xNN (lower-case hex),
 * `\` as `\\`; the result is one whitespace-free token. Returns the length. */
size_t escape_hex(const char *s, char *out);

/* The inverse of escape_hex for the len bytes at s, into out (size bytes with the terminator).
 * Returns 0, -EINVAL (a byte outside '!'..'~', a bad escape, an escaped NUL) or -ERANGE (does
 * not fit). */
int unescape_hex(const char *s, size_t len, char *out, size_t size);
