/* Fuzz target of lib/namefilter: the first line is a pattern, the others device names. A pattern
 * is compiled or refused with a reason; every name is matched within the work limits (each match
 * takes well under a second); a name that passes an include-only filter is refused by the same
 * pattern as an exclude, unless a limit stopped either match. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "namefilter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *text, *line, *save = NULL, err[256] = "";
        struct namefilter *inc = NULL, *exc = NULL;
        int r;

        if (size > 4096)
                return 0;
        text = malloc(size + 1);
        memcpy(text, data, size);
        text[size] = 0;
        line = strtok_r(text, "\n", &save);
        if (!line)
                line = text + size; /* the empty pattern */
        r = namefilter_new(line, NULL, &inc, err, sizeof err);
        if (r < 0 && (!err[0] || inc))
                abort(); /* refused without a reason, or a filter left behind */
        if (r == 0 && namefilter_new(NULL, line, &exc, err, sizeof err) < 0)
                abort(); /* the same pattern must compile as an exclude */
        if (r == 0 && namefilter_check(line, err, sizeof err) < 0)
                abort();
        while (r == 0 && (line = strtok_r(NULL, "\n", &save))) {
                uint64_t t0 = now_ns();
                bool in = namefilter_match(inc, line), out = namefilter_match(exc, line);
                if (now_ns() - t0 > 1000000000u)
                        abort();
                if (in == out && namefilter_errors(inc) == 0 && namefilter_errors(exc) == 0)
                        abort();
        }
        namefilter_free(inc);
        namefilter_free(exc);
        free(text);
        return 0;
}
