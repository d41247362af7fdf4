/* RFC 9112 framing checks; see framing.h. References are to RFC 9112 unless said otherwise. */
#include "framing.h"

#include <string.h>
#include <strings.h>

#include "util.h"

/* token characters (RFC 9110 §5.6.2): a field name is a token */
static bool tchar(unsigned char c)
{
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
                return true;
        return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool name_is(const struct framing_field *f, const char *name)
{
        return f->name_len == strlen(name) && strncasecmp(f->name, name, f->name_len) == 0;
}

size_t framing_unescape(char *s)
{
        char *w = s;

        for (const char *r = s; *r;) {
                int hi = r[0] == '%' ? unhexchar(r[1]) : -1, lo = hi >= 0 ? unhexchar(r[2]) : -1;

                if (lo >= 0 && (hi | lo) != 0) {
                        *w++ = (char)(hi << 4 | lo);
                        r += 3;
                } else {
                        *w++ = *r++;
                }
        }
        *w = 0;
        return (size_t)(w - s);
}

void framing_init(struct framing *f)
{
        memset(f, 0, sizeof(*f));
}

/* §6.3: Content-Length = 1*DIGIT; a value a 64-bit length cannot hold is invalid too. A list
 * ("5, 5") is not accepted: more than one value is treated as more than one field. */
static bool content_length_ok(const char *v, size_t n)
{
        if (n == 0 || n > 19)
                return false;
        for (size_t i = 0; i < n; i++)
                if (v[i] < '0' || v[i] > '9')
                        return false;
        return true;
}

/* §6.1, §6.3: the final transfer coding of a request must be chunked; codings are a
 * comma-separated list of tokens, optionally with parameters, with optional whitespace. */
static bool last_coding_is_chunked(const char *v, size_t n)
{
        size_t end = n, start;

        while (end > 0 && (v[end - 1] == ' ' || v[end - 1] == '\t'))
                end--;
        start = end;
        while (start > 0 && v[start - 1] != ',')
                start--;
        while (start < end && (v[start] == ' ' || v[start] == '\t'))
                start++;
        return end - start == 7 && strncasecmp(v + start, "chunked", 7) == 0;
}

void framing_add(struct framing *f, const struct framing_field *field)
{
        /* §5.1: no whitespace between a field name and its colon; a name is a token */
        if (field->name_len == 0)
                f->bad_name = true;
        for (size_t i = 0; i < field->name_len; i++)
                if (!tchar((unsigned char)field->name[i]))
                        f->bad_name = true;
        /* §5.5: CR, LF and NUL are invalid in a value; §2.2: a bare CR makes it invalid. Other
         * controls but HTAB are not field-vchars (RFC 9110 §5.5). */
        for (size_t i = 0; i < field->value_len; i++) {
                unsigned char c = (unsigned char)field->value[i];
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        f->bad_value = true;
        }
        /* §5.2: obs-fold. libmicrohttpd runs a folded line of an empty-valued field into the
         * name ("Transfer-Encoding:" CRLF " chunked" arrives as the name
         * "Transfer-Encodingchunked"), where a proxy that unfolds sees Transfer-Encoding: a
         * name that starts with a framing field's name and is longer is refused. */
        if ((field->name_len > 14 && strncasecmp(field->name, "Content-Length", 14) == 0) ||
            (field->name_len > 17 && strncasecmp(field->name, "Transfer-Encoding", 17) == 0))
                f->bad_name = true;
        if (name_is(field, "Content-Length")) {
                f->content_length++;
                if (!content_length_ok(field->value, field->value_len))
                        f->content_length_invalid = true;
        } else if (name_is(field, "Transfer-Encoding")) {
                f->transfer_encoding++;
                if (!last_coding_is_chunked(field->value, field->value_len))
                        f->te_not_chunked_last = true;
        }
}

const char *framing_verdict(const struct framing *f)
{
        if (f->bad_name)
                return FRAMING_NAME;
        if (f->bad_value)
                return FRAMING_VALUE;
        /* §6.3 item 3: a Transfer-Encoding with a Content-Length may be a smuggling attempt;
         * the server may reject it and must close the connection */
        if (f->transfer_encoding && f->content_length)
                return FRAMING_TE_AND_CL;
        /* §6.3 item 5: several Content-Length fields, or an invalid value: 400 and close */
        if (f->content_length > 1)
                return FRAMING_CL_MANY;
        if (f->content_length_invalid)
                return FRAMING_CL_INVALID;
        /* §6.3 item 4: chunked must be the final coding; several fields are a list whose last
         * coding only the last field says, which two parsers may read differently: refused */
        if (f->transfer_encoding > 1)
                return FRAMING_TE_MANY;
        if (f->te_not_chunked_last)
                return FRAMING_TE_NOT_CHUNKED;
        return NULL;
}
