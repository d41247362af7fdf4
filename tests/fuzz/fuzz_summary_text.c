/* Fuzz target of summary_text (lib/summary_text.c), the landing page's text for a terminal: the
 * input, cut at 0x01 bytes into a table's title, headings, cells and note, is laid out; the text
 * must be valid UTF-8 and hold no character a terminal acts on (C0 but the newline, DEL, C1
 * controls, Unicode's Bidi_Control characters), whatever bytes the cells had. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "summary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The code point of the valid UTF-8 sequence at p and its length, or 0. */
static size_t decode(const unsigned char *p, const unsigned char *end, uint32_t *cp)
{
        size_t len = p[0] < 0x80             ? 1
                     : (p[0] & 0xe0) == 0xc0 ? 2
                     : (p[0] & 0xf0) == 0xe0 ? 3
                     : (p[0] & 0xf8) == 0xf0 ? 4
                                             : 0;

        if (!len || (size_t)(end - p) < len)
                return 0;
        *cp = len == 1 ? p[0] : p[0] & (0x7f >> len);
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                *cp = *cp << 6 | (p[i] & 0x3f);
        }
        if ((len == 2 && *cp < 0x80) || (len == 3 && *cp < 0x800) || (len == 4 && *cp < 0x10000) ||
            *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
                return 0;
        return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *in = malloc(size + 1), *parts[8] = {0}, *text;
        size_t n = 0, len;
        struct summary *s = summary_new();
        struct summary_table *t;
        const unsigned char *p, *end;

        memcpy(in, data, size);
        in[size] = 0;
        /* title, two headings, four cells, a note: the rest "" */
        for (char *q = in; n < 8; n++) {
                parts[n] = q;
                q = strchr(q, 0x01);
                if (!q)
                        break;
                *q++ = 0;
        }
        for (size_t i = 0; i < 8; i++)
                if (!parts[i])
                        parts[i] = "";
        t = summary_table(s, parts[0], (const char *const[]){parts[1], parts[2]}, 2, 0, parts[7],
                          true);
        summary_row(t, (const char *const[]){parts[3], parts[4]});
        summary_row(t, (const char *const[]){parts[5], parts[6]});
        t->more = size % 3;
        summary_note(t, parts[7]);
        text = summary_text(s, &len);
        if (len != strlen(text))
                abort();
        for (p = (const unsigned char *)text, end = p + len; p < end;) {
                uint32_t cp;
                size_t k = decode(p, end, &cp);
                if (!k)
                        abort(); /* not UTF-8 */
                if ((cp < 0x20 && cp != '\n') || (cp >= 0x7f && cp <= 0x9f) || cp == 0x61c ||
                    cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
                    (cp >= 0x2066 && cp <= 0x2069))
                        abort();
                p += k;
        }
        free(text);
        summary_free(s);
        free(in);
        return 0;
}
