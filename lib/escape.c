/* String escaping for JSON, logfmt, HTML and the state files. */
#include "escape.h"

#include <errno.h>
#include <string.h>

#include "util.h"

static const char hex_digits[] = "0123456789abcdef";

/* Appends n bytes of r at out + o (when out) and returns the new length. */
static size_t put(char *out, size_t o, const char *r, size_t n)
{
        if (out)
                memcpy(out + o, r, n);
        return o + n;
}

/* The escaping JSON strings and logfmt values share: '"' and '\\' behind a backslash, a newline as
 * "\\n", another control byte as a backslash, ctl (JSON's "u00", logfmt's "x") and its two hex
 * digits, the rest as it is. Returns the length written (only counted when out is NULL). */
static size_t escape_backslashed(const char *s, char *out, const char *ctl)
{
        size_t o = 0;

        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p == '"' || *p == '\\') {
                        char e[2] = {'\\', (char)*p};
                        o = put(out, o, e, 2);
                } else if (*p == '\n') {
                        o = put(out, o, "\\n", 2);
                } else if (*p < 0x20) {
                        char d[2] = {hex_digits[*p >> 4], hex_digits[*p & 15]};
                        o = put(out, o, "\\", 1);
                        o = put(out, o, ctl, strlen(ctl));
                        o = put(out, o, d, 2);
                } else {
                        o = put(out, o, (const char *)p, 1);
                }
        }
        return o;
}

size_t escape_json(const char *s, char *out)
{
        return escape_backslashed(s, out, "u00");
}

bool escape_logfmt_needs_quotes(const char *s)
{
        if (!*s)
                return true;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
                if (*p == ' ' || *p == '"' || *p == '=' || *p < 0x20)
                        return true;
        return false;
}

size_t escape_logfmt(const char *s, char *out)
{
        return escape_backslashed(s, out, "x");
}

size_t escape_html(const char *s, char *out)
{
        size_t o = 0;

        for (; *s; s++) {
                const char *r;
                switch (*s) {
                case '<':
                        r = "&lt;";
                        break;
                case '>':
                        r = "&gt;";
                        break;
                case '&':
                        r = "&amp;";
                        break;
                case '"':
                        r = "&quot;";
                        break;
                default:
                        o = put(out, o, s, 1);
                        continue;
                }
                o = put(out, o, r, strlen(r));
        }
        return o;
}

static bool plain_byte(unsigned char c)
{
        return c >= '!' && c <= '~';
}

size_t escape_hex(const char *s, char *out)
{
        size_t o = 0;

        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p == '\\') {
                        o = put(out, o, "\\\\", 2);
                } else if (plain_byte(*p)) {
                        o = put(out, o, (const char *)p, 1);
                } else {
                        char e[4] = {'\\', 'x', hex_digits[*p >> 4], hex_digits[*p & 15]};
                        o = put(out, o, e, 4);
                }
        }
        return o;
}

int unescape_hex(const char *s, size_t len, char *out, size_t size)
{
        size_t o = 0;

        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];

                if (!plain_byte(c))
                        return -EINVAL;
                if (c == '\\') {
                        if (i + 1 < len && s[i + 1] == '\\') {
                                i++;
                        } else if (i + 3 < len && s[i + 1] == 'x' && unhexchar(s[i + 2]) >= 0 &&
                                   unhexchar(s[i + 3]) >= 0) {
                                c = (unsigned char)(unhexchar(s[i + 2]) * 16 + unhexchar(s[i + 3]));
                                i += 3;
                                if (c == 0)
                                        return -EINVAL;
                        } else {
                                return -EINVAL;
                        }
                }
                if (o + 1 >= size)
                        return -ERANGE;
                out[o++] = (char)c;
        }
        if (size == 0)
                return -ERANGE;
        out[o] = 0;
        return 0;
}
