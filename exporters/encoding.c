/* Accept-Encoding parsing and gzip compression. */
#include "encoding.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "util.h"

static bool is_ows(char c)
{
        return c == ' ' || c == '\t';
}

/* A qvalue (RFC 9110 §12.4.2): "0" ["." 0-3 digits] or "1" ["." 0-3 zeros]; sets *ret in
 * thousandths. Returns false when malformed. */
static bool parse_qvalue(const char *s, size_t n, int *ret)
{
        int v, scale = 100;

        if (n == 0 || (s[0] != '0' && s[0] != '1'))
                return false;
        v = (s[0] - '0') * 1000;
        if (n == 1) {
                *ret = v;
                return true;
        }
        if (s[1] != '.' || n > 5)
                return false;
        for (size_t i = 2; i < n; i++, scale /= 10) {
                if (s[i] < '0' || s[i] > '9' || (v == 1000 && s[i] != '0'))
                        return false;
                v += (s[i] - '0') * scale;
        }
        *ret = v;
        return true;
}

/* One element "token *( OWS ; OWS param )" between start and end (a coding, or a media range
 * type/subtype): the token's bounds, its qvalue (1000 when absent) and the value of its
 * "version" parameter (quotes removed; NULL when absent). Returns false when malformed. */
static bool parse_element(const char *p, const char *end, const char **ret_coding, size_t *ret_len,
                          int *ret_q, const char **ret_ver, size_t *ret_ver_len)
{
        const char *c;
        int q = 1000;

        *ret_ver = NULL;
        *ret_ver_len = 0;

        while (p < end && is_ows(*p))
                p++;
        c = p;
        while (p < end && *p != ';' && !is_ows(*p))
                p++;
        if (p == c)
                return false;
        *ret_coding = c;
        *ret_len = (size_t)(p - c);
        while (p < end) {
                const char *name, *val;
                size_t nlen;

                while (p < end && is_ows(*p))
                        p++;
                if (p == end)
                        break;
                if (*p != ';')
                        return false;
                p++;
                while (p < end && is_ows(*p))
                        p++;
                name = p;
                while (p < end && *p != '=' && *p != ';' && !is_ows(*p))
                        p++;
                nlen = (size_t)(p - name);
                if (p == end || *p != '=')
                        return false;
                val = ++p;
                while (p < end && *p != ';' && !is_ows(*p))
                        p++;
                if (nlen == 1 && (name[0] == 'q' || name[0] == 'Q') &&
                    !parse_qvalue(val, (size_t)(p - val), &q))
                        return false;
                if (nlen == 7 && strncasecmp(name, "version", 7) == 0) {
                        size_t vl = (size_t)(p - val);
                        if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') {
                                val++;
                                vl -= 2;
                        }
                        *ret_ver = val;
                        *ret_ver_len = vl;
                }
        }
        *ret_q = q;
        return true;
}

bool accept_gzip(const char *value)
{
        int gzip_q = -1, star_q = -1;
        size_t len;

        if (!value)
                return false;
        len = strnlen(value, ACCEPT_ENCODING_MAX);
        for (const char *p = value, *end = value + len; p < end;) {
                const char *comma = memchr(p, ',', (size_t)(end - p));
                const char *e = comma ? comma : end;
                const char *coding, *ver;
                size_t clen, vlen;
                int q;

                if (parse_element(p, e, &coding, &clen, &q, &ver, &vlen)) {
                        if ((clen == 4 && strncasecmp(coding, "gzip", 4) == 0) ||
                            (clen == 6 && strncasecmp(coding, "x-gzip", 6) == 0))
                                gzip_q = gzip_q < 0 || q < gzip_q ? q : gzip_q;
                        else if (clen == 1 && coding[0] == '*')
                                star_q = q;
                }
                p = comma ? comma + 1 : end;
        }
        if (gzip_q >= 0)
                return gzip_q > 0;
        return star_q > 0;
}

int gzip_compress(const void *in, size_t len, int level, void **ret, size_t *ret_len)
{
        z_stream z;
        unsigned char *out;
        uLong cap;
        int r;

        if (level < 1 || level > 9 || len > UINT_MAX / 2)
                return -EINVAL;
        memset(&z, 0, sizeof z);
        /* windowBits 15 + 16: a gzip header and trailer instead of zlib's */
        r = deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
        if (r != Z_OK)
                return r == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
        cap = deflateBound(&z, (uLong)len);
        out = malloc(cap ? cap : 1);
        if (!out) {
                deflateEnd(&z);
                return -ENOMEM;
        }
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = (uInt)len;
        z.next_out = out;
        z.avail_out = (uInt)cap;
        r = deflate(&z, Z_FINISH);
        if (r != Z_STREAM_END) {
                deflateEnd(&z);
                free(out);
                return -ENOMEM; /* deflateBound guarantees room: only memory can fail */
        }
        *ret_len = z.total_out;
        deflateEnd(&z);
        *ret = out;
        return 0;
}

static bool token_is(const char *t, size_t len, const char *want)
{
        return len == strlen(want) && strncasecmp(t, want, len) == 0;
}

static bool version_is(const char *v, size_t len, const char *want)
{
        return len == strlen(want) && strncmp(v, want, len) == 0;
}

bool accept_openmetrics(const char *value)
{
        int om_q = -1, text_q = -1;
        size_t len;

        if (!value)
                return false;
        len = strnlen(value, ACCEPT_ENCODING_MAX);
        for (const char *p = value, *end = value + len; p < end;) {
                const char *comma = memchr(p, ',', (size_t)(end - p));
                const char *e = comma ? comma : end;
                const char *t, *ver;
                size_t tlen, vlen;
                int q;

                if (parse_element(p, e, &t, &tlen, &q, &ver, &vlen)) {
                        if (token_is(t, tlen, "application/openmetrics-text")) {
                                if ((!ver || version_is(ver, vlen, "1.0.0") ||
                                     version_is(ver, vlen, "0.0.1")) &&
                                    q > om_q)
                                        om_q = q;
                        } else if (token_is(t, tlen, "text/plain") || token_is(t, tlen, "text/*") ||
                                   token_is(t, tlen, "*/*")) {
                                if (q > text_q)
                                        text_q = q;
                        }
                }
                p = comma ? comma + 1 : end;
        }
        return om_q > 0 && om_q >= text_q;
}
