/* ASCII fields of device answers; see smart_text.h. */
#include "smart_text.h"

void smart_text_span(const uint8_t *src, size_t n, size_t *b_out, size_t *e_out)
{
        size_t b = 0, e;

        while (b < n && src[b] == ' ')
                b++;
        e = b;
        while (e < n && src[e] != 0)
                e++;
        while (e > b && src[e - 1] == ' ')
                e--;
        *b_out = b;
        *e_out = e;
}

void smart_text_copy_span(char *dst, const uint8_t *src, size_t b, size_t e)
{
        for (size_t i = b; i < e; i++)
                *dst++ = (src[i] >= ' ' && src[i] <= '~') ? (char)src[i] : '?';
        *dst = 0;
}

void smart_text_copy(char *dst, const uint8_t *src, size_t n)
{
        size_t b, e;

        smart_text_span(src, n, &b, &e);
        /* Always true (the span stays within n); said so that the compiler sees dst's bound. */
        if (e > n)
                e = n;
        smart_text_copy_span(dst, src, b, e);
}
