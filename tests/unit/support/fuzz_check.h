/* What the fuzz targets of the page parsers share: the check of a parser's result, of a decoded
 * string field, and the exact-size copy of the input (so that ASan catches a parser reading past
 * the page). */
#ifndef DISKPULSE_FUZZ_CHECK_H
#define DISKPULSE_FUZZ_CHECK_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Aborts unless s is NUL-terminated within size, holds only ' '..'~' and has no space at
 * either end. */
static inline void fuzz_check_string(const char *s, size_t size)
{
        size_t n = strnlen(s, size);

        if (n >= size)
                abort();
        for (size_t i = 0; i < n; i++)
                if (s[i] < ' ' || s[i] > '~')
                        abort();
        if (n && (s[0] == ' ' || s[n - 1] == ' '))
                abort();
}

/* Whether a page parser that returned r on len bytes decoded the page (r == 0). Its refusals
 * return false: -EINVAL (only when len is below page_size, the page's whole size), -ENODATA, and
 * -EBADMSG when badmsg is set; anything else aborts. */
static inline bool fuzz_parsed(int r, size_t len, size_t page_size, bool badmsg)
{
        if (r == -EINVAL || r == -ENODATA || (badmsg && r == -EBADMSG)) {
                if (r == -EINVAL && len >= page_size)
                        abort();
                return false;
        }
        if (r != 0)
                abort();
        return true;
}

/* A malloc'd copy of exactly n bytes (at least 1) of data: cut, or zero-padded when size < n.
 * Aborts when out of memory; the caller frees it. */
static inline uint8_t *fuzz_copy(const uint8_t *data, size_t size, size_t n)
{
        uint8_t *b = calloc(1, n ? n : 1);

        if (!b)
                abort();
        memcpy(b, data, size < n ? size : n);
        return b;
}

#endif
